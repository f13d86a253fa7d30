#!/bin/sh
# read_slowdown_test.sh CHORUSRUN PERF_DIR CHORUS_INFO: what the peer-read
# slowdown (process_vm_readv's time over memcpy's, which the ranks measure
# and agree on) makes the library choose, with the ratio forced by
# CHORUS_READ_SLOWDOWN on every rank:
#   - 1 (reads cheap): 2 processes' AllReduce of 4 MiB by zerocopy, and
#     sends to the other process by reference (from 32-64 KiB);
#   - 8 (reads dear): the AllReduce not by zerocopy, and sends through the
#     slots at every size;
# each run's results checked (#wrong 0), the agreed ratio in the init
# line; chorus_info --explain prices alike; a ratio out of range is named
# in a WARN and measured instead. Skipped (77) where process_vm_readv is
# not allowed (no peer reads to price).
set -u
[ $# -eq 3 ] || { echo "usage: $0 CHORUSRUN PERF_DIR CHORUS_INFO"; exit 2; }
run=$1 perf=$2 info=$3
fail() { echo "FAIL: $*"; exit 1; }
out=$(CHORUS_READ_SLOWDOWN=1 "$info" --explain allreduce 4M --ranks 2 --host 2>&1)
case $out in
*"not measured"*) echo "skipped: no peer reads here"; exit 77 ;;
esac

# perf RATIO PROGRAM: 2 processes, one 4 MiB call checked, the log kept in $log
perf() {
  log=$(CHORUS_READ_SLOWDOWN=$1 NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,SHM,TUNING \
    timeout 120 "$run" -n 2 --timeout 100 "$perf/$2" -b 4M -e 4M -n 1 -w 1 -c 1 2>&1) || {
    printf '%s\n' "$log" | tail -20
    fail "$2 with CHORUS_READ_SLOWDOWN=$1 failed"
  }
  printf '%s\n' "$log" | grep -q "peer reads between processes take $1.00x memcpy's time" ||
    fail "$2: the init line does not give the agreed ratio $1"
}
has() { printf '%s\n' "$log" | grep -c "$1"; }

perf 1 all_reduce_perf
[ "$(has 'AllReduce of 4194304 bytes: algorithm zerocopy')" -ge 2 ] ||
  fail "reads cheap: the 4 MiB AllReduce of both ranks not by zerocopy"
perf 8 all_reduce_perf
[ "$(has 'AllReduce of 4194304 bytes: algorithm')" -ge 2 ] || fail "reads dear: no algorithm line"
[ "$(has 'AllReduce of 4194304 bytes: algorithm zerocopy')" -eq 0 ] ||
  fail "reads dear: the 4 MiB AllReduce by zerocopy"
echo "AllReduce 4 MiB on 2 processes: zerocopy where reads are cheap, not where dear"

perf 1 sendrecv_perf
[ "$(has 'sends to other processes by reference from 32-64 KiB')" -eq 2 ] ||
  fail "reads cheap: not every rank sends by reference"
perf 8 sendrecv_perf
[ "$(has 'sends to other processes through the slots')" -eq 2 ] ||
  fail "reads dear: not every rank keeps its sends to the slots"
echo "Send/Recv: by reference where reads are cheap, through the slots where dear"

for r in 1 8; do
  ex=$(CHORUS_READ_SLOWDOWN=$r "$info" --explain allreduce 4M --ranks 2 --host 2>&1)
  printf '%s\n' "$ex" | grep -q "peer reads between processes: $r.00x" ||
    fail "chorus_info --explain with ratio $r: $ex"
  pick=$(printf '%s\n' "$ex" | sed -n 's/^-> //p')
  case $r:$pick in
  1:zerocopy/* | 8:ring/* | 8:oneshot/* | 8:twoshot/*) ;;
  *) fail "chorus_info --explain with ratio $r picks $pick" ;;
  esac
done
echo "chorus_info --explain prices by the forced ratio"

ex=$(CHORUS_READ_SLOWDOWN=1000 "$info" --explain allreduce 4M --ranks 2 --host 2>&1)
printf '%s\n' "$ex" | grep -q 'CHORUS_READ_SLOWDOWN="1000" is not a ratio' ||
  fail "an out-of-range ratio is not named: $ex"
printf '%s\n' "$ex" | grep -q "peer reads between processes: 1000.00x" &&
  fail "an out-of-range ratio was used"
echo "a ratio out of range: WARN, measured instead"
