#!/bin/bash
# scale.sh - large communicators: their init time and their first calls.
# For each layout N[xH] (N ranks, as H hosts through chorusrun --hosts,
# which then talk TCP over loopback), starts N host-memory processes of
# all_reduce_perf (8 B to 4 KiB, results checked) with INIT logging, and
# writes one CSV row: the slowest and the median rank's init ("ready in"
# of the INFO line), the shared memory a process mapped (its own FIFOs and
# every peer's on its host), the slot size
# the communicator settled on, the 8-byte AllReduce's time and whether any
# result was wrong.
#
# usage: scripts/scale.sh [LAYOUT...]   (default: 64 128 256 256x2; after make build)
#   BUILD (default build), OUT (CSV; default stdout)
set -u
cd "$(dirname "$0")/.." || exit 1
build=${BUILD:-build}
run=$build/tools/chorusrun
perf=$build/tools/perf/all_reduce_perf
[ -x "$run" ] && [ -x "$perf" ] || { echo "scale.sh: build first (no $perf)" >&2; exit 1; }
layouts=("$@")
[ ${#layouts[@]} -gt 0 ] || layouts=(64 128 256 256x2)
logs=$(mktemp -d /tmp/chorus-scale.XXXXXX)
trap 'rm -rf "$logs"' EXIT
csv() {
  echo "# machine: $(hostname), $(nproc) CPUs, $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo), /dev/shm $(df -h /dev/shm | awk 'NR==2 {print $2}')"
  echo "# date: $(date -u +%F)"
  echo "# chorus: $(git rev-parse --short HEAD 2>/dev/null)$(git diff --quiet 2>/dev/null || echo +)"
  echo "# versions: Chorus alone (no reference library is timed here)"
  echo "# command: scripts/scale.sh ${layouts[*]} (all_reduce_perf -b 8 -e 4K -f 8 -n 2 -w 1 -c 1, one process per rank)"
  echo "ranks,hosts,init_median_ms,init_max_ms,shm_mapped_mib,slot_bytes,us_8B,wrong"
  for l in "${layouts[@]}"; do
    n=${l%x*} h=1
    [ "$l" != "$n" ] && h=${l#*x}
    log=$logs/$l.log
    hosts=()
    [ "$h" -gt 1 ] && hosts=(--hosts "$h")
    NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT NCCL_SOCKET_IFNAME=lo \
      timeout -s KILL 900 "$run" -n "$n" "${hosts[@]}" --timeout 880 \
      "$perf" -b 8 -e 4K -f 8 -n 2 -w 1 -c 1 >"$log" 2>&1
    rc=$?
    # the communicators of all n ranks (a GPU rank across hosts also
    # builds smaller ones of its own for the steps it composes)
    init=$(grep " nranks $n on " "$log" | sed -n 's/.* ready in \([0-9.]*\) ms.*/\1/p' | sort -n)
    count=$(printf '%s\n' "$init" | grep -c .)
    med=$(printf '%s\n' "$init" | awk -v c="$count" 'NR == int((c + 1) / 2) {print}')
    max=$(printf '%s\n' "$init" | tail -1)
    shm=$(grep " nranks $n on " "$log" | sed -n 's/.* and \([0-9.]*\) KiB more shared memory.*/\1/p' | sort -n | tail -1)
    slot=$(sed -n 's/.* slots of \([0-9]*\) bytes.*/\1/p' "$log" | head -1)
    us=$(awk '$1 == 8 && NF >= 12 {print $6; exit}' "$log")
    wrong=$(awk '$1 ~ /^[0-9]+$/ && NF >= 12 && ($9 != 0 || $13 != 0) {w = 1} END {print w ? "yes" : "no"}' "$log")
    [ "$rc" = 0 ] && [ "$count" = "$n" ] || wrong="failed (exit $rc, $count of $n ready)"
    printf '%s,%s,%s,%s,%s,%s,%s,%s\n' "$n" "$h" "$med" "$max" \
      "$(awk -v k="${shm:-0}" 'BEGIN {printf "%.0f", k / 1024}')" "${slot:-}" "${us:-}" "$wrong"
  done
}
if [ -n "${OUT:-}" ]; then csv >"$OUT"; else csv; fi
