#!/bin/sh
# cpus_counted.sh MODE CHORUSRUN PERF_DIR INFO - ranks count the CPUs they
# may run on, all of a machine's ranks together, not the CPUs it has
# online; results checked each time. Skipped (77) on a machine of one CPU.
#
# MODE affinity: their affinity (taskset, a launcher's binding, a
# container's cpuset): two ranks that taskset leaves one CPU take turns on
# it (a waiting rank yields), two ranks each bound to a CPU of its own
# have a core each, and two bound one by one to the same CPU take turns;
# where the machine has 3 CPUs or more, 3 ranks under taskset -c 0,1 bind
# within those 2; chorus_info --explain prices calls as the CPUs it may
# run on allow.
#
# MODE quota: a CPU quota (a container's CPU limit: cgroup v1
# cpu.cfs_quota_us, v2 cpu.max) as the CPUs it gives, rounded down: 2
# ranks in a cgroup of 1 or 1.5 CPUs' time take turns (rather than spin
# the quota away), with 2 they have a core each; chorus_info prices by it.
# Makes its cgroup under the cpu controller and removes it; skipped (77)
# where it cannot (not root, no writable cpu controller).
set -u
mode=$1
run=$2
perf=$3
info=$4
. "$(dirname "$0")/perf_lib.sh"
need_cpus 2

by_affinity() {
  # go WRAPPER: a checked 2-rank AllReduce, each rank run by WRAPPER (sh, with
  # $RANK set); its log in $out, what the ranks said of their CPUs in $said.
  go_set() {
    out=$(NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT timeout 100 "$run" -n 2 --timeout 90 -- sh -c \
      "exec $1 $perf/all_reduce_perf -b 8 -e 64K -f 16 -n 2 -w 1 -c 1" 2>&1) || fail "$1: exited $?"
    bad=$(wrong_rows)
    [ -z "$bad" ] || fail "$1: wrong results: $bad"
    said=$(cpus_said)
}
go_set "taskset -c 0"
[ "$said" = "1 CPU(s): they outnumber them, so a waiting rank yields at once" ] ||
  fail "two ranks on one CPU (taskset): said \"$said\""
go_set 'taskset -c $RANK'
[ "$said" = "2 CPU(s): a core each" ] || fail "two ranks bound to CPUs 0 and 1: said \"$said\""
go_set 'taskset -c $((RANK * 0))'
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
}

by_quota() {
  g=""
  cleanup() { [ -n "$g" ] && rmdir "$g" 2>/dev/null; }
  trap cleanup EXIT
  # set_quota CPUS_X100000: this cgroup's quota per 100 ms period.
  if [ -w /sys/fs/cgroup/cpu ] && [ -f /sys/fs/cgroup/cpu/cpu.cfs_quota_us ]; then
    g=/sys/fs/cgroup/cpu/chorus-quota-test-$$
    mkdir "$g" 2>/dev/null || { g=""; echo "skipped: cannot make a v1 cpu cgroup"; exit 77; }
    set_quota() { echo 100000 > "$g/cpu.cfs_period_us" && echo "$1" > "$g/cpu.cfs_quota_us"; }
  elif grep -qw cpu /sys/fs/cgroup/cgroup.subtree_control 2>/dev/null && [ -w /sys/fs/cgroup ]; then
    g=/sys/fs/cgroup/chorus-quota-test-$$
    mkdir "$g" 2>/dev/null || { g=""; echo "skipped: cannot make a v2 cgroup"; exit 77; }
    set_quota() { echo "$1 100000" > "$g/cpu.max"; }
  else
    echo "skipped: no writable cpu cgroup controller"
    exit 77
  fi
  set_quota 100000 || { echo "skipped: cannot set a CPU quota"; exit 77; }
  # go: a checked 2-rank AllReduce inside the cgroup; what the ranks said of
  # their CPUs in $said, chorus_info's cores line in $cores.
  go_quota() {
    out=$(NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT timeout 100 sh -c "echo \$\$ > $g/cgroup.procs &&
      exec $run -n 2 --timeout 90 -- $perf/all_reduce_perf -b 8 -e 64K -f 16 -n 2 -w 1 -c 1" 2>&1) ||
      fail "exited $?"
    bad=$(wrong_rows)
    [ -z "$bad" ] || fail "wrong results: $bad"
    said=$(cpus_said)
    cores=$(sh -c "echo \$\$ > $g/cgroup.procs && exec $info --explain allreduce 64K --ranks 2 --host" |
      grep "^cores:")
}
crowded="1 CPU(s): they outnumber them, so a waiting rank yields at once"
go_quota
[ "$said" = "$crowded" ] || fail "a quota of 1 CPU: said \"$said\""
[ "$cores" = "cores: 2 ranks a host on 1 CPU: more ranks than CPUs, priced as taking turns" ] ||
  fail "chorus_info under a quota of 1 CPU: $cores"
set_quota 150000
go_quota
[ "$said" = "$crowded" ] || fail "a quota of 1.5 CPUs: said \"$said\""
set_quota 200000
go_quota
[ "$said" = "2 CPU(s): a core each" ] || fail "a quota of 2 CPUs: said \"$said\""
echo "ok   a CPU quota of 1 and 1.5 CPUs: 2 ranks take turns; of 2: a core each"
}

case $mode in
affinity) by_affinity ;;
quota) by_quota ;;
*) echo "usage: cpus_counted.sh affinity|quota CHORUSRUN PERF_DIR INFO"; exit 2 ;;
esac
