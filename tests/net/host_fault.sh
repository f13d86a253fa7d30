#!/bin/bash
# A host lost while a job runs: two "hosts" in network namespaces joined by
# a veth pair, two ranks each (host_fault.c). Once the job runs, host b is
# lost: "link" takes its veth end down, "kill" kills its ranks (SIGKILL).
# The ranks of host a must fail naming host 1 within the program's bound,
# then shrink to a working communicator. Everything stays inside the
# namespaces this script makes; it removes them on exit and kills only the
# processes it started. Exits 77 (skip) when the machine does not allow it.
# usage: host_fault.sh link|kill <host_fault program>
set -u
mode=$1 prog=$2
. "$(dirname "$0")/netns_lib.sh"
make_two_hosts "f$$" 8
port=$((20000 + $$ % 20000))
logdir=$(mktemp -d)
ready=$logdir/ready
pids="" lost=""
for r in 0 1 2 3; do
  if [ "$r" -lt 2 ]; then ns=$nsa ifn=$ifa; else ns=$nsb ifn=$ifb; fi
  ip netns exec "$ns" env RANK=$r WORLD_SIZE=4 LOST_FROM=2 READY_FILE="$ready" \
    NCCL_COMM_ID=10.231.8.1:$port NCCL_SOCKET_IFNAME="$ifn" CHORUS_OP_TIMEOUT=100 \
    timeout 200 "$prog" >"$logdir/$r.log" 2>&1 &
  pids="$pids $!"
  [ "$r" -ge 2 ] && lost="$lost $!"
done
for _ in $(seq 600); do [ -e "$ready" ] && break; sleep 0.1; done
[ -e "$ready" ] || { echo "FAIL: the job never ran its first calls"; cat "$logdir"/*.log; exit 1; }
sleep 0.5
case $mode in
  link) ip -n "$nsb" link set "$ifb" down ;;
  kill) for p in $lost; do pkill -9 -P "$p" 2>/dev/null; kill -9 "$p" 2>/dev/null; done ;;
  *) echo "usage: $0 link|kill program"; exit 2 ;;
esac
fail=0
set -- $pids
for r in 0 1; do
  wait "$1" || fail=1
  shift
  cat "$logdir/$r.log"
done
for p in $lost; do kill -9 "$p" 2>/dev/null; done
pids=""
grep -q "survivor 0: shrunk to 2 ranks: ok" "$logdir/0.log" &&
  grep -q "survivor 1: shrunk to 2 ranks: ok" "$logdir/1.log" || fail=1
[ $fail = 0 ] && echo "PASS: host 1 lost ($mode), both survivors told and shrunk" || echo "FAIL"
exit $fail
