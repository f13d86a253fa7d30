#!/usr/bin/env python3
"""gpu_goals.py - issue 4's performance goals, checked from one gpu.sh run.

usage: scripts/gpu_goals.py LOGDIR

Reads the perf programs' logs that gpu.sh's bench and big modes leave
(bench_<collective>_g<N>_{chorus,nccl}.log: the same binary against Chorus
and against NVIDIA's NCCL, in the same call) and prints, for each goal and
each -g N present, the worst ratio over the goal's sizes and whether it is
met. Ratios are NCCL's time over Chorus's (out of place), or Chorus's busbw
over NCCL's, so above 1 Chorus is faster. The goals are stated for 4xH200
with -g 4; -g 2 lines are for reference.
"""
import os
import re
import sys

ROW = re.compile(r"^\s+(\d+)\s+(\d+)\s+\S+\s+\S+\s+-?\d+\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)")
KIB, MIB, GIB = 1 << 10, 1 << 20, 1 << 30


def load(path):
    """size -> (time us, busbw GB/s), out of place."""
    rows = {}
    try:
        with open(path, errors="replace") as f:
            for line in f:
                m = ROW.match(line)
                if m:
                    rows[int(m.group(1))] = (float(m.group(3)), float(m.group(5)))
    except OSError:
        pass
    return rows


def size_name(b):
    for unit, name in ((GIB, "GiB"), (MIB, "MiB"), (KIB, "KiB")):
        if b >= unit and b % unit == 0:
            return "%d %s" % (b // unit, name)
    return "%d B" % b


# (what, collective, lowest size, highest size, measure, need, absolute busbw)
GOALS = [
    ("AllReduce 8 B-64 KiB: at most half of NCCL's time", "all_reduce", 8, 64 * KIB, "time", 2.0,
     None),
    ("AllReduce 256 KiB-16 MiB: at least 1.3x NCCL", "all_reduce", 256 * KIB, 16 * MIB, "time", 1.3,
     None),
    ("AllReduce 256 MiB and up: NCCL's busbw", "all_reduce", 256 * MIB, 1 << 40, "busbw", 1.0, None),
    ("AllGather 2 GiB: 336 GB/s and NCCL's busbw", "all_gather", 2 * GIB, 2 * GIB, "busbw", 1.0,
     336),
    ("ReduceScatter 2 GiB: 336 GB/s and NCCL's busbw", "reduce_scatter", 2 * GIB, 2 * GIB, "busbw",
     1.0, 336),
    ("Broadcast 2 GiB: 362 GB/s and NCCL's busbw", "broadcast", 2 * GIB, 2 * GIB, "busbw", 1.0, 362),
    ("Send/Recv 2 GiB: 363 GB/s and NCCL's busbw", "sendrecv", 2 * GIB, 2 * GIB, "busbw", 1.0, 363),
]


def check(goal, c, n):
    """One goal against Chorus's and NCCL's rows of one mode ({size: (us,
    busbw)} each, as load() gives): None where no size of the goal has both,
    else a dict: ok, measure, need, worst (size), ratio ({size: ratio}),
    short (sizes under the need) and, for goals with a GB/s floor, low (the
    size where Chorus's busbw is lowest)."""
    what, coll, lo, hi, measure, need, absolute = goal
    sizes = sorted(s for s in set(c) & set(n) if lo <= s <= hi)
    if not sizes:
        return None
    ratio = {}
    for s in sizes:
        if measure == "time":
            ratio[s] = n[s][0] / c[s][0] if c[s][0] > 0 else 0.0
        else:
            ratio[s] = c[s][1] / n[s][1] if n[s][1] > 0 else 0.0
    worst = min(sizes, key=lambda s: ratio[s])
    ok = all(ratio[s] >= need for s in sizes)
    low = None
    if absolute is not None:
        low = min(sizes, key=lambda s: c[s][1])
        ok = ok and c[low][1] >= absolute
    return {"ok": ok, "measure": measure, "need": need, "worst": worst, "ratio": ratio,
            "short": [s for s in sizes if ratio[s] < need], "low": low}


def verdicts(logdir, g):
    out = []
    for goal in GOALS:
        what, coll = goal[0], goal[1]
        c = load(os.path.join(logdir, "bench_%s_g%d_chorus.log" % (coll, g)))
        n = load(os.path.join(logdir, "bench_%s_g%d_nccl.log" % (coll, g)))
        r = check(goal, c, n)
        if r is None:
            out.append("  %-50s not measured" % what)
            continue
        extra = ""
        if r["low"] is not None:
            extra = ", Chorus %.1f GB/s (NCCL %.1f)" % (c[r["low"]][1], n[r["low"]][1])
        short = [size_name(s) for s in r["short"]]
        out.append("  %-50s %s: worst %.*fx at %s%s%s" %
                   (what, "met" if r["ok"] else "NOT met", 2 if r["measure"] == "time" else 3,
                    r["ratio"][r["worst"]], size_name(r["worst"]), extra,
                    "" if r["ok"] or not short else " (short at " + ", ".join(short) + ")"))
    return out


def main():
    if len(sys.argv) != 2:
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    logdir = sys.argv[1]
    for g in (4, 2):
        if not os.path.exists(os.path.join(logdir, "bench_all_reduce_g%d_chorus.log" % g)) and \
           not os.path.exists(os.path.join(logdir, "bench_sendrecv_g%d_chorus.log" % g)):
            continue
        print("# goals, -g %d, NCCL in the same call (ratio above 1: Chorus faster)" % g)
        for line in verdicts(logdir, g):
            print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
