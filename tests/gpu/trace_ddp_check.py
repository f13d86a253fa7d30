#!/usr/bin/env python3
"""trace_ddp_check.py - a PyTorch run's timeline against its own call counts.

usage: trace_ddp_check.py DIR

DIR holds what the processes of one run wrote with
CHORUS_TRACE=DIR/trace.%p.json, CHORUS_STATS_INTERVAL and
CHORUS_STATS_FILE=DIR/stats.%p.jsonl (scripts/torch_ddp.sh TRACE=...).
Checked per process: every trace file parses (as the trace viewers read
it) and holds, per function, as many calls as the statistics' last line
of each of its communicators counts (so every AllReduce the job made is
on the timeline), AllReduce among them, each with a start and a
duration; then tools/chorus_trace.py merges the ranks into one timeline,
which must parse and hold every call, and its summary (time per function,
stragglers) is printed.
"""
import collections
import glob
import json
import os
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def load_trace(path):
    text = open(path).read().strip()
    try:
        return json.loads(text)
    except ValueError as e:
        fail("%s does not parse as a trace: %s" % (path, e))


def main():
    if len(sys.argv) != 2:
        print(__doc__)
        return 2
    d = sys.argv[1]
    traces = sorted(glob.glob(os.path.join(d, "trace.*.json")))
    if not traces:
        fail("no trace.*.json in %s" % d)
    total = 0
    for path in traces:
        pid = int(re.search(r"trace\.(\d+)\.json$", path).group(1))
        traced = collections.Counter()
        for e in load_trace(path):
            if e.get("ph") != "X":
                continue
            if not (isinstance(e.get("ts"), (int, float)) and e.get("dur", -1) >= 0):
                fail("%s: an event without its time: %s" % (path, e))
            traced[e["name"]] += 1
        last = {}  # comm -> its last statistics line
        for sp in glob.glob(os.path.join(d, "stats.%d.jsonl" % pid)):
            for line in open(sp):
                rec = json.loads(line)
                if rec["pid"] == pid:
                    last[rec["comm"]] = rec
        if not last:
            fail("process %d wrote no statistics" % pid)
        counted = collections.Counter()
        for rec in last.values():
            for f, c in rec["funcs"].items():
                counted[f] += c["calls"]
        if traced != counted:
            fail("process %d: the trace holds %s, the statistics count %s" %
                 (pid, dict(traced), dict(counted)))
        if not traced["AllReduce"]:
            fail("process %d: no AllReduce on its timeline" % pid)
        print("process %d: %d calls on the timeline, as counted (%s)" % (
            pid, sum(traced.values()),
            ", ".join("%s %d" % kv for kv in sorted(traced.items()))))
        total += sum(traced.values())
    merged = os.path.join(d, "merged.json")
    r = subprocess.run([sys.executable, os.path.join(HERE, "..", "..", "tools", "chorus_trace.py"),
                        "-o", merged, "--top", "3"] + traces,
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=300)
    print(r.stdout, end="")
    if r.returncode != 0:
        fail("chorus_trace.py exited %d" % r.returncode)
    events = json.load(open(merged))
    if sum(1 for e in events if e.get("ph") == "X") != total:
        fail("the merged timeline lost calls")
    if "stragglers" not in r.stdout:
        fail("no straggler summary")
    print("trace_ddp_check: ok, %d calls of %d processes on one timeline" % (total, len(traces)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
