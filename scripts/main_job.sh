#!/bin/sh
# The main job: all_reduce_perf with result checking on RANKS ranks of this
# machine, one process per rank started by chorusrun, on host memory.
# usage: scripts/main_job.sh <build dir> [ranks]
set -eu
build=${1:-build}
ranks=${2:-4}
exec "$build/tools/chorusrun" -n "$ranks" --timeout 600 -- \
  "$build/tools/perf/all_reduce_perf" -b 8 -e 64M -f 4 -n 20 -w 5 -c 1
