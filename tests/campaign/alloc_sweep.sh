#!/bin/sh
# alloc_sweep.sh TRIAL [FIRST COUNT] - failed host allocations at init,
# swept: COUNT trials (default 40) of 3 ranks, seeds FIRST.. (default 5000),
# each failing one rank's n-th allocation (the seed picks the rank and n,
# n up to ALLOC_MAX, default 60).
# Every trial must end with every rank failed, naming the faulty rank
# (ok=1): a rank whose own error is only a consequence (a peer's shared
# memory already gone) must name the rank that failed first.
[ $# -ge 1 ] || { echo "usage: $0 TRIAL [FIRST COUNT]"; exit 2; }
trial=$1 first=${2:-5000} count=${3:-40}
bad=0 i=0
while [ "$i" -lt "$count" ]; do
  seed=$((first + i))
  out=$(CHORUS_OP_TIMEOUT=20 ALLOC_MAX="${ALLOC_MAX:-60}" timeout 60 "$trial" alloc 3 "$seed" 2>&1)
  if ! printf '%s\n' "$out" | grep -q '^trial .* ok=1$'; then
    bad=$((bad + 1))
    printf '%s\n' "$out" | grep -E '^trial |^  +rank ' | tail -5
  fi
  i=$((i + 1))
done
echo "alloc sweep: $bad of $count trials failed"
[ "$bad" -eq 0 ]
