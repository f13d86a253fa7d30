#!/bin/sh
# spread_ranks.sh CHORUSRUN PERF_DIR - ranks that outnumber their machine's
# CPUs bind their calls' thread to one CPU each (util/affinity.h, core/
# enqueue.c): every rank logs its CPU, every CPU gets as many ranks give or
# take one, and the results are right; CHORUS_SPREAD_RANKS=0 binds none, nor
# does a launcher's binding (taskset) get undone; as many ranks as CPUs bind
# none. Skipped (77) on machines of more than 6 CPUs (the ranks it needs).
set -u
run=$1
perf=$2
cpus=$(getconf _NPROCESSORS_ONLN)
[ "$cpus" -le 6 ] || { echo "skipped: $cpus CPUs"; exit 77; }
n=$((cpus + 1))
[ "$n" -ge 3 ] || n=3
. "$(dirname "$0")/perf_lib.sh"
# go RANKS [wrapper]: a checked AllReduce (run by the wrapper command, if
# any), its log in $out.
go() {
  out=$(NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT timeout 100 "$run" -n "$1" --timeout 90 -- sh -c \
    "exec ${2:-} $perf/all_reduce_perf -b 8 -e 64K -f 16 -n 2 -w 1 -c 1" 2>&1) || fail "$1 ranks: exited $?"
  bad=$(wrong_rows)
  [ -z "$bad" ] || fail "$1 ranks: wrong results: $bad"
  bound=$(printf '%s\n' "$out" | sed -n 's/.*calls. thread bound to CPU \([0-9]*\).*/\1/p')
}
go "$n"
[ "$(printf '%s\n' "$bound" | grep -c .)" = "$n" ] || fail "$n ranks on $cpus CPUs: not every rank bound"
most=$(printf '%s\n' "$bound" | sort | uniq -c | awk 'NR == 1 || $1 > m {m = $1} END {print m}')
least=$(printf '%s\n' "$bound" | sort | uniq -c | awk 'NR == 1 || $1 < m {m = $1} END {print m}')
used=$(printf '%s\n' "$bound" | sort -u | grep -c .)
[ "$used" = "$cpus" ] && [ $((most - least)) -le 1 ] ||
  fail "$n ranks on $cpus CPUs: bound unevenly: $(printf '%s' "$bound" | tr '\n' ' ')"
echo "ok   $n ranks on $cpus CPUs: bound to $(printf '%s' "$bound" | tr '\n' ' ')"
go "$n" "env CHORUS_SPREAD_RANKS=0"
[ -z "$bound" ] || fail "CHORUS_SPREAD_RANKS=0: ranks bound"
go "$n" "taskset -c 0"
[ -z "$bound" ] || fail "a launcher's binding was undone"
if [ "$cpus" -ge 2 ]; then
  go "$cpus"
  [ -z "$bound" ] || fail "$cpus ranks on $cpus CPUs: ranks bound"
fi
echo "ok   none bound with CHORUS_SPREAD_RANKS=0, under taskset, or with a CPU per rank"
