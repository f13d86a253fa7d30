#!/usr/bin/env python3
"""nvidia_gpu_check.py - NVIDIA's profiler plugins on Chorus and on NCCL, side by side.

usage: nvidia_gpu_check.py [--hosts CHORUSRUN [--loop LOOP_PLUGIN_DIR]] PERF_DIR
                           EXT_PROFILER_DIR CHORUS_LIB_DIR [NCCL_LIB_DIR]

Builds NVIDIA's example and Inspector plugins as nvidia_check.py does,
then runs the same perf program (PERF_DIR/all_reduce_perf -g N, N the
GPUs visible up to 4; none: skipped, unless CHORUS_PROFILER_HOST=1 asks
for 2 host-memory ranks) with
each plugin on each library, the library chosen by LD_LIBRARY_PATH
(NCCL_LIB_DIR: NVIDIA's libnccl.so.2; default the nvidia-nccl Python
package's, as PyTorch installs it; none found: Chorus alone, its own
checks only). Checked per library: the example plugin's files, one per
rank, hold every begin with its end and a Coll event per collective the
program made (told apart by their Rank: a group of calls from one thread
has one GroupApi, in the file of its first communicator), and KernelCh
(GPU) events as many; the Inspector
logs JSON lines, each collective with its size and a time. Then against NCCL: the example plugin's event categories and
the argument keys of each, and the sequence of collectives (function,
count, type; NCCL prints ncclUint8 as "Unknown", Chorus by its name),
must be the same on Chorus; the Inspector's records must
carry the same keys, with the same timing source.
With --hosts: two hosts on the first GPU (CHORUSRUN -n 2 --hosts 2, as
NCCL_HOSTID makes them for both libraries), the example plugin asked for
ProxyOp, ProxyStep and ProxyCtrl events: on each library its ProxyOps
name the other rank, and the PROXY and NET event names (send and
receive, the proxy thread's Sleep, Append and Idle, the six phases of a
step) are the same on Chorus as on NCCL; on Chorus each phase ends no
earlier than it began. With --loop, again through the loop network
plugin (v11, tests/netplug, on both libraries: NCCL_NET=Loop), which
reports each send as a socket event of its own (LOOP_PROF=1): the
example's Sock events under the steps of both, each a send with a size.
Exit 77 (skipped) without the plugins' sources or g++.
"""
import glob
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import nvidia_check  # noqa: E402  (the plugins' build, the example's event lines)

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "harness"))
import nvidia_ref  # noqa: E402  (NVIDIA's library, the GPUs)

SKIP = 77
PROXY_AND_NET = 8 | 16 | 32 | 128  # ProxyOp, ProxyStep, ProxyCtrl, NetPlugin


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def gpus():
    return min(4, nvidia_ref.gpu_count())


def run_perf(perf, ngpu, libdir, env):
    env = dict(os.environ, LD_LIBRARY_PATH=libdir, NCCL_NVLS_ENABLE="0", NCCL_DEBUG="VERSION",
               **env)
    args = [os.path.join(perf, "all_reduce_perf"), "-g", str(ngpu or 2), "-b", "4K", "-e",
            "1M", "-f", "16", "-n", "1", "-w", "0", "-c", "1"]
    r = subprocess.run(args, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       text=True, timeout=300)
    if r.returncode != 0 or "Out of bounds values : 0 OK" not in r.stdout:
        fail("%s on %s: exit %d\n%s" % (" ".join(args), libdir, r.returncode, r.stdout[-3000:]))
    return r.stdout


def example(perf, ngpu, lib, libdir, tmp, name):
    dump = os.path.join(tmp, name, "out")
    os.makedirs(os.path.dirname(dump), exist_ok=True)
    mask = 4095 & ~PROXY_AND_NET  # pools of 16 events each: the run's 12 collectives fit
    run_perf(perf, ngpu, libdir, dict(
        NCCL_PROFILER_PLUGIN=lib, NCCL_PROFILE_EVENT_MASK=str(mask), NCCL_PROFILE_DUMP_FILE=dump,
        NCCL_PROFILE_COLL_POOL_SIZE="16", NCCL_PROFILE_P2P_POOL_SIZE="16"))
    files = sorted(glob.glob(dump + "_*_*.json"))
    if len(files) != (ngpu or 2):
        fail("%s: example files %s" % (name, files))
    # Coll events are told apart by their Rank: a group from one thread
    # (-g) has one GroupApi, in its first communicator's file, with every
    # rank's calls under it, on NCCL as on Chorus.
    keys, colls, kernels = {}, {}, 0
    for f in files:
        ev = nvidia_check.example_events(f)
        for cat in {e[1] for e in ev}:
            b = sum(1 for e in ev if e[1] == cat and e[2] == "b")
            e = sum(1 for e in ev if e[1] == cat and e[2] == "e")
            if b != e:
                fail("%s %s: %s begins %d, ends %d" % (name, os.path.basename(f), cat, b, e))
        for e in ev:
            if e[2] == "b":
                keys.setdefault(e[1], set()).update(e[3])
            if e[1] == "COLL" and e[2] == "b":
                # NCCL 2.28's name table lacks ncclUint8 (it prints
                # "Unknown"); Chorus names it. The rest must be the same.
                dtype = "ncclUint8" if name == "nccl" and e[3]["Datatype"] == "Unknown" \
                    else e[3]["Datatype"]
                colls.setdefault(int(e[3]["Rank"]), []).append((e[0], int(e[3]["Count"]), dtype))
        kernels += sum(1 for e in ev if e[1] == "GPU" and e[2] == "b")
    for rank in range(ngpu or 2):
        if not colls.get(rank):
            fail("%s rank %d: no Coll events (ranks with some: %s; files: %s)" % (
                name, rank, sorted(colls), ", ".join(
                    "%s %d lines" % (os.path.basename(f), sum(1 for _ in open(f)))
                    for f in files)))
    if kernels < sum(len(c) for c in colls.values()):
        fail("%s: %d KernelCh events, fewer than the collectives" % (name, kernels))
    return keys, colls


def inspector(perf, ngpu, lib, libdir, tmp, name):
    out = os.path.join(tmp, name, "inspector")
    # The Inspector's own leak under ASan: see nvidia_check.py.
    asan = ":".join(filter(None, [os.environ.get("ASAN_OPTIONS"), "detect_leaks=0"]))
    run_perf(perf, ngpu, libdir, dict(
        NCCL_PROFILER_PLUGIN=lib, NCCL_INSPECTOR_ENABLE="1", NCCL_INSPECTOR_DUMP_DIR=out,
        NCCL_INSPECTOR_DUMP_THREAD_INTERVAL_MICROSECONDS="1000", ASAN_OPTIONS=asan))
    recs = []
    for path in glob.glob(os.path.join(out, "*.log")):
        for line in open(path):
            try:
                recs.append(json.loads(line))
            except ValueError:
                fail("%s: an Inspector line that is not JSON: %s" % (name, line))
    if not recs:
        fail("%s: the Inspector logged nothing in %s" % (name, out))
    keys = {k: set() for k in ("top", "header", "coll_perf")}
    sources = set()
    for rec in recs:
        perf_rec = rec.get("coll_perf", {})
        keys["top"].update(rec)
        keys["header"].update(rec.get("header", {}))
        keys["coll_perf"].update(perf_rec)
        sources.add(perf_rec.get("coll_timing_source"))
        if perf_rec.get("coll_msg_size_bytes", 0) <= 0 or perf_rec.get("coll_exec_time_us", -1) < 0:
            fail("%s: Inspector record %s" % (name, rec))
    return keys, sources, len(recs)


def proxy_events(perf, chorusrun, ex, libdir, tmp, name, loop=None):
    """The example plugin's PROXY and NET events of 2 hosts on the first GPU
    (loop: through the loop network plugin, its socket events too): their
    names per category; on Chorus, each phase's order checked."""
    dump = os.path.join(tmp, name + ("-loop" if loop else "-hosts"), "out")
    os.makedirs(os.path.dirname(dump))
    env = dict(os.environ, LD_LIBRARY_PATH=libdir, NCCL_NVLS_ENABLE="0", NCCL_SOCKET_IFNAME="lo",
               NCCL_PROFILER_PLUGIN=ex,
               NCCL_PROFILE_EVENT_MASK=str(2 | 8 | 16 | 32 | (128 if loop else 0)),
               NCCL_PROFILE_DUMP_FILE=dump, NCCL_PROFILE_COLL_POOL_SIZE="16",
               NCCL_PROFILE_P2P_POOL_SIZE="16")
    if loop:
        env.update(NCCL_NET_PLUGIN=os.path.join(loop, "libnccl-net-loop11.so"), NCCL_NET="Loop",
                   LOOP_PROF="1")
    args = [chorusrun, "-n", "2", "--hosts", "2", "--timeout", "240",
            os.path.join(perf, "all_reduce_perf"), "-b", "4K", "-e", "1M", "-f", "16", "-n", "1",
            "-w", "0", "-c", "1"]
    r = subprocess.run(args, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       text=True, timeout=300)
    if r.returncode != 0 or "Out of bounds values : 0 OK" not in r.stdout:
        fail("%s on %s: exit %d\n%s" % (" ".join(args), libdir, r.returncode, r.stdout[-3000:]))
    files = sorted(glob.glob(dump + "_*_*.json"))
    if len(files) != 2:
        fail("%s hosts: example files %s" % (name, files))
    names = {}
    for f in files:
        rank = int(f.rsplit("_", 1)[1].split(".")[0])
        ev = nvidia_check.example_events(f)
        for e in ev:
            if e[1] in ("PROXY", "NET", "NET_SOCK"):
                names.setdefault(e[1], set()).add(e[0])
            # NCCL sends empty messages too; Chorus's each carry a header.
            if e[1] == "NET_SOCK" and e[2] == "b" and (
                    e[3]["op"] != "0" or int(e[3]["size"]) < (name == "chorus")):
                fail("%s loop rank %d: socket event %s" % (name, rank, e))
            if e[1] == "PROXY" and e[2] == "b" and e[0] not in nvidia_check.CTRL and \
                    int(e[3]["Peer"]) != 1 - rank:
                fail("%s hosts rank %d: ProxyOp %s" % (name, rank, e))
        bad = nvidia_check.phases_out_of_order(f, ev) if name == "chorus" else None
        if bad:
            fail("chorus hosts rank %d: phase %s at %.3f, its end %s at %.3f" % (
                rank, bad[0][0], bad[0][1], bad[1][0], bad[1][1]))
    if set(names) != ({"PROXY", "NET", "NET_SOCK"} if loop else {"PROXY", "NET"}):
        fail("%s hosts: event categories %s" % (name, sorted(names)))
    return names


def hosts(chorusrun, perf, ext, chorus, nccl, loop):
    with tempfile.TemporaryDirectory() as tmp:
        ex = nvidia_check.build(os.path.join(ext, "example"), tmp, "example",
                                ["plugin.cc", "print_event.cc"])
        for plugin in [None] + ([loop] if loop else []):
            got = {}
            for name, libdir in [("chorus", chorus)] + ([("nccl", nccl)] if nccl else []):
                got[name] = proxy_events(perf, chorusrun, ex, libdir, tmp, name, plugin)
                print("%s, 2 hosts%s: %s" % (name, ", loop plugin" if plugin else "", "; ".join(
                    "%s %s" % (c, ", ".join(sorted(n))) for c, n in sorted(got[name].items()))))
            if nccl and got["chorus"] != got["nccl"]:
                fail("proxy events unlike NCCL's: Chorus %s, NCCL %s" % (got["chorus"],
                                                                       got["nccl"]))
    print("PASS")
    return 0


def main():
    chorusrun = loop = None
    if len(sys.argv) > 2 and sys.argv[1] == "--hosts":
        chorusrun = sys.argv[2]
        del sys.argv[1:3]
    if chorusrun and len(sys.argv) > 2 and sys.argv[1] == "--loop":
        loop = sys.argv[2]
        del sys.argv[1:3]
    if len(sys.argv) not in (4, 5):
        print(__doc__)
        return 2
    perf, ext, chorus = sys.argv[1:4]
    ext = os.environ.get("CHORUS_EXT_PROFILER", ext)
    if not os.path.isdir(os.path.join(ext, "example")) or not shutil.which("g++"):
        print("SKIP: no %s/example or no g++" % ext)
        return SKIP
    ngpu = gpus()
    if not ngpu and not os.environ.get("CHORUS_PROFILER_HOST"):
        print("SKIP: no GPU (profiler.nvidia covers host memory; CHORUS_PROFILER_HOST=1 runs "
              "this on it, Chorus alone)")
        return SKIP
    nccl = (sys.argv[4] if len(sys.argv) == 5 else nvidia_ref.nccl_dir()) if ngpu else None
    if chorusrun:
        if not ngpu:
            print("SKIP: --hosts needs a GPU")
            return SKIP
        return hosts(chorusrun, perf, ext, chorus, nccl, loop)
    if ngpu == 1 and nccl:
        # NCCL runs a communicator of one rank without its profiler events
        # (its example plugin's files stay empty): --hosts covers one GPU.
        print("SKIP: one GPU (NCCL emits no events for a 1-rank communicator)")
        return SKIP
    libs = [("chorus", chorus)] + ([("nccl", nccl)] if nccl else [])
    with tempfile.TemporaryDirectory() as tmp:
        ex = nvidia_check.build(os.path.join(ext, "example"), tmp, "example",
                                ["plugin.cc", "print_event.cc"])
        version = '#include "version.h"\nconst char* get_git_version_info() { return "2.28.9"; }\n'
        ins = nvidia_check.build(os.path.join(ext, "inspector"), tmp, "inspector",
                                 ["inspector_plugin.cc", "inspector.cc", "json.cc", "version.cc"],
                                 {"version.cc": version})
        got = {}
        for name, libdir in libs:
            got[name] = (example(perf, ngpu, ex, libdir, tmp, name),
                         inspector(perf, ngpu, ins, libdir, tmp, name))
            (keys, colls), (ikeys, sources, nrec) = got[name]
            print("%s: example plugin %s; %d collectives per rank; Inspector %d records (%s)" % (
                name, ", ".join("%s %d keys" % (c, len(k)) for c, k in sorted(keys.items())),
                len(colls[0]), nrec, ", ".join(sorted(map(str, sources)))))
        if "nccl" in got:
            (ck, cc), (cik, csrc, _) = got["chorus"]
            (nk, nc), (nik, nsrc, _) = got["nccl"]
            diffs = []  # all of them, so that one run on the GPU machine shows each
            if set(ck) != set(nk):
                diffs.append("event categories: Chorus %s, NCCL %s" % (sorted(ck), sorted(nk)))
            for cat in set(ck) & set(nk):
                if ck[cat] != nk[cat]:
                    diffs.append("%s events' keys: Chorus %s, NCCL %s" % (
                        cat, sorted(ck[cat]), sorted(nk[cat])))
            if cc != nc:
                diffs.append("collectives: Chorus %s, NCCL %s" % (cc, nc))
            for part in nik:
                if cik[part] != nik[part]:
                    diffs.append("Inspector %s keys: Chorus %s, NCCL %s" % (
                        part, sorted(cik[part]), sorted(nik[part])))
            if csrc != nsrc:
                diffs.append("Inspector timing sources: Chorus %s, NCCL %s" % (csrc, nsrc))
            if diffs:
                fail("\n  ".join(["unlike NCCL:"] + diffs))
            print("the same categories, keys and collectives as on NCCL")
        else:
            print("no NVIDIA NCCL (or no GPU) here: Chorus's own checks only")
    print("PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
