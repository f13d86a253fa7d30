#!/usr/bin/env python3
"""perf_page.py - builds docs/PERFORMANCE.md from the run summaries in
bench/results/*.csv (bench/summarize.py writes them) and the hand-written
prose of bench/perf_page.in.md.

usage: bench/perf_page.py            write docs/PERFORMANCE.md
       bench/perf_page.py --check    exit 1 if docs/PERFORMANCE.md differs
       bench/perf_page.py --stdout   print the page

The template is markdown. A line that starts with '@' is replaced by what
it names (paths are relative to the repository):

  @run CSV...             a paragraph per run: machine, date, versions,
                          commands, where the raw output is
  @host-goals CSV...      the host-memory goals (bench/goals.py), met or
                          missed, over the runs merged (a later run's row
                          replaces an earlier one's)
  @host-tables CSV...     per collective and rank count: Chorus, Open MPI
                          and Gloo, 8 B x 4^k and the largest size
  @gpu-goals NAME=CSV...  the GPU goals (scripts/gpu_goals.py) per machine
                          and mode
  @gpu-tables CSV         per collective and mode: Chorus beside NCCL, then
                          the CUDA-graph replays
  @scale-table CSV        large communicators (scripts/scale.sh): init time,
                          shared memory, slot size, first calls

Everything else is copied as it is, so the page changes only when a summary
or the template does, and running it twice gives the same file.
Python 3.7+, standard library only.
"""
import argparse
import csv
import difflib
import os
import re
import statistics
import sys
import textwrap

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.dont_write_bytecode = True  # a check run from CTest leaves the tree as it was
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(REPO, "scripts"))
import compare  # noqa: E402
import goals  # noqa: E402
import gpu_goals  # noqa: E402
import summarize  # noqa: E402

PAGE = os.path.join(REPO, "docs", "PERFORMANCE.md")
TEMPLATE = os.path.join(HERE, "perf_page.in.md")

# bench/compare.py's order, so host and GPU sections list collectives alike.
COLL_ORDER = [c[1][:-len("_perf")] for c in compare.COLLS]
COLL_TITLE = {"all_reduce": "AllReduce", "reduce_scatter": "ReduceScatter",
              "all_gather": "AllGather", "broadcast": "Broadcast", "alltoall": "AlltoAll",
              "reduce": "Reduce", "gather": "Gather", "scatter": "Scatter",
              "sendrecv": "Send/Recv"}
COLL_NOTE = {"all_reduce": "float sum", "reduce_scatter": "float sum; size = total input",
             "all_gather": "size = total output", "broadcast": "root 0",
             "alltoall": "size = whole send buffer", "reduce": "float sum, root 0",
             "gather": "root 0; size = total output", "scatter": "root 0; size = root's input",
             "sendrecv": "ring shift: send to rank+1, receive from rank-1"}
GPU_MODES = ["g4", "procs4", "win_procs4", "g2", "procs2", "win_procs2"]
# Rows marked in merged host tables, by the run they come from (2nd, 3rd...).
MARKS = ["†", "‡", "§", "¶", "‖", "°", "◊"]


def mode_text(mode):
    n = mode.rstrip("0123456789")
    k = mode[len(n):]
    return {"g": "`-g %s`: one process drives %s GPUs" % (k, k),
            "procs": "%s processes, one GPU each" % k,
            "win_procs": "%s processes, buffers in symmetric windows (`-R 2`)" % k,
            "graph_procs": "%s processes, in CUDA graphs" % k}[n]


def mode_short(mode):
    n = mode.rstrip("0123456789")
    k = mode[len(n):]
    return {"g": "`-g %s`" % k, "procs": "%s processes" % k,
            "win_procs": "%s processes, windows" % k}[n]


def size_text(b):
    return compare.size_text(b)


def sizes_shown(sizes):
    """8 B x 4^k, and the largest size."""
    keep = set()
    s = 8
    while s <= max(sizes or [0]):
        keep.add(s)
        s *= 4
    if sizes:
        keep.add(max(sizes))
    return [s for s in sorted(sizes) if s in keep and s > 0]


def gpu_us(v):
    if v is None:
        return "-"
    return "%.0f" % v if v >= 1000 else "%.1f" % v


def gpu_bw(v):
    return "-" if v is None else "%.1f" % v


def ratio_text(r, digits=2):
    """Ratios under 1 (Chorus slower) in bold."""
    if r is None:
        return "-"
    text = "%.*f" % (digits, r)
    return "**%s**" % text if float(text) < 1 else text


def table(head, rows, align=None):
    align = align or ["---:"] * len(head)
    out = ["| " + " | ".join(head) + " |", "|" + "|".join(align) + "|"]
    out += ["| " + " | ".join(r) + " |" for r in rows]
    return out


def wrap(text):
    """Generated prose wrapped as the hand-written prose is."""
    return textwrap.wrap(text, 76, break_long_words=False, break_on_hyphens=False)


def read(path):
    return summarize.read_csv(os.path.join(REPO, path))


# ---- directives ----------------------------------------------------------------

def run_paragraph(path):
    head, _ = read(path)

    def one(key):
        return "; ".join(head.get(key, ["?"]))

    lines = ["Run `%s`: %s, %s. Chorus at %s; %s %s." % (
        path, one("machine"), one("date"), one("chorus"),
        "reference:" if "reference" in head else "versions:",
        one("reference") if "reference" in head else one("versions"))]
    cmds = head.get("command", [])
    if cmds:
        lines.append("Commands: " + "; ".join("`%s`" % c.split(" (")[0] + (
            " (" + c.split(" (", 1)[1] if " (" in c else "") for c in cmds) + ".")
    if "raw" in head:
        lines.append("Raw output: %s." % one("raw"))
    return wrap(" ".join(lines)) + [""]


def host_merged(paths):
    """{(collective, ranks, bytes): (row, index of its run)}, later runs winning."""
    merged = {}
    for i, path in enumerate(paths):
        for r in read(path)[1]:
            merged[(r["collective"], r["ranks"], r["bytes"])] = (r, i)
    return merged


def host_goals(paths):
    res = goals.load([os.path.join(REPO, p) for p in paths])
    return goals.goal_lines(res) + [""]


def host_tables(paths):
    merged = host_merged(paths)
    res = goals.load([os.path.join(REPO, p) for p in paths])
    out = []
    for coll in compare.COLLS:
        ranks = sorted({k[1] for k in merged if k[0] == coll[0]})
        if not ranks:
            continue
        name = coll[1][:-len("_perf")]
        out += ["### %s (%s)" % (COLL_TITLE[name], COLL_NOTE[name]), ""]
        for n in ranks:
            sizes = sizes_shown([k[2] for k in merged if k[0] == coll[0] and k[1] == n])
            rows, marks = [], set()
            for s in sizes:
                row, run = merged[(coll[0], n, s)]
                cells = {lib: res.cell(lib, coll, n, s) for lib in compare.LIBS}
                mark = MARKS[run - 1] if run else ""
                if mark:
                    marks.add(run)
                line = [size_text(s) + mark]
                for lib in ("chorus", "ompi", "gloo"):
                    c = cells[lib]
                    line.append("WRONG" if c and c["wrong"] else
                                compare.fmt_time(c and c["time_us"]))
                ch = cells["chorus"]
                for ref in ("ompi", "gloo"):
                    rc = cells[ref]
                    ok = ch and rc and not ch["wrong"] and not rc["wrong"] and ch["time_us"] > 0
                    r = rc["time_us"] / ch["time_us"] if ok else None
                    text = compare.fmt_ratio(r)
                    line.append("**%s**" % text if r is not None and r < 1 and text != "1.00"
                                else text)
                for lib in ("chorus", "ompi"):
                    c = cells[lib]
                    line.append(compare.fmt_bw(c and not c["wrong"] and c["busbw"] or None))
                rows.append(line)
            failed = sorted({lib for s in sizes for lib in merged[(coll[0], n, s)][0]
                             ["failed"].split()})
            out += ["**%d ranks**" % n, ""]
            out += table(["size", "Chorus µs", "Open MPI µs", "Gloo µs", "Open MPI / Chorus",
                          "Gloo / Chorus", "Chorus GB/s", "Open MPI GB/s"], rows)
            notes = ["%s Rows from the later run `%s`." % (MARKS[run - 1], paths[run])
                     for run in sorted(marks)]
            if failed:
                notes.append("Failed here: %s." % ", ".join(compare.LIB_TITLE[f] for f in failed))
            if notes:
                out += [""] + wrap(" ".join(notes))
            out.append("")
    return out


def gpu_rows(path):
    """{(collective, mode): {bytes: row}}."""
    out = {}
    for r in read(path)[1]:
        out.setdefault((r["collective"], r["mode"]), {})[r["bytes"]] = r
    return out


def lib_rows(rows, lib):
    """{bytes: (us, busbw)} of one library, as scripts/gpu_goals.py loads them."""
    us, bw = ("chorus_us", "chorus_busbw") if lib == "chorus" else ("ref_us", "ref_busbw")
    return {s: (r[us], r[bw]) for s, r in rows.items()
            if r[us] is not None and r[bw] is not None}


def goal_cell(goal, rows):
    if rows is None:
        return "-"
    c, n = lib_rows(rows, "chorus"), lib_rows(rows, "nccl")
    r = gpu_goals.check(goal, c, n)
    if r is None:
        return "-"
    digits = 2 if r["measure"] == "time" else 3
    text = "%.*fx" % (digits, r["ratio"][r["worst"]])
    if r["low"] is not None:
        text += ", %.1f GB/s" % c[r["low"]][1]
    else:
        text += " (%s)" % size_text(r["worst"])
    return ("met: " if r["ok"] else "**missed**: ") + text


def gpu_goals_tables(specs):
    out = []
    for spec in specs:
        name, _, path = spec.partition("=")
        data = gpu_rows(path)
        colls = {g[1] for g in gpu_goals.GOALS}
        modes = [m for m in GPU_MODES if any((c, m) in data for c in colls)]
        rows = []
        for goal in gpu_goals.GOALS:
            rows.append([goal[0]] + [goal_cell(goal, data.get((goal[1], m))) for m in modes])
        out += ["**%s** (`%s`)" % (name, path), ""]
        out += table(["goal"] + [mode_short(m) for m in modes], rows,
                     ["---"] + ["---"] * len(modes))
        out.append("")
    return out


def gpu_tables(path):
    data = gpu_rows(path)
    out = []
    for coll in COLL_ORDER:
        modes = [m for m in GPU_MODES if (coll, m) in data]
        if not modes:
            continue
        out += ["### %s (%s)" % (COLL_TITLE[coll], COLL_NOTE[coll]), ""]
        for m in modes:
            rows = []
            for s in sizes_shown(list(data[(coll, m)])):
                r = data[(coll, m)][s]
                ratio = (r["ref_us"] / r["chorus_us"]
                         if r["ref_us"] and r["chorus_us"] else None)
                rows.append([size_text(s), gpu_us(r["chorus_us"]), gpu_us(r["ref_us"]),
                             ratio_text(ratio), gpu_bw(r["chorus_busbw"]),
                             gpu_bw(r["ref_busbw"])])
            out += ["**%s**" % mode_text(m), ""]
            out += table(["size", "Chorus µs", "NCCL µs", "NCCL / Chorus", "Chorus GB/s",
                          "NCCL GB/s"], rows)
            out.append("")
    graphs = sorted((k for k in data if k[1].startswith("graph_")),
                    key=lambda k: (COLL_ORDER.index(k[0]), k[1]))
    if graphs:
        rows = []
        for coll, mode in graphs:
            what = "AllReduce (max)" if coll == "all_reduce" else "Send/Recv ring shift"
            for s, r in sorted(data[(coll, mode)].items()):
                ratio = (r["ref_us"] / r["chorus_us"]
                         if r["ref_us"] and r["chorus_us"] else None)
                rows.append([what, mode[len("graph_procs"):], size_text(s),
                             "%.2f" % r["chorus_us"] if r["chorus_us"] else "-",
                             "%.2f" % r["ref_us"] if r["ref_us"] else "-", ratio_text(ratio)])
        out += ["### Inside CUDA graphs", ""]
        out += wrap("One process per GPU; the operations are captured once and the graph "
                    "replayed (`tests/gpu/graph_allreduce.c`, `tests/gpu/graph_p2p.c`, the "
                    "same binary on both libraries); µs per operation.") + [""]
        out += table(["operation", "processes", "size", "Chorus µs", "NCCL µs",
                      "NCCL / Chorus"], rows, ["---", "---:", "---:", "---:", "---:", "---:"])
        out.append("")
    return out


def before_after(args):
    """Per collective and mode of a run with an earlier Chorus beside: the
    earlier library's time over this one's (above 1: faster now), geometric
    mean over sizes and the extremes, with NCCL's ratio for scale."""
    path = args[0]
    if "gpu_" in os.path.basename(path):
        data, second = gpu_rows(path), "mode"
    else:
        data, second = {}, "ranks"
        for r in read(path)[1]:
            data.setdefault((r["collective"], r["ranks"]), {})[r["bytes"]] = r
    rows = []
    for (coll, mode), by in sorted(data.items()):
        pairs = [(s, r["base_us"] / r["chorus_us"]) for s, r in sorted(by.items())
                 if r.get("base_us") and r.get("chorus_us") and s > 0]
        if not pairs:
            continue
        geo = statistics.geometric_mean(v for _, v in pairs)
        lo = min(pairs, key=lambda p: p[1])
        hi = max(pairs, key=lambda p: p[1])
        big = [v for s, v in pairs if s >= 64 << 20]
        rows.append([coll, str(mode), "%.3f" % geo, "%.2f (%s)" % (lo[1], size_text(lo[0])),
                     "%.2f (%s)" % (hi[1], size_text(hi[0])),
                     "%.3f" % statistics.geometric_mean(big) if big else "-"])
    return table(["collective", second, "geomean, every size", "lowest", "highest",
                  "geomean from 64 MiB"], rows, ["---", "---", "---:", "---:", "---:", "---:"]) + [""]


def hosts_tables(args):
    """Per layout and collective of a hosts run (scripts/gpu_hosts_bench.sh):
    time and bus bandwidth of both libraries, and NCCL's time over ours;
    where the run timed the build before too (base_us), its time and its
    time over ours."""
    path = args[0]
    head, rows_all = read(path)
    probe = "; ".join(head.get("probe", []))
    out = wrap("Run `%s`: %s, %s. Chorus at %s; reference: %s.%s Command: %s." % (
        path, "; ".join(head.get("machine", ["?"])), "; ".join(head.get("date", ["?"])),
        "; ".join(head.get("chorus", ["?"])), "; ".join(head.get("reference", ["?"])),
        " Loopback TCP probe: %s." % probe if probe else "",
        "; ".join("`%s`" % c.split(" (")[0] + (" (" + c.split(" (", 1)[1] if " (" in c else "")
                  for c in head.get("command", ["?"]))))
    out.append("")
    runs = {}
    for r in rows_all:
        runs.setdefault((r["layout"], r["collective"]), []).append(r)
    for (layout, coll), rows in runs.items():
        base = all(r.get("base_us") for r in rows)
        out.append("**%s, %s hosts x GPUs** (us; bus GB/s; NCCL's time over Chorus's, "
                   "above 1 faster%s):" % (coll, layout,
                                           "; Base: the build before, its time over "
                                           "Chorus's" if base else ""))
        out.append("")
        body = []
        for r in rows:
            b = r["bytes"]
            if b == 0:
                continue
            cu, nu = r["chorus_us"], r["nccl_us"]
            cells = [size_text(b), gpu_us(cu), gpu_bw(r["chorus_busbw"]), gpu_us(nu),
                     gpu_bw(r["nccl_busbw"]), ratio_text(nu / cu if cu > 0 else None)]
            if base:
                cells += [gpu_us(r["base_us"]), ratio_text(r["base_us"] / cu if cu > 0 else None)]
            body.append(cells)
        heads = ["size", "Chorus us", "GB/s", "NCCL us", "GB/s", "ratio"]
        if base:
            heads += ["Base us", "Base ratio"]
        out += table(heads, body, ["---:"] * len(heads))
        out.append("")
    return out


def scale_table(args):
    """Large communicators of a scale run (scripts/scale.sh), a row each."""
    path = args[0]
    head, _ = read(path)
    out = run_paragraph(path)
    with open(os.path.join(REPO, path)) as f:
        rows = list(csv.DictReader(l for l in f if not l.startswith("#") and l.strip()))
    body = [[r["ranks"], r["hosts"], r["init_median_ms"], r["init_max_ms"], r["shm_mapped_mib"],
             size_text(int(r["slot_bytes"])) if r["slot_bytes"] else "?", r["us_8B"], r["wrong"]]
            for r in rows]
    out += table(["ranks", "hosts", "init ms (median)", "init ms (slowest)",
                  "shared memory mapped per rank (MiB)", "slot", "AllReduce 8 B (us)",
                  "wrong"], body, ["---:"] * 7 + [":---"])
    out.append("")
    return out


DIRECTIVES = {
    "@run": lambda args: [l for p in args for l in run_paragraph(p)],
    "@host-goals": host_goals,
    "@host-tables": host_tables,
    "@gpu-goals": gpu_goals_tables,
    "@gpu-tables": lambda args: gpu_tables(args[0]),
    "@before-after": before_after,
    "@hosts-tables": hosts_tables,
    "@scale-table": scale_table,
}


def build(template):
    out = []
    with open(template) as f:
        for line in f:
            line = line.rstrip("\n")
            word = line.split()[0] if line.startswith("@") else None
            if word in DIRECTIVES:
                out += DIRECTIVES[word](line.split()[1:])
            elif word:
                raise SystemExit("%s: unknown directive %s" % (template, word))
            else:
                out.append(line)
    while out and out[-1] == "":
        out.pop()
    text = "\n".join(out) + "\n"
    return re.sub(r"\n{3,}", "\n\n", text)


def repeated_headings(text):
    """The first heading that repeats within its parent section, or None:
    a section pasted twice into the template shows up this way."""
    seen = {}
    for line in text.splitlines():
        if not line.startswith("#"):
            continue
        level = len(line) - len(line.lstrip("#"))
        for deeper in [k for k in seen if k > level]:
            del seen[deeper]
        names = seen.setdefault(level, set())
        if line in names:
            return line
        names.add(line)
    return None


def main(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--check", action="store_true",
                   help="compare the page with what the summaries give; exit 1 if it differs")
    p.add_argument("--stdout", action="store_true", help="print the page instead")
    p.add_argument("--template", default=TEMPLATE)
    p.add_argument("--page", default=PAGE)
    args = p.parse_args(argv)
    text = build(args.template)
    dup = repeated_headings(text)
    if dup:
        sys.stderr.write("%s: heading %r appears twice in one section\n" % (args.template, dup))
        return 1
    if args.stdout:
        sys.stdout.write(text)
        return 0
    if args.check:
        try:
            with open(args.page) as f:
                old = f.read()
        except OSError:
            old = ""
        if old == text:
            return 0
        diff = difflib.unified_diff(old.splitlines(), text.splitlines(), args.page,
                                    "bench/perf_page.py", lineterm="", n=1)
        sys.stderr.write("\n".join(list(diff)[:40]) + "\n")
        sys.stderr.write("%s is not what bench/perf_page.py builds from bench/results/*.csv "
                         "and bench/perf_page.in.md: run python3 bench/perf_page.py\n"
                         % os.path.relpath(args.page, REPO))
        return 1
    with open(args.page, "w") as f:
        f.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
