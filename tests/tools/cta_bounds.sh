#!/bin/sh
# cta_bounds.sh CHORUSRUN PERF_DIR - a CTA cap or floor asked for (config,
# NCCL_MAX_CTAS, NCCL_MIN_CTAS) is accepted, and every rank says at INFO
# that it is not applied, naming the values; none asked for, nothing said.
# Out of range (NCCL_MAX_CTAS=0) fails the init.
set -u
run=$1
perf=$2
. "$(dirname "$0")/perf_lib.sh"
go() {
  out=$(env "$@" NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT timeout 60 "$run" -n 2 --timeout 50 -- \
    "$perf/all_reduce_perf" -b 8 -e 1K -f 8 -n 2 -w 1 -c 1 2>&1)
}
go NCCL_MAX_CTAS=8 || fail "NCCL_MAX_CTAS=8: exited $?"
[ "$(printf '%s\n' "$out" | grep -c 'minCTAs unset, maxCTAs 8 .* accepted but not applied')" = 2 ] ||
  fail "NCCL_MAX_CTAS=8: not said by both ranks"
bad=$(wrong_rows)
[ -z "$bad" ] || fail "wrong results: $bad"
go NCCL_MIN_CTAS=2 NCCL_MAX_CTAS=4 || fail "NCCL_MIN_CTAS=2: exited $?"
printf '%s\n' "$out" | grep -q 'minCTAs 2, maxCTAs 4 .* accepted but not applied' ||
  fail "NCCL_MIN_CTAS=2 NCCL_MAX_CTAS=4: not said"
go X=1 || fail "no bounds: exited $?"
printf '%s\n' "$out" | grep -q 'maxCTAs' && fail "no bounds asked for, yet a line about them"
if go NCCL_MAX_CTAS=0; then fail "NCCL_MAX_CTAS=0 accepted"; fi
printf '%s\n' "$out" | grep -q 'maxCTAs' || fail "NCCL_MAX_CTAS=0: the error does not name maxCTAs"
echo "ok   CTA bounds accepted, said not to apply; out of range refused"
