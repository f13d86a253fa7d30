#!/bin/sh
# cpu_quota.sh CHORUSRUN PERF_DIR INFO - ranks count a CPU quota (a
# container's CPU limit: cgroup v1 cpu.cfs_quota_us, v2 cpu.max) as the
# CPUs it gives them, rounded down: 2 ranks in a cgroup of 1 or 1.5 CPUs'
# time take turns (a waiting rank yields rather than spins the quota
# away), with 2 they have a core each; chorus_info prices by it. Makes
# its cgroup under the cpu controller and removes it; skipped (77) where
# it cannot (not root, no writable cpu controller) or on one CPU.
set -u
run=$1
perf=$2
info=$3
[ "$(getconf _NPROCESSORS_ONLN)" -ge 2 ] || { echo "skipped: one CPU"; exit 77; }
. "$(dirname "$0")/perf_lib.sh"
g=""
cleanup() { [ -n "$g" ] && rmdir "$g" 2>/dev/null; }
trap cleanup EXIT
# quota CPUS_X100000: this cgroup's quota per 100 ms period.
if [ -w /sys/fs/cgroup/cpu ] && [ -f /sys/fs/cgroup/cpu/cpu.cfs_quota_us ]; then
  g=/sys/fs/cgroup/cpu/chorus-quota-test-$$
  mkdir "$g" 2>/dev/null || { g=""; echo "skipped: cannot make a v1 cpu cgroup"; exit 77; }
  quota() { echo 100000 > "$g/cpu.cfs_period_us" && echo "$1" > "$g/cpu.cfs_quota_us"; }
elif grep -qw cpu /sys/fs/cgroup/cgroup.subtree_control 2>/dev/null && [ -w /sys/fs/cgroup ]; then
  g=/sys/fs/cgroup/chorus-quota-test-$$
  mkdir "$g" 2>/dev/null || { g=""; echo "skipped: cannot make a v2 cgroup"; exit 77; }
  quota() { echo "$1 100000" > "$g/cpu.max"; }
else
  echo "skipped: no writable cpu cgroup controller"
  exit 77
fi
quota 100000 || { echo "skipped: cannot set a CPU quota"; exit 77; }
# go: a checked 2-rank AllReduce inside the cgroup; what the ranks said of
# their CPUs in $said, chorus_info's cores line in $cores.
go() {
  out=$(NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT timeout 100 sh -c "echo \$\$ > $g/cgroup.procs &&
    exec $run -n 2 --timeout 90 -- $perf/all_reduce_perf -b 8 -e 64K -f 16 -n 2 -w 1 -c 1" 2>&1) ||
    fail "exited $?"
  bad=$(wrong_rows)
  [ -z "$bad" ] || fail "wrong results: $bad"
  said=$(printf '%s\n' "$out" | sed -n 's/.*rank [01]: 2 rank(s) on this machine may run on \(.*\)/\1/p' |
    sort -u)
  cores=$(sh -c "echo \$\$ > $g/cgroup.procs && exec $info --explain allreduce 64K --ranks 2 --host" |
    grep "^cores:")
}
crowded="1 CPU(s): they outnumber them, so a waiting rank yields at once"
go
[ "$said" = "$crowded" ] || fail "a quota of 1 CPU: said \"$said\""
[ "$cores" = "cores: 2 ranks a host on 1 CPU: more ranks than CPUs, priced as taking turns" ] ||
  fail "chorus_info under a quota of 1 CPU: $cores"
quota 150000
go
[ "$said" = "$crowded" ] || fail "a quota of 1.5 CPUs: said \"$said\""
quota 200000
go
[ "$said" = "2 CPU(s): a core each" ] || fail "a quota of 2 CPUs: said \"$said\""
echo "ok   a CPU quota of 1 and 1.5 CPUs: 2 ranks take turns; of 2: a core each"
