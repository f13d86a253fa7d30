#!/bin/sh
# check_local_symbols.sh OBJ... - fails when two of the CUDA objects define
# the same weak (inline or template) host symbol, the unwinder's DW.ref.*
# aside. The linker keeps one copy of such a symbol, so two kernel files'
# helpers of one name (say each file's launcher<T, REDUCE>::run) would
# silently become one, every file then launching one file's kernel. File-local helpers belong in an anonymous
# namespace, which gives them a name per file. Runs without a GPU.
set -u
[ $# -gt 0 ] || { echo "usage: $0 OBJ..."; exit 2; }
command -v nm >/dev/null 2>&1 || { echo "nm not found: skipped"; exit 77; }
dups=$(for o in "$@"; do
  nm --defined-only "$o" | awk '$2 == "W" || ($2 == "V" && $3 !~ /^DW\.ref\./) { print $3 }' | sort -u
done | sort | uniq -d)
if [ -n "$dups" ]; then
  echo "weak symbols defined in more than one CUDA object (make them file-local):"
  echo "$dups" | c++filt | sed 's/^/  /'
  exit 1
fi
echo "ok: no weak symbol shared between $# CUDA objects"
