#!/bin/bash
# gpu_hosts_ab.sh - Chorus with several settings, the build before and
# NVIDIA's NCCL, side by side on 2 hosts x 1 GPU (chorusrun --hosts 2:
# each rank its own NCCL_HOSTID, the hosts joined over loopback TCP;
# on a 1-GPU machine both ranks share the GPU), each variant in turn,
# round after round, and the median time per size.
#
# usage: scripts/gpu_hosts_ab.sh   (after scripts/gpu.sh build)
#   VARIANTS  space-separated, each words joined by '+': base (the library
#             in $BASE_LIB, e.g. from BASE_SRC=dir scripts/gpu.sh build),
#             nccl (NVIDIA's), a setting VAR=value, or a value of
#             CHORUS_GPU_STAGE_PIECE (4M, off, ...); e.g. base+off
#             (default: "base 4M nccl"); the first is the others' yardstick
#   COLLS     perf programs without _perf (default: all_reduce all_gather
#             reduce_scatter); B, E, F: sizes (default 8, 256M, 4)
#   ROUNDS    (default 2); N: timed calls per size (default 10, 3 warm-up)
# Prints per collective the median us per variant (min-max over rounds)
# and the first variant's time over each; logs in $OUT/hosts-ab-logs.tgz.
set -u
cd "$(dirname "$0")/.." || exit 1
build=${BUILD:-build-gpu}
perf=$build/tools/perf run=$build/tools/chorusrun
out=${OUT:-/tmp/chorus-gpu}
logs=$(mktemp -d /tmp/chorus-hosts-ab.XXXXXX)
mkdir -p "$out"
export NCCL_NVLS_ENABLE=0 NCCL_SOCKET_IFNAME=lo CHORUS_OP_TIMEOUT=60
ref=${NCCL_REF_LIB:-$(python3 -c 'import nvidia.nccl, os; print(os.path.join(list(nvidia.nccl.__path__)[0], "lib"))' 2>/dev/null)}
variants=${VARIANTS:-base 4M nccl}
colls=${COLLS:-all_reduce all_gather reduce_scatter}
rounds=${ROUNDS:-2}
[ -x "$perf/all_reduce_perf" ] || { echo "no $perf/all_reduce_perf: build first"; exit 1; }
for r in $(seq "$rounds"); do
  for coll in $colls; do
    i=0
    for v in $variants; do
      i=$((i + 1))
      env=(env) limit=200
      IFS=+ read -ra words <<<"$v"
      for w in "${words[@]}"; do
        case $w in
          nccl) env+=(LD_LIBRARY_PATH="$ref") limit=90 ;;
          base) env+=(LD_LIBRARY_PATH="${BASE_LIB:?base needs BASE_LIB}") ;;
          *=*) env+=("$w") ;;
          *) env+=(CHORUS_GPU_STAGE_PIECE="$w") ;;
        esac
      done
      timeout "$limit" "${env[@]}" "$run" -n 2 --hosts 2 --timeout $((limit - 10)) \
        "$perf/${coll}_perf" -b "${B:-8}" -e "${E:-256M}" -f "${F:-4}" -n "${N:-10}" -w 3 -c 0 -T 60 \
        >"$logs/${coll}_${i}_$r.log" 2>&1 || echo "  $coll $v round $r: exit $?"
    done
  done
done
python3 - "$logs" "$variants" "$colls" "$rounds" <<'PY'
import statistics as st, sys
logs, variants, colls, rounds = sys.argv[1], sys.argv[2].split(), sys.argv[3].split(), int(sys.argv[4])
sys.path.insert(0, "bench")
from summarize import ROW as row  # an nccl-tests result row
for coll in colls:
    times = {}
    for i, v in enumerate(variants, 1):
        for r in range(1, rounds + 1):
            try:
                for line in open(f"{logs}/{coll}_{i}_{r}.log", errors="replace"):
                    m = row.match(line)
                    if m:
                        times.setdefault((v, int(m.group(1))), []).append(float(m.group(3)))
            except OSError:
                pass
    print(f"# {coll}: median us (min-max over {rounds} rounds) and {variants[0]}'s time over each")
    for i, v in enumerate(variants):
        print(f"#   [{i}] {v}")
    print("  %10s" % "size" + "".join("%28s" % f"[{i}]" for i in range(len(variants))))
    for s in sorted({s for (_, s) in times}):
        first = times.get((variants[0], s))
        cells = []
        for v in variants:
            t = times.get((v, s))
            if not t:
                cells.append("%28s" % "-")
                continue
            m = st.median(t)
            ratio = "%.2f" % (st.median(first) / m) if first and m > 0 else "-"
            cells.append("%28s" % ("%.1f (%.0f-%.0f) %s" % (m, min(t), max(t), ratio)))
        print("  %10d" % s + "".join(cells))
PY
tar -C "$logs" -czf "$out/hosts-ab-logs.tgz" .
