#!/bin/sh
# cpuset_ranks.sh CHORUSRUN PERF_DIR INFO - ranks count the CPUs they may
# run on (their affinity: taskset, a launcher's binding, a container's
# cpuset), all of a machine's ranks together, not the CPUs it has online:
# two ranks that taskset leaves one CPU take turns on it (a waiting rank
# yields), two ranks each bound to a CPU of its own have a core each, and
# two bound one by one to the same CPU take turns; where the machine has 3
# CPUs or more, 3 ranks under taskset -c 0,1 bind within those 2;
# chorus_info --explain prices calls as the CPUs it may run on allow. Results checked each time.
# Skipped (77) on a machine of one CPU.
set -u
run=$1
perf=$2
info=$3
[ "$(getconf _NPROCESSORS_ONLN)" -ge 2 ] || { echo "skipped: one CPU"; exit 77; }
. "$(dirname "$0")/perf_lib.sh"
# go WRAPPER: a checked 2-rank AllReduce, each rank run by WRAPPER (sh, with
# $RANK set); its log in $out, what the ranks said of their CPUs in $said.
go() {
  out=$(NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT timeout 100 "$run" -n 2 --timeout 90 -- sh -c \
    "exec $1 $perf/all_reduce_perf -b 8 -e 64K -f 16 -n 2 -w 1 -c 1" 2>&1) || fail "$1: exited $?"
  bad=$(wrong_rows)
  [ -z "$bad" ] || fail "$1: wrong results: $bad"
  said=$(printf '%s\n' "$out" | sed -n 's/.*rank [01]: 2 rank(s) on this machine may run on \(.*\)/\1/p' |
    sort -u)
}
go "taskset -c 0"
[ "$said" = "1 CPU(s): they outnumber them, so a waiting rank yields at once" ] ||
  fail "two ranks on one CPU (taskset): said \"$said\""
go 'taskset -c $RANK'
[ "$said" = "2 CPU(s): a core each" ] || fail "two ranks bound to CPUs 0 and 1: said \"$said\""
go 'taskset -c $((RANK * 0))'
[ "$said" = "1 CPU(s): they outnumber them, so a waiting rank yields at once" ] ||
  fail "two ranks each bound to CPU 0: said \"$said\""
echo "ok   ranks count their CPUs together: one CPU by taskset, two bound apart, two bound to one"
# A set the whole job shares, fewer CPUs than the machine has: ranks that
# outnumber it bind one by one within it (where the machine has 3 CPUs or
# more, so that 2 is fewer).
if [ "$(getconf _NPROCESSORS_ONLN)" -ge 3 ]; then
  out=$(NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT timeout 100 taskset -c 0,1 "$run" -n 3 --timeout 90 -- \
    $perf/all_reduce_perf -b 8 -e 64K -f 16 -n 2 -w 1 -c 1 2>&1) || fail "3 ranks on CPUs 0-1: exited $?"
  bad=$(wrong_rows)
  [ -z "$bad" ] || fail "3 ranks on CPUs 0-1: wrong results: $bad"
  bound=$(printf '%s\n' "$out" | sed -n 's/.*calls. thread bound to CPU \([0-9]*\).*/\1/p' | sort | tr '\n' ' ')
  [ "$bound" = "0 0 1 " ] || fail "3 ranks under taskset -c 0,1 bound to: $bound"
  echo "ok   3 ranks under taskset -c 0,1 spread over those CPUs: $bound"
fi
out=$(taskset -c 0 "$info" --explain allreduce 64K --ranks 2 --host)
printf '%s\n' "$out" | grep -q "^cores: 2 ranks a host on 1 CPU: more ranks than CPUs" ||
  fail "chorus_info under taskset -c 0 does not price ranks taking turns"
out=$(taskset -c 0,1 "$info" --explain allreduce 64K --ranks 2 --host)
printf '%s\n' "$out" | grep -q "^cores: 2 ranks a host on 2 CPUs: a core each" ||
  fail "chorus_info on 2 CPUs does not give a core each"
echo "ok   chorus_info prices by the CPUs it may run on"
