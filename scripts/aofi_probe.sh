#!/bin/bash
# aofi_probe.sh - readies AWS's aws-ofi-nccl network plugin (a third
# party's libnccl-net.so, ext-net v6, over libfabric) for Chorus's loader
# on the GPU machine, where its init finds the CUDA devices it insists on.
#   here:  scripts/aofi_probe.sh prepare
#          builds ../shared/third_party/aws-ofi-nccl-1.7.4 in /tmp (as its
#          README says; needs libfabric-dev, libhwloc-dev, autotools) and
#          puts into build-aofi/ the plugin, the shared libraries it needs
#          that a bare machine may lack, and build/'s test_netplug
#   there: scripts/aofi_probe.sh run   (with build-aofi carried)
#          loads the plugin through Chorus (FI_PROVIDER=tcp: libfabric's
#          tcp;ofi_rxm) and carries 0 B, 1000 B and 3 MiB over its device 0;
#          then every collective's correctness matrix (test_colls) on 4
#          host-memory ranks as 2 hosts (NCCL_HOSTID), their traffic
#          between the hosts through the plugin (NCCL_NET forces it), then
#          mismatched calls and communicators made one after another
#   there: scripts/aofi_probe.sh gpu   (build-aofi carried, after
#          scripts/gpu.sh build): the same for GPU buffers, every
#          collective's perf program (checked) on 2 hosts x 1 GPU
set -eu
cd "$(dirname "$0")/.."
case ${1:-} in
prepare)
  src=../shared/third_party/aws-ofi-nccl-1.7.4
  work=$(mktemp -d /tmp/aofi.XXXXXX)
  cp -r "$src"/. "$work"
  (cd "$work" && ./autogen.sh && ./configure --with-cuda=/usr/local/cuda --with-libfabric=/usr \
    --with-hwloc=/usr --disable-tests --prefix="$work/inst" && make -j2 && make install) \
    >"$work/build.log" 2>&1 || { tail -20 "$work/build.log"; exit 1; }
  rm -rf build-aofi && mkdir -p build-aofi/lib
  cp -L "$work/inst/lib/libnccl-net.so" build-aofi/lib/
  ldd "$work/inst/lib/libnccl-net.so" | awk '/=>/ {print $3}' | grep -v -E '/lib(c|m)\.so' |
    xargs -r -I{} cp -L {} build-aofi/lib/
  # the test programs from ${BUILD:-build} (a host-only build serves)
  cp "${BUILD:-build}"/tests/netplug/test_netplug "${BUILD:-build}"/tests/coll/test_colls \
    "${BUILD:-build}"/tests/coll/test_mismatch "${BUILD:-build}"/tests/coll/test_comm build-aofi/
  rm -rf "$work"
  echo "build-aofi ready: $(du -sh build-aofi | cut -f1); carry it and run: $0 run"
  ;;
run)
  export LD_LIBRARY_PATH=$PWD/build-aofi/lib FI_PROVIDER=${FI_PROVIDER:-tcp}
  export NCCL_NET_PLUGIN=$PWD/build-aofi/lib/libnccl-net.so
  if ldd "$NCCL_NET_PLUGIN" | grep "not found"; then exit 1; fi
  timeout 120 build-aofi/test_netplug --probe
  fail=0
  for coll in allreduce allgather reducescatter broadcast reduce alltoall gather scatter; do
    CHORUS_HOST_COMM=1 HARNESS_HOSTS=2 NCCL_NET="AWS Libfabric" timeout 300 \
      build-aofi/test_colls "$coll" procs 4 >"/tmp/aofi-$coll.log" 2>&1 || fail=1
    tail -1 "/tmp/aofi-$coll.log"
  done
  # Mismatched calls across it (every trial a communicator that fails and
  # is aborted, then the next made: the plugin's close keeps the receives
  # posted), and communicators made and destroyed one after another.
  export CHORUS_HOST_COMM=1 HARNESS_HOSTS=2 NCCL_NET="AWS Libfabric"
  timeout 300 build-aofi/test_mismatch procs 4 24 40 >/tmp/aofi-mismatch.log 2>&1 || fail=1
  tail -1 /tmp/aofi-mismatch.log
  timeout 120 build-aofi/test_comm comm_cycles procs 4 >/tmp/aofi-cycles.log 2>&1 || fail=1
  tail -1 /tmp/aofi-cycles.log
  [ $fail = 0 ] || { grep -h "WARN" /tmp/aofi-*.log | sort | uniq -c | head -20; exit 1; }
  ;;
gpu)
  # GPU buffers: 2 hosts x 1 GPU (one process each), every collective's
  # perf program with its check (-c 1) from 8 B to 16 MiB; the GPU
  # proxies stage through host memory and the hosts' traffic goes
  # through the plugin (NCCL_NET forces it; the INFO line proves it).
  export LD_LIBRARY_PATH=$PWD/build-aofi/lib FI_PROVIDER=${FI_PROVIDER:-tcp}
  export NCCL_NET_PLUGIN=$PWD/build-aofi/lib/libnccl-net.so NCCL_NET="AWS Libfabric"
  export NCCL_NVLS_ENABLE=0 NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=NET
  perf=${BUILD:-build-gpu}/tools/perf
  fail=0
  for coll in all_reduce all_gather reduce_scatter broadcast reduce alltoall gather scatter sendrecv; do
    log=/tmp/aofi-gpu-$coll.log
    timeout 200 "${BUILD:-build-gpu}"/tools/chorusrun -n 2 --hosts 2 --timeout 190 \
      "$perf/${coll}_perf" -d float -o sum -b 8 -e 16M -f 8 -n 2 -w 1 -c 1 >"$log" 2>&1 || fail=1
    via=$(grep -c 'NET/Plugin: using network AWS Libfabric' "$log" || true)
    [ "$via" -ge 2 ] || fail=1
    printf '%-15s %s; plugin chosen by %s rank(s)\n' "$coll" \
      "$(grep -E 'Out of bounds' "$log" | head -1 | tr -s ' ')" "$via"
  done
  [ $fail = 0 ] || { grep -h "WARN" /tmp/aofi-gpu-*.log | sort | uniq -c | head -20; exit 1; }
  ;;
*)
  echo "usage: $0 prepare|run|gpu"
  exit 2
  ;;
esac
