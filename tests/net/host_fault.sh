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
tag=f$$
nsa=$tag-a nsb=$tag-b
skip() { echo "SKIP: $*"; exit 77; }
[ "$(id -u)" = 0 ] || skip "needs root to create network namespaces"
command -v ip >/dev/null || skip "iproute2 (ip) is not installed"
cleanup() {
  for p in ${pids:-}; do kill -9 "$p" 2>/dev/null; done
  ip netns del "$nsa" 2>/dev/null
  ip netns del "$nsb" 2>/dev/null
  rm -rf "${logdir:-}"
}
trap cleanup EXIT
ip netns add "$nsa" 2>/dev/null || skip "cannot create a network namespace (ip netns add failed)"
ip netns add "$nsb" || skip "cannot create a second network namespace"
ip link add "v$tag" type veth peer name "w$tag" 2>/dev/null || skip "cannot create a veth pair"
ip link set "v$tag" netns "$nsa" && ip link set "w$tag" netns "$nsb" || skip "cannot move veth ends"
ip -n "$nsa" addr add 10.231.8.1/24 dev "v$tag"
ip -n "$nsb" addr add 10.231.8.2/24 dev "w$tag"
for ns in "$nsa" "$nsb"; do ip -n "$ns" link set lo up; done
ip -n "$nsa" link set "v$tag" up
ip -n "$nsb" link set "w$tag" up
port=$((20000 + $$ % 20000))
logdir=$(mktemp -d)
ready=$logdir/ready
pids="" lost=""
for r in 0 1 2 3; do
  if [ "$r" -lt 2 ]; then ns=$nsa ifn="v$tag"; else ns=$nsb ifn="w$tag"; fi
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
  link) ip -n "$nsb" link set "w$tag" down ;;
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
