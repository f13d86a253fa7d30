#!/bin/sh
# auto_threads.sh TEST_COLLS N: NCCL_SOCKET_NTHREADS=auto decides as its
# rule says. N processes, each a host of its own on this machine (so all
# N count against its CPUs), run test_colls's AllGather matrix; every
# rank's NET transport line must say 2 threads with 2 sockets per peer
# and channel where CPUs / (2 N) - 1 >= 2 (computed here from this
# machine's CPU count), else the calling thread with 1 socket; with
# CHORUS_SOCKET_THREADS_FIT=0 always the former, with
# NCCL_SOCKET_NTHREADS=0 always the latter. One lane each
# (CHORUS_HOST_LANES=1): a lane's connections say their own line.
set -u
[ $# -eq 2 ] || { echo "usage: $0 TEST_COLLS N"; exit 2; }
prog=$1 n=$2
cpus=$(getconf _NPROCESSORS_ONLN)
threads="2 sockets each, moved by 2 thread(s) in calls that only move large messages"
alone="1 sockets each, moved by the calling thread"
if [ $((cpus / (2 * n) - 1)) -ge 2 ]; then rule=$threads; else rule=$alone; fi
check() { # what, expected line, environment...
  what=$1 want=$2
  shift 2
  out=$(env "$@" HARNESS_HOSTS="$n" CHORUS_HOST_LANES=1 NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=NET NCCL_SOCKET_IFNAME=lo \
    timeout 120 "$prog" allgather procs "$n" 2>&1) || {
    printf '%s\n' "$out" | tail -20
    echo "$what: allgather procs $n failed"
    exit 1
  }
  got=$(printf '%s\n' "$out" | grep -c "NET transport: .*$want")
  if [ "$got" != "$n" ]; then
    printf '%s\n' "$out" | grep "NET transport"
    echo "$what: $got of $n ranks said '$want'"
    exit 1
  fi
  echo "$what: every rank: $want"
}
check "auto, $cpus CPUs, $n ranks" "$rule"
check "auto, the cores not counted" "$threads" CHORUS_SOCKET_THREADS_FIT=0
check "none asked" "$alone" NCCL_SOCKET_NTHREADS=0 CHORUS_SOCKET_THREADS_FIT=0
