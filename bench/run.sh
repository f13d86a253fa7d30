#!/bin/sh
# run.sh - the one command: build what is missing, then compare Chorus with
# Open MPI and Gloo (bench/compare.py) and write tables, markdown and plots
# to $BENCH_OUT (default $CHORUS_BUILD/bench-results). Raw output stays out
# of the source tree; bench/summarize.py condenses a run into the CSV that
# bench/results/ keeps.
#
# usage: bench/run.sh [compare.py options]     e.g. bench/run.sh --quick
#   CHORUS_BUILD  Chorus build folder, relative to the repository (build)
#   BENCH_OUT     folder for the raw output (<CHORUS_BUILD>/bench-results)
#   BENCH_BUILD   where mpi_bench and gloo_bench go (bench/build)
#   CC_MPI        MPI compiler wrapper (mpicc.openmpi)
#   CXX           C++ compiler for gloo_bench (g++)
#
# Packages (Debian 12): openmpi-bin libopenmpi-dev libgloo-dev gnuplot-nox.
# A library whose program cannot be built is reported as FAIL ("not built")
# in every table; the others still run.
set -u
cd "$(dirname "$0")/.." || exit 1
build=${CHORUS_BUILD:-build}
bench_build=${BENCH_BUILD:-bench/build}
cc_mpi=${CC_MPI:-mpicc.openmpi}
cxx=${CXX:-g++}
jobs=$(nproc 2>/dev/null || echo 2)
mkdir -p "$bench_build"

# Chorus: configure and build only if the launcher or a perf program is missing.
need_chorus=0
for p in tools/chorusrun tools/perf/all_reduce_perf tools/perf/sendrecv_perf; do
  [ -x "$build/$p" ] || need_chorus=1
done
if [ "$need_chorus" = 1 ]; then
  echo "# building Chorus in $build"
  cmake -S . -B "$build" -DCHORUS_CUDA=OFF -DCHORUS_BUILD_TESTS=OFF >"$bench_build/chorus_build.log" 2>&1 &&
    cmake --build "$build" -j "$jobs" >>"$bench_build/chorus_build.log" 2>&1 ||
    echo "# WARNING: Chorus build failed (see $bench_build/chorus_build.log)"
fi

# Rebuilds $1 from $2 when missing or older than its source or the shared
# header.
stale() { [ ! -x "$1" ] || [ "$2" -nt "$1" ] || [ bench/bench_common.h -nt "$1" ]; }

if stale "$bench_build/mpi_bench" bench/mpi_bench.c; then
  if command -v "$cc_mpi" >/dev/null 2>&1; then
    echo "# building $bench_build/mpi_bench"
    "$cc_mpi" -std=c11 -O2 -Wall -Wextra -o "$bench_build/mpi_bench" bench/mpi_bench.c ||
      echo "# WARNING: mpi_bench did not build"
  else
    echo "# WARNING: $cc_mpi not found (apt-get install -y openmpi-bin libopenmpi-dev)"
  fi
fi

if stale "$bench_build/gloo_bench" bench/gloo_bench.cc; then
  if [ -f /usr/include/gloo/allreduce.h ] && command -v "$cxx" >/dev/null 2>&1; then
    echo "# building $bench_build/gloo_bench"
    gloo_ver=$(dpkg-query -W -f '${Version}' libgloo-dev 2>/dev/null || echo unknown)
    "$cxx" -std=c++17 -O2 -Wall -Wextra -DGLOO_PKG_VERSION="\"$gloo_ver\"" \
      -o "$bench_build/gloo_bench" bench/gloo_bench.cc -lgloo -lpthread ||
      echo "# WARNING: gloo_bench did not build"
  else
    echo "# WARNING: Gloo headers or $cxx not found (apt-get install -y libgloo-dev g++)"
  fi
fi

export BENCH_COMMAND="bench/run.sh $*"
exec python3 bench/compare.py --build "$build" --mpi-bench "$bench_build/mpi_bench" \
  --gloo-bench "$bench_build/gloo_bench" "$@"
