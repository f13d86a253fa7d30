#!/bin/sh
# slots_between_hosts.sh CHORUSRUN PERF_DIR - the FIFO geometry of a
# host-memory communicator (core/comm.c, few_slots_between_hosts): every
# rank a host of its own (as many as the machine's cores, or more) cuts the
# FIFO into 2 slots of 512 KiB, or 2 per socket where socket threads give a
# peer k > 1 (2k of 1 MiB / 2k); hosts of several ranks, or CHORUS_NSLOTS
# set on any rank keep 8 of 128 KiB (the ranks agree). Each run checks its results
# (-c 1) from 4 KiB to 8 MiB, many messages wrapping around the slots.
set -u
run=$1
perf=$2
. "$(dirname "$0")/perf_lib.sh"
# geometry NAME RANKS HOSTS WANT [sh -c prefix]: every rank logs WANT.
geometry() {
  name=$1 n=$2 hosts=$3 want=$4 pre=${5:-}
  for coll in all_reduce broadcast alltoall; do
    out=$(NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT NCCL_SOCKET_IFNAME=lo \
      timeout 100 "$run" -n "$n" --hosts "$hosts" --timeout 90 -- sh -c \
      "$pre exec $perf/${coll}_perf -b 4K -e 8M -f 8 -n 2 -w 1 -c 1" 2>&1) ||
      fail "$name: $coll exited $?"
    k=$(printf '%s\n' "$out" | sed -n 's/.*NET transport: .* x \([0-9]*\) sockets each.*/\1/p' | head -1)
    w=$want
    if [ "$want" = few ] && [ "${k:-1}" -gt 1 ]; then
      w="$((2 * k)) slots of $((1048576 / (2 * k) / 64 * 64)) bytes"
    elif [ "$want" = few ]; then
      w="2 slots of 524288 bytes"
    fi
    got=$(printf '%s\n' "$out" | grep -c "over NET, $w\$")
    [ "$got" = "$n" ] || fail "$name: $coll: $got of $n ranks logged '$w'"
    bad=$(wrong_rows)
    [ -z "$bad" ] || fail "$name: $coll: wrong results: $bad"
    rows=$(printf '%s\n' "$out" | grep -cE '^ +[0-9]+ ')
    [ "$rows" -ge 4 ] || fail "$name: $coll: $rows result rows"
  done
  echo "ok   $name: $w"
}
few=few many="8 slots of 131072 bytes"
cores=$(getconf _NPROCESSORS_ONLN)
geometry "2 hosts of 1" 2 2 "$few"
geometry "3 hosts of 1 on $cores cores" 3 3 "$few"
geometry "2 hosts of 2" 4 2 "$many"
geometry "CHORUS_NSLOTS=8 on rank 1 only" 2 2 "$many" \
  'if [ "$RANK" = 1 ]; then export CHORUS_NSLOTS=8; fi;'
