#!/bin/sh
# Runs the layout program built against our header and against NVIDIA's and
# requires identical output. usage: compare_layout.sh <ours> <nvidia>
set -eu
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$1" > "$tmp/ours" || { cat "$tmp/ours"; echo "FAIL: layout (our header) reported a mismatch"; exit 1; }
"$2" > "$tmp/nvidia" || { cat "$tmp/nvidia"; echo "FAIL: layout (NVIDIA header) reported a mismatch"; exit 1; }
if ! diff -u "$tmp/nvidia" "$tmp/ours"; then
  echo "FAIL: ABI facts differ between NVIDIA's nccl.h and ours"; exit 1
fi
echo "PASS: $(wc -l < "$tmp/ours") ABI facts identical"
