#!/usr/bin/env python3
"""prof_check.py - the profiler plugin interface against a plugin of every version.

usage: prof_check.py PROF_CALLS PLUGIN_DIR NOSYM_LIB

For each interface version 1-5, runs prof_calls.c on 2 ranks with
NCCL_PROFILER_PLUGIN naming libnccl-profiler-testV.so (prof_plugin.c),
which logs every call, and checks the log against the calls made: init
and finalize once per rank with that version's arguments; per rank the
events each version can carry (API events from 5, KernelCh from 3 with
its times from 4), their fields (function, count, type, root or peer,
sequence number per function; version 1's codes), their parents (each
call's Coll under its CollApi, in its Group; KernelCh under its Coll),
every handle stopped once. Then version 5 with one thread driving both
ranks' communicators, a group per step: one GroupApi per group, in the
first communicator's context, with both ranks' API events under it (as
NCCL keeps it per thread). Then: a mask of Coll alone (its ancestors are
still emitted, P2P events and KernelCh not), an init that fails, a
library that is not there and one without a table (each: no events, the
calls still right, and a WARN for the two broken libraries).
"""
import os
import re
import subprocess
import sys
import tempfile

GROUP, COLL, P2P, KCH, GAPI, CAPI, PAPI = 1, 2, 4, 64, 256, 512, 1024


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def run(prog, env, *mode):
    r = subprocess.run([prog, "2", *mode], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       text=True, timeout=120)
    if r.returncode != 0 or "ok" not in r.stdout.split():
        fail("prof_calls: exit %d:\n%s" % (r.returncode, r.stdout))
    return r.stdout


def parse(path):
    events, stops, records, inits, fin = {}, [], {}, [], 0
    if not os.path.exists(path):
        return events, stops, records, inits, fin
    for line in open(path):
        w = line.split()
        if w[0] == "init":
            inits.append(line.strip())
        elif w[0] == "finalize":
            fin += 1
        elif w[0] == "start":
            f = dict(zip(w[8::2], w[9::2]))
            events[int(w[1])] = dict(f, id=int(w[1]), type=int(w[3]), parent=int(w[5]),
                                     rank=int(w[7]))
        elif w[0] == "stop":
            stops.append(int(w[1]))
        elif w[0] == "record":
            records[int(w[1])] = line.split()
    return events, stops, records, inits, fin


def check_version(v, events, stops, records, inits, fin):
    where = "v%d" % v
    if len(inits) != 2 or fin != 2:
        fail("%s: %d inits, %d finalizes" % (where, len(inits), fin))
    if v >= 4:
        for r in (0, 1):
            if not any(re.search(r"name profiled nnodes 1 nranks 2 rank %d log 1$" % r, i)
                       for i in inits):
                fail("%s: no init for rank %d: %s" % (where, r, inits))
    if sorted(stops) != sorted(events):
        fail("%s: started %s, stopped %s" % (where, sorted(events), sorted(stops)))
    for r in (0, 1):
        mine = [e for e in events.values() if e["rank"] == r]
        by = lambda t: [e for e in mine if e["type"] == t]
        colls, p2ps, groups = by(COLL), by(P2P), by(GROUP)
        if len(colls) != 3 or len(p2ps) != 2 or len(groups) != 3:
            fail("%s rank %d: %d Coll, %d P2p, %d Group" % (where, r, len(colls), len(p2ps),
                                                           len(groups)))
        want = [("AllReduce", "0", "1024"), ("Broadcast", "0", "256"), ("AllReduce", "1", "1024")]
        if v == 1:
            want = [("4", "0", "1024"), ("0", "0", "256"), ("4", "1", "1024")]
        got = [(c["func"], c["seq"], c["count"]) for c in sorted(colls, key=lambda e: e["id"])]
        if got != want:
            fail("%s rank %d: Coll events %s, want %s" % (where, r, got, want))
        bcast = [c for c in colls if c["count"] == "256"][0]
        if bcast["root"] != "0":
            fail("%s rank %d: Broadcast root %s" % (where, r, bcast["root"]))
        if v == 1:
            ar = [c for c in colls if c["count"] == "1024"][0]
            if (ar["dtype"], ar["op"], ar["bytes"], bcast["dtype"]) != ("7", "0", "4096", "2"):
                fail("%s rank %d: codes %s %s" % (where, r, ar, bcast))
        elif (colls[0]["dtype"], bcast["dtype"]) != ("ncclFloat32", "ncclInt32"):
            fail("%s rank %d: types %s %s" % (where, r, colls[0]["dtype"], bcast["dtype"]))
        peers = sorted((p["func"], p["peer"]) for p in p2ps)
        send, recv = ("6", "7") if v == 1 else ("Send", "Recv")
        want_p = sorted([(send, str(1 - r)), (recv, str(1 - r))])
        if peers != want_p:
            fail("%s rank %d: P2p events %s, want %s" % (where, r, peers, want_p))
        kch = by(KCH)
        if v < 3:
            if kch:
                fail("%s: KernelCh events before version 3" % where)
        else:
            calls = {e["id"] for e in colls + p2ps}
            if sorted(k["parent"] for k in kch) != sorted(calls):
                fail("%s rank %d: KernelCh parents %s, calls %s" % (where, r,
                                                                   [k["parent"] for k in kch],
                                                                   sorted(calls)))
            for k in kch:
                rec = records.get(k["id"])
                if v >= 4:
                    if not rec or rec[3] != "22" or int(rec[5]) < int(k["ptimer"]) or \
                            int(k["ptimer"]) == 0:
                        fail("%s rank %d: KernelCh %s, its stop %s" % (where, r, k, rec))
                elif rec:
                    fail("%s: a state recorded before version 4" % where)
        if v == 5:
            gapi, capi, papi = by(GAPI), by(CAPI), by(PAPI)
            depths = [g["depth"] for g in sorted(gapi, key=lambda e: e["id"])]
            if depths != ["1", "2", "1"]:
                fail("v5 rank %d: GroupApi depths %s" % (r, depths))
            if any(a.get("graph") != "0" for a in gapi + by(CAPI) + by(PAPI)):
                fail("v5 rank %d: an API event marked graph-captured on host memory" % r)
            gids = {g["id"] for g in gapi}
            if len(capi) != 3 or len(papi) != 2 or any(a["parent"] not in gids
                                                        for a in capi + papi):
                fail("v5 rank %d: CollApi %s, P2pApi %s" % (r, capi, papi))
            for c in colls + p2ps:
                api = events.get(c["parent"])
                if not api or api["type"] not in (CAPI, PAPI) or api["count"] != c["count"] or \
                        api["func"] != c["func"] or events[int(c["group"])]["type"] != GROUP:
                    fail("v5 rank %d: %s's parent %s" % (r, c, api))
        elif any(e["type"] >= GAPI for e in mine):
            fail("%s: API events before version 5" % where)
        elif any(c["parent"] for c in colls + p2ps):
            fail("%s: a Coll/P2p event with a parent" % where)


def check_all(events, stops, records, inits, fin):
    """prof_calls all: one thread, both communicators, three groups."""
    if len(inits) != 2 or fin != 2 or sorted(stops) != sorted(events):
        fail("all: %d inits, %d finalizes, started %s, stopped %s" % (
            len(inits), fin, sorted(events), sorted(stops)))
    by = lambda t: sorted((e for e in events.values() if e["type"] == t), key=lambda e: e["id"])
    gapi = by(GAPI)
    if [(g["rank"], g["depth"]) for g in gapi] != [(0, "2")] * 3:
        fail("all: GroupApi events %s, want three on rank 0 at depth 2" % gapi)
    gids = [g["id"] for g in gapi]
    for r in (0, 1):
        capi = [a for a in by(CAPI) if a["rank"] == r]
        papi = [a for a in by(PAPI) if a["rank"] == r]
        got = [(a["func"], gids.index(a["parent"]) if a["parent"] in gids else None)
               for a in capi + papi]
        want = [("AllReduce", 0), ("Broadcast", 1), ("AllReduce", 2), ("Send", 1), ("Recv", 1)]
        if got != want:
            fail("all rank %d: API events (function, group) %s, want %s" % (r, got, want))
        colls = [c for c in by(COLL) if c["rank"] == r]
        if [(c["func"], c["seq"]) for c in colls] != [("AllReduce", "0"), ("Broadcast", "0"),
                                                      ("AllReduce", "1")]:
            fail("all rank %d: Coll events %s" % (r, colls))


def main():
    if len(sys.argv) != 4:
        print(__doc__)
        return 2
    prog, plugdir, nosym = sys.argv[1:]
    with tempfile.TemporaryDirectory() as tmp:
        base = dict(os.environ, NCCL_SOCKET_IFNAME="lo", NCCL_DEBUG="WARN")
        for v in range(1, 6):
            log = os.path.join(tmp, "v%d.log" % v)
            run(prog, dict(base, NCCL_PROFILER_PLUGIN=os.path.join(
                plugdir, "libnccl-profiler-test%d.so" % v), CHORUS_TEST_PROF_LOG=log))
            check_version(v, *parse(log))
            print("v%d: events, fields and parents as NCCL emits them" % v)
        log = os.path.join(tmp, "all.log")
        run(prog, dict(base, NCCL_PROFILER_PLUGIN=os.path.join(plugdir, "libnccl-profiler-test5.so"),
                       CHORUS_TEST_PROF_LOG=log), "all")
        check_all(*parse(log))
        print("one thread, two communicators: one GroupApi per group, both ranks under it")
        # A mask of Coll alone: its ancestors come, the rest does not.
        log = os.path.join(tmp, "mask.log")
        run(prog, dict(base, NCCL_PROFILER_PLUGIN=os.path.join(plugdir, "libnccl-profiler-test5.so"),
                       CHORUS_TEST_PROF_LOG=log, CHORUS_TEST_PROF_MASK=str(COLL)))
        types = sorted({e["type"] for e in parse(log)[0].values()})
        if types != [GROUP, COLL, GAPI, CAPI]:
            fail("mask Coll: event types %s" % types)
        print("mask Coll: Group, Coll, GroupApi and CollApi only")
        # A failing init, a missing library, one without a table.
        log = os.path.join(tmp, "none.log")
        run(prog, dict(base, NCCL_PROFILER_PLUGIN=os.path.join(plugdir, "libnccl-profiler-test5.so"),
                       CHORUS_TEST_PROF_LOG=log, CHORUS_TEST_PROF_FAIL="1"))
        if parse(log)[0]:
            fail("events after a failed init")
        for lib, words in ((os.path.join(tmp, "nowhere.so"), "cannot load it"),
                           (nosym, "exports no ncclProfiler_v5 .. _v1 table")):
            out = run(prog, dict(base, NCCL_PROFILER_PLUGIN=lib))
            if words not in out:
                fail("NCCL_PROFILER_PLUGIN=%s: no WARN saying '%s':\n%s" % (lib, words, out))
        print("failed init, missing library, library without a table: no events, calls right")
    print("PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
