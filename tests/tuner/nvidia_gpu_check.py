#!/usr/bin/env python3
"""nvidia_gpu_check.py - the test tuner plugins on Chorus and on NVIDIA's NCCL, side by side.

usage: nvidia_gpu_check.py PERF_DIR CHORUSRUN PLUGIN_DIR CHORUS_LIB_DIR [NCCL_LIB_DIR]

The plugins of tuner_plugin.c are built from Chorus's own reading of the
interface (core/tuner_abi.h); NVIDIA's NCCL loading them and calling them
as Chorus does is what shows that reading right. On a GPU machine, two
hosts (chorusrun --hosts 2, each rank on the first GPU) run the same perf
programs (AllReduce, AllGather, Broadcast, 8 B to 1 MiB) with the plugin
of each version on each library (NCCL_LIB_DIR: NVIDIA's libnccl.so.2;
default the nvidia-nccl Python package's), TUNER_FORCE=ring. Checked: the
results right on both; the plugin's log the same on both, init for init
(versions 5: the communicator id, two NVLink domains of one rank) and
query for query (NCCL's function code, the bytes of the larger buffer,
the table's shape, the registration flag), but for the prices; and both
run the ring (Chorus the chain for Broadcast), as the plugin asks.
Exit 77 (skipped) without a GPU or without NVIDIA's library.
"""
import collections
import os
import re
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "harness"))
import nvidia_ref  # noqa: E402  (NVIDIA's library, the GPUs)

SKIP = 77


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def run(perf, chorusrun, prog, plugin, libdir, log):
    env = dict(os.environ, LD_LIBRARY_PATH=libdir, NCCL_NVLS_ENABLE="0", NCCL_SOCKET_IFNAME="lo",
               NCCL_TUNER_PLUGIN=plugin, TUNER_FORCE="ring", TUNER_LOG=log, NCCL_DEBUG="INFO",
               NCCL_DEBUG_SUBSYS="TUNING")
    args = [chorusrun, "-n", "2", "--hosts", "2", "--timeout", "240",
            os.path.join(perf, prog + "_perf"), "-b", "8", "-e", "1M", "-f", "32", "-n", "2",
            "-w", "1", "-c", "1"]
    r = subprocess.run(args, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       text=True, timeout=300)
    if r.returncode != 0 or "Out of bounds values : 0 OK" not in r.stdout:
        fail("%s on %s: exit %d\n%s" % (" ".join(args), libdir, r.returncode, r.stdout[-3000:]))
    return r.stdout


def calls(log):
    """The plugin's log, prices and ranks aside: a count per line."""
    lines = []
    for line in open(log).read().splitlines():
        w = line.split()
        f = dict(zip(w[2::2], w[3::2]))
        for k in ("ring", "tree", "pat", "nranks"):
            f.pop(k, None)
        lines.append(" ".join(w[:2] + ["%s %s" % kv for kv in sorted(f.items())]))
    return collections.Counter(lines)


def main():
    perf, chorusrun, plugdir, chorus = sys.argv[1:5]
    ref = sys.argv[5] if len(sys.argv) > 5 else nvidia_ref.nccl_dir()
    if not nvidia_ref.gpu_count() or not ref:
        why = "no GPU" if not nvidia_ref.gpu_count() else "NVIDIA's NCCL not found"
        print("skipped: " + why)
        sys.exit(SKIP)
    progs = {"all_reduce": "AllReduce", "all_gather": "AllGather", "broadcast": "Broadcast"}
    with tempfile.TemporaryDirectory() as tmp:
        for v in (2, 3, 4, 5):
            plugin = os.path.join(plugdir, "libnccl-tuner-test%d.so" % v)
            for prog, func in progs.items():
                if v < 5 and prog != "all_reduce":
                    continue
                logs, outs = {}, {}
                for lib, libdir in (("nccl", ref), ("chorus", chorus)):
                    logs[lib] = os.path.join(tmp, "%s_v%d_%s.log" % (lib, v, prog))
                    outs[lib] = run(perf, chorusrun, prog, plugin, libdir, logs[lib])
                theirs, ours = calls(logs["nccl"]), calls(logs["chorus"])
                if not theirs or theirs != ours:
                    fail("v%d %s: the plugin saw otherwise on Chorus:\n NCCL %s\n Chorus %s" %
                         (v, prog, sorted(theirs.items()), sorted(ours.items())))
                algos = set(re.findall(r"%s: \d+ Bytes -> Algo (\w+) proto (\w+)" % func,
                                       outs["nccl"]))
                if algos != {("RING", "SIMPLE")}:
                    fail("v%d %s: NCCL ran %s" % (v, prog, algos))
                want = "chain" if prog == "broadcast" else "ring"
                ran = set(re.findall(r"%s of \d+ bytes: algorithm (\w+)" % func, outs["chorus"]))
                if ran != {want}:
                    fail("v%d %s: Chorus ran %s" % (v, prog, ran))
                print("v%d %s: %d plugin calls alike" % (v, prog, sum(ours.values())))
    print("tuner plugins beside NCCL: ok")


if __name__ == "__main__":
    main()
