#!/usr/bin/env python3
"""tuner_check.py - the tuner plugin interface against a plugin of every version.

usage: tuner_check.py TUNER_CALLS PLUGIN_DIR NOSYM_LIB CHORUS_INFO

tuner_calls.c runs AllReduce, AllGather, Broadcast and AlltoAll of host
memory on 2 ranks, twice, checking every result; with NCCL_DEBUG_SUBSYS
TUNING each rank logs the algorithm of every call, and the test plugin
(tuner_plugin.c, libnccl-tuner-testV.so) logs its init, queries and
finalize. Against a run without a tuner (NCCL_TUNER_PLUGIN=none), checks:
for versions 2-5, a plugin that makes NCCL's ring cost nothing moves
AllReduce and AllGather to the ring and Broadcast to the chain, each query
carries NCCL's function code, the call's larger buffer and (from 3) a
table where Chorus's runnable algorithms have prices, AlltoAll is never
asked about, init and finalize come once per rank with that version's
arguments; a plugin that edits nothing leaves every choice; pat moves
AllGather to recursive doubling and nothing else; tree moves AllReduce;
an nvls cell, which Chorus cannot run, changes nothing; a query that fails
leaves the choices with one WARN per rank; an init that fails fails the
communicator's init with the plugin named; a bare name, ranks as
processes, a tuner carried by the network plugin's library, and
NCCL_TUNER_PLUGIN=none over that; a library that is not there and one
without a table (a WARN each, the choices as without); and chorus_info
--explain, which names the plugin and shows its say in the choice.
"""
import os
import re
import subprocess
import sys
import tempfile

ALGO = re.compile(r"\[(\d)\] NCCL INFO (\w+) of \d+ bytes: algorithm (\w+)")


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def run(prog, env, *args, ok=True):
    full = {k: v for k, v in os.environ.items() if not k.startswith("TUNER_")}
    # The peer-read probe, timed at each init, moves the cost model's
    # choices between runs on a busy machine: fixed, every run chooses as
    # the baseline does.
    full.update(NCCL_DEBUG="INFO", NCCL_DEBUG_SUBSYS="INIT,TUNING", CHORUS_READ_SLOWDOWN="3",
                **env)
    for k in [k for k, v in full.items() if v is None]:
        del full[k]
    r = subprocess.run([prog, "2", *args], env=full, stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, text=True, timeout=120)
    if ok and (r.returncode != 0 or "ok" not in r.stdout.split()):
        fail("tuner_calls %s with %s: exit %d:\n%s" % (" ".join(args), env, r.returncode, r.stdout))
    return r.stdout


def choices(out):
    """{function: set of algorithms} over both ranks' calls."""
    got = {}
    for rank, func, algo in ALGO.findall(out):
        got.setdefault(func, set()).add(algo)
    return got


def log_of(path):
    lines = open(path).read().split("\n") if os.path.exists(path) else []
    return [l.split() for l in lines if l]


def check_queries(v, log, where):
    inits = [l for l in log if l[0] == "init"]
    fins = [l for l in log if l[0] == "finalize"]
    queries = [l for l in log if l[0] == "query"]
    if len(inits) != 2 or len(fins) != 2:
        fail("%s: %d inits, %d finalizes" % (where, len(inits), len(fins)))
    for l in inits:
        f = dict(zip(l[2::2], l[3::2]))
        if l[1] != "v%d" % v or f["nranks"] != "2" or f["nnodes"] != "1" or f["log"] != "1":
            fail("%s: init %s" % (where, l))
        if v == 5 and (f["id"], f["domains"], f["min"], f["max"], f["constants"]) != \
                ("1", "1", "2", "2", "1"):
            fail("%s: v5 init %s" % (where, l))
    per = {}
    for q in queries:
        f = dict(zip(q[2::2], q[3::2]))
        per.setdefault(f["func"], []).append(f)
    # 2 ranks x 2 rounds of AllReduce (4), AllGather (2), Broadcast (0);
    # the larger buffer's bytes; AlltoAll never.
    want = {"4": "16384", "2": "8192", "0": "16384"}
    if sorted(per) != sorted(want) or any(len(per[k]) != 4 for k in per):
        fail("%s: queries by function %s" % (where, {k: len(x) for k, x in per.items()}))
    for func, qs in per.items():
        for f in qs:
            if f["bytes"] != want[func] or f["npipe"] != "1" or f["nranks"] != "2":
                fail("%s: query %s" % (where, f))
            if v == 2:
                if (f["algo"], f["proto"], f["collnet"], f["nvls"]) != ("-1", "-1", "0", "0"):
                    fail("%s: v2 query %s" % (where, f))
                continue
            if (f["nalgo"], f["nproto"]) != ("7", "3") or (v >= 4) != (f["reg"] == "0"):
                fail("%s: query %s" % (where, f))
            # the ring runs all three; pat (recursive doubling) only AllGather
            # here; tree only AllReduce
            ring, tree, pat = float(f["ring"]), float(f["tree"]), float(f["pat"])
            if ring <= 0 or (pat > 0) != (func == "2") or (tree > 0) != (func == "4"):
                fail("%s: the table of function %s: %s" % (where, func, f))


def main():
    prog, plugdir, nosym, info = sys.argv[1:5]
    base = choices(run(prog, {"NCCL_TUNER_PLUGIN": "none"}))
    if base.get("AllReduce") == {"ring"} or base.get("Broadcast") == {"chain"}:
        fail("the defaults already take the ring: %s" % base)
    if set(base) != {"AllReduce", "AllGather", "Broadcast", "AlltoAll"}:
        fail("calls without a tuner: %s" % base)
    ringed = dict(base, AllReduce={"ring"}, AllGather={"ring"}, Broadcast={"chain"})
    with tempfile.TemporaryDirectory() as tmp:
        for v in (2, 3, 4, 5):
            lib = os.path.join(plugdir, "libnccl-tuner-test%d.so" % v)
            log = os.path.join(tmp, "v%d.log" % v)
            out = run(prog, {"NCCL_TUNER_PLUGIN": lib, "TUNER_FORCE": "ring", "TUNER_LOG": log})
            if "tuner plugin %s (test%d, ncclTunerPlugin_v%d)" % (lib, v, v) not in out:
                fail("v%d: not loaded:\n%s" % (v, out))
            if choices(out) != ringed:
                fail("v%d: ring forced: %s" % (v, choices(out)))
            check_queries(v, log_of(log), "v%d" % v)
            if v == 5 and "test5 tuner: init of 2 ranks" not in out:
                fail("v5: the plugin's log line is not in Chorus's log")
        lib = lambda v: os.path.join(plugdir, "libnccl-tuner-test%d.so" % v)
        got = choices(run(prog, {"NCCL_TUNER_PLUGIN": lib(4)}))
        if got != base:
            fail("a tuner that edits nothing: %s, without one %s" % (got, base))
        got = choices(run(prog, {"NCCL_TUNER_PLUGIN": lib(3), "TUNER_FORCE": "pat"}))
        if got != dict(base, AllGather={"rd"}):
            fail("pat forced: %s" % got)
        got = choices(run(prog, {"NCCL_TUNER_PLUGIN": lib(5), "TUNER_FORCE": "tree"}))
        if got != dict(base, AllReduce={"tree"}):
            fail("tree forced: %s" % got)
        for v in (2, 5):
            got = choices(run(prog, {"NCCL_TUNER_PLUGIN": lib(v), "TUNER_FORCE": "nvls"}))
            if got != base:
                fail("v%d: a cell Chorus cannot run changed the choices: %s" % (v, got))
        out = run(prog, {"NCCL_TUNER_PLUGIN": lib(4), "TUNER_FORCE": "ring",
                         "TUNER_FAIL": "query"})
        if choices(out) != base or len(re.findall(r"WARN tuner plugin test4: getCollInfo returned 3",
                                                  out)) != 2:
            fail("a query that fails: %s\n%s" % (choices(out), out))
        out = run(prog, {"NCCL_TUNER_PLUGIN": lib(5), "TUNER_FAIL": "init"}, "threads", "initfail")
        if not re.search(r"WARN .*tuner plugin test5 \(.*\): init returned 3", out):
            fail("an init that fails is not named:\n%s" % out)
        out = run(prog, {"NCCL_TUNER_PLUGIN": "test4", "TUNER_FORCE": "ring",
                         "LD_LIBRARY_PATH": plugdir}, "procs")
        if choices(out) != ringed or "(test4, ncclTunerPlugin_v4)" not in out:
            fail("a bare name, ranks as processes: %s\n%s" % (choices(out), out))
        out = run(prog, {"NCCL_TUNER_PLUGIN": None, "NCCL_NET_PLUGIN": lib(3),
                         "TUNER_FORCE": "ring"})
        if choices(out) != ringed or "(test3, ncclTunerPlugin_v3)" not in out:
            fail("a tuner in the network plugin's library: %s\n%s" % (choices(out), out))
        out = run(prog, {"NCCL_TUNER_PLUGIN": "none", "NCCL_NET_PLUGIN": lib(3),
                         "TUNER_FORCE": "ring"})
        if choices(out) != base or "ncclTunerPlugin" in out:
            fail("NCCL_TUNER_PLUGIN=none: %s\n%s" % (choices(out), out))
        for name, why in ((os.path.join(tmp, "missing.so"), "cannot load it"),
                          (nosym, "exports no ncclTunerPlugin_v5 .. _v2 table")):
            out = run(prog, {"NCCL_TUNER_PLUGIN": name, "TUNER_FORCE": "ring"})
            if choices(out) != base or why not in out:
                fail("%s: %s\n%s" % (name, choices(out), out))
        # chorus_info --explain has the plugin's say as a communicator does
        out = subprocess.run([info, "--explain", "allreduce", "16K", "--host", "--ranks", "2"],
                             env=dict(os.environ, NCCL_TUNER_PLUGIN=lib(5), TUNER_FORCE="ring"),
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                             timeout=60).stdout
        if "tuner plugin: test5" not in out or "the tuner plugin repriced ring/Simple" not in out \
                or "-> ring/Simple" not in out:
            fail("chorus_info --explain with a tuner:\n%s" % out)
    print("tuner plugins: ok")


if __name__ == "__main__":
    main()
