#!/usr/bin/env python3
"""trace_check.py - CHORUS_TRACE and tools/chorus_trace.py against a known straggler.

usage: trace_check.py STUCK_RANK CHORUS_TRACE_PY threads|procs NRANKS

Runs stuck_rank.c's `late` case (the last rank sleeps 1 s before
AllReduce #3) with CHORUS_TRACE in a fresh folder, then merges the files
with chorus_trace.py and checks: one file per process, each a trace that
parses; on rank 0's clock every rank has AllReduce #0-#3 on comm main, in
order, with bytes and a bus bandwidth; the clocks of one machine differ by
under a millisecond; and the summary names the last rank as #3's
straggler, about a second after the first rank to issue it.
"""
import glob
import json
import os
import re
import subprocess
import sys
import tempfile


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def main():
    if len(sys.argv) != 5:
        print(__doc__)
        return 2
    prog, tool, mode, n = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    with tempfile.TemporaryDirectory() as tmp:
        env = dict(os.environ, READY_DIR=tmp, LATE_S="1", CHORUS_STUCK_WARN="off",
                   CHORUS_TRACE=os.path.join(tmp, "t.%p.json"), NCCL_SOCKET_IFNAME="lo")
        if mode == "threads":
            run = subprocess.run([prog, "late", "threads", str(n)], env=env, timeout=120,
                                 stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            if run.returncode:
                fail("stuck_rank exited %d:\n%s" % (run.returncode, run.stdout))
        else:
            port = 10000 + os.getpid() % 20000  # below the ephemeral range (32768 up)
            procs = [subprocess.Popen([prog, "late"], stdout=subprocess.PIPE,
                                      stderr=subprocess.STDOUT, text=True,
                                      env=dict(env, RANK=str(r), WORLD_SIZE=str(n),
                                               NCCL_COMM_ID="127.0.0.1:%d" % port))
                     for r in range(n)]
            for p in procs:
                out, _ = p.communicate(timeout=120)
                if p.returncode:
                    fail("a rank exited %d:\n%s" % (p.returncode, out))
        files = sorted(glob.glob(os.path.join(tmp, "t.*.json")))
        if len(files) != (1 if mode == "threads" else n):
            fail("%d trace files" % len(files))
        for path in files:
            json.load(open(path))  # a finished run closes its array
        merged = os.path.join(tmp, "merged.json")
        run = subprocess.run([sys.executable, tool, "-o", merged] + files, timeout=60,
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        print(run.stdout)
        if run.returncode:
            fail("chorus_trace.py exited %d" % run.returncode)
        events = json.load(open(merged))
        comms = {e["pid"]: e["args"]["name"] for e in events
                 if e["ph"] == "M" and e["name"] == "process_name"}
        main_pid = [p for p, name in comms.items() if name == "comm main"]
        if len(main_pid) != 1:
            fail("communicators %s" % sorted(comms.values()))
        for r in range(n):
            mine = sorted((e for e in events if e["ph"] == "X" and e["pid"] == main_pid[0]
                           and e["tid"] == r), key=lambda e: e["ts"])
            got = [(e["name"], e["args"]["index"]) for e in mine]
            if got != [("AllReduce", k) for k in range(4)]:
                fail("rank %d's calls on comm main: %s" % (r, got))
            for e in mine:
                a = e["args"]
                if a["bytes"] != 4096 or a["count"] != 1024 or a["type"] != "float" or \
                        a["busbw_GBps"] <= 0 or e["dur"] < 0 or a["enqueue_ts"] > e["ts"] + 1:
                    fail("rank %d: %s" % (r, e))
        for path in files:
            for e in json.load(open(path)):
                if e.get("name") == "chorus_clock" and abs(e["args"]["offset_us"]) > 1000:
                    fail("clock offset %s on one machine" % e["args"])
        m = re.search(r"stragglers.*\n  comm main AllReduce #3: rank %d \([^)]*\) last, "
                      r"([\d.]+) ms after rank" % (n - 1), run.stdout)
        if not m:
            fail("the summary does not name rank %d as #3's straggler first" % (n - 1))
        if not 900 <= float(m.group(1)) <= 3000:
            fail("rank %d was %s ms late, it slept 1000" % (n - 1, m.group(1)))
    print("PASS: %s %d: the timeline names rank %d, %s ms late" % (mode, n, n - 1, m.group(1)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
