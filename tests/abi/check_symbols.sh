#!/bin/sh
# Compares the dynamic symbols our libnccl.so.2 defines with NVIDIA's list
# (tests/abi/nccl-2.28.9.symbols, taken from NVIDIA's libnccl.so.2 2.28.9),
# and, where NVIDIA's library is installed, with that library directly.
# Also checks the soname and that ncclX are weak aliases of pncclX.
# usage: check_symbols.sh <our libnccl.so> <symbol list> [nvidia libnccl.so.2]
set -eu
ours=$1 list=$2 nvidia=${3:-}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
nm -D --defined-only "$ours" | awk '{print $3}' | sort > "$tmp/ours"
if ! diff -u "$list" "$tmp/ours"; then
  echo "FAIL: exported symbols differ from NVIDIA's list (- expected, + ours)"; exit 1
fi
if [ -n "$nvidia" ] && [ -f "$nvidia" ]; then
  nm -D --defined-only "$nvidia" | awk '{print $3}' | sort > "$tmp/nvidia"
  if ! diff -u "$tmp/nvidia" "$tmp/ours"; then
    echo "FAIL: exported symbols differ from $nvidia"; exit 1
  fi
  echo "symbols identical to $nvidia"
fi
soname=$(readelf -d "$ours" | sed -n 's/.*Library soname: \[\(.*\)\]/\1/p')
[ "$soname" = "libnccl.so.2" ] || { echo "FAIL: soname is '$soname'"; exit 1; }
weak=$(nm -D --defined-only "$ours" | awk '$2 == "W" {print $3}' | grep -c '^nccl')
strong=$(nm -D --defined-only "$ours" | awk '$2 == "T" {print $3}' | grep -c '^pnccl')
[ "$weak" -eq 52 ] && [ "$strong" -eq 52 ] || { echo "FAIL: $weak weak nccl*, $strong pncclX"; exit 1; }
echo "PASS: $(wc -l < "$tmp/ours") symbols, soname $soname, 52 weak ncclX + 52 pncclX"
