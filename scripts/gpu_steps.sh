#!/bin/bash
# gpu_steps.sh COLL BYTES [VAR=value...] - where a ring or chain launch's
# time goes, step by step: a library built with -DCHORUS_STEP_TIMING
# (src/device/ring.cu) runs COLL_perf at one size, and CTA 0 of every rank
# prints, per step of a chunk position (up to 4), the time spent waiting
# for the peers' words and the time spent copying and handing the slots
# on, summed over the launch. Nsight Compute cannot profile kernels that
# wait for each other across processes; this can.
#
#   scripts/gpu_steps.sh reduce_scatter 1G NCCL_MAX_CTAS=8
#
# RANKS (default 2) processes, one GPU each, through chorusrun; the perf
# programs of $BUILD (build-gpu: scripts/gpu.sh build). The timing library
# is built once into build-steps (library only, about a minute); the last
# launch's lines are printed, one per rank.
set -u
cd "$(dirname "$0")/.." || exit 1
. scripts/gpu_lib.sh
[ $# -ge 2 ] || { sed -n 2,16p "$0"; exit 2; }
coll=$1 bytes=$2
shift 2
build=${BUILD:-build-gpu}
ranks=${RANKS:-2}
[ -x "$build/tools/perf/${coll}_perf" ] || { echo "no $build/tools/perf/${coll}_perf: build first"; exit 1; }
if [ ! -f build-steps/libnccl.so.2 ]; then
  # CUDAFLAGS seeds CMAKE_CUDA_FLAGS at a build tree's first configuration.
  CUDAFLAGS=-DCHORUS_STEP_TIMING build_lib . build-steps /tmp/chorus-steps-build.log ||
    { tail -20 /tmp/chorus-steps-build.log; exit 1; }
fi
export NCCL_NVLS_ENABLE=0
out=$(env LD_LIBRARY_PATH="$PWD/build-steps" "$@" timeout 120 "$build/tools/chorusrun" -n "$ranks" \
  --timeout 100 "$build/tools/perf/${coll}_perf" -b "$bytes" -e "$bytes" -n 2 -w 1 -c 0 2>&1)
rc=$?
lines=$(printf '%s\n' "$out" | grep '^chorus steps:')
[ -n "$lines" ] || { printf '%s\n' "$out" | tail -20; echo "no step lines (not a ring or chain launch?)"; exit 1; }
printf '%s\n' "$lines" | tail -n "$ranks"
printf '%s\n' "$out" | grep -E '^ +[0-9]+ +[0-9]+ ' | tail -1
exit $rc
