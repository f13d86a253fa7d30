#!/bin/bash
# bench/compare.py --netns end to end, Chorus only: every rank a host in a
# namespace of bench/netns_hosts.sh's making. The run must give its rows
# (checked results: the perf programs' -c 1), its ranks must have talked
# over the namespaces' addresses, not loopback, and the namespaces and
# their temporary folders must be gone after it. The hosts' congestion
# control is set (--netns-cc) to bbr where the system runs another and bbr
# is there, else to reno, and the ranks must have found it: Chorus says
# that it runs reno instead exactly where a host's choice is bbr. Exits 77
# (skip) where the machine does not allow namespaces.
# usage: netns_bench.sh <chorus build folder>
set -u
build=$1
src=$(cd "$(dirname "$0")/../.." && pwd)
[ "$(id -u)" = 0 ] || { echo "SKIP: needs root to create network namespaces"; exit 77; }
command -v ip >/dev/null || { echo "SKIP: iproute2 (ip) is not installed"; exit 77; }
ip netns add "nbprobe$$" 2>/dev/null || { echo "SKIP: cannot create a network namespace"; exit 77; }
ip netns del "nbprobe$$"
prefix=nb$$
out=$(mktemp -d)
trap 'sh "$src/bench/netns_hosts.sh" down "$prefix" 2; [ -n "${KEEP:-}" ] || rm -rf "$out"' EXIT
cc=reno
if [ "$(cat /proc/sys/net/ipv4/tcp_congestion_control)" != bbr ] &&
  grep -qw bbr /proc/sys/net/ipv4/tcp_available_congestion_control; then
  cc=bbr
fi
NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT timeout 200 python3 "$src/bench/compare.py" \
  --build "$build" --netns "$prefix" --netns-cc $cc --ranks 2 --colls allreduce,alltoall --libs chorus \
  -b 64K -e 128K --rounds 1 --target 0.01 --out "$out" --stamp t --no-plot >"$out/run.log" 2>&1
rc=$?
fail=0
[ $rc = 0 ] || { echo "FAIL: compare.py exit $rc"; fail=1; }
for coll in allreduce alltoall; do
  grep -Eq "# round 1  n=2  $coll +Chorus +2 rows .* ok" "$out/run.log" ||
    { echo "FAIL: no checked rows of $coll"; fail=1; }
done
# Each rank answered its peers on its own namespace's address.
for a in 10.233.0.1 10.233.0.2; do
  grep -q "answers its peers on $a:" "$out"/t/raw/chorus_*.log ||
    { echo "FAIL: no rank on $a"; fail=1; }
done
grep -q "peer(s) over SHM, 1 over NET" "$out"/t/raw/chorus_*.log ||
  { echo "FAIL: the ranks did not talk over the network"; fail=1; }
said=no
grep -q "run reno, not the system's bbr" "$out"/t/raw/chorus_*.log && said=yes
[ "$said" = "$([ $cc = bbr ] && echo yes || echo no)" ] ||
  { echo "FAIL: with --netns-cc $cc, Chorus said it ran reno instead of bbr: $said"; fail=1; }
if ip netns list | grep -q "^$prefix-"; then echo "FAIL: namespaces left"; fail=1; fi
[ $fail = 0 ] || { tail -20 "$out/run.log"; exit 1; }
echo "PASS: compare.py --netns ran checked rows over the namespaces and removed them"
