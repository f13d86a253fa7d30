# shellcheck shell=bash
# netns_lib.sh - sourced by the multi-host tests here: two "hosts" made
# with network namespaces joined by a veth pair. Everything stays inside
# the namespaces the test makes; they are removed on exit, and only the
# processes the test started (in $pids) are killed.
#
# make_two_hosts PREFIX N: namespaces $nsa and $nsb, veth ends $ifa (in
# $nsa: 10.231.N.1 and fd42:231:N::1) and $ifb (in $nsb: .2 and ::2),
# loopback up; the test skips (exit 77) with the reason where the machine
# does not allow it.

skip() { echo "SKIP: $*"; exit 77; }

netns_cleanup() {
  for p in ${pids:-}; do kill -9 "$p" 2>/dev/null; done
  ip netns del "$nsa" 2>/dev/null
  ip netns del "$nsb" 2>/dev/null
  [ -z "${logdir:-}" ] || rm -rf "$logdir"
}

make_two_hosts() {
  local tag=$1 n=$2
  nsa=$tag-a nsb=$tag-b ifa=v$tag ifb=w$tag
  [ "$(id -u)" = 0 ] || skip "needs root to create network namespaces"
  command -v ip >/dev/null || skip "iproute2 (ip) is not installed"
  trap netns_cleanup EXIT
  ip netns add "$nsa" 2>/dev/null || skip "cannot create a network namespace (ip netns add failed)"
  ip netns add "$nsb" || skip "cannot create a second network namespace"
  ip link add "$ifa" type veth peer name "$ifb" 2>/dev/null || skip "cannot create a veth pair"
  ip link set "$ifa" netns "$nsa" && ip link set "$ifb" netns "$nsb" || skip "cannot move veth ends"
  ip -n "$nsa" addr add "10.231.$n.1/24" dev "$ifa"
  ip -n "$nsb" addr add "10.231.$n.2/24" dev "$ifb"
  ip -n "$nsa" -6 addr add "fd42:231:$n::1/64" dev "$ifa" nodad 2>/dev/null
  ip -n "$nsb" -6 addr add "fd42:231:$n::2/64" dev "$ifb" nodad 2>/dev/null
  for ns in "$nsa" "$nsb"; do ip -n "$ns" link set lo up; done
  ip -n "$nsa" link set "$ifa" up
  ip -n "$nsb" link set "$ifb" up
}
