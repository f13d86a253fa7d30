#!/usr/bin/env python3
"""goals.py - checks a saved side-by-side run against the host-memory
performance goals and prints markdown: one line per goal (met, or the
worst ratio and where), then a compact table of Chorus/OMPI and
Chorus/Gloo time ratios per collective, rank count and size.

usage: bench/goals.py RUN.jsonl
       bench/goals.py bench/results/host_<name>.csv [LATER.csv ...]

A run's .jsonl (bench/compare.py), or its summary (bench/summarize.py
host); with several summaries, a row of a later one replaces the earlier
rows of the same collective, rank count and size.

The goals (issue 3; float, ranks as processes, same run):
  AllReduce 8 B..4 KiB      >= 1x Open MPI at 2 ranks, >= 2x at 4 ranks
  AllReduce 64 KiB..256 MiB >= 2x Open MPI busbw, >= 10x Gloo busbw
  AllGather, ReduceScatter, Broadcast, AlltoAll from 64 KiB: >= 1x Open MPI
  (issue 26) Reduce, Gather, Scatter, Send/Recv from 64 KiB: >= 1x Open MPI
A ratio is the reference's median time over Chorus's (= busbw ratio).
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import compare  # noqa: E402

KIB, MIB = 1 << 10, 1 << 20
BY_NAME = {c[0]: c for c in compare.COLLS}

GOALS = [
    # (title, collective, ranks, lo, hi, reference, factor)
    ("AllReduce 8 B-4 KiB, 2 ranks: no slower than Open MPI", "allreduce", 2, 8, 4 * KIB, "ompi", 1.0),
    ("AllReduce 8 B-4 KiB, 4 ranks: 2x Open MPI", "allreduce", 4, 8, 4 * KIB, "ompi", 2.0),
    ("AllReduce 64 KiB-256 MiB, 2 ranks: 2x Open MPI", "allreduce", 2, 64 * KIB, 256 * MIB, "ompi", 2.0),
    ("AllReduce 64 KiB-256 MiB, 4 ranks: 2x Open MPI", "allreduce", 4, 64 * KIB, 256 * MIB, "ompi", 2.0),
    ("AllReduce 64 KiB-256 MiB, 2 ranks: 10x Gloo", "allreduce", 2, 64 * KIB, 256 * MIB, "gloo", 10.0),
    ("AllReduce 64 KiB-256 MiB, 4 ranks: 10x Gloo", "allreduce", 4, 64 * KIB, 256 * MIB, "gloo", 10.0),
]
for coll, title in (("allgather", "AllGather"), ("reducescatter", "ReduceScatter"),
                    ("broadcast", "Broadcast"), ("alltoall", "AlltoAll"), ("reduce", "Reduce"),
                    ("gather", "Gather"), ("scatter", "Scatter"), ("sendrecv", "Send/Recv")):
    for n in (2, 4):
        GOALS.append(("%s from 64 KiB, %d ranks: Open MPI's busbw" % (title, n), coll, n,
                      64 * KIB, 256 * MIB, "ompi", 1.0))


def load(paths):
    """compare.Results of a .jsonl, or of summaries merged in order."""
    if len(paths) == 1 and paths[0].endswith(".jsonl"):
        return compare.Results.load(paths[0])
    import summarize  # only summaries need it
    merged = {}
    for path in paths:
        for r in summarize.read_csv(path)[1]:
            merged[(r["collective"], r["ranks"], r["bytes"])] = r
    res = compare.Results()
    for (name, n, size), r in merged.items():
        coll = BY_NAME[name]
        for lib in compare.LIBS:
            us = r.get(summarize.HOST_LIB_COLUMN[lib])
            if us is not None:
                res.add(lib, 1, [{"collective": coll[1], "size": size, "nranks": n,
                                  "out_of_place": {"time_us": us,
                                                   "wrong": int(lib in r["wrong"].split())}}])
        for lib in r["failed"].split():
            if not res.errors(lib, coll, n):
                res.fail(lib, name, n, 1, "failed")
    return res


def ratio(res, coll, n, size, ref):
    ch = res.cell("chorus", coll, n, size)
    rc = res.cell(ref, coll, n, size)
    if not ch or not rc or ch["wrong"] or rc["wrong"] or ch["time_us"] <= 0:
        return None
    return rc["time_us"] / ch["time_us"]


def goal_lines(res):
    out = ["| goal | sizes compared | met at | worst ratio (size) | verdict |",
           "|---|---:|---:|---:|---|"]
    for title, name, n, lo, hi, ref, factor in GOALS:
        coll = BY_NAME[name]
        rs = [(s, ratio(res, coll, n, s, ref)) for s in res.sizes(coll, n) if lo <= s <= hi]
        rs = [(s, r) for s, r in rs if r is not None]
        if not rs:
            out.append("| %s | 0 | - | - | not measured |" % title)
            continue
        met = sum(1 for _, r in rs if r >= factor)
        ws, wr = min(rs, key=lambda x: x[1])
        verdict = "met" if met == len(rs) else "missed at %d of %d sizes" % (len(rs) - met, len(rs))
        out.append("| %s | %d | %d | %s (%s) | %s |" % (
            title, len(rs), met, compare.fmt_ratio(wr), compare.size_text(ws), verdict))
    return out


def ratio_table(res, ref):
    names = [c[0] for c in compare.COLLS]
    cols = [(name, n) for name in names for n in (2, 4)
            if res.sizes(BY_NAME[name], n)]
    sizes = sorted({s for name, n in cols for s in res.sizes(BY_NAME[name], n)})
    head = "| size | " + " | ".join("%s n=%d" % (name, n) for name, n in cols) + " |"
    out = [head, "|---:|" + "---:|" * len(cols)]
    for s in sizes:
        cells = []
        for name, n in cols:
            r = ratio(res, BY_NAME[name], n, s, ref) if s > 0 else None
            cells.append(compare.fmt_ratio(r))
        if all(c == "-" for c in cells):
            continue
        out.append("| %s | %s |" % (compare.size_text(s), " | ".join(cells)))
    return out


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    res = load(sys.argv[1:])
    print("\n".join(goal_lines(res)))
    print("\n#### Chorus/Open MPI (time ratio; above 1 Chorus is faster)\n")
    print("\n".join(ratio_table(res, "ompi")))
    print("\n#### Chorus/Gloo (time ratio)\n")
    print("\n".join(ratio_table(res, "gloo")))


if __name__ == "__main__":
    main()
