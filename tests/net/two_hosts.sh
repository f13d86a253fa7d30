#!/bin/bash
# Two "hosts" made with network namespaces joined by a veth pair, two ranks
# on each: ranks inside one namespace share memory, ranks across them talk
# TCP over the veth. All traffic stays inside the namespaces this script
# creates; it removes them on exit and kills only the processes it started.
# Exits 77 (skip) with the reason when the machine does not allow it.
# usage: two_hosts.sh <ranks per host> <program> [args...]
#   The program is started once per rank with RANK, WORLD_SIZE, NCCL_COMM_ID
#   and NCCL_SOCKET_IFNAME set.
set -u
per=$1
shift
tag=c$$
nsa=$tag-a nsb=$tag-b
skip() { echo "SKIP: $*"; exit 77; }
[ "$(id -u)" = 0 ] || skip "needs root to create network namespaces"
command -v ip >/dev/null || skip "iproute2 (ip) is not installed"
cleanup() {
  for p in ${pids:-}; do kill -9 "$p" 2>/dev/null; done
  ip netns del "$nsa" 2>/dev/null
  ip netns del "$nsb" 2>/dev/null
}
trap cleanup EXIT
ip netns add "$nsa" 2>/dev/null || skip "cannot create a network namespace (ip netns add failed)"
ip netns add "$nsb" || skip "cannot create a second network namespace"
ip link add "v$tag" type veth peer name "w$tag" 2>/dev/null || skip "cannot create a veth pair"
ip link set "v$tag" netns "$nsa" && ip link set "w$tag" netns "$nsb" || skip "cannot move veth ends"
ip -n "$nsa" addr add 10.231.7.1/24 dev "v$tag"
ip -n "$nsb" addr add 10.231.7.2/24 dev "w$tag"
for ns in "$nsa" "$nsb"; do ip -n "$ns" link set lo up; done
ip -n "$nsa" link set "v$tag" up
ip -n "$nsb" link set "w$tag" up
port=$((20000 + $$ % 20000))
world=$((2 * per))
logdir=$(mktemp -d)
pids=""
for r in $(seq 0 $((world - 1))); do
  if [ "$r" -lt "$per" ]; then ns=$nsa ifn="v$tag"; else ns=$nsb ifn="w$tag"; fi
  ip netns exec "$ns" env RANK=$r WORLD_SIZE=$world NCCL_COMM_ID=10.231.7.1:$port \
    NCCL_SOCKET_IFNAME="$ifn" NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT \
    timeout 240 "$@" > "$logdir/$r.log" 2>&1 &
  pids="$pids $!"
done
fail=0
for p in $pids; do wait "$p" || fail=1; done
pids=""
for r in $(seq 0 $((world - 1))); do
  grep -E "net_rank|PASS|FAIL|WARN|element" "$logdir/$r.log" | head -20
  # Each rank reaches its own host over SHM (itself included) and the other over NET.
  grep -q "rank $r: $per peer(s) over SHM, $per over NET" "$logdir/$r.log" ||
    { echo "rank $r did not use SHM within and NET across hosts:"; grep "peer(s)" "$logdir/$r.log"; fail=1; }
done
rm -rf "$logdir"
[ $fail = 0 ] && echo "PASS: $world ranks on 2 namespace hosts" || echo "FAIL"
exit $fail
