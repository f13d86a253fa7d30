#!/bin/bash
# gpu.sh - everything the GPU machine is for, in one call: build with CUDA,
# run the GPU correctness matrix, then time Chorus and NVIDIA's NCCL with the
# same perf binary, and print a short table last.
#
# usage: scripts/gpu.sh [quick|full|check|bench|big|tune]  (on a machine with GPUs)
#   quick: matrix up to 1 MiB, bench 8 B..512 MiB
#   full:  matrix up to 16 MiB, bench 8 B..2 GiB
#   check: the quick matrix only
#   bench: the quick benchmarks only
#   big:   the benchmarks from 512 MiB to 2 GiB (BIG_E=8G: to 8 GiB) only
#          (fewer iterations, results not checked: the perf tools check on
#          the host, which at 2-8 GiB took most of a 90 s limit per run on
#          2xH100), no sweeps. On 4xH100 (2026-11-26) every 4-GPU run to
#          8 GiB, both libraries, took about 110 s in all (two calls split
#          with BENCH=regex)
#   tune:  Chorus alone under settings that are being chosen (sweeps)
# CHECKS=regex runs only the checks whose names match (a targeted re-run,
# e.g. CHECKS='sendrecv|graph|failures' scripts/gpu.sh check);
# CHECK_SHARD=i/n runs every n-th check from the i-th (1-based), so that n
# calls together run them all.
# On 4 GPUs the checks take about 10 minutes: 181 of them took 295 and 279
# s in two calls on 4xH100 (2026-11-26, build 60-70 s), so run
# `CHECK_SHARD=1/2 ... check` and `CHECK_SHARD=2/2 ... check`, then `bench`
# (200-260 s), as three calls where a call is limited to 10 minutes. On
# 2xH200 `quick` took 260 s (build 64 s, checks 120 s, bench 80 s; before
# the zero-copy and copy-engine checks).
# The output says how long each phase took; bench and big end with the
# issue's goals checked against NCCL's rows of the same call
# (scripts/gpu_goals.py, which also reads a saved run's logs).
# Output: $OUT (or /tmp/chorus-gpu) gets summary.txt (this output, written as
# it goes, so a run stopped at a time limit still leaves it), gpu-table.md and
# logs.tgz (every log; the logs are written outside $OUT until then, as the
# device tool brings back at most 8 files).
#
# NVIDIA's library: $NCCL_REF_LIB, else the one inside PyTorch's Python
# environment (python3 -c "import nvidia.nccl"). NVLink multicast stays off
# (NCCL_NVLS_ENABLE=0) whenever it runs; Chorus never uses it.
set -u
mode=${1:-quick}
out=${OUT:-/tmp/chorus-gpu}
mkdir -p "$out"
logs=$(mktemp -d /tmp/chorus-gpu-logs.XXXXXX)
exec > >(tee "$out/summary.txt") 2>&1
cd "$(dirname "$0")/.." || exit 1
export NCCL_NVLS_ENABLE=0
export CHORUS_OP_TIMEOUT=${CHORUS_OP_TIMEOUT:-30} # a hung GPU wait fails in 30 s, not 10 min
ngpu=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
echo "# $(date -u +%FT%TZ) $(hostname): $ngpu GPU(s), mode $mode"
nvidia-smi --query-gpu=index,name,memory.total,driver_version --format=csv,noheader
nvidia-smi topo -m 2>/dev/null | head -8

# ---- build ------------------------------------------------------------------
build=build-gpu
if ! { cmake -S . -B $build -DCHORUS_CUDA=ON -DCMAKE_BUILD_TYPE=Release >"$logs/build.log" 2>&1 &&
  cmake --build $build -j "$(nproc)" >>"$logs/build.log" 2>&1; }; then
  tail -30 "$logs/build.log"
  echo "BUILD FAILED"
  exit 1
fi
echo "# built in $build (${SECONDS} s so far)"

ref=${NCCL_REF_LIB:-$(python3 -c 'import nvidia.nccl, os; print(os.path.join(list(nvidia.nccl.__path__)[0], "lib"))' 2>/dev/null)}
[ -f "$ref/libnccl.so.2" ] || { echo "# NVIDIA NCCL not found (set NCCL_REF_LIB)"; ref=""; }
perf=$build/tools/perf
run=$build/tools/chorusrun

# ---- correctness ------------------------------------------------------------
fails=0
passes=0
matrix_e=1M
[ "$mode" = full ] && matrix_e=16M
checkno=0
check() { # name, then the command
  local name=$1
  shift
  checkno=$((checkno + 1))
  if { [ -n "${CHECKS:-}" ] && ! [[ $name =~ $CHECKS ]]; } ||
    { [ -n "${CHECK_SHARD:-}" ] && [ $(((checkno - 1) % ${CHECK_SHARD#*/} + 1)) != "${CHECK_SHARD%/*}" ]; }; then
    : >"$logs/check_$name.log" # skipped: not named by CHECKS, or another shard's
    return
  fi
  # The perf programs exit non-zero when a row has #wrong > 0 or a call fails.
  local t0=$SECONDS # each check's seconds, to plan shards and limits by
  if timeout "${CHECK_TIMEOUT:-90}" "$@" >"$logs/check_$name.log" 2>&1; then
    passes=$((passes + 1))
    printf '  %-40s %4d s ok\n' "$name" $((SECONDS - t0))
  else
    fails=$((fails + 1))
    printf '  %-40s %4d s FAIL (check_%s.log)\n' "$name" $((SECONDS - t0)) "$name"
    # rows with wrong elements (#wrong is the 9th and 13th column), then the end
    grep -a -E '^ +[0-9]+ +[0-9]+ ' "$logs/check_$name.log" | awk '$9 != "0" || $13 != "0"' | head -8 | sed 's/^/      /'
    tail -3 "$logs/check_$name.log" | sed 's/^/      /'
  fi
}
{ [ "$mode" = bench ] || [ "$mode" = big ] || [ "$mode" = tune ]; } && matrix=no || matrix=yes
[ "$matrix" = yes ] && {
echo "# correctness: every type and op, in and out of place, against exact references"
colls="all_reduce reduce_scatter reduce all_gather broadcast alltoall gather scatter sendrecv"
for coll in $colls; do
  for g in 1 2 4; do
    [ "$g" -le "$ngpu" ] || continue
    check "${coll}_g$g" $perf/${coll}_perf -g "$g" -d all -o all -b 8 -e $matrix_e -f 4 -n 1 -w 1 -c 1 -T 60
    if [ "$g" -gt 1 ] && { [ "$g" = 4 ] || [ "$coll" = all_reduce ]; }; then
      check "${coll}_procs$g" $run -n "$g" --timeout 80 $perf/${coll}_perf -d all -o all -b 8 -e $matrix_e -f 4 -n 1 -w 1 -c 1 -T 60
    fi
  done
done
# The bandwidth paths (pipelined kernel, chains) and
# LL pieces, forced at small sizes so that the matrix covers them; tiny
# pipeline steps on 3 channels make every FIFO wrap around many times.
# (Zero-copy is off in these, which it would take over with -g.)
force="env CHORUS_GPU_DIRECT=0 CHORUS_GPU_PIPE_BYTES=0 CHORUS_GPU_PIPE_BYTES_PAIR=0 CHORUS_GPU_TWOSHOT_BYTES=-1 CHORUS_GPU_TWOSHOT_BYTES_PAIR=-1 CHORUS_GPU_CHAIN_BYTES=0"
tiny="env CHORUS_GPU_CHUNK_BYTES=4096 CHORUS_GPU_FIFO_BYTES=8192 CHORUS_GPU_FIFO_BYTES_PAIR=0 CHORUS_GPU_CHANNELS=3 CHORUS_GPU_RING_CHUNK_BYTES=4096 CHORUS_GPU_TWOSHOT_CHUNK_BYTES=4096"
# Two-shot AllReduce at every size: in LL lines (default up to 1 MiB), and
# in FIFO chunks (CHORUS_GPU_TWOSHOT_LL_BYTES=0).
twoshot="env CHORUS_GPU_DIRECT=0 CHORUS_GPU_TWOSHOT_BYTES=0 CHORUS_GPU_TWOSHOT_BYTES_PAIR=0"
fifo="env CHORUS_GPU_TWOSHOT_LL_BYTES=0"
gw=4
[ "$ngpu" -lt 4 ] && gw=$ngpu
if [ "$gw" -ge 2 ]; then
  for coll in all_reduce reduce_scatter all_gather broadcast alltoall reduce gather scatter; do
    check "${coll}_pipe_g$gw" $force $perf/${coll}_perf -g $gw -d all -o all -b 8 -e $matrix_e -f 4 -n 1 -w 1 -c 1 -T 60
  done
  check "all_reduce_ring_procs2" env CHORUS_GPU_RING_BYTES=1 $run -n 2 --timeout 80 $perf/all_reduce_perf -d all -o all -b 8 -e 16M -f 8 -n 1 -w 1 -c 1 -T 60
  # 2 GPUs: Broadcast and Reduce as one-hop chains at every size; exchanges
  # in larger pipeline steps.
  check "broadcast_chain_procs2" env CHORUS_GPU_CHAIN_BYTES_PAIR=0 $run -n 2 --timeout 80 $perf/broadcast_perf -d all -r all -b 8 -e 16M -f 8 -n 1 -w 1 -c 1 -T 60
  CHECK_TIMEOUT=170 check "reduce_chain_procs2" env CHORUS_GPU_CHAIN_BYTES_PAIR=0 $run -n 2 --timeout 160 $perf/reduce_perf -d all -o all -r all -b 8 -e 16M -f 8 -n 1 -w 1 -c 1 -T 60
  check "reduce_chain_g2" env CHORUS_GPU_CHAIN_BYTES_PAIR=0 $perf/reduce_perf -g 2 -d float -o all -b 4 -e 16M -f 7 -n 1 -w 1 -c 1 -T 60
  for coll in alltoall gather scatter all_gather; do
    check "${coll}_chunk128k_procs2" env CHORUS_GPU_CHUNK_BYTES_PAIR=131072 $run -n 2 --timeout 80 $perf/${coll}_perf -d all -b 8 -e 32M -f 8 -n 1 -w 1 -c 1 -T 60
  done
  # A launcher thread per GPU (gpu/launchers.h) that sleeps between groups,
  # and the calling thread launching every GPU's kernels itself.
  check "all_reduce_g${gw}_launchers_asleep" env CHORUS_GPU_LAUNCH_SPIN_US=0 $perf/all_reduce_perf -g $gw -d all -o all -b 8 -e 1M -f 4 -n 3 -w 1 -c 1 -T 60
  check "all_reduce_g${gw}_no_launchers" env CHORUS_GPU_LAUNCH_THREADS=0 $perf/all_reduce_perf -g $gw -d all -o all -b 8 -e 1M -f 4 -n 1 -w 1 -c 1 -T 60
fi
if [ "$ngpu" -ge 4 ]; then
  for coll in all_reduce broadcast reduce alltoall; do
    roots=""
    [ "$coll" = broadcast ] || [ "$coll" = reduce ] && roots="-r all"
    check "${coll}_pipe_tiny_procs4" $force $tiny $run -n 4 --timeout 80 $perf/${coll}_perf -d all -o all $roots -b 4 -e 4M -f 7 -n 2 -w 1 -c 1 -T 60
  done
  # Rings (AllReduce, AllGather, ReduceScatter) forced at every size.
  for coll in all_reduce all_gather reduce_scatter; do
    check "${coll}_ring_g3" env CHORUS_GPU_DIRECT=0 CHORUS_GPU_RING_BYTES=1 $perf/${coll}_perf -g 3 -d all -o all -b 4 -e $matrix_e -f 3 -n 1 -w 1 -c 1 -T 60
    check "${coll}_ring_tiny_procs4" env CHORUS_GPU_RING_BYTES=1 $tiny $run -n 4 --timeout 80 $perf/${coll}_perf -d all -o all -b 8 -e 4M -f 7 -n 2 -w 1 -c 1 -T 60
  done
  check "all_reduce_twoshot_g3" $twoshot $perf/all_reduce_perf -g 3 -d all -o all -b 4 -e $matrix_e -f 3 -n 1 -w 1 -c 1 -T 60
  check "all_reduce_twoshot_fifo_g3" $twoshot $fifo $perf/all_reduce_perf -g 3 -d all -o all -b 4 -e $matrix_e -f 3 -n 1 -w 1 -c 1 -T 60
  check "all_reduce_twoshot_procs4" $twoshot $run -n 4 --timeout 80 $perf/all_reduce_perf -d all -o all -b 8 -e $matrix_e -f 4 -n 1 -w 1 -c 1 -T 60
  check "all_reduce_twoshot_fifo_tiny_procs4" $twoshot $fifo $tiny $run -n 4 --timeout 80 $perf/all_reduce_perf -d all -o all -b 4 -e 4M -f 7 -n 2 -w 1 -c 1 -T 60
  check "all_reduce_twoshot_procs2" $twoshot $run -n 2 --timeout 80 $perf/all_reduce_perf -d all -o all -b 4 -e $matrix_e -f 7 -n 1 -w 1 -c 1 -T 60
  # NCCL_ALGO and NCCL_PROTO steer the GPU plan (gpu/plan.c).
  check "all_reduce_proto_ll_g4" env NCCL_PROTO=LL $perf/all_reduce_perf -g 4 -d all -o sum -b 8 -e 4M -f 8 -n 1 -w 1 -c 1 -T 60
  check "all_reduce_twoshot_simple_procs4" env NCCL_ALGO=allreduce:twoshot NCCL_PROTO=Simple $run -n 4 --timeout 80 $perf/all_reduce_perf -d all -o sum -b 64 -e 1M -f 8 -n 1 -w 1 -c 1 -T 60
  check "all_reduce_pieces_g4" env CHORUS_GPU_DIRECT=0 CHORUS_GPU_LL_BYTES=4096 $perf/all_reduce_perf -g 4 -d all -o all -b 8 -e $matrix_e -f 4 -n 1 -w 1 -c 1 -T 60
  check "all_gather_pieces_procs4" env CHORUS_GPU_LL_BYTES=4096 $run -n 4 --timeout 80 $perf/all_gather_perf -d all -b 8 -e $matrix_e -f 4 -n 1 -w 1 -c 1 -T 60
fi
# Zero-copy AllReduce, AllGather and ReduceScatter (gpu/direct.c) at every
# size: GPUs of one process (-g), and symmetric windows across processes
# (-R 2: ncclMemAlloc buffers, ncclCommWindowRegister); with 4 KiB per CTA
# and up to 64 CTAs; that it is really used (its INFO line).
direct="env CHORUS_GPU_DIRECT_BYTES=0 CHORUS_GPU_DIRECT_MAX=0 CHORUS_GPU_DIRECT_AGRS_MAX=0"
if [ "$gw" -ge 2 ]; then
  for coll in all_reduce all_gather reduce_scatter; do
    # (-d all -o all to 4 MiB; to 16 MiB, checked on the host, it took 104
    # s on 4xH200, most of it the last size; float at 64-512 MiB below)
    CHECK_TIMEOUT=180 check "${coll}_direct_g$gw" $direct $perf/${coll}_perf -g $gw -d all -o all -b 64 -e 4M -f 4 -n 1 -w 1 -c 1 -T 60
    check "${coll}_direct_win_procs$gw" $direct $run -n $gw --timeout 80 $perf/${coll}_perf -R 2 -d all -o all -b 64 -e 16M -f 4 -n 1 -w 1 -c 1 -T 60
  done
  # Large ReduceScatter and AllGather zero-copy (by default from 1 MiB, up
  # to CHORUS_GPU_DIRECT_AGRS_MAX on 3+ GPUs, lifted here): 64 and 512 MiB,
  # checked on the host.
  for coll in all_gather reduce_scatter; do
    CHECK_TIMEOUT=150 check "${coll}_direct_big_g$gw" env CHORUS_GPU_DIRECT_AGRS_MAX=0 CHORUS_GPU_XCHG_CE_BYTES=0 CHORUS_GPU_XCHG_CE_BYTES_PAIR=0 $perf/${coll}_perf -g $gw -d float -b 64M -e 512M -f 8 -n 1 -w 1 -c 1 -T 120
    CHECK_TIMEOUT=150 check "${coll}_direct_big_win_procs$gw" env CHORUS_GPU_DIRECT_AGRS_MAX=0 $run -n $gw --timeout 140 $perf/${coll}_perf -R 2 -d float -b 64M -e 512M -f 8 -n 1 -w 1 -c 1 -T 120
    # and above that limit, by default: the rings with -g 4
    [ "$gw" -gt 2 ] && CHECK_TIMEOUT=150 check "${coll}_big_g$gw" $perf/${coll}_perf -g $gw -d float -b 128M -e 512M -f 4 -n 1 -w 1 -c 1 -T 120
  done
  check "all_reduce_direct_odd_g$gw" $direct $perf/all_reduce_perf -g $gw -d all -o sum -b 4 -e 4M -f 7 -n 1 -w 1 -c 1 -T 60
  check "all_reduce_direct_ctas_procs$gw" $direct env CHORUS_GPU_DIRECT_CTA_BYTES=4096 CHORUS_GPU_DIRECT_CHANNELS=64 $run -n $gw --timeout 80 $perf/all_reduce_perf -R 2 -d float -o sum -b 64 -e 64M -f 4 -n 2 -w 1 -c 1 -T 60
  [ -x $build/tests/gpu/gpu_windows ] && check "windows_procs$gw" $run -n $gw --timeout 80 $build/tests/gpu/gpu_windows && grep -a "^offset" "$logs/check_windows_procs$gw.log" | sed 's/^/      /'
  check "direct_in_use_g$gw" bash -c "NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=COLL $perf/all_reduce_perf -g $gw -b 4M -e 4M -n 1 -w 0 -c 1 2>&1 | grep -q 'runs zero-copy (all ranks'"
  check "direct_win_in_use_procs$gw" bash -c "NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=COLL $run -n $gw --timeout 80 $perf/all_reduce_perf -R 2 -b 4M -e 4M -n 1 -w 0 -c 1 2>&1 | grep -q 'runs zero-copy (symmetric'"
fi
# Send/Recv groups: several messages per pair of mixed sizes, self sends,
# two streams, an in-place ring shift and an AllReduce in one group.
sr=$build/tests/gpu/gpu_sendrecv
for g in 2 4; do
  [ "$g" -le "$ngpu" ] && [ -x "$sr" ] || continue
  check "sendrecv_groups_g$g" $sr -g "$g"
  check "sendrecv_groups_procs$g" $run -n "$g" --timeout 80 $sr
done
[ "$ngpu" -ge 4 ] && [ -x "$sr" ] && check "sendrecv_groups_tiny_procs4" $tiny $run -n 4 --timeout 80 $sr
# Send/Recv pulled from the sender's FIFO (CHORUS_GPU_P2P_PULL, every size
# through the FIFOs): the perf ring, the groups (an AllReduce between, whose
# FIFOs share the area), in a CUDA graph, large ones; and ranks that set it
# differently fail at init, naming it.
pull="env CHORUS_GPU_P2P_PULL=1 CHORUS_GPU_P2P_LL_BYTES=0 CHORUS_GPU_P2P_CE_BYTES=0"
for g in 2 4; do
  [ "$g" -le "$ngpu" ] || continue
  check "sendrecv_pull_procs$g" $pull $run -n $g --timeout 80 $perf/sendrecv_perf -d all -b 8 -e $matrix_e -f 4 -n 1 -w 1 -c 1 -T 60
  [ -x "$sr" ] && check "sendrecv_groups_pull_procs$g" $pull $run -n $g --timeout 80 $sr
  [ -x "$sr" ] && check "sendrecv_groups_pull_g$g" $pull $sr -g $g
  [ -x $build/tests/gpu/gpu_graph_p2p ] && check "graph_p2p_pull_procs$g" $pull $run -n $g --timeout 80 $build/tests/gpu/gpu_graph_p2p
  check "sendrecv_pull_slots8_procs$g" $pull CHORUS_GPU_P2P_SLOTS=8 $run -n $g --timeout 80 $perf/sendrecv_perf -d float -b 8 -e 64M -f 4 -n 1 -w 1 -c 1 -T 60
  CHECK_TIMEOUT=150 check "sendrecv_pull_big_procs$g" $pull $run -n $g --timeout 140 $perf/sendrecv_perf -d float -b 64M -e 512M -f 8 -n 1 -w 1 -c 1 -T 120
done
[ "$ngpu" -ge 2 ] && check "sendrecv_slots8_procs2" env CHORUS_GPU_P2P_LL_BYTES=0 CHORUS_GPU_P2P_SLOTS=8 $run -n 2 --timeout 80 $perf/sendrecv_perf -d all -b 8 -e 64M -f 4 -n 1 -w 1 -c 1 -T 60
[ "$ngpu" -ge 2 ] && check "settings_differ_procs2" bash -c "$run -n 2 --timeout 60 bash -c 'NCCL_DEBUG=WARN CHORUS_GPU_P2P_PULL=\$RANK exec $perf/sendrecv_perf -b 8 -e 8 -n 1 -w 0 -c 1 -T 30' 2>&1 | grep -q 'CHORUS_GPU_P2P_PULL is 0 on rank 0 but 1 on rank 1'"
# Send/Recv, Broadcast, AllGather and AlltoAll on the copy engine
# (gpu/ce.h; one process, every end in one group): every size (the Send/Recv groups above; the perf
# tools, whose in-place Send/Recv rows stay in the kernels; Broadcast from
# every root, in chunks of 1 MiB on 3+ GPUs; the rooted program's NULL and
# canary buffers), large ones at the default sizes, and that they are
# really used (their INFO lines).
bce="env CHORUS_GPU_BCAST_CE_BYTES=1 CHORUS_GPU_BCAST_CE_BYTES_PAIR=1 CHORUS_GPU_BCAST_CE_CHUNK=1048576"
for g in 2 4; do
  [ "$g" -le "$ngpu" ] || continue
  [ -x "$sr" ] && check "sendrecv_groups_ce_g$g" env CHORUS_GPU_P2P_CE_BYTES=1 $sr -g "$g"
  check "sendrecv_ce_g$g" env CHORUS_GPU_P2P_CE_BYTES=1 $perf/sendrecv_perf -g "$g" -d all -b 8 -e $matrix_e -f 4 -n 1 -w 1 -c 1 -T 60
  CHECK_TIMEOUT=150 check "sendrecv_ce_big_g$g" $perf/sendrecv_perf -g "$g" -d float -b 64M -e 512M -f 8 -n 1 -w 1 -c 1 -T 120
  check "ce_in_use_g$g" bash -c "NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=P2P $perf/sendrecv_perf -g $g -b 16M -e 16M -n 1 -w 0 -c 1 2>&1 | grep -q 'runs on the copy engine'"
  check "broadcast_ce_g$g" $bce $perf/broadcast_perf -g "$g" -d all -r all -b 8 -e 16M -f 8 -n 1 -w 1 -c 1 -T 60
  CHECK_TIMEOUT=150 check "broadcast_ce_big_g$g" $bce CHORUS_GPU_BCAST_CE_CHUNK=33554432 $perf/broadcast_perf -g "$g" -d float -r all -b 64M -e 512M -f 8 -n 1 -w 1 -c 1 -T 120
  [ -x $build/tests/gpu/gpu_rooted ] && check "rooted_ce_g$g" $bce env CUDA_VISIBLE_DEVICES=$(seq -s, 0 $((g - 1))) $build/tests/gpu/gpu_rooted
  check "bcast_ce_in_use_g$g" bash -c "NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=COLL $bce $perf/broadcast_perf -g $g -b 16M -e 16M -n 1 -w 0 -c 1 2>&1 | grep -q 'runs on the copy engine'"
  # AllGather and AlltoAll on the copy engine (every size; AlltoAll's
  # in-place rows stay in the kernels), large ones, and that they are used.
  for coll in all_gather alltoall; do
    check "${coll}_ce_g$g" env CHORUS_GPU_XCHG_CE_BYTES=1 CHORUS_GPU_XCHG_CE_BYTES_PAIR=1 $perf/${coll}_perf -g "$g" -d all -b 8 -e 16M -f 8 -n 1 -w 1 -c 1 -T 60
    CHECK_TIMEOUT=150 check "${coll}_ce_big_g$g" env CHORUS_GPU_XCHG_CE_BYTES=1 CHORUS_GPU_XCHG_CE_BYTES_PAIR=1 $perf/${coll}_perf -g "$g" -d float -b 64M -e 512M -f 8 -n 1 -w 1 -c 1 -T 120
  done
  check "xchg_ce_in_use_g$g" bash -c "NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=COLL CHORUS_GPU_XCHG_CE_BYTES=1 CHORUS_GPU_XCHG_CE_BYTES_PAIR=1 $perf/all_gather_perf -g $g -b 16M -e 16M -n 1 -w 0 -c 1 2>&1 | grep -q 'ncclAllGather of .* runs on the copy engine'"
done
# Small Send/Recv as LL lines per pair (default up to 128 KiB, a CTA per
# 4 KiB part): off (every size through the FIFOs), and up to 1 MiB (32
# parts of up to 32 KiB, many lines per thread).
[ "$ngpu" -ge 2 ] && check "sendrecv_ll1m_procs2" env CHORUS_GPU_P2P_LL_BYTES=1048576 $run -n 2 --timeout 80 $perf/sendrecv_perf -d all -b 8 -e $matrix_e -f 4 -n 1 -w 1 -c 1 -T 60
if [ "$ngpu" -ge 4 ] && [ -x "$sr" ]; then
  check "sendrecv_groups_fifo_procs4" env CHORUS_GPU_P2P_LL_BYTES=0 $run -n 4 --timeout 80 $sr
  check "sendrecv_groups_ll1m_g4" env CHORUS_GPU_P2P_LL_BYTES=1048576 $sr -g 4
  check "sendrecv_ll1m_procs4" env CHORUS_GPU_P2P_LL_BYTES=1048576 $run -n 4 --timeout 80 $perf/sendrecv_perf -d all -b 8 -e $matrix_e -f 4 -n 1 -w 1 -c 1 -T 60
fi
# CUDA graphs: K AllReduces captured once, replayed with fresh inputs.
graph=$build/tests/gpu/gpu_graph_allreduce
for g in 2 4; do
  [ "$g" -le "$ngpu" ] && [ -x "$graph" ] || continue
  check "graph_procs$g" $run -n "$g" --timeout 80 $graph
  grep -a "graph replay" "$logs/check_graph_procs$g.log" | sed 's/^/      /'
  [ "$g" = 4 ] && check "graph_pipe_procs$g" $force $run -n "$g" --timeout 80 $graph
  [ "$g" = 4 ] && check "graph_twoshot_fifo_procs$g" $twoshot $fifo $run -n "$g" --timeout 80 $graph
  if [ -n "$ref" ]; then # the same binary on NVIDIA's NCCL, for the graph-replay times
    LD_LIBRARY_PATH="$ref" timeout 90 $run -n "$g" --timeout 80 $graph >"$logs/graph_nccl_procs$g.log" 2>&1
    grep -a "graph replay" "$logs/graph_nccl_procs$g.log" | sed 's/^/      NCCL /'
  fi
  # Send/Recv in graphs, with a pair-only swap and an AllReduce in each.
  gp2p=$build/tests/gpu/gpu_graph_p2p
  [ -x "$gp2p" ] || continue
  check "graph_p2p_procs$g" $run -n "$g" --timeout 80 $gp2p
  grep -a "graph replay" "$logs/check_graph_p2p_procs$g.log" | sed 's/^/      /'
  [ "$g" = 4 ] && check "graph_p2p_fifo_procs$g" env CHORUS_GPU_P2P_LL_BYTES=0 $run -n "$g" --timeout 80 $gp2p
  if [ -n "$ref" ]; then
    LD_LIBRARY_PATH="$ref" timeout 90 $run -n "$g" --timeout 80 $gp2p >"$logs/graph_p2p_nccl_procs$g.log" 2>&1
    grep -a -E "graph (replay|Send)" "$logs/graph_p2p_nccl_procs$g.log" | sed 's/^/      NCCL /'
  fi
done
for g in 1 2 4; do
  [ "$g" -le "$ngpu" ] || continue
  check "all_reduce_odd_g$g" $perf/all_reduce_perf -g "$g" -d float -o sum -b 4 -e 4 -n 1 -w 1 -c 3 -T 60
done
# ncclMemAlloc: device memory through cuMem on every GPU, given back, used by an AllReduce.
[ -x $build/tests/gpu/gpu_memalloc ] && check "memalloc_all" $build/tests/gpu/gpu_memalloc && grep -a -E "^(GPU|AllReduce)" "$logs/check_memalloc_all.log" | sed 's/^/      /'
# Rooted collectives: NULL or untouched buffers off the root, each kernel kind.
rooted=$build/tests/gpu/gpu_rooted
if [ "$ngpu" -ge 2 ] && [ -x "$rooted" ]; then
  check "rooted_all" $rooted
  check "rooted_pipe_all" $force $rooted
  [ "$ngpu" -ge 3 ] && check "rooted_g3" env CUDA_VISIBLE_DEVICES=0,1,2 $rooted
fi
# NCCL_P2P_DISABLE=1: windows in pinned shared host memory; every kernel
# kind (LL, pipeline, rings and chains by 16 MiB), Send/Recv, graphs.
staged="env NCCL_P2P_DISABLE=1"
if [ "$ngpu" -ge 2 ]; then
  check "staged_all_reduce_procs2" $staged $run -n 2 --timeout 80 $perf/all_reduce_perf -d all -o all -b 8 -e 4M -f 8 -n 1 -w 1 -c 1 -T 60
  check "staged_all_reduce_g2" $staged $perf/all_reduce_perf -g 2 -d float -o all -b 8 -e 16M -f 8 -n 1 -w 1 -c 1 -T 60
fi
if [ "$ngpu" -ge 4 ]; then
  for coll in all_reduce all_gather reduce_scatter broadcast reduce alltoall; do
    check "staged_${coll}_procs4" $staged $run -n 4 --timeout 80 $perf/${coll}_perf -d float -o sum -b 8 -e 16M -f 8 -n 1 -w 1 -c 1 -T 60
  done
  [ -x "$sr" ] && check "staged_sendrecv_groups_procs4" $staged $run -n 4 --timeout 80 $sr
  [ -x "$graph" ] && check "staged_graph_procs4" $staged $run -n 4 --timeout 80 $graph
  [ -x "$rooted" ] && check "staged_rooted_all" $staged $rooted
fi
# CHORUS_GPU_CUMEM=1 (the default): windows in cuMem memory, handed to the
# other processes as POSIX descriptors over Unix sockets; =0 gives CUDA IPC.
cumem="env CHORUS_GPU_CUMEM=1"
if [ "$ngpu" -ge 2 ]; then
  check "cumem_in_use_procs2" bash -c "NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT $run -n 2 --timeout 80 $perf/all_reduce_perf -b 8 -e 8 -n 1 -w 0 -c 1 2>&1 | grep -q 'cuMem device memory'"
  check "cumem_all_reduce_procs2" $cumem $run -n 2 --timeout 80 $perf/all_reduce_perf -d all -o all -b 8 -e $matrix_e -f 4 -n 1 -w 1 -c 1 -T 60
  check "ipc_in_use_procs2" bash -c "NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT CHORUS_GPU_CUMEM=0 $run -n 2 --timeout 80 $perf/all_reduce_perf -b 8 -e 8 -n 1 -w 0 -c 1 2>&1 | grep -q 'bytes of device memory'"
  check "ipc_all_reduce_procs2" env CHORUS_GPU_CUMEM=0 $run -n 2 --timeout 80 $perf/all_reduce_perf -d all -o all -b 8 -e $matrix_e -f 4 -n 1 -w 1 -c 1 -T 60
fi
if [ "$ngpu" -ge 4 ]; then
  check "cumem_all_reduce_procs4" $cumem $run -n 4 --timeout 80 $perf/all_reduce_perf -d all -o all -b 8 -e $matrix_e -f 4 -n 1 -w 1 -c 1 -T 60
  check "cumem_all_reduce_g4" $cumem $perf/all_reduce_perf -g 4 -d float -o all -b 8 -e 64M -f 8 -n 1 -w 1 -c 1 -T 60
  check "cumem_all_gather_procs4" $cumem $run -n 4 --timeout 80 $perf/all_gather_perf -d float -b 8 -e 64M -f 8 -n 1 -w 1 -c 1 -T 60
  [ -x "$sr" ] && check "cumem_sendrecv_groups_procs4" $cumem $run -n 4 --timeout 80 $sr
  [ -x "$graph" ] && check "cumem_graph_procs4" $cumem $run -n 4 --timeout 80 $graph
fi
# Failures: a peer that never launches, ncclCommAbort during a wait, bad setups.
[ "$ngpu" -ge 2 ] && check "failures_g2" $build/tests/gpu/gpu_failures && grep -a -E "^(silent|abort|size|call|bad)" "$logs/check_failures_g2.log" | sed 's/^/      /'
# A peer process that exits: the rank waiting for it fails at once (util/watch.h).
[ "$ngpu" -ge 2 ] && [ -x $build/tests/gpu/gpu_peer_exit ] && check "peer_exit_procs2" $run -n 2 --timeout 60 $build/tests/gpu/gpu_peer_exit && grep -a "^peer exit" "$logs/check_peer_exit_procs2.log" | sed 's/^/      /'
if command -v compute-sanitizer >/dev/null && [ "$ngpu" -ge 2 ]; then
  check "sanitizer_allreduce_g2" compute-sanitizer --error-exitcode 9 $perf/all_reduce_perf -g 2 -d float -b 8 -e 64K -f 8 -n 1 -w 0 -c 1
  check "sanitizer_pipe_g2" $force compute-sanitizer --error-exitcode 9 $perf/all_reduce_perf -g 2 -d float -b 8 -e 1M -f 8 -n 1 -w 0 -c 1
  check "sanitizer_direct_g2" env CHORUS_GPU_DIRECT_BYTES=0 CHORUS_GPU_DIRECT_MAX=0 CHORUS_GPU_DIRECT_AGRS_MAX=0 compute-sanitizer --error-exitcode 9 $perf/all_reduce_perf -g 2 -d float -b 8 -e 1M -f 8 -n 1 -w 0 -c 1
  check "sanitizer_twoshot_g2" $twoshot compute-sanitizer --error-exitcode 9 $perf/all_reduce_perf -g 2 -d float -b 8 -e 1M -f 8 -n 1 -w 0 -c 1
  [ "$ngpu" -ge 4 ] && check "sanitizer_twoshot_fifo_g4" $twoshot $fifo compute-sanitizer --error-exitcode 9 $perf/all_reduce_perf -g 4 -d float -b 8 -e 1M -f 8 -n 1 -w 0 -c 1
fi
echo "# correctness: $passes passed, $fails failed (${SECONDS} s so far)"
}

# ---- tune: one setting at a time, Chorus alone, printed per size ---------
# sweep label variable "values" command... : one run per value of the
# setting, then a table of us per size with a column per value; the value
# "nccl" runs NVIDIA's library instead, for reference.
# TUNE=regex runs only the sweeps whose labels match.
sweep() {
  local label=$1 var=$2 values=$3
  shift 3
  [ -n "${TUNE:-}" ] && ! [[ $label =~ $TUNE ]] && return 0
  for v in $values; do
    local set="$var=$v"
    if [ "$v" = nccl ]; then
      [ -n "$ref" ] || continue
      set="LD_LIBRARY_PATH=$ref"
    fi
    timeout 90 env "$set" "$@" -n 30 -w 5 -c 0 -T 60 >"$logs/sweep_${label}_$v.log" 2>&1 ||
      echo "  sweep $label $set: exit $?"
  done
  python3 - "$logs" "$label" "$var" $values <<'EOF2'
import re, sys
logs, label, var, values = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
row = re.compile(r"^\s+(\d+)\s+(\d+)\s+\S+\s+\S+\s+-?\d+\s+([\d.]+)")
runs = []
for v in values:
    t = {}
    try:
        for line in open(f"{logs}/sweep_{label}_{v}.log", errors="replace"):
            m = row.match(line)
            if m: t[int(m.group(1))] = float(m.group(3))
    except OSError:
        pass
    runs.append(t)
print(f"\n# {label}: us by {var} = " + ", ".join(values))
for size in sorted(set().union(*runs)):
    print(f"  {size:>10}  " + "  ".join("%8s" % ("%.1f" % r[size] if size in r else "-") for r in runs))
EOF2
}
if [ "$mode" = tune ] && [ "$ngpu" -ge 2 ]; then
  r2="$run -n 2 --timeout 80"
  sweep "sendrecv_procs2_ll" CHORUS_GPU_P2P_LL_BYTES "0 16384 131072 262144 524288 1048576 nccl" $r2 $perf/sendrecv_perf -b 8 -e 2M -f 2
  # Send/Recv pulled from the sender's FIFO against pushed (processes).
  for g in 2 4; do
    [ "$g" -le "$ngpu" ] && sweep "sendrecv_procs${g}_pull" CHORUS_GPU_P2P_PULL "0 1 nccl" $run -n $g --timeout 80 $perf/sendrecv_perf -b 1M -e 4G -f 4
  done
  # More FIFO slots per Send/Recv stream, pulled and pushed: a puller
  # starts on a slot only once its flag is seen, so slots filled further
  # ahead might hide that (2026-11-26: pulling 7-12% slower than pushing
  # with the default two slots of 256 KiB).
  for dir in pull push; do
    sweep "sendrecv_procs2_${dir}_slots" CHORUS_GPU_P2P_SLOTS "2 4 8 nccl" env CHORUS_GPU_P2P_PULL=$([ $dir = pull ] && echo 1 || echo 0) CHORUS_GPU_FIFO_BYTES_PAIR=2097152 $r2 $perf/sendrecv_perf -b 64M -e 4G -f 4
  done
  # Send/Recv and Broadcast on the copy engine (from 1 byte) against the
  # kernels, -g; the chain's chunk on 3+ GPUs.
  for g in 2 4; do
    [ "$g" -le "$ngpu" ] || continue
    sweep "sendrecv_g${g}_ce" CHORUS_GPU_P2P_CE_BYTES "0 1 nccl" $perf/sendrecv_perf -g $g -b 16K -e 1G -f 4
    var=CHORUS_GPU_BCAST_CE_BYTES
    [ "$g" = 2 ] && var=CHORUS_GPU_BCAST_CE_BYTES_PAIR
    sweep "broadcast_g${g}_ce" $var "0 1 nccl" $perf/broadcast_perf -g $g -b 16K -e 1G -f 4
    for coll in all_gather alltoall; do
      sweep "${coll}_g${g}_ce" CHORUS_GPU_XCHG_CE_BYTES$([ "$g" = 2 ] && echo _PAIR) "0 1 nccl" $perf/${coll}_perf -g $g -b 1M -e 2G -f 4
    done
    [ "$g" -gt 2 ] && sweep "broadcast_g${g}_ce_chunk" CHORUS_GPU_BCAST_CE_CHUNK "4194304 16777216 33554432 67108864 nccl" env CHORUS_GPU_BCAST_CE_BYTES=1 $perf/broadcast_perf -g $g -b 4M -e 2G -f 4
  done
  # 2 GiB, where the goals are set: the AllReduce ring's FIFO and step,
  # the FIFO behind Send/Recv and Broadcast with one process per GPU, and
  # AlltoAll's step (2xH200, 2026-11-26: AllReduce 0.98x NCCL at 2 GiB,
  # Send/Recv and Broadcast 0.94-0.96x, AlltoAll 0.86x).
  r2big="-b 512M -e 2G -f 4"
  sweep "all_reduce_g2_fifo_2g" CHORUS_GPU_FIFO_BYTES_PAIR "524288 1048576 2097152 nccl" $perf/all_reduce_perf -g 2 $r2big
  sweep "all_reduce_g2_ringchunk_2g" CHORUS_GPU_RING_CHUNK_BYTES "262144 524288 1048576" env CHORUS_GPU_FIFO_BYTES_PAIR=2097152 $perf/all_reduce_perf -g 2 $r2big
  sweep "alltoall_procs2_chunk_2g" CHORUS_GPU_CHUNK_BYTES_PAIR "131072 262144 524288 nccl" env CHORUS_GPU_FIFO_BYTES_PAIR=2097152 $r2 $perf/alltoall_perf $r2big
  for coll in sendrecv broadcast; do
    sweep "${coll}_procs2_fifo_2g" CHORUS_GPU_FIFO_BYTES_PAIR "524288 1048576 2097152 4194304 nccl" $r2 $perf/${coll}_perf $r2big
  done
  # Chorus as it is (a setting at its default) beside NCCL, FIFO sizes.
  for coll in all_reduce broadcast sendrecv; do
    sweep "${coll}_procs2_asis" CHORUS_GPU_CUMEM "1 nccl" $r2 $perf/${coll}_perf -b 1M -e 256M -f 4
  done
  for coll in all_reduce broadcast; do
    sweep "${coll}_procs2_ringchunk" CHORUS_GPU_RING_CHUNK_BYTES "65536 131072 262144 nccl" $r2 $perf/${coll}_perf -b 1M -e 512M -f 4
    sweep "${coll}_procs2_ringch" CHORUS_GPU_RING_CHANNELS "16 32 48 64" $r2 $perf/${coll}_perf -b 1M -e 512M -f 4
  done
  sweep "all_reduce_procs2_ringbytes" CHORUS_GPU_RING_BYTES "1048576 2097152 4194304 8388608" $r2 $perf/all_reduce_perf -b 512K -e 16M -f 2
  for coll in sendrecv broadcast reduce; do
    sweep "${coll}_procs2_fifo" CHORUS_GPU_FIFO_BYTES_PAIR "262144 524288 1048576 2097152 nccl" $r2 $perf/${coll}_perf -b 4M -e 512M -f 4
  done
  for coll in broadcast reduce; do
    sweep "${coll}_procs2_chain" CHORUS_GPU_CHAIN_BYTES_PAIR "-1 262144" $r2 $perf/${coll}_perf -b 256K -e 512M -f 4
  done
  for coll in alltoall gather scatter; do
    sweep "${coll}_procs2_chunk" CHORUS_GPU_CHUNK_BYTES_PAIR "0 131072 262144" $r2 $perf/${coll}_perf -b 1M -e 512M -f 4
  done
  for coll in all_gather reduce_scatter alltoall; do
    sweep "${coll}_procs2_pipe" CHORUS_GPU_PIPE_BYTES_PAIR "262144 524288 1048576" $r2 $perf/${coll}_perf -b 128K -e 4M -f 2
  done
  # Zero-copy against staged (and NCCL, with the same registration), from
  # 64 KiB: -g 2 (any cudaMalloc buffer) and symmetric windows (-R 2).
  for coll in all_reduce all_gather reduce_scatter; do
    sweep "${coll}_g2_direct" CHORUS_GPU_DIRECT "0 1 nccl" env CHORUS_GPU_XCHG_CE_BYTES_PAIR=0 CHORUS_GPU_DIRECT_BYTES=0 CHORUS_GPU_DIRECT_MAX=0 CHORUS_GPU_DIRECT_AGRS_MAX=0 $perf/${coll}_perf -g 2 -b 64K -e 1G -f 4
    sweep "${coll}_procs2_win_direct" CHORUS_GPU_DIRECT "0 1 nccl" env CHORUS_GPU_DIRECT_BYTES=0 CHORUS_GPU_DIRECT_MAX=0 CHORUS_GPU_DIRECT_AGRS_MAX=0 $r2 $perf/${coll}_perf -R 2 -b 64K -e 1G -f 4
    if [ "$ngpu" -ge 4 ]; then
      sweep "${coll}_g4_direct" CHORUS_GPU_DIRECT "0 1 nccl" env CHORUS_GPU_XCHG_CE_BYTES=0 CHORUS_GPU_DIRECT_BYTES=0 CHORUS_GPU_DIRECT_MAX=0 CHORUS_GPU_DIRECT_AGRS_MAX=0 $perf/${coll}_perf -g 4 -b 64K -e 1G -f 4
      sweep "${coll}_procs4_win_direct" CHORUS_GPU_DIRECT "0 1 nccl" env CHORUS_GPU_DIRECT_BYTES=0 CHORUS_GPU_DIRECT_MAX=0 CHORUS_GPU_DIRECT_AGRS_MAX=0 $run -n 4 --timeout 80 $perf/${coll}_perf -R 2 -b 64K -e 1G -f 4
    fi
  done
  # Zero-copy AllGather/ReduceScatter on 4 GPUs without an upper limit (0)
  # against the default one, to the goal's 2 GiB; the FIFO behind the
  # large AllReduce's ring and Broadcast's chain (0.98x and 0.94x NCCL on
  # 4xH200), which more slots might help.
  if [ "$ngpu" -ge 4 ]; then
    for coll in all_gather reduce_scatter; do
      sweep "${coll}_g4_agrs" CHORUS_GPU_DIRECT_AGRS_MAX "0 67108864 nccl" $perf/${coll}_perf -g 4 -b 32M -e 2G -f 4
    done
    sweep "all_reduce_g4_fifo" CHORUS_GPU_FIFO_BYTES "524288 1048576 2097152 nccl" $perf/all_reduce_perf -g 4 -b 128M -e 2G -f 4
    sweep "broadcast_g4_fifo" CHORUS_GPU_FIFO_BYTES "524288 1048576 2097152 nccl" $perf/broadcast_perf -g 4 -b 32M -e 2G -f 4
    # The ring kernel's CTAs and step at 2 GiB, where AllReduce and the
    # Broadcast chain trail NCCL (0.96x and 0.94x on 4xH100, 2026-11-26).
    # There busbw rose with every CTA up to 64 while steps of 128 KiB-1
    # MiB and FIFOs of 512 KiB-4 MiB moved it by 3% at most: the copy
    # loop, not the handshake between steps, is what is short.
    for coll in all_reduce broadcast; do
      sweep "${coll}_g4_ringch_2g" CHORUS_GPU_RING_CHANNELS "16 32 48 64 nccl" $perf/${coll}_perf -g 4 -b 512M -e 2G -f 4
      sweep "${coll}_g4_ringchunk_2g" CHORUS_GPU_RING_CHUNK_BYTES "131072 262144 524288 1048576" env CHORUS_GPU_FIFO_BYTES=2097152 $perf/${coll}_perf -g 4 -b 512M -e 2G -f 4
      sweep "${coll}_g4_ringch32_2g" CHORUS_GPU_RING_CHUNK_BYTES "262144 524288 1048576" env CHORUS_GPU_FIFO_BYTES=4194304 CHORUS_GPU_RING_CHANNELS=32 $perf/${coll}_perf -g 4 -b 512M -e 2G -f 4
    done
  fi
  # The pipelined kernel with and without a system fence before each release.
  for coll in alltoall gather scatter; do
    sweep "${coll}_procs2_pipefence" CHORUS_GPU_PIPE_FENCE "1 0 nccl" $r2 $perf/${coll}_perf -b 1M -e 512M -f 4
  done
  # Zero-copy at mid sizes, in finer steps than the sweeps above: staged /
  # zero-copy / NCCL, then zero-copy by bytes per CTA (up to 64 CTAs).
  zc="env CHORUS_GPU_DIRECT_BYTES=0 CHORUS_GPU_DIRECT_MAX=0 CHORUS_GPU_DIRECT_AGRS_MAX=0"
  for coll in all_reduce reduce_scatter all_gather; do
    sweep "${coll}_procs2_win_mid" CHORUS_GPU_DIRECT "0 1 nccl" $zc $r2 $perf/${coll}_perf -R 2 -b 512K -e 16M -f 2
    sweep "${coll}_procs2_win_ctab" CHORUS_GPU_DIRECT_CTA_BYTES "8192 16384 32768 65536" $zc $r2 $perf/${coll}_perf -R 2 -b 512K -e 16M -f 2
  done
  if [ "$ngpu" -ge 4 ]; then
    # 4 GPUs: the band itself comes from the g4_direct / procs4_win_direct
    # sweeps above; here the slice per CTA for the mid-size AllReduce.
    sweep "all_reduce_procs4_win_ctab" CHORUS_GPU_DIRECT_CTA_BYTES "4096 8192 16384 32768" $zc $run -n 4 --timeout 80 $perf/all_reduce_perf -R 2 -b 256K -e 16M -f 2
    sweep "all_reduce_g4_ctab" CHORUS_GPU_DIRECT_CTA_BYTES "4096 8192 16384 32768" $zc $perf/all_reduce_perf -g 4 -b 256K -e 16M -f 2
    # The goal's band (256 KiB-16 MiB, 1.3x NCCL) in every size, -g 4, as
    # it is (1) and staged (0).
    sweep "all_reduce_g4_mid" CHORUS_GPU_DIRECT "1 0 nccl" $perf/all_reduce_perf -g 4 -b 256K -e 32M -f 2
  fi
  sweep "all_reduce_g2_mid" CHORUS_GPU_DIRECT "0 1 nccl" $zc $perf/all_reduce_perf -g 2 -b 512K -e 16M -f 2
  sweep "all_reduce_g2_ctab" CHORUS_GPU_DIRECT_CTA_BYTES "8192 16384 32768 65536" $zc $perf/all_reduce_perf -g 2 -b 512K -e 16M -f 2
  sweep "all_reduce_g2_direct_ctas" CHORUS_GPU_DIRECT_CHANNELS "8 16 32 64" $zc $perf/all_reduce_perf -g 2 -b 64K -e 1G -f 4
  tar -C "$logs" -czf "$out/logs.tgz" . 2>/dev/null
  echo "# ${SECONDS} s in all"
  exit 0
fi
if [ "$mode" = check ]; then
  tar -C "$logs" -czf "$out/logs.tgz" . 2>/dev/null
  [ "$fails" -eq 0 ]
  exit
fi

# ---- side by side -----------------------------------------------------------
# What one hand-off between two GPUs costs per protocol (tools/hop_bench.cu).
[ "$mode" != big ] && [ "$ngpu" -ge 2 ] && [ -x $build/tools/hop_bench ] && echo "# GPU 0 <-> GPU 1 hand-offs" &&
  timeout 60 $build/tools/hop_bench 2000 | sed 's/^/  /'
# What a kernel launch costs, from one thread and from a thread per GPU
# (tools/launch_bench.cu): the floor under eager small collectives.
[ "$mode" != big ] && [ -x $build/tools/launch_bench ] && echo "# empty-kernel launches" &&
  timeout 60 $build/tools/launch_bench 5000 | sed 's/^/  /'
bench_b=8 bench_e=1G bench_it="-n 50 -w 10 -c 0"
[ "$mode" = full ] && bench_e=2G
bench_limit=90
[ "$mode" = big ] && bench_b=512M bench_e=${BIG_E:-2G} bench_it="-n 10 -w 3 -c 0" bench_limit=240
table="$out/gpu-table.md"
: >"$table"
# BENCH=regex runs only the benchmarks whose labels match (big runs take
# minutes per collective: split them over calls).
bench() { # label lib(chorus|nccl) args...
  local label=$1 lib=$2
  shift 2
  [ -n "${BENCH:-}" ] && ! [[ $label =~ $BENCH ]] && return 0
  local env=()
  [ "$lib" = nccl ] && env=(env LD_LIBRARY_PATH="$ref")
  timeout $bench_limit "${env[@]}" "$@" -b $bench_b -e $bench_e -f 4 $bench_it -T 60 >"$logs/bench_${label}_$lib.log" 2>&1 ||
    echo "  $label $lib: exit $? (bench_${label}_$lib.log)"
  # big: each run's rows as it ends, so a call stopped at its limit keeps them
  [ "$mode" = big ] && grep -a -E '^ +[0-9]+ +[0-9]+ ' "$logs/bench_${label}_$lib.log" | sed "s/^/  $label $lib: /"
  return 0
}
for lib in chorus nccl; do
  [ "$lib" = nccl ] && [ -z "$ref" ] && continue
  for g in 2 4; do
    [ "$g" -le "$ngpu" ] || continue
    bench "all_reduce_g$g" $lib $perf/all_reduce_perf -g "$g"
    bench "all_reduce_procs$g" $lib $run -n "$g" --timeout $((bench_limit - 10)) $perf/all_reduce_perf
  done
  # every other collective on 4 GPUs (2 where there are fewer), one process each
  np=4
  [ "$ngpu" -lt 4 ] && np=2
  if [ "$ngpu" -ge 2 ]; then
    for coll in reduce_scatter all_gather broadcast alltoall reduce gather scatter sendrecv; do
      bench "${coll}_procs$np" $lib $run -n $np --timeout $((bench_limit - 10)) $perf/${coll}_perf
    done
  fi
  [ "$ngpu" -ge 4 ] && bench "sendrecv_procs2" $lib $run -n 2 --timeout $((bench_limit - 10)) $perf/sendrecv_perf
  # Zero-copy: AllGather and ReduceScatter with -g (AllReduce's is above),
  # and symmetric windows (-R 2, both libraries registering them).
  if [ "$ngpu" -ge 2 ]; then
    for coll in reduce_scatter all_gather sendrecv broadcast alltoall; do
      bench "${coll}_g$np" $lib $perf/${coll}_perf -g $np
    done
    for coll in all_reduce reduce_scatter all_gather; do
      bench "${coll}_win_procs$np" $lib $run -n $np --timeout $((bench_limit - 10)) $perf/${coll}_perf -R 2
    done
  fi
done
if [ "$mode" != big ]; then
# Small Send/Recv by CHORUS_GPU_P2P_LL_BYTES (0: FIFO kernel only), Chorus
# only; NCCL's times are in the tables below.
sweep_p2p() { # label ll-bytes command...
  local label=$1 ll=$2
  shift 2
  timeout 60 env CHORUS_GPU_P2P_LL_BYTES=$ll "$@" -b 8 -e 256K -f 4 -n 50 -w 10 -c 0 -T 60 \
    >"$logs/p2psweep_${label}_$ll.log" 2>&1 || echo "  p2p sweep $label $ll: exit $?"
}
# -g N AllReduce with and without a launcher thread per GPU (Chorus only).
for g in 2 4; do
  [ "$g" -le "$ngpu" ] || continue
  for lt in 0 1; do
    timeout 60 env CHORUS_GPU_LAUNCH_THREADS=$lt $perf/all_reduce_perf -g $g -b 8 -e 1M -f 8 -n 50 -w 10 -c 0 -T 60 \
      >"$logs/launchsweep_g${g}_$lt.log" 2>&1 || echo "  launch sweep g$g $lt: exit $?"
  done
done
for ll in 0 16384 65536 131072 262144; do
  [ "$ngpu" -ge 2 ] && sweep_p2p procs2 $ll $run -n 2 --timeout 50 $perf/sendrecv_perf
  [ "$ngpu" -ge 4 ] && sweep_p2p procs4 $ll $run -n 4 --timeout 50 $perf/sendrecv_perf
done
python3 - "$logs" <<'EOF'
import glob, re, sys
row = re.compile(r"^\s+(\d+)\s+(\d+)\s+\S+\s+\S+\s+-?\d+\s+([\d.]+)")
for kind, label, what in [("p2psweep", l, "Send/Recv " + l + ", us by CHORUS_GPU_P2P_LL_BYTES")
                         for l in ("procs2", "procs4")] + \
                        [("launchsweep", l, "AllReduce -" + l.replace("g", "g ") + ", us by CHORUS_GPU_LAUNCH_THREADS")
                         for l in ("g2", "g4")]:
    runs = {}
    for path in glob.glob(f"{sys.argv[1]}/{kind}_{label}_*.log"):
        ll = int(path.rsplit("_", 1)[1][:-4])
        runs[ll] = {}
        for line in open(path, errors="replace"):
            m = row.match(line)
            if m: runs[ll][int(m.group(1))] = float(m.group(3))
    if not runs: continue
    lls = sorted(runs)
    print(f"\n# {what} = " + ", ".join(map(str, lls)))
    for size in sorted(set().union(*runs.values())):
        print(f"  {size:>8}  " + "  ".join("%7s" % ("%.2f" % runs[l][size] if size in runs[l] else "-") for l in lls))
EOF
fi
python3 - "$logs" "$ngpu" >"$table" <<'EOF'
import os, re, sys
out, ngpu = sys.argv[1], int(sys.argv[2])
row = re.compile(r"^\s+(\d+)\s+(\d+)\s+\S+\s+\S+\s+-?\d+\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)")
def load(path):
    t = {}
    if os.path.exists(path):
        for line in open(path, errors="replace"):
            m = row.match(line)
            if m: t[int(m.group(1))] = (float(m.group(3)), float(m.group(5)))
    return t
labels = []
for coll in ("all_reduce", "reduce_scatter", "all_gather", "broadcast", "alltoall", "reduce", "gather", "scatter", "sendrecv"):
    for mode, what in (("procs2", "2 GPUs, 1 process each"), ("g2", "2 GPUs, -g 2"),
                       ("win_procs2", "2 GPUs, 1 process each, symmetric windows (-R 2)"),
                       ("procs4", "4 GPUs, 1 process each"), ("g4", "4 GPUs, -g 4"),
                       ("win_procs4", "4 GPUs, 1 process each, symmetric windows (-R 2)")):
        labels.append((f"{coll}_{mode}", f"{coll}, {what}"))
for label, title in labels:
    c, n = load(f"{out}/bench_{label}_chorus.log"), load(f"{out}/bench_{label}_nccl.log")
    if not c and not n: continue
    print(f"\n{title} (float, out of place; us, busbw GB/s)\n")
    print("| size | Chorus us | NCCL us | Chorus busbw | NCCL busbw | NCCL/Chorus time |")
    print("|---:|---:|---:|---:|---:|---:|")
    for s in sorted(set(c) | set(n)):
        ct, cb = c.get(s, (None, None)); nt, nb = n.get(s, (None, None))
        f = lambda v, p: "-" if v is None else ("%.*f" % (p, v))
        r = "-" if not ct or not nt else "%.2f" % (nt / ct)
        print(f"| {s} | {f(ct,1)} | {f(nt,1)} | {f(cb,1)} | {f(nb,1)} | {r} |")
EOF
cat "$table"
python3 scripts/gpu_goals.py "$logs"
tar -C "$logs" -czf "$out/logs.tgz" . 2>/dev/null
[ "$matrix" = yes ] && echo "# correctness: $passes passed, $fails failed"; echo "# ${SECONDS} s in all"
[ "$fails" -eq 0 ]
