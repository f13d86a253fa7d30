#!/bin/bash
# gpu_tune.sh - sweeps for choosing rules and settings: Chorus alone under
# each value of one setting, then a table of us per size with a column per
# value (after scripts/gpu.sh build; on a machine with GPUs).
#
#   sweep label VAR "values" command...
# runs the command once per value with VAR=value; a value of the form
# NAME=value sets that variable instead (so one sweep can set NCCL_ALGO in
# one column and CHORUS_TUNE in the next), "-" sets nothing (as Chorus is),
# "nccl" runs NVIDIA's library ($NCCL_REF_LIB, or the nvidia-nccl Python
# package) and "base" the Chorus library in $BASE_LIB, for reference.
# Which algorithm runs at which size is a rule, so most sweeps are over
# CHORUS_TUNE strings (chorus_info --rules: the defaults they go before;
# chorus_info --explain FUNC SIZE --gpu: what a string does); the rest are
# over structural settings (FIFO, steps, CTAs, slots).
# TUNE=regex runs only the sweeps whose labels match. Output under $OUT:
# summary.txt (unless scripts/gpu.sh writes it) and tune-logs.tgz.
set -u
set -f # values hold '*' (2M*n): never file names
cd "$(dirname "$0")/.." || exit 1
out=${OUT:-/tmp/chorus-gpu}
mkdir -p "$out"
if [ -z "${CHORUS_GPU_TEED:-}" ]; then
  exec > >(tee "$out/summary.txt") 2>&1
  echo "# $(date -u +%FT%TZ) $(hostname): $(nvidia-smi -L 2>/dev/null | grep -c '^GPU') GPU(s), mode tune"
fi
build=${BUILD:-build-gpu}
perf=$build/tools/perf
run=$build/tools/chorusrun
[ -x "$perf/all_reduce_perf" ] || { echo "no $perf/all_reduce_perf: build first (scripts/gpu.sh build)"; exit 1; }
logs=$(mktemp -d /tmp/chorus-gpu-tune.XXXXXX)
export NCCL_NVLS_ENABLE=0 # NVLink multicast: Chorus never uses it
export CHORUS_OP_TIMEOUT=${CHORUS_OP_TIMEOUT:-30}
ngpu=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
ref=${NCCL_REF_LIB:-$(python3 -c 'import nvidia.nccl, os; print(os.path.join(list(nvidia.nccl.__path__)[0], "lib"))' 2>/dev/null)}
[ -f "$ref/libnccl.so.2" ] || ref=""
base=${BASE_LIB:-}
[ -z "$base" ] || [ -f "$base/libnccl.so.2" ] || { echo "BASE_LIB=$base holds no libnccl.so.2"; exit 1; }

sweep() {
  local label=$1 var=$2 values=$3 i=0 v
  shift 3
  [ -n "${TUNE:-}" ] && ! [[ $label =~ $TUNE ]] && return 0
  for v in $values; do
    i=$((i + 1))
    local set=()
    case $v in
      -) ;;
      nccl) [ -n "$ref" ] || continue; set=(LD_LIBRARY_PATH="$ref") ;;
      base) [ -n "$base" ] || continue; set=(LD_LIBRARY_PATH="$base") ;;
      [[:upper:]]*=*) set=("$v") ;;
      *) set=("$var=$v") ;;
    esac
    timeout 90 env ${set[@]+"${set[@]}"} "$@" -n 30 -w 5 -c 0 -T 60 >"$logs/sweep_${label}_$i.log" 2>&1 ||
      echo "  sweep $label ${set[*]}: exit $?"
  done
  # shellcheck disable=SC2086 # a value per word
  python3 - "$logs" "$label" "$var" $values <<'EOF'
import re, sys
logs, label, var, values = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
row = re.compile(r"^\s+(\d+)\s+(\d+)\s+\S+\s+\S+\s+-?\d+\s+([\d.]+)")
runs = []
for i, v in enumerate(values, 1):
    t = {}
    try:
        for line in open(f"{logs}/sweep_{label}_{i}.log", errors="replace"):
            m = row.match(line)
            if m: t[int(m.group(1))] = float(m.group(3))
    except OSError:
        pass
    runs.append(t)
print(f"\n# {label}: us by {var}")
for i, v in enumerate(values, 1):
    print(f"#   {i}: {'(as is)' if v == '-' else v}")
print(f"  {'size':>10}  " + "  ".join("%8s" % i for i in range(1, len(values) + 1)))
for size in sorted(set().union(*runs)):
    print(f"  {size:>10}  " + "  ".join("%8s" % ("%.1f" % r[size] if size in r else "-") for r in runs))
EOF
}
# NCCL_ALGO / CHORUS_TUNE spell AllReduce "allreduce": the perf name without '_'.
key() { echo "${1//_/}"; }

if [ "$ngpu" -lt 2 ]; then
  echo "# tune: needs 2 GPUs, $ngpu visible"
  exit 1
fi
r2=("$run" -n 2 --timeout 80)
r4=("$run" -n 4 --timeout 80)

# ---- which algorithm where: every size under each AllReduce algorithm ---------
for g in 2 4; do
  [ "$g" -le "$ngpu" ] || continue
  sweep "all_reduce_g${g}_algos" CHORUS_TUNE "allreduce:oneshot allreduce:twoshot allreduce:ring allreduce:zerocopy - nccl" \
    "$perf/all_reduce_perf" -g $g -b 8 -e 1G -f 4
  sweep "all_reduce_procs${g}_algos" CHORUS_TUNE "allreduce:oneshot allreduce:twoshot allreduce:ring - nccl" \
    "$run" -n $g --timeout 80 "$perf/all_reduce_perf" -b 8 -e 1G -f 4
done

# ---- Send/Recv --------------------------------------------------------------------
# LL lines up to each size (slots of 1 MiB; the first column: never LL).
sweep "sendrecv_procs2_ll" CHORUS_TUNE "sendrecv:direct/Simple sendrecv:0-16K:direct/LL sendrecv:0-128K:direct/LL sendrecv:0-256K:direct/LL sendrecv:0-512K:direct/LL sendrecv:0-1M:direct/LL nccl" \
  env CHORUS_GPU_P2P_LL_BYTES=1M "${r2[@]}" "$perf/sendrecv_perf" -b 8 -e 2M -f 2
# Pulled from the sender's FIFO against pushed (processes).
for g in 2 4; do
  [ "$g" -le "$ngpu" ] && sweep "sendrecv_procs${g}_pull" CHORUS_GPU_P2P_PULL "0 1 nccl" "$run" -n $g --timeout 80 "$perf/sendrecv_perf" -b 1M -e 4G -f 4
done
# More FIFO slots per Send/Recv stream, pulled and pushed: a puller starts
# on a slot only once its flag is seen, so slots filled further ahead
# might hide that.
for dir in pull push; do
  pull=0
  [ $dir = pull ] && pull=1
  sweep "sendrecv_procs2_${dir}_slots" CHORUS_GPU_P2P_SLOTS "2 4 8 nccl" env CHORUS_GPU_P2P_PULL="$pull" CHORUS_GPU_FIFO_BYTES=2M "${r2[@]}" "$perf/sendrecv_perf" -b 64M -e 4G -f 4
done

# ---- the copy engine (one process): never, from 1 byte, as is ----------------
for g in 2 4; do
  [ "$g" -le "$ngpu" ] || continue
  sweep "sendrecv_g${g}_ce" CHORUS_TUNE "NCCL_ALGO=sendrecv:^copyengine sendrecv:1-inf:copyengine - nccl" "$perf/sendrecv_perf" -g $g -b 16K -e 1G -f 4
  sweep "broadcast_g${g}_ce" CHORUS_TUNE "NCCL_ALGO=broadcast:^copyengine broadcast:1-inf:copyengine - nccl" "$perf/broadcast_perf" -g $g -b 16K -e 1G -f 4
  for coll in all_gather alltoall; do
    k=$(key $coll)
    sweep "${coll}_g${g}_ce" CHORUS_TUNE "NCCL_ALGO=$k:^copyengine $k:1-inf:copyengine - nccl" "$perf/${coll}_perf" -g $g -b 1M -e 2G -f 4
  done
  # the copy of a copy-engine Broadcast chain on 3+ GPUs
  [ "$g" -gt 2 ] && sweep "broadcast_g${g}_ce_chunk" CHORUS_GPU_CE_CHUNK_BYTES "4M 16M 32M 64M nccl" env CHORUS_TUNE=broadcast:1-inf:copyengine "$perf/broadcast_perf" -g $g -b 4M -e 2G -f 4
done

# ---- 2 GPUs at 2 GiB, where the goals are set: FIFOs and steps ---------------
r2big=(-b 512M -e 2G -f 4)
sweep "all_reduce_g2_fifo_2g" CHORUS_GPU_FIFO_BYTES "512K 1M 2M nccl" "$perf/all_reduce_perf" -g 2 "${r2big[@]}"
sweep "all_reduce_g2_ringchunk_2g" CHORUS_GPU_RING_CHUNK_BYTES "256K 512K 1M" env CHORUS_GPU_FIFO_BYTES=2M "$perf/all_reduce_perf" -g 2 "${r2big[@]}"
sweep "alltoall_procs2_chunk_2g" CHORUS_GPU_CHUNK_BYTES "128K 256K 512K nccl" env CHORUS_GPU_FIFO_BYTES=2M "${r2[@]}" "$perf/alltoall_perf" "${r2big[@]}"
for coll in sendrecv broadcast; do
  sweep "${coll}_procs2_fifo_2g" CHORUS_GPU_FIFO_BYTES "512K 1M 2M 4M nccl" "${r2[@]}" "$perf/${coll}_perf" "${r2big[@]}"
done

# ---- 2 processes: as is beside NCCL; the ring, chains, FIFOs, steps -----------
for coll in all_reduce broadcast sendrecv; do
  sweep "${coll}_procs2_asis" CHORUS_GPU_CUMEM "- nccl" "${r2[@]}" "$perf/${coll}_perf" -b 1M -e 256M -f 4
done
for coll in all_reduce broadcast; do
  sweep "${coll}_procs2_ringchunk" CHORUS_GPU_RING_CHUNK_BYTES "64K 128K 256K nccl" "${r2[@]}" "$perf/${coll}_perf" -b 1M -e 512M -f 4
  sweep "${coll}_procs2_ringch" CHORUS_GPU_RING_CHANNELS "16 32 48 64" "${r2[@]}" "$perf/${coll}_perf" -b 1M -e 512M -f 4
done
# where the AllReduce ring takes over, per rank's block
sweep "all_reduce_procs2_ringbytes" CHORUS_TUNE "allreduce:1M*n-inf:ring allreduce:2M*n-inf:ring allreduce:4M*n-inf:ring allreduce:8M*n-inf:ring" \
  "${r2[@]}" "$perf/all_reduce_perf" -b 512K -e 16M -f 2
for coll in sendrecv broadcast reduce; do
  sweep "${coll}_procs2_fifo" CHORUS_GPU_FIFO_BYTES "256K 512K 1M 2M nccl" "${r2[@]}" "$perf/${coll}_perf" -b 4M -e 512M -f 4
done
# Broadcast and Reduce: never the chain, or as is (from 256 KiB)
for coll in broadcast reduce; do
  sweep "${coll}_procs2_chain" CHORUS_TUNE "NCCL_ALGO=$coll:^chain -" "${r2[@]}" "$perf/${coll}_perf" -b 256K -e 512M -f 4
done
for coll in alltoall gather scatter; do
  sweep "${coll}_procs2_chunk" CHORUS_GPU_CHUNK_BYTES "64K 128K 256K" "${r2[@]}" "$perf/${coll}_perf" -b 1M -e 512M -f 4
done
# where the pipelined exchange (oneshot/Simple) takes over from LL lines,
# per rank's block
for coll in all_gather reduce_scatter alltoall; do
  k=$(key $coll)
  sweep "${coll}_procs2_pipe" CHORUS_TUNE "$k:256K*n-inf:oneshot/Simple $k:512K*n-inf:oneshot/Simple $k:1M*n-inf:oneshot/Simple" \
    "${r2[@]}" "$perf/${coll}_perf" -b 128K -e 4M -f 2
done

# ---- zero-copy against staged (neither copy engine nor zero-copy), and NCCL ---
# with the same registration, from 64 KiB: -g (any cudaMalloc buffer) and
# symmetric windows (-R 2).
for coll in all_reduce all_gather reduce_scatter; do
  k=$(key $coll)
  values="NCCL_ALGO=$k:^zerocopy,copyengine $k:zerocopy nccl"
  sweep "${coll}_g2_direct" CHORUS_TUNE "$values" "$perf/${coll}_perf" -g 2 -b 64K -e 1G -f 4
  sweep "${coll}_procs2_win_direct" CHORUS_TUNE "$values" "${r2[@]}" "$perf/${coll}_perf" -R 2 -b 64K -e 1G -f 4
  if [ "$ngpu" -ge 4 ]; then
    sweep "${coll}_g4_direct" CHORUS_TUNE "$values" "$perf/${coll}_perf" -g 4 -b 64K -e 1G -f 4
    sweep "${coll}_procs4_win_direct" CHORUS_TUNE "$values" "${r4[@]}" "$perf/${coll}_perf" -R 2 -b 64K -e 1G -f 4
  fi
done
if [ "$ngpu" -ge 4 ]; then
  # Zero-copy AllGather/ReduceScatter on 4 GPUs at every size from 1 MiB
  # against the default (to 64 MiB, then the rings), to the goal's 2 GiB;
  # the FIFO behind the large AllReduce's ring and Broadcast's chain.
  for coll in all_gather reduce_scatter; do
    k=$(key $coll)
    sweep "${coll}_g4_agrs" CHORUS_TUNE "$k:1M-inf:zerocopy - nccl" "$perf/${coll}_perf" -g 4 -b 32M -e 2G -f 4
  done
  sweep "all_reduce_g4_fifo" CHORUS_GPU_FIFO_BYTES "512K 1M 2M nccl" "$perf/all_reduce_perf" -g 4 -b 128M -e 2G -f 4
  sweep "broadcast_g4_fifo" CHORUS_GPU_FIFO_BYTES "512K 1M 2M nccl" "$perf/broadcast_perf" -g 4 -b 32M -e 2G -f 4
  # The ring kernel's CTAs and step at 2 GiB, where the AllReduce ring and
  # the Broadcast chain trail NCCL: busbw rose with every CTA up to 64,
  # while steps and FIFOs moved it by 3% at most (the copy loop, not the
  # handshake between steps, is what is short).
  for coll in all_reduce broadcast; do
    sweep "${coll}_g4_ringch_2g" CHORUS_GPU_RING_CHANNELS "16 32 48 64 nccl" "$perf/${coll}_perf" -g 4 -b 512M -e 2G -f 4
    sweep "${coll}_g4_ringchunk_2g" CHORUS_GPU_RING_CHUNK_BYTES "128K 256K 512K 1M" env CHORUS_GPU_FIFO_BYTES=2M "$perf/${coll}_perf" -g 4 -b 512M -e 2G -f 4
    sweep "${coll}_g4_ringch32_2g" CHORUS_GPU_RING_CHUNK_BYTES "256K 512K 1M" env CHORUS_GPU_FIFO_BYTES=4M CHORUS_GPU_RING_CHANNELS=32 "$perf/${coll}_perf" -g 4 -b 512M -e 2G -f 4
  done
fi

# ---- zero-copy at mid sizes, in finer steps: staged / zero-copy / NCCL, then --
# zero-copy by bytes per CTA (up to 64 CTAs).
for coll in all_reduce reduce_scatter all_gather; do
  k=$(key $coll)
  sweep "${coll}_procs2_win_mid" CHORUS_TUNE "NCCL_ALGO=$k:^zerocopy $k:zerocopy nccl" "${r2[@]}" "$perf/${coll}_perf" -R 2 -b 512K -e 16M -f 2
  sweep "${coll}_procs2_win_ctab" CHORUS_GPU_ZEROCOPY_CTA_BYTES "8K 16K 32K 64K" env CHORUS_TUNE="$k:zerocopy" "${r2[@]}" "$perf/${coll}_perf" -R 2 -b 512K -e 16M -f 2
done
if [ "$ngpu" -ge 4 ]; then
  sweep "all_reduce_procs4_win_ctab" CHORUS_GPU_ZEROCOPY_CTA_BYTES "4K 8K 16K 32K" env CHORUS_TUNE=allreduce:zerocopy "${r4[@]}" "$perf/all_reduce_perf" -R 2 -b 256K -e 16M -f 2
  sweep "all_reduce_g4_ctab" CHORUS_GPU_ZEROCOPY_CTA_BYTES "4K 8K 16K 32K" env CHORUS_TUNE=allreduce:zerocopy "$perf/all_reduce_perf" -g 4 -b 256K -e 16M -f 2
  # The goal's band (256 KiB-16 MiB, 1.3x NCCL) in every size, -g 4, as is
  # and staged.
  sweep "all_reduce_g4_mid" NCCL_ALGO "- ^zerocopy nccl" "$perf/all_reduce_perf" -g 4 -b 256K -e 32M -f 2
fi
sweep "all_reduce_g2_mid" CHORUS_TUNE "NCCL_ALGO=allreduce:^zerocopy allreduce:zerocopy nccl" "$perf/all_reduce_perf" -g 2 -b 512K -e 16M -f 2
sweep "all_reduce_g2_ctab" CHORUS_GPU_ZEROCOPY_CTA_BYTES "8K 16K 32K 64K" env CHORUS_TUNE=allreduce:zerocopy "$perf/all_reduce_perf" -g 2 -b 512K -e 16M -f 2
sweep "all_reduce_g2_direct_ctas" CHORUS_GPU_ZEROCOPY_CHANNELS "8 16 32 64" env CHORUS_TUNE=allreduce:zerocopy "$perf/all_reduce_perf" -g 2 -b 64K -e 1G -f 4

tar -C "$logs" -czf "$out/tune-logs.tgz" . 2>/dev/null
echo "# tune: ${SECONDS} s"
