#!/bin/bash
# Two "hosts" made with network namespaces joined by a veth pair, two ranks
# on each: ranks inside one namespace share memory, ranks across them talk
# TCP over the veth. All traffic stays inside the namespaces this script
# creates; it removes them on exit and kills only the processes it started.
# Exits 77 (skip) with the reason when the machine does not allow it.
# usage: two_hosts.sh [-6] [--qdisc "ARGS" [--probe-below GBPS]]
#                     [--cc ALG yes|no] <ranks per host> <program> [args...]
#   The program is started once per rank with RANK, WORLD_SIZE, NCCL_COMM_ID
#   and NCCL_SOCKET_IFNAME set; -6: over IPv6 (NCCL_SOCKET_FAMILY=AF_INET6,
#   the rendezvous at [fd42:231:7::1]), checked in the ranks' bootstrap lines;
#   --qdisc: both veth ends get the tc queueing discipline ARGS: "netem
#   delay 2ms 1ms loss 1%" (late, lost and reordered packets, so TCP
#   retransmits under the collectives), "tbf rate 100mbit ..." (a slow link);
#   --probe-below: rank 0's network probe at init must measure less;
#   --cc: both namespaces' default TCP congestion control is ALG; every
#   rank logs that its streams to the other host, on this same machine,
#   keep at most 128 KiB unsent, and (yes) or not (no) that they run reno
#   instead; other: the second host gets a host name of its own (a UTS
#   namespace), so the hosts are two machines, and every rank logs that its
#   streams run the system's congestion control again, none reno.
set -u
v6=0 qdisc=""
[ "${1:-}" = -6 ] && { v6=1; shift; }
[ "${1:-}" = --qdisc ] && { qdisc=$2; shift 2; }
below=""
[ "${1:-}" = --probe-below ] && { below=$2; shift 2; }
cc="" unpaced=""
[ "${1:-}" = --cc ] && { cc=$2 unpaced=$3; shift 3; }
per=$1
shift
. "$(dirname "$0")/netns_lib.sh"
make_two_hosts "c$$" 7
if [ -n "$qdisc" ]; then
  command -v tc >/dev/null || skip "tc (iproute2) is not installed"
  # shellcheck disable=SC2086 # ARGS are words for tc
  ip netns exec "$nsa" tc qdisc add dev "$ifa" root $qdisc 2>/dev/null ||
    skip "this kernel has no '${qdisc%% *}' queueing discipline (tc qdisc add failed)"
  # shellcheck disable=SC2086
  ip netns exec "$nsb" tc qdisc add dev "$ifb" root $qdisc
  echo "both links: $qdisc"
fi
if [ -n "$cc" ]; then
  if [ "$unpaced" = other ]; then
    unshare --uts true 2>/dev/null || skip "cannot make a UTS namespace (unshare --uts failed)"
  fi
  for ns in "$nsa" "$nsb"; do
    ip netns exec "$ns" sysctl -q -w net.ipv4.tcp_congestion_control="$cc" 2>/dev/null ||
      skip "this kernel cannot make $cc a namespace's default congestion control"
  done
  echo "both hosts: congestion control $cc"
fi
root=10.231.7.1 family=AF_INET
[ $v6 = 1 ] && root="[fd42:231:7::1]" family=AF_INET6
port=$((20000 + $$ % 20000))
world=$((2 * per))
logdir=$(mktemp -d)
pids=""
for r in $(seq 0 $((world - 1))); do
  if [ "$r" -lt "$per" ]; then ns=$nsa ifn=$ifa; else ns=$nsb ifn=$ifb; fi
  other=()
  if [ "$unpaced" = other ] && [ "$ns" = "$nsb" ]; then
    # shellcheck disable=SC2016 # $@ is the inner shell's
    other=(unshare --uts sh -c 'hostname chorus-other-machine && exec "$@"' sh)
  fi
  ip netns exec "$ns" ${other[@]+"${other[@]}"} env RANK=$r WORLD_SIZE=$world NCCL_COMM_ID="$root:$port" \
    NCCL_SOCKET_IFNAME="$ifn" NCCL_SOCKET_FAMILY=$family NCCL_DEBUG=INFO \
    NCCL_DEBUG_SUBSYS=INIT,BOOTSTRAP \
    timeout 240 "$@" > "$logdir/$r.log" 2>&1 &
  pids="$pids $!"
done
fail=0
for p in $pids; do wait "$p" || fail=1; done
pids=""
for r in $(seq 0 $((world - 1))); do
  grep -E "net_rank|PASS|FAIL|WARN|element|network probe" "$logdir/$r.log" | grep -v "no job key" | head -20
  # Each rank reaches its own host over SHM (itself included) and the other over NET.
  grep -q "rank $r: $per peer(s) over SHM, $per over NET" "$logdir/$r.log" ||
    { echo "rank $r did not use SHM within and NET across hosts:"; grep "peer(s)" "$logdir/$r.log"; fail=1; }
  # Every rank of a communicator across hosts prices hops by one measurement.
  if [ "$r" = 0 ]; then
    gbps=$(sed -n 's/.*network probe, rank 0 to rank [0-9]* (another host): [0-9.]* us one way, \([0-9.]*\) GB\/s.*/\1/p' "$logdir/0.log" | head -1)
    [ -n "$gbps" ] || { echo "rank 0 logged no network probe"; fail=1; }
    if [ -n "$below" ] && [ -n "$gbps" ] && ! awk -v g="$gbps" -v b="$below" 'BEGIN { exit !(g < b) }'; then
      echo "the probe measured $gbps GB/s, not below $below"
      fail=1
    fi
  fi
  if [ -n "$cc" ]; then
    # One data stream per channel to the other host (the default sockets).
    [ "$unpaced" = other ] || grep -Eq "NET transport: [1-9][0-9]* data stream\(s\) to peers on this machine keep at most 131072 bytes unsent" "$logdir/$r.log" ||
      { echo "rank $r did not hold its streams to the other host to 128 KiB unsent"; fail=1; }
    line=$(grep "run reno, not the system's bbr" "$logdir/$r.log")
    if [ "$unpaced" = other ]; then
      grep -q "stream(s) to peers on other machines run the system's congestion control again" "$logdir/$r.log" ||
        { echo "rank $r did not give its streams to the other machine $cc back"; fail=1; }
      [ -z "$line" ] || { echo "rank $r runs reno to another machine: $line"; fail=1; }
    elif [ "$unpaced" = yes ] && [ -z "$line" ]; then
      echo "rank $r did not move its streams to the other host off $cc"
      fail=1
    elif [ "$unpaced" = no ] && [ -n "$line" ]; then
      echo "rank $r moved streams off $cc where told not to: $line"
      fail=1
    fi
  fi
  if [ $v6 = 1 ]; then
    grep -q "rank $r of $world listening on \[fd42:231:7::" "$logdir/$r.log" ||
      { echo "rank $r did not listen on IPv6:"; grep "listening" "$logdir/$r.log"; fail=1; }
  fi
done
rm -rf "$logdir"
[ $fail = 0 ] && echo "PASS: $world ranks on 2 namespace hosts" || echo "FAIL"
exit $fail
