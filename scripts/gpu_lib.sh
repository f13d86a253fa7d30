# shellcheck shell=bash
# gpu_lib.sh - sourced by the GPU scripts: building another Chorus's
# library, and checking which library the perf programs load.

# gpu_archs: CHORUS_CUDA_ARCHS for builds on this machine: $CHORUS_CUDA_ARCHS
# if set, else the compute capabilities of its GPUs ("90" on H100 and
# H200: half the nvcc time of the library's "80;90"), else "80;90".
gpu_archs() {
  local caps
  caps=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | tr -d '. ' |
    grep -E '^[0-9]+$' | sort -u | paste -sd';')
  echo "${CHORUS_CUDA_ARCHS:-${caps:-80;90}}"
}

# build_lib SRC DIR LOG: the library alone (libnccl.so.2) of the source
# tree SRC, with CUDA for this machine's GPUs (gpu_archs), into DIR; the
# output into LOG. Fails as cmake does.
build_lib() {
  cmake -S "$1" -B "$2" -DCHORUS_CUDA=ON -DCHORUS_CUDA_ARCHS="$(gpu_archs)" \
    -DCMAKE_BUILD_TYPE=Release -DCHORUS_BUILD_TESTS=OFF \
    -DCHORUS_BUILD_TOOLS=OFF -DCHORUS_WERROR=OFF >"$3" 2>&1 &&
    cmake --build "$2" -j "$(nproc)" --target nccl >>"$3" 2>&1
}

# loads PROGRAM DIR: the libnccl.so.2 PROGRAM loads with DIR first on
# LD_LIBRARY_PATH. The perf programs must load what LD_LIBRARY_PATH names
# (RUNPATH, not RPATH, to their build), or one library would be timed twice.
loads() {
  env LD_LIBRARY_PATH="$2" ldd "$1" | awk '$1 == "libnccl.so.2" { print $3 }'
}

# loads_from PROGRAM DIR: whether PROGRAM loads DIR/libnccl.so.2 that way.
loads_from() {
  [ "$(readlink -f "$(loads "$1" "$2")")" = "$(readlink -f "$2/libnccl.so.2")" ]
}
