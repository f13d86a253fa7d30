#!/bin/sh
# `make install` output works for a consumer: installs the build into a
# temporary prefix, then builds a small program against it twice, with
# pkg-config and with CMake's find_package(Chorus), and runs both.
# usage: install_test.sh <build dir> <source dir> [extra compiler flags]
set -eu
build=$1 src=$2 extra=${3:-}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cmake --install "$build" --prefix "$tmp/prefix" >/dev/null
libdir=$(ls -d "$tmp"/prefix/lib*/ | head -1)
for f in "$tmp/prefix/include/nccl.h" "$tmp/prefix/include/chorus.h" "${libdir}libnccl.so.2" \
         "${libdir}libnccl.so" "${libdir}libnccl_static.a" "${libdir}pkgconfig/nccl.pc" \
         "${libdir}cmake/Chorus/ChorusConfig.cmake"; do
  [ -e "$f" ] || { echo "FAIL: $f was not installed"; exit 1; }
done
cat > "$tmp/app.c" <<'APP'
#include <chorus.h>
#include <stdio.h>
int main(void) {
  ncclUniqueId id;
  ncclComm_t comm;
  float x[3] = {1, 2, 3};
  if (ncclGetUniqueId(&id) || ncclCommInitRank(&comm, 1, id, 0)) return 1;
  if (ncclAllReduce(x, x, 3, ncclFloat, ncclSum, comm, NULL) || x[2] != 3) return 1;
  int host = chorusCommIsHost(comm);
  ncclCommDestroy(comm);
  printf("installed library works (host communicator: %d)\n", host);
  return host == 1 ? 0 : 1;
}
APP
export NCCL_SOCKET_IFNAME=lo CHORUS_HOST_COMM=1
if command -v pkg-config >/dev/null; then
  PKG_CONFIG_PATH="${libdir}pkgconfig" cc -std=c11 $extra -DCHORUS_NCCL_NO_CUDA_INCLUDE "$tmp/app.c" \
    -o "$tmp/app_pc" $(PKG_CONFIG_PATH="${libdir}pkgconfig" pkg-config --cflags --libs nccl) \
    -Wl,-rpath,"$libdir"
  "$tmp/app_pc"
else
  echo "pkg-config not installed: skipping that half"
fi
mkdir "$tmp/cm"
cat > "$tmp/cm/CMakeLists.txt" <<'CM'
cmake_minimum_required(VERSION 3.18)
project(app C)
find_package(Chorus REQUIRED)
add_executable(app ../app.c)
target_compile_definitions(app PRIVATE CHORUS_NCCL_NO_CUDA_INCLUDE)
target_link_libraries(app PRIVATE Chorus::nccl)
CM
cmake -S "$tmp/cm" -B "$tmp/cm/build" -DCMAKE_PREFIX_PATH="$tmp/prefix" \
  -DCMAKE_C_FLAGS="$extra" -DCMAKE_EXE_LINKER_FLAGS="$extra" >/dev/null
cmake --build "$tmp/cm/build" >/dev/null
"$tmp/cm/build/app"
echo "PASS: install tree usable with pkg-config and find_package"
