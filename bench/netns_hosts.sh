#!/bin/sh
# netns_hosts.sh - hosts made of network namespaces for the benchmarks
# (bench/compare.py --netns): N namespaces PREFIX-0 .. PREFIX-<N-1>, each
# with one veth end h<i> at 10.233.0.<i+1>/24, the other ends on a bridge in
# a namespace of its own (PREFIX-sw), so every pair of hosts talks TCP
# through the kernel's network stack as machines on one switch do. The
# launching namespace joins the bridge too (10.233.0.254, interface
# <PREFIX>r), where a launcher that starts daemons per host (Open MPI's
# mpirun) listens for them; no traffic leaves the namespaces this script
# makes and that bridge.
#
# usage: netns_hosts.sh up PREFIX N [MTU [CC]]   make them (MTU default
#            9000; CC: the hosts' default TCP congestion control, as
#            net.ipv4.tcp_congestion_control, default the system's)
#        netns_hosts.sh down PREFIX N       remove them
#        netns_hosts.sh exec PREFIX cmd...  run cmd as one rank: in the
#            namespace of its rank ($RANK, or Open MPI's
#            $OMPI_COMM_WORLD_RANK), with NCCL_SOCKET_IFNAME and
#            GLOO_SOCKET_IFNAME naming its interface and NCCL_COMM_ID's
#            address moved to host 0's (the launcher set 127.0.0.1:port)
#        netns_hosts.sh agent PREFIX HOST cmd...   a remote shell for
#            mpirun (--mca plm_rsh_agent): runs the shell command cmd in the
#            namespace of HOST, a host's address
# Needs root and iproute2; `up` fails with the reason where the machine
# does not allow it.
set -u
cmd=${1:-} prefix=${2:-}
[ -n "$cmd" ] && [ -n "$prefix" ] || { echo "usage: $0 up|down|exec|agent PREFIX ..." >&2; exit 2; }
shift 2

addr() { echo "10.233.0.$(($1 + 1))"; }
rootif=$(printf %.14s "$prefix")r

case $cmd in
up)
  n=$1 mtu=${2:-9000} cc=${3:-}
  [ "$(id -u)" = 0 ] || { echo "netns_hosts.sh: needs root" >&2; exit 1; }
  ip netns add "$prefix-sw" || exit 1
  ip -n "$prefix-sw" link add br0 type bridge &&
    ip -n "$prefix-sw" link set br0 mtu "$mtu" up &&
    ip -n "$prefix-sw" link set lo up || exit 1
  ip link add "$rootif" mtu "$mtu" type veth peer name sr netns "$prefix-sw" mtu "$mtu" &&
    ip -n "$prefix-sw" link set sr master br0 up &&
    ip addr add 10.233.0.254/24 dev "$rootif" &&
    ip link set "$rootif" up || exit 1
  i=0
  while [ "$i" -lt "$n" ]; do
    ns=$prefix-$i
    ip netns add "$ns" &&
      ip link add "h$i" netns "$ns" mtu "$mtu" type veth peer name "s$i" netns "$prefix-sw" mtu "$mtu" &&
      ip -n "$prefix-sw" link set "s$i" master br0 up &&
      ip -n "$ns" addr add "$(addr "$i")/24" dev "h$i" &&
      ip -n "$ns" link set "h$i" up &&
      ip -n "$ns" link set lo up || exit 1
    if [ -n "$cc" ]; then
      ip netns exec "$ns" sysctl -q -w net.ipv4.tcp_congestion_control="$cc" || exit 1
    fi
    i=$((i + 1))
  done
  ;;
down)
  n=$1 i=0
  while [ "$i" -lt "$n" ]; do
    ip netns del "$prefix-$i" 2>/dev/null
    rm -rf "/tmp/$prefix-$i" # an agent's TMPDIR
    i=$((i + 1))
  done
  ip netns del "$prefix-sw" 2>/dev/null # takes the launcher's end along
  ip link del "$rootif" 2>/dev/null
  exit 0
  ;;
exec)
  r=${RANK:-${OMPI_COMM_WORLD_RANK:-}}
  [ -n "$r" ] || { echo "netns_hosts.sh exec: no RANK or OMPI_COMM_WORLD_RANK" >&2; exit 2; }
  export NCCL_SOCKET_IFNAME="h$r" GLOO_SOCKET_IFNAME="h$r"
  [ -n "${NCCL_COMM_ID:-}" ] && export NCCL_COMM_ID="$(addr 0):${NCCL_COMM_ID##*:}"
  exec ip netns exec "$prefix-$r" "$@"
  ;;
agent)
  host=$1
  shift
  case $host in 10.233.0.[0-9]*) ;; *) echo "netns_hosts.sh agent: $host is not a host here" >&2; exit 2 ;; esac
  i=$((${host##*.} - 1))
  # Every namespace host has this machine's hostname, so daemons would share
  # (and remove) each other's session directories under one TMPDIR.
  mkdir -p "/tmp/$prefix-$i"
  exec ip netns exec "$prefix-$i" env TMPDIR="/tmp/$prefix-$i" sh -c "$*"
  ;;
*)
  echo "usage: $0 up|down|exec|agent PREFIX ..." >&2
  exit 2
  ;;
esac
