#!/bin/bash
# gpu_bench.sh - Chorus timed beside NVIDIA's NCCL on this machine's GPUs:
# the very same perf binaries, run once per library, LD_LIBRARY_PATH
# choosing the libnccl.so.2 they load.
#
# usage: scripts/gpu_bench.sh [bench|big|full]   (after scripts/gpu.sh build)
#   bench: 8 B..1 GiB, -n 50 -w 10; first what one hand-off between two GPUs
#          and a kernel launch cost, last small Send/Recv by LL slot size
#          and -g AllReduce with and without launcher threads (Chorus
#          alone), and CUDA-graph replay times
#   full:  the same to 2 GiB
#   big:   512 MiB..2 GiB (BIG_E=8G: to 8 GiB), -n 10 -w 3, each run's rows
#          printed as it ends (a call cut at its limit keeps them)
# Settings:
#   BUILD=build-gpu     the CUDA build whose perf programs run
#   NCCL_REF_LIB=dir    NVIDIA's libnccl.so.2 (default: the one of the
#                       nvidia-nccl Python package, as PyTorch installs it)
#   BASE_LIB=dir        another Chorus libnccl.so.2 (say a build of an
#                       earlier commit): run a third time, so the tables show
#                       new, base and NCCL side by side (a before/after in
#                       one call, with the reference as a yardstick for drift)
#   BENCH=regex         only the labels that match (e.g. '_g4$')
# Every collective runs on every library before the next one starts, so
# drift over the call spreads over all libraries alike.
# Output under $OUT (default /tmp/chorus-gpu): summary.txt (what this
# prints, written as it goes), gpu-table.md, logs.tgz (every log, named
# bench_<label>_<chorus|chorusbase|nccl>.log, nccl-tests' format, as
# bench/summarize.py and scripts/gpu_goals.py read them).
set -u
mode=${1:-bench}
case $mode in bench | big | full) ;; *) echo "usage: $0 [bench|big|full]"; exit 2 ;; esac
cd "$(dirname "$0")/.." || exit 1
. scripts/gpu_lib.sh
out=${OUT:-/tmp/chorus-gpu}
mkdir -p "$out"
if [ -z "${CHORUS_GPU_TEED:-}" ]; then # not under scripts/gpu.sh, which writes summary.txt
  exec > >(tee "$out/summary.txt") 2>&1
  echo "# $(date -u +%FT%TZ) $(hostname): $(nvidia-smi -L 2>/dev/null | grep -c '^GPU') GPU(s), mode $mode"
  nvidia-smi --query-gpu=index,name,memory.total,driver_version --format=csv,noheader
fi
build=${BUILD:-build-gpu}
perf=$build/tools/perf
run=$build/tools/chorusrun
[ -x "$perf/all_reduce_perf" ] || { echo "no $perf/all_reduce_perf: build first (scripts/gpu.sh build)"; exit 1; }
logs=$(mktemp -d /tmp/chorus-gpu-logs.XXXXXX) # into $OUT as one tar: few files come back
export NCCL_NVLS_ENABLE=0                      # NVLink multicast: Chorus never uses it
export CHORUS_OP_TIMEOUT=${CHORUS_OP_TIMEOUT:-30}
ngpu=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')

ref=${NCCL_REF_LIB:-$(python3 -c 'import nvidia.nccl, os; print(os.path.join(list(nvidia.nccl.__path__)[0], "lib"))' 2>/dev/null)}
[ -f "$ref/libnccl.so.2" ] || { echo "# NVIDIA NCCL not found (set NCCL_REF_LIB)"; ref=""; }
base=${BASE_LIB:-}
if [ -n "$base" ] && [ ! -f "$base/libnccl.so.2" ]; then
  echo "BASE_LIB=$base holds no libnccl.so.2"
  exit 1
fi
libs=chorus
for lib in chorusbase nccl; do
  dir=$base
  [ "$lib" = nccl ] && dir=$ref
  [ -n "$dir" ] || continue
  if ! loads_from "$perf/all_reduce_perf" "$dir"; then
    echo "# $lib: the perf programs load $(loads "$perf/all_reduce_perf" "$dir"), not $dir/libnccl.so.2: left out"
    continue
  fi
  libs="$libs $lib"
  echo "# $lib: $dir/libnccl.so.2"
done
lib_env() { # lib: the env command that makes the programs load it
  case $1 in
    chorusbase) echo "env LD_LIBRARY_PATH=$base" ;;
    nccl) echo "env LD_LIBRARY_PATH=$ref" ;;
    *) echo env ;;
  esac
}
picked() { [ -z "${BENCH:-}" ] || [[ $1 =~ $BENCH ]]; }

# ---- probes: one hand-off, one launch --------------------------------------
if [ "$mode" != big ]; then
  # What one hand-off between two GPUs costs per protocol (tools/hop_bench.cu).
  [ "$ngpu" -ge 2 ] && [ -x "$build/tools/hop_bench" ] && echo "# GPU 0 <-> GPU 1 hand-offs" &&
    timeout 60 "$build/tools/hop_bench" 2000 | sed 's/^/  /'
  # What a kernel launch costs, from one thread and from a thread per GPU
  # (tools/launch_bench.cu): the floor under eager small collectives.
  [ -x "$build/tools/launch_bench" ] && echo "# empty-kernel launches" &&
    timeout 60 "$build/tools/launch_bench" 5000 | sed 's/^/  /'
fi

# ---- side by side -----------------------------------------------------------
bench_b=8 bench_e=1G bench_it=(-n 50 -w 10 -c 0) bench_limit=90
[ "$mode" = full ] && bench_e=2G
# big: results not checked (the perf tools check on the host, which at 2-8
# GiB took most of a 90 s limit per run on 2xH100)
if [ "$mode" = big ]; then
  bench_b=512M bench_e=${BIG_E:-2G} bench_it=(-n 10 -w 3 -c 0) bench_limit=240
fi
bench() { # label command...: the command once per library
  local label=$1 lib
  shift
  picked "$label" || return 0
  for lib in $libs; do
    local log=$logs/bench_${label}_$lib.log
    # shellcheck disable=SC2046 # lib_env's words
    timeout $bench_limit $(lib_env "$lib") "$@" -b "$bench_b" -e "$bench_e" -f 4 "${bench_it[@]}" -T 60 >"$log" 2>&1 ||
      echo "  $label $lib: exit $? (bench_${label}_$lib.log)"
    [ "$mode" = big ] && grep -a -E '^ +[0-9]+ +[0-9]+ ' "$log" | sed "s/^/  $label $lib: /"
  done
  return 0
}
rl=$((bench_limit - 10))
for g in 2 4; do
  [ "$g" -le "$ngpu" ] || continue
  bench "all_reduce_g$g" "$perf/all_reduce_perf" -g "$g"
  bench "all_reduce_procs$g" "$run" -n "$g" --timeout $rl "$perf/all_reduce_perf"
done
# every other collective on 4 GPUs (2 where there are fewer), one process each
np=4
[ "$ngpu" -lt 4 ] && np=2
if [ "$ngpu" -ge 2 ]; then
  for coll in reduce_scatter all_gather broadcast alltoall reduce gather scatter sendrecv; do
    bench "${coll}_procs$np" "$run" -n $np --timeout $rl "$perf/${coll}_perf"
  done
  [ "$ngpu" -ge 4 ] && bench "sendrecv_procs2" "$run" -n 2 --timeout $rl "$perf/sendrecv_perf"
  # One process driving the GPUs (zero-copy and the copy engine where the
  # rules take them; AllReduce's is above), and symmetric windows (-R 2,
  # both libraries registering them).
  for coll in reduce_scatter all_gather sendrecv broadcast alltoall; do
    bench "${coll}_g$np" "$perf/${coll}_perf" -g $np
  done
  for coll in all_reduce reduce_scatter all_gather; do
    bench "${coll}_win_procs$np" "$run" -n $np --timeout $rl "$perf/${coll}_perf" -R 2
  done
fi

if [ "$mode" != big ]; then
  # ---- Chorus alone: small Send/Recv by LL slot size, launcher threads ------
  # CHORUS_GPU_P2P_LL_BYTES sizes the LL slots and the rule sends every
  # Send/Recv up to that size through them (0: off, every size through the
  # FIFOs).
  sweep_p2p() { # label ll-bytes command...
    local label=$1 ll=$2
    shift 2
    local set=(CHORUS_GPU_P2P_LL_BYTES=off)
    [ "$ll" != 0 ] && set=(CHORUS_GPU_P2P_LL_BYTES="$ll" CHORUS_TUNE="sendrecv:0-$ll:direct/LL")
    timeout 60 env "${set[@]}" "$@" -b 8 -e 256K -f 4 -n 50 -w 10 -c 0 -T 60 \
      >"$logs/p2psweep_${label}_$ll.log" 2>&1 || echo "  p2p sweep $label $ll: exit $?"
  }
  for ll in 0 16384 65536 131072 262144; do
    [ "$ngpu" -ge 2 ] && picked sendrecv_procs2 && sweep_p2p procs2 $ll "$run" -n 2 --timeout 50 "$perf/sendrecv_perf"
    [ "$ngpu" -ge 4 ] && picked sendrecv_procs4 && sweep_p2p procs4 $ll "$run" -n 4 --timeout 50 "$perf/sendrecv_perf"
  done
  # -g N AllReduce with and without a launcher thread per GPU.
  for g in 2 4; do
    if [ "$g" -gt "$ngpu" ] || ! picked "all_reduce_g$g"; then continue; fi
    for lt in 0 1; do
      timeout 60 env CHORUS_GPU_LAUNCH_THREADS=$lt "$perf/all_reduce_perf" -g $g -b 8 -e 1M -f 8 -n 50 -w 10 -c 0 -T 60 \
        >"$logs/launchsweep_g${g}_$lt.log" 2>&1 || echo "  launch sweep g$g $lt: exit $?"
    done
  done
  python3 - "$logs" <<'EOF'
import glob, re, sys
row = re.compile(r"^\s+(\d+)\s+(\d+)\s+\S+\s+\S+\s+-?\d+\s+([\d.]+)")
for kind, label, what in [("p2psweep", l, "Send/Recv " + l + ", us by CHORUS_GPU_P2P_LL_BYTES (0: off)")
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

  # ---- CUDA-graph replays (tests/gpu/graph_*.c), every library ------------
  # Chorus's logs keep the names bench/summarize.py reads (check_graph_*).
  graph_log() { # program lib g
    case $2 in
      chorus) echo "$logs/check_$1_procs$3.log" ;;
      *) echo "$logs/$1_$2_procs$3.log" ;;
    esac
  }
  for g in 2 4; do
    [ "$g" -le "$ngpu" ] || continue
    for prog in graph graph_p2p; do
      exe=$build/tests/gpu/gpu_$prog
      [ "$prog" = graph ] && exe=$build/tests/gpu/gpu_graph_allreduce
      if [ ! -x "$exe" ] || ! picked "${prog}_procs$g"; then continue; fi
      echo "# $prog, $g processes: replay times"
      for lib in $libs; do
        log=$(graph_log $prog "$lib" $g)
        # shellcheck disable=SC2046 # lib_env's words
        timeout 90 $(lib_env "$lib") "$run" -n "$g" --timeout 80 "$exe" >"$log" 2>&1 ||
          echo "  $prog $lib: exit $? ($(basename "$log"))"
        prefix="      "
        [ "$lib" = nccl ] && prefix="      NCCL "
        [ "$lib" = chorusbase ] && prefix="      base "
        grep -a -E "graph (replay|Send)" "$log" | sed "s/^/$prefix/"
      done
    done
  done
fi

# ---- tables, goals ------------------------------------------------------------
table=$out/gpu-table.md
python3 - "$logs" >"$table" <<'EOF'
import math, os, re, sys
logs = sys.argv[1]
row = re.compile(r"^\s+(\d+)\s+(\d+)\s+\S+\s+\S+\s+-?\d+\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)")
def load(label, lib):
    t, path = {}, f"{logs}/bench_{label}_{lib}.log"
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
f = lambda v, p: "-" if v is None else ("%.*f" % (p, v))
speeds = []
for label, title in labels:
    c, n, b = load(label, "chorus"), load(label, "nccl"), load(label, "chorusbase")
    if not c and not n and not b: continue
    # The first five columns keep their places (bench/summarize.py reads
    # them from printed tables); the base library's come after.
    print(f"\n{title} (float, out of place; us, busbw GB/s)\n")
    head = "| size | Chorus us | NCCL us | Chorus busbw | NCCL busbw | NCCL/Chorus time |"
    if b: head += " base us | base busbw | new/base speed |"
    print(head)
    print("|---:" * (head.count("|") - 1) + "|")
    ratios = {}
    for s in sorted(set(c) | set(n) | set(b)):
        ct, cb = c.get(s, (None, None)); nt, nb = n.get(s, (None, None))
        r = "-" if not ct or not nt else "%.2f" % (nt / ct)
        line = f"| {s} | {f(ct,1)} | {f(nt,1)} | {f(cb,1)} | {f(nb,1)} | {r} |"
        if b:
            bt, bb = b.get(s, (None, None))
            if ct and bt: ratios[s] = bt / ct
            line += f" {f(bt,1)} | {f(bb,1)} | {f(ratios.get(s),2)} |"
        print(line)
    if ratios:
        lo, hi = min(ratios, key=ratios.get), max(ratios, key=ratios.get)
        g = math.exp(sum(math.log(v) for v in ratios.values()) / len(ratios))
        speeds.append(f"  {label:<28} {g:5.2f}   {ratios[lo]:5.2f} at {lo:>10}   {ratios[hi]:5.2f} at {hi:>10}")
if speeds:
    print("\n# new/base speed (base us / new us; above 1: the new library is faster)")
    print(f"  {'label':<28} {'geomean':>7}   {'lowest':>19}   {'highest':>19}")
    print("\n".join(speeds))
EOF
cat "$table"
python3 scripts/gpu_goals.py "$logs"
if [[ " $libs " == *" chorusbase "* ]]; then
  # The base library's goals: its logs under the names gpu_goals.py reads.
  view=$(mktemp -d /tmp/chorus-gpu-base.XXXXXX)
  for f in "$logs"/bench_*_chorusbase.log; do
    [ -e "$f" ] && ln -s "$f" "$view/$(basename "${f%_chorusbase.log}")_chorus.log"
  done
  for f in "$logs"/bench_*_nccl.log; do [ -e "$f" ] && ln -s "$f" "$view/"; done
  python3 scripts/gpu_goals.py "$view" | sed 's/^# goals/# base library: goals/'
  rm -rf "$view"
fi
tar -C "$logs" -czf "$out/logs.tgz" . 2>/dev/null
echo "# bench: ${SECONDS} s"
