#!/bin/bash
# torch_ddp.sh - examples/pytorch_ddp.py (PyTorch DistributedDataParallel
# and the other calls training makes, each checked) under torchrun on the
# GPU machine, on Chorus (its libnccl.so.2 preloaded) and on NVIDIA's NCCL
# (PyTorch's own), in two shapes:
#   1 node:  one torchrun, a process per GPU;
#   2 nodes: two torchruns (--nnodes 2, --node-rank 0 and 1) on this
#            machine, NCCL_HOSTID=node0 and node1 making them two hosts to
#            both libraries, each with its half of the GPUs
#            (CUDA_VISIBLE_DEVICES), talking over loopback TCP.
# usage: scripts/torch_ddp.sh   (after scripts/gpu.sh build; BUILD as there,
#        or CHORUS_LIB=path of the libnccl.so.2; CTest runs it as
#        examples-gpu.pytorch_ddp in CUDA builds); LIBS="chorus" or
#        "nccl" runs one library only; TRACE=dir: Chorus's runs also write
#        their timelines and statistics under dir/<shape>, each checked by
#        tests/gpu/trace_ddp_check.py)
# Prints one line per run: shape, library, result, seconds, the library
# file the ranks loaded. Exit 1 if a run fails.
set -u
cd "$(dirname "$0")/.." || exit 1
build=${BUILD:-build-gpu}
chorus=${CHORUS_LIB:-$PWD/$build/libnccl.so.2}
case " ${LIBS:-chorus} " in *" chorus "*) [ -f "$chorus" ] || { echo "no $chorus: build first"; exit 1; } ;; esac
# exit 77 (skipped, for CTest) where PyTorch is missing
if command -v torchrun >/dev/null; then torchrun=(torchrun)
elif python3 -c 'import torch' 2>/dev/null; then torchrun=(python3 -m torch.distributed.run)
else echo "no PyTorch here"; exit 77; fi
ngpu=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
[ "$ngpu" -ge 2 ] || { echo "needs 2 GPUs, found $ngpu"; exit 77; }
# NCCL_DEBUG=VERSION (or more): the banner names the library (Chorus's says +chorus)
export NCCL_NVLS_ENABLE=0 NCCL_SOCKET_IFNAME=lo CHORUS_OP_TIMEOUT=30 OMP_NUM_THREADS=1 NCCL_DEBUG=${NCCL_DEBUG:-VERSION}
logs=${OUT:-/tmp}/torch-ddp-logs
mkdir -p "$logs"
half=$((ngpu / 2))
gpus() { seq -s, "$1" "$(($1 + half - 1))"; } # the GPUs of node $1's half
port=29500
rc=0
for lib in ${LIBS:-chorus nccl}; do
  for shape in 1node 2nodes; do
    pre=()
    [ $lib = chorus ] && pre=(env LD_PRELOAD="$chorus")
    traced=
    if [ $lib = chorus ] && [ -n "${TRACE:-}" ]; then
      traced=$TRACE/$shape
      rm -rf "$traced" && mkdir -p "$traced"
      pre+=(CHORUS_TRACE="$traced/trace.%p.json" CHORUS_STATS_INTERVAL=1
        CHORUS_STATS_FILE="$traced/stats.%p.jsonl")
    fi
    log=$logs/${shape}_$lib.log
    port=$((port + 10))
    start=$SECONDS
    if [ $shape = 1node ]; then
      timeout 240 "${pre[@]}" "${torchrun[@]}" --standalone --nproc-per-node "$ngpu" \
        examples/pytorch_ddp.py >"$log" 2>&1
      status=$?
    else
      pids=()
      for n in 0 1; do
        CUDA_VISIBLE_DEVICES=$(gpus $((n * half))) NCCL_HOSTID=node$n timeout 240 "${pre[@]}" \
          "${torchrun[@]}" --nnodes 2 --node-rank $n --nproc-per-node $half --master-addr 127.0.0.1 \
          --master-port $port examples/pytorch_ddp.py >"$log.$n" 2>&1 &
        pids+=($!)
      done
      status=0
      for p in "${pids[@]}"; do wait "$p" || status=$?; done
      cat "$log.0" "$log.1" >"$log"
      rm -f "$log.0" "$log.1"
    fi
    result=$(grep -o 'pytorch_ddp: all checks passed' "$log" | head -1)
    # the run counts only on the library it was meant for
    banner=$(grep -c 'NCCL version .*+chorus' "$log")
    if [ $lib = chorus ] && [ "$banner" -eq 0 ]; then result="FAILED (no Chorus banner)"
    elif [ $lib = nccl ] && [ "$banner" -ne 0 ]; then result="FAILED (Chorus loaded)"
    elif [ $status -eq 0 ] && [ -n "$result" ]; then result=passed
    else result="FAILED (exit $status)"; fi
    [ "$result" = passed ] || rc=1
    loaded=$(grep -o 'NCCL: [^)]*' "$log" | head -1)
    printf '%-7s %-7s %-20s %4d s  %s\n' $shape $lib "$result" $((SECONDS - start)) "$loaded"
    [ "$result" = passed ] || tail -15 "$log"
    if [ -n "$traced" ]; then
      python3 tests/gpu/trace_ddp_check.py "$traced" | sed 's/^/    /'
      [ "${PIPESTATUS[0]}" -eq 0 ] || rc=1
    fi
  done
done
exit $rc
