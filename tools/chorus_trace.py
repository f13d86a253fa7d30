#!/usr/bin/env python3
"""chorus_trace.py - merges CHORUS_TRACE files into one timeline and names the stragglers.

usage: chorus_trace.py [-o MERGED.json] [--top N] TRACE.json...

Each process that ran with CHORUS_TRACE=path wrote a Chrome trace event
file (a run cut short leaves it without its closing bracket: read anyway).
Every communicator's ranks are placed on rank 0's clock (the offset each
rank measured at init, its "chorus_clock" record) and written to one file
(default chorus-trace.json) that Perfetto or chrome://tracing opens: a
process per communicator, a thread per rank. A call captured in a CUDA
graph appears once per replay (its "replay" number), each replay matched
across the ranks as a call of its own. The summary printed: per
communicator and function the calls, their mean time and bus bandwidth;
then the stragglers: for each call, the last rank to issue it and how long
after the first rank (and after the median one) it did, the N latest
(default 10), and each rank's lateness summed over all calls.
"""
import argparse
import json
import statistics
import sys


def load(path):
    """The events of one trace file."""
    text = open(path).read().strip()
    if text.endswith(","):
        text = text[:-1]
    if not text.endswith("]"):
        text += "]"
    return json.loads(text)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("-o", "--output", default="chorus-trace.json")
    ap.add_argument("--top", type=int, default=10)
    ap.add_argument("traces", nargs="+")
    args = ap.parse_args()
    offset, nranks, where = {}, {}, {}  # (comm, rank) -> us; comm -> n; (comm, rank) -> text
    calls = []  # (comm, rank, event)
    for path in args.traces:
        events = load(path)
        slots = {}  # (pid, tid) of this file -> comm label
        for e in events:
            if e.get("ph") == "M" and e.get("name") == "chorus_clock":
                a = e["args"]
                slots[(e["pid"], e["tid"])] = a["comm"]
                offset[(a["comm"], a["rank"])] = a["offset_us"]
                nranks[a["comm"]] = a["nranks"]
                where[(a["comm"], a["rank"])] = "host %s, pid %d" % (a["host"], a["os_pid"])
        for e in events:
            if e.get("ph") == "X":
                calls.append((e["args"]["comm"], e["pid"], e))
    if not calls:
        print("no calls in %s" % " ".join(args.traces))
        return 1
    comms = sorted(nranks)
    out = []
    for ci, c in enumerate(comms):
        out.append({"name": "process_name", "ph": "M", "pid": ci, "args": {"name": "comm " + c}})
        for r in range(nranks[c]):
            out.append({"name": "thread_name", "ph": "M", "pid": ci, "tid": r,
                        "args": {"name": "rank %d (%s)" % (r, where.get((c, r), "?"))}})
    by_call = {}  # (comm, func, index, replay, p2p) -> {rank: (issued, start, end, busbw)}
    for c, r, e in calls:
        off = offset.get((c, r), 0.0)
        a = dict(e["args"])
        ts = e["ts"] + off
        a["enqueue_ts"] = a["enqueue_ts"] + off
        out.append(dict(e, pid=comms.index(c), tid=r, ts=round(ts, 3), args=a))
        key = (c, e["name"], a["index"], a.get("replay", -1), e["cat"] == "p2p")
        by_call.setdefault(key, {})[r] = (a["enqueue_ts"], ts, ts + e["dur"], a["busbw_GBps"])
    with open(args.output, "w") as f:
        json.dump(out, f)
    print("merged %d calls of %d communicator(s) into %s" % (len(calls), len(comms), args.output))
    for c in comms:
        print("comm %s: %d ranks" % (c, nranks[c]))
        funcs = {}
        for (cc, name, _, _, _), ranks in by_call.items():
            if cc == c:
                funcs.setdefault(name, []).append(ranks)
        for name in sorted(funcs):
            times = [e - s for ranks in funcs[name] for (_, s, e, _) in ranks.values()]
            bws = [b for ranks in funcs[name] for (_, _, _, b) in ranks.values()]
            print("  %-14s %6d calls, %10.1f us mean, %8.2f GB/s mean bus bandwidth" % (
                name, len(funcs[name]), statistics.mean(times), statistics.mean(bws)))
    late, total = [], {}
    for (c, name, index, _, p2p), ranks in by_call.items():
        if p2p or len(ranks) < 2:
            continue
        issued = sorted((t, r) for r, (t, _, _, _) in ranks.items())
        first, last = issued[0], issued[-1]
        median = statistics.median(t for t, _ in issued)
        late.append((last[0] - first[0], last[0] - median, c, name, index, last[1], first[1]))
        for t, r in issued:
            total[(c, r)] = total.get((c, r), 0.0) + (t - first[0])
    late.sort(reverse=True)
    print("stragglers (the last rank to issue a call, after the first to):")
    for after_first, after_median, c, name, index, r, r0 in late[:args.top]:
        print("  comm %s %s #%d: rank %d (%s) last, %.3f ms after rank %d, %.3f ms after the "
              "median" % (c, name, index, r, where.get((c, r), "?"), after_first / 1e3, r0,
                          after_median / 1e3))
    print("lateness per rank (summed over its calls, after the first rank to issue each):")
    for (c, r), t in sorted(total.items(), key=lambda kv: -kv[1])[:args.top]:
        print("  comm %s rank %d: %.3f ms" % (c, r, t / 1e3))
    return 0


if __name__ == "__main__":
    sys.exit(main())
