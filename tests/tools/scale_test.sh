#!/bin/sh
# scale_test.sh SCALE_SH BUILD - 72 host-memory ranks on one host through
# scripts/scale.sh: all initialise, no result is wrong, and the slots are
# smaller than the 128 KiB the defaults give (the host's FIFOs bounded).
set -u
fail() { echo "FAIL: $*"; exit 1; }
out=$(BUILD=$2 "$1" 72) || fail "scale.sh exited $?"
printf '%s\n' "$out"
row=$(printf '%s\n' "$out" | grep '^72,1,')
[ -n "$row" ] || fail "no row for 72 ranks"
slot=$(printf '%s\n' "$row" | cut -d, -f6)
wrong=$(printf '%s\n' "$row" | cut -d, -f8)
[ "$wrong" = no ] || fail "72 ranks: $wrong"
[ -n "$slot" ] && [ "$slot" -lt 131072 ] || fail "slots of ${slot:-?} bytes: the FIFOs were not bounded"
echo "scale: 72 ranks ok, slots of $slot bytes"
