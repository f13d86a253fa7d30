#!/bin/bash
# gpu_hosts_bench.sh - Chorus beside NVIDIA's NCCL with this machine's GPUs
# split into hosts: chorusrun --hosts gives each block of ranks its own
# NCCL_HOSTID, which both libraries read as the host's identity, so the
# blocks talk over loopback TCP as machines would over a network
# (NCCL_SOCKET_IFNAME=lo for both). 2 hosts x 1 GPU, 2 hosts x 2 GPUs
# where there are 4, and 2 hosts x 4 (8 ranks, each GPU shared by two
# hosts) where there are 4; on one GPU, 2 x 1 with the GPU shared.
#
# usage: scripts/gpu_hosts_bench.sh   (after scripts/gpu.sh build)
#   BUILD, NCCL_REF_LIB, BENCH as for gpu_bench.sh; HOSTS_E (default 256M)
# First a loopback TCP probe (1 and 8 streams, the ceiling), then per
# collective and layout both libraries, -n 20 -w 5; prints one table per
# run (time in us and bus bandwidth in GB/s, and NCCL's time over ours).
# Output under $OUT: summary.txt (when run alone), hosts-logs.tgz.
set -u
cd "$(dirname "$0")/.." || exit 1
. scripts/gpu_lib.sh
out=${OUT:-/tmp/chorus-gpu}
mkdir -p "$out"
[ -n "${CHORUS_GPU_TEED:-}" ] || exec > >(tee "$out/summary.txt") 2>&1
build=${BUILD:-build-gpu}
perf=$build/tools/perf
run=$build/tools/chorusrun
[ -x "$perf/all_reduce_perf" ] || { echo "no $perf/all_reduce_perf: build first"; exit 1; }
logs=$(mktemp -d /tmp/chorus-hosts-logs.XXXXXX)
export NCCL_NVLS_ENABLE=0 NCCL_SOCKET_IFNAME=lo CHORUS_OP_TIMEOUT=${CHORUS_OP_TIMEOUT:-30}
ngpu=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
ref=${NCCL_REF_LIB:-$(python3 -c 'import nvidia.nccl, os; print(os.path.join(list(nvidia.nccl.__path__)[0], "lib"))' 2>/dev/null)}
libs=chorus
if [ -f "$ref/libnccl.so.2" ] && loads_from "$perf/all_reduce_perf" "$ref"; then libs="chorus nccl"; fi
echo "# hosts on loopback: $ngpu GPU(s), libraries: $libs (NCCL: ${ref:-none})"

# The ceiling: loopback TCP between processes, k streams of 1 GiB each.
python3 - <<'PY'
import os, socket, time
def probe(k, total=1 << 30):
    ls = socket.socket(); ls.bind(("127.0.0.1", 0)); ls.listen(k)
    port = ls.getsockname()[1]
    kids = []
    for _ in range(k):
        pid = os.fork()
        if pid == 0:
            s = socket.create_connection(("127.0.0.1", port))
            buf = b"\0" * (4 << 20); left = total
            while left > 0: left -= s.send(buf[:min(left, len(buf))])
            s.close(); os._exit(0)
        kids.append(pid)
    conns = [ls.accept()[0] for _ in range(k)]
    t0 = time.time(); rk = []
    for c in conns:
        pid = os.fork()
        if pid == 0:
            got = 0; b = bytearray(4 << 20)
            while got < total:
                n = c.recv_into(b)
                if n == 0: break
                got += n
            os._exit(0)
        rk.append(pid)
    for p in kids + rk: os.waitpid(p, 0)
    return k * total / (time.time() - t0) / 1e9
for k in (1, 8):
    print("# loopback TCP, %d stream(s): %.1f GB/s" % (k, probe(k)))
PY

# Layouts HxG: H hosts of G ranks. Each rank has a GPU of its own where
# H*G <= GPUs; 2x4 (4 GPUs) shares each GPU between two hosts' processes,
# which the GPU then serves in turns (time slices of about 2.3 ms: small
# calls take that long on both libraries), so it is run only on 4 GPUs,
# where nothing unshared is left to measure.
# On a 1-GPU machine 2x1 shares the GPU between the two hosts' processes.
for layout in 2x1 2x2 2x4; do
  h=${layout%x*} g=${layout#*x}
  if [ "$layout" = 2x4 ]; then [ "$ngpu" -eq 4 ] || continue
  elif [ "$layout" != 2x1 ]; then [ $((h * g)) -le "$ngpu" ] || continue
  else [ "$ngpu" -ge 1 ] || continue; fi
  np=$((h * g))
  for coll in all_reduce all_gather reduce_scatter; do
    label=${coll}_hosts$layout
    [ -z "${BENCH:-}" ] || [[ $label =~ $BENCH ]] || continue
    for lib in $libs; do
      env=(env)
      [ "$lib" = nccl ] && env=(env LD_LIBRARY_PATH="$ref")
      timeout 150 "${env[@]}" "$run" -n $np --hosts "$h" --timeout 140 "$perf/${coll}_perf" \
        -b 8 -e "${HOSTS_E:-256M}" -f 4 -n 20 -w 5 -c 0 -T 60 >"$logs/bench_${label}_$lib.log" 2>&1 ||
        echo "  $label $lib: exit $? (bench_${label}_$lib.log)"
    done
    python3 - "$logs" "$label" <<'PY'
import sys
sys.path.insert(0, "bench")
from summarize import ROW as row  # an nccl-tests result row
def read(lib):
    r = {}
    try:
        for line in open(f"{sys.argv[1]}/bench_{sys.argv[2]}_{lib}.log", errors="replace"):
            m = row.match(line)
            if m: r[int(m.group(1))] = (float(m.group(3)), float(m.group(5)))
    except OSError: pass
    return r
c, n = read("chorus"), read("nccl")
print(f"# {sys.argv[2]}: size, Chorus us / GB/s bus, NCCL us / GB/s bus, NCCL time / Chorus time")
for s in sorted(set(c) | set(n)):
    a, b = c.get(s), n.get(s)
    f = lambda v: "%9.1f %7.2f" % v if v else "%9s %7s" % ("-", "-")
    ratio = "%.2f" % (b[0] / a[0]) if a and b and a[0] > 0 else "-"
    print(f"  {s:>10} {f(a)}  {f(b)}  {ratio:>6}")
PY
  done
done
tar -C "$logs" -czf "$out/hosts-logs.tgz" .
