#!/usr/bin/env python3
"""nvidia_check.py - NVIDIA's two profiler plugins, built as their users build them, on Chorus.

usage: nvidia_check.py PROF_CALLS EXT_PROFILER_DIR [LOOP_PLUGIN_DIR]

EXT_PROFILER_DIR is NCCL 2.28's ext-profiler folder (example/ and
inspector/); without it, or without g++, the test is skipped (exit 77).
Each plugin is compiled in a temporary folder from its own sources and
headers with g++ (their Makefiles need files of NCCL's tree that the
folder does not hold), then prof_calls.c runs on 2 ranks with it:

- example: every event type the mask asks for, written at finalize to
  <file>_<commHash>_<rank>.json. Checked per rank: one GroupApi per
  group, each call's CollApi/P2pApi, Coll (its function, SeqNum per
  function, Count, Datatype, the communicator's hash and the rank) and
  P2p (Peer), a KernelCh under each, each begin with its end.
- Inspector: a JSON line per completed collective its dump thread sees.
  Checked: every line parses; each paced AllReduce (sequence numbers 2-5)
  is logged on both ranks with its size, a kernel time and bus bandwidth
  equal to algorithm bandwidth times 2(n-1)/n.
- example across the network: prof_calls' "net" run (each rank a process
  and a host of its own, HARNESS_HOSTS=2; 4 lanes) with ProxyOp, ProxyStep
  and ProxyCtrl events asked for. Checked per rank: the example's PROXY
  events (each naming the other rank, with a chunk size), the lane
  threads' Sleep, Append and Idle events, and the six phases of its NET
  steps, each begin with its end, and each phase ending no earlier than it
  began (the plugin times a phase from its state to the next one's).
  With LOOP_PLUGIN_DIR, again through the loop network plugin (v11), whose
  sends it reports as socket events of its own (LOOP_PROF=1): the
  example's Sock events, each a send with its size.
"""
import glob
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

SKIP = 77
NRANKS = 2
PACED = 4


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def build(src, tmp, name, sources, files=None):
    work = os.path.join(tmp, name)
    shutil.copytree(src, work)
    for fname, text in (files or {}).items():
        with open(os.path.join(work, fname), "w") as f:
            f.write(text)
    lib = os.path.join(work, "libnccl-profiler-%s.so" % name)
    cmd = ["g++", "-O2", "-fPIC", "-shared", "-Inccl", "-I" + cuda_include(tmp), "-o", lib]
    cmd += list(sources)
    r = subprocess.run(cmd, cwd=work, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                       timeout=300)
    if r.returncode != 0:
        fail("building %s: %s\n%s" % (name, " ".join(cmd), r.stdout))
    return lib


def cuda_include(tmp):
    """CUDA's headers (the example takes cudaStream_t from them), or where
    there is no toolkit a folder whose cuda_runtime.h declares that type."""
    for d in (os.environ.get("CUDA_HOME", "/usr/local/cuda") + "/include",):
        if os.path.exists(os.path.join(d, "cuda_runtime.h")):
            return d
    d = os.path.join(tmp, "cuda-stand-in")
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "cuda_runtime.h"), "w") as f:
        f.write("typedef struct CUstream_st *cudaStream_t;\n")
    return d


def run(prog, env):
    r = subprocess.run([prog, str(NRANKS), "paced"], env=env, stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, text=True, timeout=120)
    if r.returncode != 0 or "ok" not in r.stdout.split():
        fail("prof_calls: exit %d:\n%s" % (r.returncode, r.stdout))
    return r.stdout


EVENT = re.compile(r'^\{"name": "([^"]*)", "cat": "([A-Z0-9_]+)", "ph": "([be])", "id": (\d+), '
                   r'.*?"ts": [-0-9.]+(?:, "args": \{(.*)\})?\},?$')


def example_events(path):
    """The plugin's lines as (name, cat, ph, args); its COLL_API and
    P2P_API args print the datatype unquoted, so args are read by key."""
    out = []
    for line in open(path):
        line = line.strip()
        if line in ("[", "{}]", ""):
            continue
        m = EVENT.match(line)
        if not m:
            fail("%s: a line the example plugin does not write: %s" % (path, line))
        args = dict(re.findall(r'"(\w+)": ?"?([^",}]*)"?', m.group(5) or ""))
        out.append((m.group(1), m.group(2), m.group(3), args))
    return out


def check_example(tmp, lib, prog):
    dump = os.path.join(tmp, "example", "out")
    mask = 1 | 2 | 4 | 64 | 128 | 256 | 512 | 1024  # all but the proxy and net events
    run(prog, dict(os.environ, NCCL_PROFILER_PLUGIN=lib, NCCL_PROFILE_EVENT_MASK=str(mask),
                   NCCL_PROFILE_DUMP_FILE=dump, NCCL_DEBUG="WARN",
                   # Its pools hold events of up to 755 MB each (32 channels x
                   # 1024 steps); the defaults do not fit a small machine.
                   NCCL_PROFILE_COLL_POOL_SIZE="16", NCCL_PROFILE_P2P_POOL_SIZE="16"))
    files = sorted(glob.glob(dump + "_*_*.json"))
    if len(files) != NRANKS:
        fail("example: files %s" % files)
    hashes = {re.search(r"_(\d+)_\d+\.json$", f).group(1) for f in files}
    if len(hashes) != 1:
        fail("example: communicator hashes %s" % hashes)
    comm_hash = hashes.pop()
    colls_want = [("AllReduce", 0, 1024, "ncclFloat32"), ("Broadcast", 0, 256, "ncclInt32"),
                  ("AllReduce", 1, 1024, "ncclFloat32")]
    colls_want += [("AllReduce", 2 + i, 2048 << i, "ncclFloat32") for i in range(PACED)]
    for f in files:
        rank = int(re.search(r"_(\d+)\.json$", f).group(1))
        ev = example_events(f)
        for cat in ("GROUP_API", "COLL_API", "P2P_API", "COLL", "P2P", "GPU"):
            b = sum(1 for e in ev if e[1] == cat and e[2] == "b")
            e = sum(1 for e in ev if e[1] == cat and e[2] == "e")
            if b != e:
                fail("example rank %d: %s begins %d, ends %d" % (rank, cat, b, e))
        groups = [e for e in ev if e[1] == "GROUP_API" and e[2] == "b"]
        if len(groups) != 3 + PACED or groups[1][3].get("groupDepth") != "2":
            fail("example rank %d: GroupApi events %s" % (rank, groups))
        colls = [e for e in ev if e[1] == "COLL" and e[2] == "b"]
        got = [(e[0], int(e[3]["SeqNum"]), int(e[3]["Count"]), e[3]["Datatype"]) for e in colls]
        if got != colls_want:
            fail("example rank %d: Coll events %s, want %s" % (rank, got, colls_want))
        for e in colls:
            if e[3]["CommHash"] != comm_hash or int(e[3]["Rank"]) != rank or \
                    int(e[3]["nChannels"]) < 1 or not e[3]["Algorithm"]:
                fail("example rank %d: Coll %s" % (rank, e))
        apis = [(e[0], int(e[3]["count"])) for e in ev if e[1] == "COLL_API" and e[2] == "b"]
        if apis != [(c[0], c[2]) for c in colls_want]:
            fail("example rank %d: CollApi events %s" % (rank, apis))
        p2ps = sorted((e[0], int(e[3]["Peer"]), int(e[3]["Count"]))
                      for e in ev if e[1] == "P2P" and e[2] == "b")
        peer = 1 - rank
        if p2ps != [("Recv", peer, 64), ("Send", peer, 64)]:
            fail("example rank %d: P2p events %s" % (rank, p2ps))
        kch = [e for e in ev if e[1] == "GPU" and e[2] == "b"]
        if len(kch) != len(colls) + len(p2ps) or any(
                int(k[3]["StopGpuClk"]) < int(k[3]["StartGpuClk"]) for k in kch):
            fail("example rank %d: KernelCh events %s" % (rank, kch))
    print("example: %d ranks, every call with its Coll/P2p, API, Group and KernelCh events"
          % NRANKS)


TS = re.compile(r'"ts": ([-0-9.]+)')
CTRL = {"Sleep", "Append", "Idle"}  # the example names a ProxyCtrl event by its last state
PHASES = {"SendGpuWait", "SendPeerWait", "SendWait", "RecvWait", "RecvFlushWait", "RecvGpuWait"}


def phases_out_of_order(path, ev):
    """The example's NET step phases of file path (its events ev) come as a
    begin and its end, the end no earlier: the first pair that is not so,
    as ((begin, ts), (end, ts)), or None."""
    ts = [float(TS.search(line).group(1)) for line in open(path) if TS.search(line)]
    steps = [(e, t) for e, t in zip(ev, ts) if e[1] == "NET"]
    for (b, tb), (e, te) in zip(steps[::2], steps[1::2]):
        if (b[2], e[0], e[2]) != ("b", b[0], "e") or te < tb:
            return (b, tb), (e, te)
    return None


def check_example_net(tmp, lib, prog, loops=None):
    """loops: through the loop network plugin (v11), whose sends are
    socket events of its own (LOOP_PROF=1), asked for too."""
    dump = os.path.join(tmp, "example-net" + ("-plugin" if loops else ""), "out")
    os.makedirs(os.path.dirname(dump))
    mask = 2 | 4 | 8 | 16 | 32 | (128 if loops else 0)  # Coll, P2p, Proxy*, NetPlugin
    env = dict(os.environ, HARNESS_HOSTS=str(NRANKS), CHORUS_HOST_LANES="4",
               NCCL_PROFILER_PLUGIN=lib, NCCL_PROFILE_EVENT_MASK=str(mask),
               NCCL_PROFILE_DUMP_FILE=dump, NCCL_DEBUG="WARN", NCCL_PROFILE_COLL_POOL_SIZE="16",
               NCCL_PROFILE_P2P_POOL_SIZE="16")
    if loops:
        env.update(NCCL_NET_PLUGIN=os.path.join(loops, "libnccl-net-loop11.so"), LOOP_PROF="1")
    r = subprocess.run([prog, str(NRANKS), "net"], env=env, stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, text=True, timeout=120)
    if r.returncode != 0 or "ok" not in r.stdout.split():
        fail("prof_calls net: exit %d:\n%s" % (r.returncode, r.stdout))
    files = sorted(glob.glob(dump + "_*_*.json"))
    if len(files) != NRANKS:
        fail("example net: files %s" % files)
    for f in files:
        rank = int(f.rsplit("_", 1)[1].split(".")[0])
        ev = example_events(f)
        proxy = [e for e in ev if e[1] == "PROXY" and e[0] not in CTRL]
        ctrl = {e[0] for e in ev if e[1] == "PROXY" and e[0] in CTRL}
        names = {e[0] for e in ev if e[1] == "NET"}
        if not proxy or names != PHASES or ctrl != CTRL:
            fail("example net rank %d: %d PROXY events, NET phases %s, ProxyCtrl %s" % (
                rank, len(proxy), sorted(names), sorted(ctrl)))
        for cat in ("PROXY", "NET"):
            b = sum(1 for e in ev if e[1] == cat and e[2] == "b")
            if b != sum(1 for e in ev if e[1] == cat and e[2] == "e"):
                fail("example net rank %d: %s begins and ends differ" % (rank, cat))
        for e in proxy:
            if e[2] == "b" and (int(e[3]["Peer"]) != 1 - rank or int(e[3]["ChunkSize"]) <= 0):
                fail("example net rank %d: ProxyOp %s" % (rank, e))
        bad = phases_out_of_order(f, ev)
        if bad:
            fail("example net rank %d: phase %s at %.3f, its end %s at %.3f" % (
                rank, bad[0][0], bad[0][1], bad[1][0], bad[1][1]))
        socks = [e for e in ev if e[1] == "NET_SOCK"]
        if loops and (not socks or any(e[0] != "Sock" for e in socks) or any(
                e[2] == "b" and (e[3]["op"] != "0" or int(e[3]["size"]) <= 0) for e in socks) or
                sum(e[2] == "b" for e in socks) != sum(e[2] == "e" for e in socks)):
            fail("example net rank %d: the plugin's socket events %s" % (rank, socks))
        if not loops and socks:
            fail("example net rank %d: socket events without the plugin" % rank)
    print("example net%s: ProxyOp events and every step's phases, in order, on each rank%s" % (
        " (loop plugin)" if loops else "", "; the plugin's sends as Sock events" if loops else ""))


def check_inspector(tmp, lib, prog):
    out = os.path.join(tmp, "inspector", "out")
    # The Inspector moves a finalized communicator's record (calloc'd at
    # init) to a list that only its dump thread frees, and that thread
    # stops at the last finalize without another pass: under ASan the
    # record is a leak once the plugin is unloaded. The leak is the
    # plugin's, so LeakSanitizer is off for this run only; the example
    # run and profiler.versions keep it on for Chorus's own paths.
    env = dict(os.environ, NCCL_PROFILER_PLUGIN=lib, NCCL_INSPECTOR_ENABLE="1",
               NCCL_INSPECTOR_DUMP_THREAD_INTERVAL_MICROSECONDS="1000",
               NCCL_INSPECTOR_DUMP_DIR=out, NCCL_DEBUG="WARN")
    env["ASAN_OPTIONS"] = ":".join(filter(None, [os.environ.get("ASAN_OPTIONS"),
                                                  "detect_leaks=0"]))
    run(prog, env)
    logs = glob.glob(os.path.join(out, "*.log"))
    if not logs:
        fail("inspector: no log in %s" % out)
    seen = {}
    for path in logs:
        for line in open(path):
            try:
                rec = json.loads(line)
            except ValueError:
                fail("inspector: a line that is not JSON: %s" % line)
            h, perf = rec.get("header", {}), rec.get("coll_perf", {})
            if h.get("n_ranks") != NRANKS or rec.get("metadata", {}).get(
                    "rec_mechanism") != "nccl_profiler_interface":
                fail("inspector: header %s" % rec)
            seen[(h["rank"], perf.get("coll"), perf.get("coll_sn"))] = perf
    for rank in range(NRANKS):
        for i in range(PACED):
            perf = seen.get((rank, "AllReduce", 2 + i))
            if perf is None:
                fail("inspector: rank %d's AllReduce #%d not logged; logged: %s"
                     % (rank, 2 + i, sorted(seen)))
            size = 4 * (2048 << i)
            algbw, busbw = perf["coll_algobw_gbs"], perf["coll_busbw_gbs"]
            if perf["coll_msg_size_bytes"] != size or perf["coll_exec_time_us"] <= 0 or \
                    perf["coll_timing_source"] != "kernel_gpu" or \
                    abs(busbw - algbw * 2 * (NRANKS - 1) / NRANKS) > 1e-3 * max(algbw, 1e-9):
                fail("inspector: rank %d AllReduce #%d: %s" % (rank, 2 + i, perf))
    print("inspector: every paced AllReduce on every rank, with size, kernel time and bandwidth")


def main():
    if len(sys.argv) not in (3, 4):
        print(__doc__)
        return 2
    prog, ext = sys.argv[1:3]
    loops = sys.argv[3] if len(sys.argv) == 4 else None
    if not os.path.isdir(os.path.join(ext, "example")) or not shutil.which("g++"):
        print("SKIP: no %s/example or no g++" % ext)
        return SKIP
    with tempfile.TemporaryDirectory() as tmp:
        lib = build(os.path.join(ext, "example"), tmp, "example", ["plugin.cc", "print_event.cc"])
        check_example(tmp, lib, prog)
        check_example_net(tmp, lib, prog)
        if loops:
            check_example_net(tmp, lib, prog, loops)
        # version.cc is generated from git by its Makefile; here a constant.
        version = '#include "version.h"\nconst char* get_git_version_info() { return "2.28.9"; }\n'
        lib = build(os.path.join(ext, "inspector"), tmp, "inspector",
                    ["inspector_plugin.cc", "inspector.cc", "json.cc", "version.cc"],
                    {"version.cc": version})
        check_inspector(tmp, lib, prog)
    print("PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
