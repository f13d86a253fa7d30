#!/usr/bin/env python3
"""Calibrates the cost model: runs a Chorus perf program with each algorithm
forced through NCCL_ALGO, several times, and prints the best (fastest) time
per size and algorithm, side by side, with the algorithm the library picks on
its own in the last column. The machine's speed changes between runs (see
docs/PERFORMANCE.md), so each algorithm's runs are interleaved with the
others' and the minimum is kept: that compares algorithms in the same mode.

usage: bench/calibrate.py [--build build] [--ranks 2] [--coll all_reduce]
                          [--algos ring,oneshot,twoshot] [--runs 5]
                          [-b 8] [-e 64M] [-f 4] [--iters 20] [--check 0]
                          [--slowest] [--median]

--iters and --check are the perf program's -n and -c; --slowest times the
slowest rank (-a 3, as bench/compare.py does) instead of rank 0; --median
keeps the median of the runs instead of the minimum (on a guest whose
memory other tenants share, the minimum of short loops can come from a
quiet moment that longer runs do not see).
"""
import argparse
import os
import re
import statistics
import subprocess
import sys

ROW = re.compile(r"^\s+(\d+)\s+(\d+)\s+\S+\s+\S+\s+-?\d+\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)")


def run(build, ranks, coll, algo, b, e, f, iters=20, check=0, slowest=False):
    env = dict(os.environ, NCCL_SOCKET_IFNAME="lo")
    if algo != "auto":
        env["NCCL_ALGO"] = "%s:%s" % (coll.replace("_", ""), algo)
    cmd = [os.path.join(build, "tools/chorusrun"), "-n", str(ranks), "--timeout", "300",
           os.path.join(build, "tools/perf/%s_perf" % coll), "-b", b, "-e", e, "-f", f,
           "-n", str(iters), "-w", "5", "-c", str(check)] + (["-a", "3"] if slowest else [])
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=400).stdout
    times = {}
    for line in out.splitlines():
        m = ROW.match(line)
        if m:
            times[int(m.group(1))] = float(m.group(3))
    return times


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--build", default="build")
    p.add_argument("--ranks", type=int, default=2)
    p.add_argument("--coll", default="all_reduce")
    p.add_argument("--algos", default="ring,oneshot,twoshot")
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("-b", default="8")
    p.add_argument("-e", default="64M")
    p.add_argument("-f", default="4")
    p.add_argument("--no-auto", action="store_true", help="skip the library's own choice")
    p.add_argument("--iters", type=int, default=20, help="timed iterations (-n)")
    p.add_argument("--check", type=int, default=0, help="checked iterations (-c)")
    p.add_argument("--slowest", action="store_true", help="the slowest rank's time (-a 3)")
    p.add_argument("--median", action="store_true", help="the median of the runs, not the best")
    p.add_argument("--fit", action="store_true",
                   help="also fit latency + size/bandwidth per algorithm (tune.c's form)")
    a = p.parse_args()
    algos = a.algos.split(",") + ([] if a.no_auto else ["auto"])
    seen = {x: {} for x in algos}
    for _ in range(a.runs):
        for algo in algos:
            for size, t in run(a.build, a.ranks, a.coll, algo, a.b, a.e, a.f, a.iters, a.check,
                               a.slowest).items():
                seen[algo].setdefault(size, []).append(t)
    keep = statistics.median if a.median else min
    best = {x: {s: keep(ts) for s, ts in d.items()} for x, d in seen.items()}
    sizes = sorted(set(s for d in best.values() for s in d))
    print("%s, %d ranks, %s of %d runs, us per op" % (a.coll, a.ranks,
                                                     "median" if a.median else "best", a.runs))
    print("%12s" % "bytes" + "".join("%12s" % x for x in algos) + "   fastest")
    forced = [x for x in algos if x != "auto"]
    for s in sizes:
        row = [best[x].get(s) for x in algos]
        valid = [(best[x][s], x) for x in forced if s in best[x]]
        fastest = min(valid)[1] if valid else "-"
        print("%12d" % s + "".join("%12s" % ("%.2f" % t if t is not None else "-")
                                   for t in row) + "   " + fastest)
    if a.fit:
        for x in forced:
            pts = [(s, t) for s, t in best[x].items() if s > 0]
            if len(pts) >= 2:
                al, bw = fit(pts)
                print("fit %s %s n=%d: %.3f us + bytes / %.0f B/us" % (a.coll, x, a.ranks, al, bw))
    return 0


def fit(points):
    """Least squares of t = alpha + bytes/bw, weighted by 1/t^2 (relative
    error), over (bytes, us) points."""
    sw = sws = swss = swt = swst = 0.0
    for s, t in points:
        w = 1.0 / (t * t)
        sw, sws, swss = sw + w, sws + w * s, swss + w * s * s
        swt, swst = swt + w * t, swst + w * s * t
    det = sw * swss - sws * sws
    alpha = (swt * swss - sws * swst) / det
    slope = (sw * swst - sws * swt) / det
    return alpha, (1.0 / slope if slope > 0 else float("inf"))


if __name__ == "__main__":
    sys.exit(main())
