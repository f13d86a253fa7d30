#!/bin/sh
# cta_bounds.sh CHORUSRUN PERF_DIR - CTA bounds on host-memory ranks: a
# floor asked for (minCTAs, NCCL_MIN_CTAS) is accepted and every rank says
# at INFO that it is not applied; a cap (NCCL_MAX_CTAS) is accepted (it
# applies to GPU kernels: tests/gpu/checks.tsv, max_ctas rows); none asked
# for, nothing said. Out of range (NCCL_MAX_CTAS=0) fails the init.
set -u
run=$1
perf=$2
. "$(dirname "$0")/perf_lib.sh"
go() {
  out=$(env "$@" NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT timeout 60 "$run" -n 2 --timeout 50 -- \
    "$perf/all_reduce_perf" -b 8 -e 1K -f 8 -n 2 -w 1 -c 1 2>&1)
}
go NCCL_MIN_CTAS=2 NCCL_MAX_CTAS=8 || fail "NCCL_MIN_CTAS=2 NCCL_MAX_CTAS=8: exited $?"
[ "$(printf '%s\n' "$out" | grep -c 'minCTAs 2 .* accepted but not applied')" = 2 ] ||
  fail "NCCL_MIN_CTAS=2: not said by both ranks"
bad=$(wrong_rows)
[ -z "$bad" ] || fail "wrong results: $bad"
go X=1 || fail "no bounds: exited $?"
printf '%s\n' "$out" | grep -q 'minCTAs' && fail "no bounds asked for, yet a line about them"
if go NCCL_MAX_CTAS=0; then fail "NCCL_MAX_CTAS=0 accepted"; fi
printf '%s\n' "$out" | grep -q 'maxCTAs' || fail "NCCL_MAX_CTAS=0: the error does not name maxCTAs"
echo "ok   CTA bounds accepted, the floor said not to apply; out of range refused"
