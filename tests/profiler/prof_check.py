#!/usr/bin/env python3
"""prof_check.py - the profiler plugin interface against a plugin of every version.

usage: prof_check.py PROF_CALLS PLUGIN_DIR NOSYM_LIB [LOOP_PLUGIN_DIR]

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

Across the network: versions 5, 4 and 1 with the 2 ranks as processes on
hosts of their own (HARNESS_HOSTS=2: their messages go over TCP) and a
Send/Recv of 1 MiB besides (version 5 with 4 lanes: that Send cut in 4,
a ProxyOp per lane, the lane its channel, the lane threads' ProxyCtrl
events (Sleep, Append with the calls taken, Active), and in the timeline of
CHORUS_TRACE too that Send by its whole count). Checked per rank: each ProxyOp under one of
its calls, naming the other rank, its own process, a chunk, as many steps
as it then has for a Send or Recv (0 for a collective); each
ProxyStep under a ProxyOp, numbered from 0, its states in NCCL's order (sends
SendGPUWait, SendPeerWait (from version 4), SendWait with its bytes;
receives RecvWait, RecvFlushWait, RecvGPUWait with its bytes), stopped before its
ProxyOp; the bytes of a Send's and a Recv's steps add up to the call's
size, those a rank's collective sent to those its peer's same call
received (at least the peer's whole input for AllReduce). A mask of
ProxyStep alone brings its ancestors (ProxyOp, the calls, their groups)
and nothing else. With LOOP_PLUGIN_DIR (tests/netplug's loop plugins),
the same through the loop network plugin of version 11 (profiler 5) and
10 (profiler 3), which reports each send as an event of its own: each
under its message's ProxyStep, with its id, updated and stopped.
"""
import glob
import os
import re
import subprocess
import sys
import tempfile

GROUP, COLL, P2P, KCH, GAPI, CAPI, PAPI = 1, 2, 4, 64, 256, 512, 1024
POP, PSTEP, PCTRL, PNET = 8, 16, 32, 128
LOOP_PROF_ID = (2 << 16) | 1  # tests/netplug/loop_plugin.c's events (LOOP_PROF=1)
BIG = 1 << 20


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def run(prog, env, *mode):
    r = subprocess.run([prog, "2", *mode], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       text=True, timeout=120)
    if r.returncode != 0 or "ok" not in r.stdout.split():
        fail("prof_calls: exit %d:\n%s" % (r.returncode, r.stdout))
    return r.stdout


def parse_log(path):
    """The plugin's log: events by id, stops in order, each handle's last
    record (its words), inits, finalizes, every record as (id, state, value)."""
    events, stops, records, inits, fin, recs = {}, [], {}, [], 0, []
    if not os.path.exists(path):
        return events, stops, records, inits, fin, recs
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
            records[int(w[1])] = w
            recs.append((int(w[1]), int(w[3]), int(w[5]) if len(w) > 5 else 0))
    return events, stops, records, inits, fin, recs


def parse(path):
    return parse_log(path)[:5]


def parse_steps(path):
    """A process's log: its events, the order of stops, every record."""
    events, stops, _, _, _, recs = parse_log(path)
    return events, stops, recs


def step_bytes(v, where, events, stops, recs, pop):
    """Checks ProxyOp pop's steps; returns the bytes they moved."""
    steps = sorted((e for e in events.values() if e["type"] == PSTEP and e["parent"] == pop["id"]),
                   key=lambda e: e["id"])
    if [int(e["step"]) for e in steps] != list(range(len(steps))):
        fail("%s: ProxyOp %s's steps numbered %s" % (where, pop, [e["step"] for e in steps]))
    send = pop["send"] == "1"
    total = 0
    for e in steps:
        states = [(st, val) for (i, st, val) in recs if i == e["id"]]
        seq = [st for st, _ in states]
        if send:
            if seq != ([8, 20, 9] if v >= 4 else [8, 9]):
                fail("%s: send step %s states %s" % (where, e, seq))
        elif seq != [10, 11, 12]:
            fail("%s: receive step %s states %s" % (where, e, seq))
        total += states[-1][1]
        if e["id"] not in stops or stops.index(e["id"]) > stops.index(pop["id"]):
            fail("%s: step %s not stopped before its ProxyOp %s" % (where, e, pop))
    return total


def check_netplugin(v, logs):
    """prof_calls net through the loop network plugin (LOOP_PROF=1): each
    message it sends is an event of its own (NetPlugin) under that message's
    ProxyStep, with its id, an update (state 21) from version 4 and a stop."""
    for path in logs:
        events, stops, recs = parse_steps(path)
        where = "netplugin v%d %s" % (v, os.path.basename(path))
        nets = [e for e in events.values() if e["type"] == PNET]
        sends = {e["id"] for e in events.values() if e["type"] == PSTEP and
                 events.get(e["parent"], {}).get("send") == "1"}
        if not nets or {e["parent"] for e in nets} != sends or len(nets) != len(sends):
            fail("%s: %d NetPlugin events under %d of %d send steps" % (
                where, len(nets), len({e["parent"] for e in nets} & sends), len(sends)))
        for e in nets:
            states = [st for (i, st, _) in recs if i == e["id"]]
            if e["netid"] != str(LOOP_PROF_ID) or states != ([21] if v >= 4 else []) or \
                    e["id"] not in stops:
                fail("%s: NetPlugin %s states %s" % (where, e, states))


def check_ctrl(where, events, recs, lanes):
    """The lane threads' ProxyCtrl events: none without lanes; with them,
    each a Sleep (15 then 16: woken), an Append (17, then 18 with the calls
    taken) or a run (14 Active, then 13 Idle), no parent, as many runs as
    appends, and some calls taken."""
    ctrl = [e for e in events.values() if e["type"] == PCTRL]
    if lanes == 1:
        if ctrl:
            fail("%s: ProxyCtrl events without lane threads" % where)
        return
    kinds, taken = {}, 0
    for e in ctrl:
        seq = [(st, val) for (i, st, val) in recs if i == e["id"]]
        states = tuple(st for st, _ in seq)
        if e["parent"] != 0 or states not in ((15, 16), (17, 18), (14, 13)):
            fail("%s: ProxyCtrl %s states %s" % (where, e, seq))
        kinds[states] = kinds.get(states, 0) + 1
        if states == (17, 18):
            taken += seq[1][1]
    if kinds.get((17, 18), 0) != kinds.get((14, 13), -1) or not taken:
        fail("%s: ProxyCtrl events %s, %d calls taken" % (where, kinds, taken))


def check_net(v, logs, lanes):
    """prof_calls net on 2 hosts: the proxy events of each process's log; with
    lanes > 1 the large Send's ProxyOps one per lane (its channel)."""
    if len(logs) != 2:
        fail("net v%d: %d process logs" % (v, len(logs)))
    moved = {}  # (rank, func, seq, direction) -> bytes
    for path in logs:
        pid = int(re.search(r"(\d+)\.log$", path).group(1))
        events, stops, recs = parse_steps(path)
        if sorted(stops) != sorted(events):
            fail("net v%d: started %s, stopped %s" % (v, sorted(events), sorted(stops)))
        r = next(iter(events.values()))["rank"]
        where = "net v%d rank %d" % (v, r)
        pops = [e for e in events.values() if e["type"] == POP]
        calls = {e["id"]: e for e in events.values() if e["type"] in (COLL, P2P)}
        if not pops:
            fail("%s: no ProxyOp events" % where)
        for pop in pops:
            call = calls.get(pop["parent"])
            nsteps = sum(1 for e in events.values() if e["type"] == PSTEP and
                         e["parent"] == pop["id"]) if call and call["type"] == P2P else 0
            if not call or pop["peer"] != str(1 - r) or pop["pid"] != str(pid) or \
                    int(pop["chunk"]) <= 0 or pop["nsteps"] != str(nsteps) or \
                    pop["send"] not in "01":
                fail("%s: ProxyOp %s (its call %s)" % (where, pop, call))
            if v >= 4 and (pop["id"], 19) not in [(i, st) for (i, st, _) in recs]:
                fail("%s: ProxyOp %s never in progress" % (where, pop))
            # A collective by its sequence number (its peer's is the same), a P2p by its event.
            key = (r, call["func"], call["seq"] if "seq" in call else "p%d" % call["id"],
                   pop["send"])
            moved[key] = moved.get(key, 0) + step_bytes(v, where, events, stops, recs, pop)
        for e in events.values():
            if e["type"] == PSTEP and events.get(e["parent"], {}).get("type") != POP:
                fail("%s: ProxyStep %s not under a ProxyOp" % (where, e))
        send, recv = ("6", "7") if v == 1 else ("Send", "Recv")
        big = [c["id"] for c in calls.values() if c["func"] == send and c["count"] == str(BIG)]
        chans = sorted(int(p["channel"]) for p in pops if p["parent"] in big)
        if chans != list(range(lanes)):
            fail("%s: the %d-byte Send's ProxyOps on channels %s, want one per lane of %d" % (
                where, BIG, chans, lanes))
        for func, want in ((send, BIG), (recv, BIG)):
            got = sorted(b for (rk, f, _, _), b in moved.items() if rk == r and f == func)
            if got != sorted([64, want]):
                fail("%s: %s steps moved %s bytes, want 64 and %d" % (where, func, got, want))
        check_ctrl(where, events, recs, lanes)
    allreduce, bcast = ("4", "0") if v == 1 else ("AllReduce", "Broadcast")
    for (r, func, seq, d), sent in moved.items():
        if d != "1" or func not in (allreduce, bcast):
            continue
        got = moved.get((1 - r, func, seq, "0"), 0)
        if got != sent:
            fail("net v%d: rank %d's %s #%s sent %d bytes, rank %d's received %d" % (
                v, r, func, seq, sent, 1 - r, got))
    for r in (0, 1):
        for seq in ("0", "1"):
            if moved.get((r, allreduce, seq, "0"), 0) < 4096:
                fail("net v%d: rank %d's AllReduce #%s received under 4096 bytes" % (v, r, seq))
    if moved.get((1, bcast, "0", "0"), 0) < 1024:
        fail("net v%d: rank 1's Broadcast received under 1024 bytes" % v)


def check_trace_counts(d):
    """The timeline (CHORUS_TRACE) of the run whose large Send was cut across
    lanes names it by its whole count, as the profiler's events do."""
    counts = []
    for path in glob.glob(os.path.join(d, "t.*.json")):
        counts += re.findall(r'"name":"Send".*?"count":(\d+)', open(path).read())
    if sorted(counts) != sorted(["64", str(BIG)] * 2):
        fail("net: the timeline's Sends have counts %s, want 64 and %d on each rank" % (
            counts, BIG))


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
    if len(sys.argv) not in (4, 5):
        print(__doc__)
        return 2
    prog, plugdir, nosym = sys.argv[1:4]
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
        # Across the network: processes on hosts of their own, a log each.
        net = dict(base, HARNESS_HOSTS="2")
        for v, lanes in ((5, 4), (4, 1), (1, 1)):
            d = os.path.join(tmp, "net%d" % v)
            os.mkdir(d)
            run(prog, dict(net, NCCL_PROFILER_PLUGIN=os.path.join(
                plugdir, "libnccl-profiler-test%d.so" % v), CHORUS_HOST_LANES=str(lanes),
                CHORUS_TEST_PROF_LOG=os.path.join(d, "%d.log"),
                CHORUS_TRACE=os.path.join(d, "t.%p.json")), "net")
            check_net(v, sorted(os.path.join(d, f) for f in os.listdir(d)
                                if f.endswith(".log")), lanes)
            if lanes > 1:
                check_trace_counts(d)
            print("net v%d, %d lane(s): ProxyOp and ProxyStep events, states and bytes" % (
                v, lanes))
        d = os.path.join(tmp, "netmask")
        os.mkdir(d)
        run(prog, dict(net, NCCL_PROFILER_PLUGIN=os.path.join(plugdir, "libnccl-profiler-test5.so"),
                       CHORUS_TEST_PROF_LOG=os.path.join(d, "%d.log"),
                       CHORUS_TEST_PROF_MASK=str(PSTEP)), "net")
        for f in os.listdir(d):
            types = sorted({e["type"] for e in parse_steps(os.path.join(d, f))[0].values()})
            if types != [GROUP, COLL, P2P, POP, PSTEP, GAPI, CAPI, PAPI]:
                fail("mask ProxyStep: event types %s" % types)
        print("mask ProxyStep: its ancestors and itself only")
        loops = sys.argv[4] if len(sys.argv) > 4 else None
        for v, netv in ((5, 11), (3, 10)) if loops else ():
            d = os.path.join(tmp, "netplugin%d" % v)
            os.mkdir(d)
            run(prog, dict(net, NCCL_PROFILER_PLUGIN=os.path.join(
                plugdir, "libnccl-profiler-test%d.so" % v), LOOP_PROF="1",
                NCCL_NET_PLUGIN=os.path.join(loops, "libnccl-net-loop%d.so" % netv),
                CHORUS_TEST_PROF_LOG=os.path.join(d, "%d.log")), "net")
            check_netplugin(v, sorted(os.path.join(d, f) for f in os.listdir(d)))
            print("netplugin v%d, network plugin v%d: its events under their steps" % (v, netv))
    print("PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
