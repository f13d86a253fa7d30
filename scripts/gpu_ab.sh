#!/bin/bash
# gpu_ab.sh NAME=DIR... - small-message latency of several Chorus builds
# (or NVIDIA's NCCL) through the very same perf binaries, run in turn, round
# after round, so that drift of the machine falls on all of them alike; the
# median per size of each, and its time over the first's (above 1: slower).
#
# DIR is a folder holding libnccl.so.2, or a source tree (say from `git
# archive REV | tar -x -C DIR`), built here into build-ab-NAME (library
# only, 40-70 s on the GPU machine). The perf binaries are those of
# $BUILD/tools/perf (build-gpu: scripts/gpu.sh build).
#
#   COLLS   perf programs, without _perf (default: broadcast sendrecv all_reduce)
#   ARGS    their arguments (default: -g 4 -b 8 -e 512K -f 4 -n 200 -w 20 -c 0)
#   ROUNDS  rounds (default 5; each runs every library once per program)
#   ENVS    settings to run each library under, ';'-separated sets of
#           VAR=value (default: one empty set), e.g.
#           "CHORUS_GPU_LAUNCH_THREADS=1;CHORUS_GPU_LAUNCH_THREADS=0"
#   WRAP    a command every run goes through, e.g. "taskset -c 0-15" to
#           keep the process on one socket (default: none)
#
# A run's times move together: one run of a build can sit 20-30% above
# another of the same build at every size (where the scheduler put the
# threads), so the table gives per build the spread of its runs (the
# median over sizes of (slowest run - fastest) / median), and a ratio
# inside that spread says nothing; add ROUNDS until the spread is small.
#
# Example, the commits since 5d80b9e side by side in one call (after
# scripts/gpu.sh build):
#   for r in 5d80b9e f3254b8 74104d9; do mkdir -p build-src/$r &&
#     git archive $r | tar -x -C build-src/$r; done     # here; then carry build-src
#   scripts/gpu_ab.sh base=build-src/5d80b9e a=build-src/f3254b8 \
#     b=build-src/74104d9 new=.                              # there
set -u
cd "$(dirname "$0")/.." || exit 1
. scripts/gpu_lib.sh
build=${BUILD:-build-gpu}
perf=$build/tools/perf
colls=${COLLS:-broadcast sendrecv all_reduce}
read -r -a args <<<"${ARGS:--g 4 -b 8 -e 512K -f 4 -n 200 -w 20 -c 0}"
rounds=${ROUNDS:-5}
read -r -a wrap <<<"${WRAP:-}"
IFS=';' read -r -a envs <<<"${ENVS:-}"
[ ${#envs[@]} -eq 0 ] && envs=("")
out=${OUT:-/tmp/chorus-ab}
logs=$out/ab-logs
mkdir -p "$logs"
export NCCL_NVLS_ENABLE=0 # never NVLink multicast, on either library
[ $# -ge 2 ] || { echo "usage: $0 NAME=DIR NAME=DIR..."; exit 2; }
[ -x "$perf/all_reduce_perf" ] || { echo "no $perf/all_reduce_perf: build first"; exit 1; }

names=() dirs=()
for spec in "$@"; do
  name=${spec%%=*} dir=${spec#*=}
  case $name in '' | *[!A-Za-z0-9_-]*) echo "bad name in $spec"; exit 2 ;; esac
  if [ -f "$dir/CMakeLists.txt" ] && [ ! -e "$dir/libnccl.so.2" ]; then
    b=build-ab-$name
    if [ "$(cd "$dir" && pwd)" = "$PWD" ]; then
      b=$build # this tree: its own build
    elif ! build_lib "$dir" "$b" "$logs/build-$name.log"; then
      tail -20 "$logs/build-$name.log"
      echo "BUILD OF $name FAILED"
      exit 1
    fi
    dir=$b
  fi
  dir=$(cd "$dir" && pwd)
  loads_from "$perf/all_reduce_perf" "$dir" ||
    { echo "$name: the perf programs load $(loads "$perf/all_reduce_perf" "$dir"), not $dir/libnccl.so.2"; exit 1; }
  names+=("$name") dirs+=("$dir")
  echo "# $name: $dir/libnccl.so.2"
done

for r in $(seq 1 "$rounds"); do
  for coll in $colls; do
    for e in "${!envs[@]}"; do
      read -r -a set_ <<<"${envs[$e]}"
      for i in "${!names[@]}"; do
        timeout 120 env LD_LIBRARY_PATH="${dirs[$i]}" "${set_[@]}" "${wrap[@]}" "$perf/${coll}_perf" "${args[@]}" \
          >"$logs/$coll.$e.${names[$i]}.$r.log" 2>&1 || echo "# $coll ${names[$i]} round $r: exit $?"
      done
    done
  done
done

python3 - "$logs" "$rounds" "${ENVS:-}" "$colls" "${names[@]}" <<'PY'
import math, re, statistics, sys
logs, rounds, envs, colls, names = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4].split(), sys.argv[5:]
envs = envs.split(";") if envs else [""]
# nccl-tests' rows: size count type redop root time algbw busbw #wrong ...
row = re.compile(r"^\s+(\d+)\s+(\d+)\s+\S+\s+\S+\s+-?\d+\s+([\d.]+)\s+\S+\s+\S+\s+(\S+)")
for coll in colls:
    for e, env in enumerate(envs):
        t, wrong = {}, set()
        for name in names:
            for r in range(1, rounds + 1):
                try:
                    for line in open(f"{logs}/{coll}.{e}.{name}.{r}.log", errors="replace"):
                        m = row.match(line)
                        if m:
                            t.setdefault((name, int(m.group(1))), []).append(float(m.group(3)))
                            if m.group(4) not in ("0", "N/A"):
                                wrong.add(name)
                except OSError:
                    pass
        sizes = sorted({s for (_, s) in t})
        print(f"\n{coll} {env or '(defaults)'}: median of {rounds} interleaved runs, us"
              + (f"; WRONG RESULTS: {', '.join(sorted(wrong))}" if wrong else ""))
        print("%10s" % "bytes" + "".join("%10s" % n for n in names)
              + "".join("%10s" % (n + "/" + names[0])[:10] for n in names[1:]))
        ratios = {n: [] for n in names[1:]}
        for s in sizes:
            med = {n: statistics.median(t[(n, s)]) if (n, s) in t else None for n in names}
            line = "%10d" % s + "".join("%10s" % ("%.2f" % med[n] if med[n] else "-") for n in names)
            for n in names[1:]:
                if med[n] and med[names[0]]:
                    ratios[n].append(med[n] / med[names[0]])
                    line += "%10.3f" % ratios[n][-1]
                else:
                    line += "%10s" % "-"
            print(line)
        print("%10s" % "geomean" + " " * 10 * len(names) + "".join(
            "%10.3f" % math.exp(sum(map(math.log, v)) / len(v)) if v else "%10s" % "-"
            for v in ratios.values()))
        spread = {n: [(max(t[(n, s)]) - min(t[(n, s)])) / statistics.median(t[(n, s)])
                      for s in sizes if len(t.get((n, s), [])) > 1] for n in names}
        print("%10s" % "spread" + "".join(
            "%10s" % ("%.0f%%" % (100 * statistics.median(v)) if v else "-") for v in spread.values()))
PY
tar -C "$out" -czf "$out/ab-logs.tgz" ab-logs && rm -rf "$logs"
