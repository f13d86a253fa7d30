#!/bin/bash
# gpu.sh - what the GPU machine is for, in one call: build with CUDA into
# build-gpu, kernels for this machine's GPUs only (gpu_lib.sh, gpu_archs:
# about 70 s from scratch on 2xH200), then
#   check: the GPU matrix, tests/gpu/checks.tsv, and the examples on GPUs
#          (examples/), through CTest (ctest -L "^(gpu|examples-gpu)$"
#          in build-gpu). Its first 181 checks took 295 + 279 s on 4xH100 as two
#          calls, build included: CHECK_SHARD=1/2, then CHECK_SHARD=2/2
#          (ctest -I i,,n; the tests are ordered so that shards balance).
#          CHECKS=regex runs the tests whose names match (ctest -R).
#   bench: Chorus beside NVIDIA's NCCL, 8 B..1 GiB (scripts/gpu_bench.sh;
#          200-260 s on 4xH100); BASE_LIB=dir (a libnccl.so.2) or
#          BASE_SRC=dir (a source tree, built here) adds another Chorus, a
#          before/after in one call; BENCH=regex picks labels
#   big:   the same from 512 MiB to 2 GiB (BIG_E=8G: to 8 GiB)
#   tune:  the sweeps of scripts/gpu_tune.sh (TUNE=regex picks some)
#   hosts: Chorus beside NCCL with the GPUs split into hosts over loopback
#          (scripts/gpu_hosts_bench.sh)
#   quick: check, then bench;  full: check to 16 MiB, then bench to 2 GiB
#   build: the build alone
# Output under $OUT (default /tmp/chorus-gpu), at most 8 files as the device
# tool brings back: summary.txt (all of this, written as it goes), and per
# mode ctest.log and checks.tgz (check), gpu-table.md and logs.tgz (bench),
# tune-logs.tgz (tune).
set -u
mode=${1:-quick}
case $mode in check | bench | big | hosts | tune | quick | full | build) ;; *)
  echo "usage: $0 [check|bench|big|hosts|tune|quick|full|build]"
  exit 2
  ;;
esac
out=${OUT:-/tmp/chorus-gpu}
mkdir -p "$out"
exec > >(tee "$out/summary.txt") 2>&1
export CHORUS_GPU_TEED=1 # the scripts below print here
cd "$(dirname "$0")/.." || exit 1
. scripts/gpu_lib.sh
ngpu=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
echo "# $(date -u +%FT%TZ) $(hostname): $ngpu GPU(s), mode $mode"
nvidia-smi --query-gpu=index,name,memory.total,driver_version --format=csv,noheader
nvidia-smi topo -m 2>/dev/null | head -8

export BUILD=build-gpu
if ! { cmake -S . -B "$BUILD" -DCHORUS_CUDA=ON -DCHORUS_CUDA_ARCHS="$(gpu_archs)" \
  -DCMAKE_BUILD_TYPE=Release >"$out/build.log" 2>&1 &&
  cmake --build "$BUILD" -j "$(nproc)" >>"$out/build.log" 2>&1; }; then
  tail -30 "$out/build.log"
  echo "BUILD FAILED (build.log)"
  exit 1
fi
rm -f "$out/build.log"
echo "# built in $BUILD (${SECONDS} s so far)"
# BASE_SRC=dir (a source tree of an earlier commit, e.g. from git archive):
# its library alone, built here, becomes BASE_LIB (bench, tune, build).
if [ -n "${BASE_SRC:-}" ] && [ "$mode" != check ]; then
  if ! build_lib "$BASE_SRC" build-gpu-base "$out/build.log"; then
    tail -30 "$out/build.log"
    echo "BASE BUILD FAILED (build.log)"
    exit 1
  fi
  rm -f "$out/build.log"
  export BASE_LIB=$PWD/build-gpu-base
  echo "# built $BASE_SRC in build-gpu-base (${SECONDS} s so far)"
fi

check() {
  local logs args=(-L '^(gpu|examples-gpu)$' --output-on-failure --no-tests=error)
  logs=$(mktemp -d /tmp/chorus-gpu-checks.XXXXXX)
  [ -n "${CHECKS:-}" ] && args+=(-R "$CHECKS")
  if [ -n "${CHECK_SHARD:-}" ]; then
    [[ $CHECK_SHARD =~ ^[0-9]+/[0-9]+$ ]] || { echo "CHECK_SHARD=i/n, not $CHECK_SHARD"; return 1; }
    args+=(-I "${CHECK_SHARD%/*},,${CHECK_SHARD#*/}")
  fi
  echo "# checks: ctest ${args[*]}"
  # A line per test as it ends (a call stopped at its limit keeps them),
  # under a failed one what run_check.sh printed (wrong rows, the end of
  # the output); all of ctest's output goes to ctest.log.
  (cd "$BUILD" && CHORUS_CHECK_LOGS=$logs ctest "${args[@]}") 2>&1 | tee "$out/ctest.log" |
    awk '
      / Test +#[0-9]+: / { show = 0 }
      show && /^$/ { show = 0 }
      show { print "      " $0; fflush(); next }
      / Test +#[0-9]+: / {
        name = $0; sub(/.*Test +#[0-9]+: /, "", name); sub(/ .*/, "", name); sub(/^gpu\./, "", name)
        secs = $(NF - 1); st = "ok"
        if ($0 ~ /\*\*\*Skipped/) st = "skipped"
        else if ($0 !~ / Passed /) {
          why = $0; sub(/.*\*\*\*/, "", why); sub(/ +[0-9.]+ sec$/, "", why)
          st = why == "Failed" ? "FAIL" : "FAIL (" why ")"
        }
        printf "  %-40s %6.1f s %s\n", name, secs, st
        count[st ~ /^FAIL/ ? "failed" : st]++; total += secs
        if (st ~ /^FAIL/) { failed = failed " " name; show = 1 } # then its output
        fflush()
      }
      END {
        printf "# checks: %d passed, %d failed, %d skipped, %.0f s of tests\n",
               count["ok"], count["failed"], count["skipped"], total
        if (failed != "") print "# failed:" failed " (ctest.log, checks.tgz)"
      }'
  local rc=${PIPESTATUS[0]}
  tar -C "$logs" -czf "$out/checks.tgz" . 2>/dev/null
  return "$rc"
}

rc=0
case $mode in
  check) check || rc=1 ;;
  quick) check || rc=1; bash scripts/gpu_bench.sh bench || rc=1 ;;
  full)
    export CHORUS_CHECK_E=16M # the matrix's largest size (run_check.sh)
    check || rc=1
    bash scripts/gpu_bench.sh full || rc=1
    ;;
  bench | big) bash scripts/gpu_bench.sh "$mode" || rc=1 ;;
  hosts) bash scripts/gpu_hosts_bench.sh || rc=1 ;;
  tune) bash scripts/gpu_tune.sh || rc=1 ;;
  build) ;;
esac
echo "# ${SECONDS} s in all"
exit $rc
