#!/bin/bash
# nccl_tests_mpi.sh - NVIDIA's nccl-tests across hosts on the GPU machine,
# which has no MPI of its own: one process per rank needs an MPI build.
#   here:  scripts/nccl_tests_mpi.sh prepare
#          (needs Debian's openmpi-bin and libopenmpi-dev, and nvcc)
#          copies Open MPI's runtime (mpirun, its libraries, components
#          and help files, laid out as Debian installs them) into
#          build-mpi/ and builds ../shared/third_party/nccl-tests-2.19.6
#          with MPI=1 against NVIDIA's nccl.h in /tmp, keeping its *_perf
#          programs as build-mpi/nccl-tests.tar.xz (the programs are 6 MB
#          each; the archive is small enough to carry)
#   there: scripts/nccl_tests_mpi.sh run   (build-mpi carried, after
#          scripts/gpu.sh build)
#          every nccl-tests program with its check (-c 1), 8 B to 64 MiB,
#          started by mpirun as H hosts (NCCL_HOSTID per process) of one
#          GPU-rank each, on Chorus (build-gpu) and on NVIDIA's NCCL; a
#          row per program and library with its wrong count. NET=aofi adds
#          the runs with aws-ofi-nccl carrying the hosts' traffic
#          (build-aofi carried, scripts/aofi_probe.sh prepare).
#          LAYOUTS="2x1 2x2" (H hosts x G ranks; default: 2x1, and 2x2 and
#          4x1 where there are 4 GPUs); LIBS="chorus", NETS="aofi" pick
#          some of the runs
set -eu
cd "$(dirname "$0")/.."
progs="all_reduce all_gather reduce_scatter broadcast reduce alltoall sendrecv scatter gather hypercube"
case ${1:-} in
prepare)
  command -v mpirun >/dev/null && [ -f /usr/lib/x86_64-linux-gnu/openmpi/include/mpi.h ] ||
    { echo "needs openmpi-bin and libopenmpi-dev"; exit 1; }
  work=$(mktemp -d /tmp/nt-mpi.XXXXXX)
  # MPI_HOME as nccl-tests' Makefile reads it: include/ and lib/libmpi.so
  mkdir -p "$work/mpi/lib"
  ln -s /usr/lib/x86_64-linux-gnu/openmpi/include "$work/mpi/include"
  ln -s /usr/lib/x86_64-linux-gnu/libmpi.so.40 "$work/mpi/lib/libmpi.so"
  if [ -x "${NT_BUILD:-}/all_reduce_perf" ]; then # built before (NT_BUILD=its build/)
    mkdir -p "$work/nt" && ln -s "$(readlink -f "$NT_BUILD")" "$work/nt/build"
  else
    cp -r ../shared/third_party/nccl-tests-2.19.6 "$work/nt"
  fi
  [ -x "$work/nt/build/all_reduce_perf" ] || (cd "$work/nt" && make -j2 MPI=1 MPI_HOME="$work/mpi" NCCL_HOME=/usr/local/cuda \
    CUDA_HOME=/usr/local/cuda NVCC_GENCODE="-gencode=arch=compute_90,code=sm_90") \
    >"$work/build.log" 2>&1 || { tail -20 "$work/build.log"; exit 1; }
  rm -rf build-mpi && mkdir -p build-mpi/lib
  (cd "$work/nt/build" && tar -cJf - ./*_perf) >build-mpi/nccl-tests.tar.xz
  # Open MPI relocates to OPAL_PREFIX when its tree keeps the installed
  # layout under it; PMIx likewise to PMIX_INSTALL_PREFIX.
  r=build-mpi/root/usr
  mkdir -p $r/bin $r/lib/x86_64-linux-gnu $r/share
  for b in mpirun orterun orted; do cp -L /usr/bin/$b $r/bin/ 2>/dev/null || true; done
  cp -r /usr/lib/x86_64-linux-gnu/openmpi /usr/lib/x86_64-linux-gnu/pmix2 $r/lib/x86_64-linux-gnu/
  rm -rf $r/lib/x86_64-linux-gnu/openmpi/include
  cp -r /usr/share/openmpi $r/share/
  [ -d /usr/share/pmix ] && cp -r /usr/share/pmix $r/share/
  # the shared libraries they need beyond glibc's
  { ldd /usr/bin/orterun "$work/nt/build/all_reduce_perf" /usr/lib/x86_64-linux-gnu/libmpi.so.40
    find /usr/lib/x86_64-linux-gnu/pmix2 /usr/lib/x86_64-linux-gnu/openmpi -name '*.so' -exec ldd {} + 2>/dev/null
  } | awk '/=> \// {print $3}' | sort -u |
    grep -v -E '/lib(c|m|pthread|dl|rt|z|gcc_s|stdc\+\+|nccl|cuda|cudart)\.so' |
    grep -v -E '/(libfabric|libucp|libucs|libuct|libucm|libpsm|libibverbs|librdmacm|libnl)' |
    xargs -r -I{} cp -L {} build-mpi/lib/
  rm -rf "$work"
  echo "build-mpi ready: $(du -sh build-mpi | cut -f1); carry it and run: $0 run"
  ;;
run)
  mpi=$PWD/build-mpi
  [ -f "$mpi/nccl-tests.tar.xz" ] || { echo "no build-mpi: run '$0 prepare' here and carry it"; exit 1; }
  export OPAL_PREFIX=$mpi/root/usr PATH=$mpi/root/usr/bin:$PATH
  export PMIX_MCA_mca_base_component_path=$mpi/root/usr/lib/x86_64-linux-gnu/pmix2/lib/pmix
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
  nt=$(mktemp -d /tmp/nccl-tests.XXXXXX)
  tar -C "$nt" -xJf "$mpi/nccl-tests.tar.xz"
  chorus=$PWD/${BUILD:-build-gpu}
  [ -f "$chorus/libnccl.so.2" ] || { echo "no $chorus/libnccl.so.2: scripts/gpu.sh build first"; exit 1; }
  ref=${NCCL_REF_LIB:-$(python3 -c 'import nvidia.nccl, os; print(os.path.join(list(nvidia.nccl.__path__)[0], "lib"))' 2>/dev/null)}
  libs="chorus"
  [ -f "$ref/libnccl.so.2" ] && libs="chorus nccl"
  libs=${LIBS:-$libs}
  ngpu=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
  layouts=${LAYOUTS:-2x1}
  [ -n "${LAYOUTS:-}" ] || [ "$ngpu" -lt 4 ] || layouts="2x1 2x2 4x1"
  nets=sock
  [ "${NET:-}" = aofi ] && nets="sock aofi"
  nets=${NETS:-$nets}
  logs=${OUT:-/tmp}/nccl-tests-logs
  mkdir -p "$logs"
  export NCCL_NVLS_ENABLE=0 NCCL_SOCKET_IFNAME=lo NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET
  echo "# nccl-tests (MPI) across hosts: $ngpu GPU(s), layouts $layouts, libraries $libs, networks $nets"
  printf '%-6s %-7s %-5s %-15s %7s %9s  %s\n' layout library net program wrong "busbw" "which library and network served it"
  fail=0
  for layout in $layouts; do
    h=${layout%x*} g=${layout#*x} np=$((${layout%x*} * ${layout#*x}))
    for lib in $libs; do
      for net in $nets; do
        [ "$net" = aofi ] && [ "$lib" = nccl ] && continue # NCCL's own plugin loading is not ours to test
        libdir=$chorus
        [ "$lib" = nccl ] && libdir=$ref
        env=(-x LD_LIBRARY_PATH="$libdir:$mpi/lib")
        if [ "$net" = aofi ]; then
          env=(-x LD_LIBRARY_PATH="$libdir:$mpi/lib:$PWD/build-aofi/lib" -x FI_PROVIDER=tcp
            -x NCCL_NET_PLUGIN="$PWD/build-aofi/lib/libnccl-net.so" -x NCCL_NET="AWS Libfabric")
        fi
        for prog in $progs; do
          log=$logs/${layout}_${lib}_${net}_$prog.log
          # Each process is a host of its own group of g ranks (NCCL_HOSTID)
          # on GPU rank % GPUs (NCCL_TESTS_DEVICE: nccl-tests would pick
          # its local rank, all processes being on one machine).
          timeout 240 mpirun -np "$np" --bind-to none "${env[@]}" -x NCCL_NVLS_ENABLE -x NCCL_SOCKET_IFNAME \
            -x PMIX_MCA_mca_base_component_path \
            -x NCCL_DEBUG -x NCCL_DEBUG_SUBSYS -x CHORUS_OP_TIMEOUT=60 \
            sh -c "NCCL_HOSTID=host\$((OMPI_COMM_WORLD_RANK / $g)) NCCL_TESTS_DEVICE=\$((OMPI_COMM_WORLD_RANK % $ngpu)) exec \"\$0\" \"\$@\"" \
            "$nt/${prog}_perf" -b 8 -e "${NT_E:-64M}" -f 4 -g 1 -c 1 -n 5 -w 2 >"$log" 2>&1 || echo "  exit $? ($log)"
          wrong=$(awk '/Out of bounds values/ {print $7}' "$log")
          bw=$(awk '/Avg bus bandwidth/ {print $6}' "$log")
          # the evidence: Chorus's banner carries "+chorus"; an inter-host
          # transport line per library; aws-ofi-nccl names itself
          who=$(grep -c '+chorus' "$log" || true)
          case $lib-$net in
          chorus-sock) via=$(grep -cE 'NET transport: [0-9]+ peer' "$log" || true) ;;
          chorus-aofi) via=$(grep -c 'NET/Plugin: using network AWS Libfabric' "$log" || true) ;;
          nccl-sock) via=$(grep -cE 'NET/Socket|via NET/Socket' "$log" || true) ;;
          esac
          ok=1
          [ "$wrong" = 0 ] || ok=0
          if [ "$lib" = chorus ]; then [ "$who" -ge "$np" ] || ok=0; else [ "$who" = 0 ] || ok=0; fi
          [ "$via" -ge 1 ] || ok=0
          [ $ok = 1 ] || fail=1
          printf '%-6s %-7s %-5s %-15s %7s %9s  %s%s\n' "$layout" "$lib" "$net" "$prog" "${wrong:--}" "${bw:--}" \
            "chorus banners $who/$np, network lines $via" "$([ $ok = 1 ] || echo '  FAIL')"
        done
      done
    done
  done
  tar -C "$logs" -czf "${OUT:-/tmp}/nccl-tests-logs.tgz" . && rm -rf "$logs" "$nt"
  [ $fail = 0 ] && echo "nccl-tests across hosts: all passed" || { echo "nccl-tests across hosts: FAILED"; exit 1; }
  ;;
*)
  echo "usage: $0 prepare|run"
  exit 2
  ;;
esac
