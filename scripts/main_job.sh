#!/bin/sh
# The main job: all_reduce_perf with result checking, one process per rank
# started by chorusrun: on the GPUs of this machine when the build has CUDA
# and sees some (one rank per GPU), else on host memory (4 ranks).
# usage: scripts/main_job.sh <build dir> [ranks]
set -eu
build=${1:-build}
ngpu=0
if command -v nvidia-smi >/dev/null 2>&1 && [ "${CHORUS_HOST_COMM:-0}" != 1 ]; then
  ngpu=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)
fi
if [ "$ngpu" -gt 0 ] && [ -n "$(find "$build" -name 'probe.cu.o' 2>/dev/null | head -1)" ]; then
  ranks=${2:-$ngpu}
  echo "# main job: $ranks rank(s) on GPUs"
else
  ranks=${2:-4}
  echo "# main job: $ranks rank(s) on host memory"
fi
exec "$build/tools/chorusrun" -n "$ranks" --timeout 600 -- \
  "$build/tools/perf/all_reduce_perf" -b 8 -e 64M -f 4 -n 20 -w 5 -c 1
