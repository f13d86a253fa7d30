#!/bin/sh
# probe_once.sh TEST_COMM CASE: communicators split or shrunk from one
# across hosts take its network figures; the whole run (test_comm's CASE,
# 4 processes as 2 hosts over loopback) logs one network probe, the
# parent's, not one more per child that spans the hosts.
set -u
out=$(HARNESS_HOSTS=2 NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,TUNING NCCL_SOCKET_IFNAME=lo \
  timeout 120 "$1" "$2" procs 4 2>&1) || {
  printf '%s\n' "$out" | tail -20
  echo "$2 procs 4 failed"
  exit 1
}
n=$(printf '%s\n' "$out" | grep -c "network probe, rank 0")
if [ "$n" != 1 ]; then
  printf '%s\n' "$out" | grep "network probe"
  echo "$2: $n network probes in the run, 1 expected (the parent's)"
  exit 1
fi
echo "$2: one network probe (the parent's)"
