#!/bin/bash
# gpu_hosts_crossover.sh - where hier overtakes staged for GPUs across
# hosts, measured, beside what the cost model chooses (the default):
# each perf program on 2 hosts x 1, 2 and 4 GPUs over loopback (chorusrun
# --hosts), with NCCL_ALGO=staged, NCCL_ALGO=hier and no setting, in one
# call so the three compare. Prints per size the three times (us) and
# which the default matched. Run on the GPU machine after a build
# (BUILD, default build-gpu); SIZES_E bounds the sizes (default 4M).
set -u
cd "$(dirname "$0")/.." || exit 1
build=${BUILD:-build-gpu}
perf=$build/tools/perf
run=$build/tools/chorusrun
[ -x "$perf/all_reduce_perf" ] || { echo "no $perf/all_reduce_perf: build first"; exit 1; }
export NCCL_NVLS_ENABLE=0 NCCL_SOCKET_IFNAME=lo CHORUS_OP_TIMEOUT=${CHORUS_OP_TIMEOUT:-30}
ngpu=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
logs=$(mktemp -d /tmp/chorus-crossover.XXXXXX)
# 2 x 4 shares each of 4 GPUs between the hosts, as scripts/gpu_hosts_bench.sh;
# SHARED=1 lets any layout share GPUs between hosts (2 x 1 on one GPU).
for layout in ${LAYOUTS:-2x1 2x2 2x4}; do
  h=${layout%x*} g=${layout#*x}
  [ $((h * g)) -le "$ngpu" ] || { [ "$layout" = 2x4 ] && [ "$ngpu" -eq 4 ]; } ||
    { [ -n "${SHARED:-}" ] && [ "$g" -le "$ngpu" ]; } || continue
  for coll in ${COLLS:-all_reduce all_gather reduce_scatter broadcast reduce}; do
    for algo in staged hier default; do
      env=(env)
      [ "$algo" = default ] || env=(env NCCL_ALGO=$algo)
      timeout 120 "${env[@]}" "$run" -n $((h * g)) --hosts "$h" --timeout 110 \
        "$perf/${coll}_perf" -b 8 -e "${SIZES_E:-4M}" -f 4 -n 20 -w 5 -c 1 \
        >"$logs/${coll}_${layout}_$algo.log" 2>&1 || echo "  $coll $layout $algo: exit $?"
    done
    python3 - "$logs" "${coll}_$layout" <<'PY'
import re, sys
row = re.compile(r"^\s+(\d+)\s+(\d+)\s+\S+\s+\S+\s+-?\d+\s+([\d.]+)\s+\S+\s+\S+\s+(\d+)")
def read(algo):
    r = {}
    for line in open(f"{sys.argv[1]}/{sys.argv[2]}_{algo}.log", errors="replace"):
        m = row.match(line)
        if m: r[int(m.group(1))] = (float(m.group(3)), int(m.group(4)))
    return r
t = {a: read(a) for a in ("staged", "hier", "default")}
print(f"# {sys.argv[2]}: size, us staged / hier / default (the model's), #wrong, faster, "
      "the default nearer")
for s in sorted(t["default"]):
    v = [t[a].get(s, (float("nan"), -1)) for a in ("staged", "hier", "default")]
    best = "staged" if v[0][0] <= v[1][0] else "hier"
    took = "staged" if abs(v[2][0] - v[0][0]) <= abs(v[2][0] - v[1][0]) else "hier"
    wrong = max(x[1] for x in v)
    print(f"  {s:>9} {v[0][0]:9.1f} {v[1][0]:9.1f} {v[2][0]:9.1f} {wrong:3d} {best:>7} {took:>7}")
PY
  done
done
