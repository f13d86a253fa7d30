#!/bin/bash
# Peers that cannot reach each other: two namespace hosts, the rank on host
# b told to use loopback only (NCCL_SOCKET_IFNAME==lo), so host a cannot
# reach it. Both ranks must fail their init within the bootstrap deadline
# (4 s here) plus slack, and each must say which rank listens on a
# loopback address and which setting to change, with the addresses.
# usage: unreachable.sh <net_rank program>
set -u
prog=$1
. "$(dirname "$0")/netns_lib.sh"
make_two_hosts "u$$" 11
port=$((20000 + $$ % 20000))
logdir=$(mktemp -d)
pids=""
for r in 0 1; do
  if [ "$r" = 0 ]; then ns=$nsa ifn=$ifa; else ns=$nsb ifn="=lo"; fi
  ip netns exec "$ns" env RANK=$r WORLD_SIZE=2 NCCL_COMM_ID="10.231.11.1:$port" \
    CHORUS_BOOTSTRAP_TIMEOUT=4 NCCL_SOCKET_IFNAME="$ifn" NCCL_SOCKET_FAMILY=AF_INET \
    timeout 60 "$prog" >"$logdir/$r.log" 2>&1 &
  pids="$pids $!"
done
start=$SECONDS
fail=0
for p in $pids; do wait "$p" && { echo "FAIL: a rank's init passed"; fail=1; }; done
pids=""
took=$((SECONDS - start))
for r in 0 1; do
  line=$(grep -a "init failed" "$logdir/$r.log")
  echo "rank $r: $line"
  echo "$line" | grep -q "rank 1 at 127.0.0.1:[0-9]* (loopback: other hosts cannot reach it; set NCCL_SOCKET_IFNAME)" ||
    { echo "FAIL: rank $r does not say rank 1 is on loopback, with its address"; fail=1; }
done
[ "$took" -le 30 ] || { echo "FAIL: $took s to fail"; fail=1; }
[ $fail = 0 ] && echo "PASS: both ranks named the unreachable rank in $took s" || echo "FAIL"
exit $fail
