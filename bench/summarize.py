#!/usr/bin/env python3
"""summarize.py - turns a benchmark run's raw output into the compact CSV
that bench/results/ keeps and bench/perf_page.py reads.

usage:
  bench/summarize.py host RUN.jsonl -o bench/results/host_<name>.csv
  bench/summarize.py gpu [--machine M] [--date D] [--chorus C] [--reference R]
                     [--command TEXT]... -o bench/results/gpu_<name>.csv INPUT...

host: a run of bench/compare.py (its .jsonl, every library and round). One
row per collective, rank count and size: the median over rounds of the
slowest rank's time per operation, for Chorus, Open MPI and Gloo, and which
libraries gave wrong results or failed there.

gpu: runs of scripts/gpu.sh (bench and big modes). Each INPUT is the folder
of its logs, its logs.tgz, or its printed output (summary.txt, or a file
holding several of them). Logs are read from bench_<collective>_<mode>_
<chorus|nccl>.log (nccl-tests rows, out of place) and from the CUDA-graph
replays (check_graph_procsN.log, graph_nccl_procsN.log and their _p2p_
twins); printed output from its per-size lines (big mode), its tables, and
its graph-replay lines. A later INPUT replaces an earlier one's row of the
same collective, mode and size, unless it has only one library there and
the earlier one has both. The machine and date are read from printed output
when it has them; the options override that.

The first lines of each CSV are '# key: value' comments (machine, date,
versions, command); bench/perf_page.py shows them above the run's tables.
Python 3.7+, standard library only.
"""
import argparse
import csv
import io
import os
import re
import sys
import tarfile

HERE = os.path.dirname(os.path.abspath(__file__))

GPU_COLUMNS = ["collective", "mode", "bytes", "chorus_us", "ref_us", "chorus_busbw", "ref_busbw"]
# A run with an earlier Chorus beside (gpu_bench.sh BASE_LIB, compare.py
# --base-lib) adds its columns.
GPU_BASE_COLUMNS = ["base_us", "base_busbw"]
HOST_COLUMNS = ["collective", "ranks", "bytes", "chorus_us", "ompi_us", "gloo_us", "wrong",
                "failed"]
HOST_LIB_COLUMN = {"chorus": "chorus_us", "chorusbase": "base_us", "ompi": "ompi_us",
                   "gloo": "gloo_us"}

# An nccl-tests result row: size count type redop root, then out of place
# time algbw busbw (the in-place columns follow and are not used).
ROW = re.compile(r"^\s+(\d+)\s+(\d+)\s+\S+\s+\S+\s+-?\d+\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)")
# gpu.sh labels: <collective>_<mode>, mode g<N>, procs<N> or win_procs<N>.
LABEL = re.compile(r"^([a-z_]+?)_((?:win_)?procs\d+|g\d+)$")
# big mode prints each row prefixed with its label and library.
BIG_ROW = re.compile(r"^\s*([a-z_]+\d+) (chorus|chorusbase|nccl):(\s+\d+\s+\d+\s+\S+\s+\S+\s+-?\d+\s+"
                     r"[\d.]+\s+[\d.]+\s+[\d.]+.*)$")
# gpu.sh's table titles, e.g. "all_reduce, 4 GPUs, -g 4 (float, ...)".
TABLE_TITLE = re.compile(r"^([a-z_]+), (\d+) GPUs, (-g \d+|1 process each)"
                         r"(, symmetric windows \(-R 2\))? \(float, out of place")
TABLE_ROW = re.compile(r"^\|\s*(\d+)\s*\|\s*([\d.]+|-)\s*\|\s*([\d.]+|-)\s*\|\s*([\d.]+|-)\s*\|"
                       r"\s*([\d.]+|-)\s*\|")
GRAPH = re.compile(r"^\s*(NCCL )?graph replay: (\d+) ranks, (\d+) floats: ([\d.]+) us per "
                   r"(AllReduce|ring shift)")
STAMP = re.compile(r"^# (\d{4}-\d\d-\d\d)T[\d:]+Z \S+: (\d+) GPU\(s\), mode")
SMI = re.compile(r"^(\d+), (NVIDIA [^,]+), (\d+) MiB, ([\d.]+)$")
TOPO = re.compile(r"^GPU0\s+X\s+(NV\d+|PIX|PXB|PHB|NODE|SYS)")
LIBVER = re.compile(r"nccl-library=(\d+)")


# ---- GPU runs ------------------------------------------------------------------

class Call:
    """Rows of one gpu.sh run: (collective, mode, bytes) -> {lib: (us, busbw)}."""

    def __init__(self):
        self.rows = {}
        self.info = {}  # what the output says about the machine and libraries

    def put(self, coll, mode, size, lib, us, busbw, replace=True):
        cell = self.rows.setdefault((coll, mode, size), {})
        if replace or lib not in cell:
            cell[lib] = (us, busbw)


def graph_key(m):
    ranks, floats, what = int(m.group(2)), int(m.group(3)), m.group(5)
    coll = "all_reduce" if what == "AllReduce" else "sendrecv"
    return coll, "graph_procs%d" % ranks, floats * 4


def read_log(call, name, text):
    """One gpu.sh log file, by its name."""
    base = os.path.basename(name)
    m = re.match(r"^bench_(.+)_(chorus|chorusbase|nccl)\.log$", base)
    if m:
        lab = LABEL.match(m.group(1))
        if not lab:
            return
        for line in text.splitlines():
            r = ROW.match(line)
            if r:
                call.put(lab.group(1), lab.group(2), int(r.group(1)), m.group(2),
                         float(r.group(3)), float(r.group(5)))
            v = LIBVER.search(line)
            if v and m.group(2) == "nccl":
                call.info.setdefault("nccl_code", int(v.group(1)))
        return
    # The default-setting graph checks and NCCL's runs of the same programs
    # (gpu.sh runs the graph test under forced settings too; those are not
    # the numbers to compare).
    g = re.match(r"^(check_graph(?:_p2p)?_procs\d+|graph(?:_p2p)?_nccl_procs\d+)\.log$", base)
    if g:
        lib = "nccl" if "_nccl_" in base else "chorus"
        for line in text.splitlines():
            r = GRAPH.match(line)
            if r:
                call.put(*graph_key(r), lib, float(r.group(4)), None)


def read_printed(call, text):
    """gpu.sh's printed output: big-mode rows first, tables only where a
    row is missing (tables round to 0.1), graph replays, machine lines."""
    title = None
    gpus = {}
    for line in text.splitlines():
        m = BIG_ROW.match(line)
        if m:
            lab, r = LABEL.match(m.group(1)), ROW.match(m.group(3))
            if lab and r:
                call.put(lab.group(1), lab.group(2), int(r.group(1)), m.group(2),
                         float(r.group(3)), float(r.group(5)))
            continue
        m = GRAPH.match(line)
        if m:
            call.put(*graph_key(m), "nccl" if m.group(1) else "chorus", float(m.group(4)), None)
            continue
        m = STAMP.match(line)
        if m:
            call.info.setdefault("date", m.group(1))
            continue
        m = SMI.match(line.strip())
        if m:
            gpus[int(m.group(1))] = (m.group(2), m.group(4))
            continue
        m = TOPO.match(line)
        if m:
            call.info.setdefault("link", m.group(1))
            continue
        m = TABLE_TITLE.match(line)
        if m:
            n = m.group(2)
            mode = ("g" + n) if m.group(3).startswith("-g") else ("procs" + n)
            title = (m.group(1), ("win_" + mode) if m.group(4) else mode)
            continue
        m = TABLE_ROW.match(line)
        if m and title:
            vals = [None if v == "-" else float(v) for v in m.group(2, 3, 4, 5)]
            size = int(m.group(1))
            for lib, us, bw in (("chorus", vals[0], vals[2]), ("nccl", vals[1], vals[3])):
                if us is not None:
                    call.put(title[0], title[1], size, lib, us, bw, replace=False)
        elif line.strip() and not line.startswith("|"):
            title = None  # the table ended
    if gpus:
        names = sorted({v[0] for v in gpus.values()})
        drivers = sorted({v[1] for v in gpus.values()})
        call.info.setdefault("gpus", "%dx %s" % (len(gpus), "/".join(names)))
        call.info.setdefault("driver", "/".join(drivers))


def read_input(path):
    call = Call()
    if os.path.isdir(path):
        for name in sorted(os.listdir(path)):
            if name.endswith(".log"):
                with open(os.path.join(path, name), errors="replace") as f:
                    read_log(call, name, f.read())
    elif path.endswith((".tgz", ".tar.gz")):
        with tarfile.open(path) as tar:
            for member in tar.getmembers():
                if member.isfile() and member.name.endswith(".log"):
                    data = tar.extractfile(member).read().decode("utf-8", "replace")
                    read_log(call, member.name, data)
    else:
        with open(path, errors="replace") as f:
            read_printed(call, f.read())
    return call


def merge(calls):
    """Later calls win, except that a row with both libraries is not replaced
    by one with a single library (a call cut short by its time limit)."""
    rows, info = {}, {}
    for call in calls:
        for key, cell in call.rows.items():
            old = rows.get(key)
            if old is None or len(cell) == 2 or len(old) < 2:
                rows[key] = cell
        for k, v in call.info.items():
            info[k] = v
    return rows, info


def nccl_version(code):
    return "%d.%d.%d" % (code // 10000, code // 100 % 100, code % 100)


def num(v, digits=6):
    return "" if v is None else "%.*g" % (digits, v)


def write_gpu(args):
    rows, info = merge([read_input(p) for p in args.inputs])
    machine = args.machine
    if not machine:
        machine = info.get("gpus", "?")
        if info.get("link"):
            machine += ", every pair %s" % info["link"]
        if info.get("driver"):
            machine += ", driver %s" % info["driver"]
    reference = args.reference
    if not reference:
        code = info.get("nccl_code")
        reference = "NVIDIA NCCL %s" % (nccl_version(code) if code else "?")
        reference += ", NCCL_NVLS_ENABLE=0"
    head = [("machine", machine), ("date", args.date or info.get("date", "?")),
            ("chorus", args.chorus or "?"), ("reference", reference)]
    head += [("command", c) for c in args.command]
    if args.raw:
        head.append(("raw", args.raw))
    head.append(("rows", "float, out of place; us per operation, averaged over ranks (the "
                         "perf programs' default, -a 1); busbw in GB/s with nccl-tests "
                         "factors; graph_procsN: one process per GPU, us per operation "
                         "replayed in a CUDA graph"))
    order = {c: i for i, c in enumerate(["all_reduce", "reduce_scatter", "all_gather", "broadcast",
                                         "alltoall", "reduce", "gather", "scatter", "sendrecv"])}

    def key(k):
        return (order.get(k[0], 99), k[0], k[1], k[2])

    out = io.StringIO()
    for k, v in head:
        out.write("# %s: %s\n" % (k, v))
    w = csv.writer(out, lineterminator="\n")
    has_base = any("chorusbase" in cell for cell in rows.values())
    w.writerow(GPU_COLUMNS + (GPU_BASE_COLUMNS if has_base else []))
    for k in sorted(rows, key=key):
        c, n = rows[k].get("chorus", (None, None)), rows[k].get("nccl", (None, None))
        line = [k[0], k[1], k[2], num(c[0]), num(n[0]), num(c[1]), num(n[1])]
        if has_base:
            b = rows[k].get("chorusbase", (None, None))
            line += [num(b[0]), num(b[1])]
        w.writerow(line)
    return out.getvalue(), len(rows)


# ---- host runs -----------------------------------------------------------------

def write_host(args):
    sys.path.insert(0, HERE)
    import compare  # noqa: E402  (bench/compare.py: the run's own loader and medians)
    res = compare.Results.load(args.inputs[0])
    meta = res.meta
    head = [("machine", args.machine or meta.get("machine", "?")),
            ("date", args.date or meta.get("date", "?")),
            ("chorus", args.chorus or meta.get("commit") or "?"),
            ("versions", meta.get("versions", "?")),
            ("command", args.command[0] if args.command else meta.get("command", "?"))]
    if args.raw:
        head.append(("raw", args.raw))
    head += [("rows", "median over rounds (%s) of the slowest rank's average time per "
                     "operation, us; Chorus and Open MPI out of place (Chorus's Broadcast in "
                     "place, as MPI_Bcast), Gloo as PyTorch calls it; wrong/failed: libraries with wrong results or a failure there"
                     % meta.get("rounds", "?"))]
    out = io.StringIO()
    for k, v in head:
        out.write("# %s: %s\n" % (k, v))
    w = csv.writer(out, lineterminator="\n")
    libs = [lib for lib in compare.LIBS if lib != "chorusbase" or lib in meta.get("libs", [])]
    w.writerow(HOST_COLUMNS[:3] + [HOST_LIB_COLUMN[lib] for lib in libs] + HOST_COLUMNS[-2:])
    count = 0
    for coll in compare.COLLS:
        for n in meta.get("ranks", [2, 4]):
            failed = " ".join(lib for lib in compare.LIBS
                              if any(not e["error"].startswith("wrong results")
                                     for e in res.errors(lib, coll, n)))
            for size in res.sizes(coll, n):
                cells = {lib: res.cell(lib, coll, n, size) for lib in compare.LIBS}
                wrong = " ".join(lib for lib in compare.LIBS if cells[lib] and cells[lib]["wrong"])
                w.writerow([coll[0], n, size] +
                           [num(cells[lib]["time_us"], 9) if cells[lib] else ""
                            for lib in libs] + [wrong, failed])
                count += 1
    return out.getvalue(), count


# ---- reading the CSVs back (bench/perf_page.py, bench/goals.py) -----------------

def read_csv(path):
    """(header dict, list of row dicts with numbers converted) of a summary."""
    head, lines = {}, []
    with open(path) as f:
        for line in f:
            if line.startswith("#"):
                k, _, v = line[1:].strip().partition(":")
                head.setdefault(k.strip(), []).append(v.strip())
            elif line.strip():
                lines.append(line)
    rows = []
    for r in csv.DictReader(lines):
        for k, v in r.items():
            if k in ("collective", "mode", "wrong", "failed", "layout"):
                continue
            r[k] = None if v == "" else (int(v) if k in ("bytes", "ranks") else float(v))
        rows.append(r)
    return head, rows


def main(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog=__doc__.split("\n\n", 1)[1])
    p.add_argument("kind", choices=["host", "gpu"])
    p.add_argument("inputs", nargs="+")
    p.add_argument("-o", "--output", help="CSV to write (default: stdout)")
    p.add_argument("--machine", help="machine description (default: from the output)")
    p.add_argument("--date", help="date of the run (default: from the output)")
    p.add_argument("--chorus", help="Chorus commit (or commits) the run measured")
    p.add_argument("--reference", help="reference library (gpu; default: NCCL's version "
                                       "from its logs)")
    p.add_argument("--command", action="append", default=[],
                   help="command that produced the output (repeatable)")
    p.add_argument("--raw", help="where the raw output is kept (it stays out of the "
                                 "repository)")
    args = p.parse_args(argv)
    if args.kind == "host" and len(args.inputs) != 1:
        p.error("host takes one .jsonl")
    text, count = write_host(args) if args.kind == "host" else write_gpu(args)
    if args.output:
        with open(args.output, "w") as f:
            f.write(text)
        print("# %s: %d rows, %d bytes" % (args.output, count, len(text)), file=sys.stderr)
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
