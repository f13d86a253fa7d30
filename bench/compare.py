#!/usr/bin/env python3
"""compare.py - Chorus against Open MPI and Gloo, side by side, in one run.

Runs the nine collectives of the Chorus perf programs (allreduce, allgather,
reducescatter, broadcast, alltoall, reduce, gather, scatter, sendrecv) with
three libraries on host memory of this machine, one process per rank:

  Chorus   build/tools/chorusrun -n N build/tools/perf/<coll>_perf ... -J file
  OMPI     mpirun.openmpi ... -np N bench/build/mpi_bench -c <coll> ... -J file
  Gloo     build/tools/chorusrun -n N bench/build/gloo_bench -c <coll> ... -J file

All three write the JSON lines of tools/perf/report.c (one object per size),
so one parser reads them. The libraries are interleaved to spread noise:
round 1 runs, for each rank count and collective, Chorus then OMPI then Gloo;
round 2 does the same, and so on (Gloo usually gets fewer rounds, it is
slow). Tables show the median time over rounds and the bus bandwidth of that
median time.

Method (the one of the CPU anchors, see bench/README.md): sizes from -b to -e
by factor 2; per size the operation is checked once, calibrated, warmed up and
timed in a loop of about --target seconds; time = per-operation average of the
slowest rank; busbw factors of nccl-tests. mpi_bench and gloo_bench calibrate
themselves. The Chorus perf programs take a fixed iteration count, so this
script calibrates for them (ChorusRunner): a short probe (-n 5 -w 1 -c 0)
over the sizes up to 32 MiB first, larger sizes extrapolated linearly, then
the median of every time seen; iteration counts are powers of two, and
consecutive sizes with the same count run in one invocation (-a 3: time of
the slowest rank; -I 0: out of place only, as MPI; -c 1: checked).

--netns: every rank a host of its own in a network namespace
(bench/netns_hosts.sh, made for the run and removed after it), the hosts
joined by veth pairs on one bridge, so all three libraries talk TCP through
the kernel's network stack as machines on one switch do: each rank's
command goes through `netns_hosts.sh exec`, which enters its namespace and
names its interface (NCCL_SOCKET_IFNAME, GLOO_SOCKET_IFNAME); Open MPI
starts a daemon in each namespace (`netns_hosts.sh agent` as its remote
shell, a host per rank, not bound to cores, as each daemon would otherwise
bind its rank to the first core) and takes --mca btl tcp,self on that
subnet.

A library that fails on a collective (not built, not implemented, crash,
timeout) is marked FAIL for that collective and rank count, rows with wrong
results WRONG; the run goes on, and (except after wrong results) that
library is not run again on that collective and rank count in later rounds. Every invocation has a timeout,
and on expiry its whole process group (started by this script) is killed.

Output: a table per collective and rank count on stdout, and under --out
(default <build>/bench-results, outside the source tree): <stamp>.md,
<stamp>.jsonl (every row of every library and round, plus meta and status
records), and <stamp>/ with the PNG plots (gnuplot), the plot data and every
raw JSON file and log. `compare.py --report <stamp>.jsonl` rebuilds tables
and plots from a saved run. The repository keeps only a run's summary:
bench/summarize.py host <stamp>.jsonl -o bench/results/host_<stamp>.csv,
which bench/perf_page.py turns into docs/PERFORMANCE.md.

Standard library only (python3 >= 3.7). Usually started by bench/run.sh,
which builds what is missing first.
"""

import argparse
import contextlib
import datetime
import json
import math
import os
import platform
import shutil
import signal
import statistics
import subprocess
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# name on the command line, Chorus program (= "collective" in the JSON),
# busbw factor kind (0: 1, 1: (n-1)/n, 2: 2(n-1)/n), element-count shape
# (0: count, 1: gather-like, 2: scatter-like, 3: alltoall), title.
COLLS = [
    ("allreduce", "all_reduce_perf", 2, 0, "AllReduce (float sum)"),
    ("allgather", "all_gather_perf", 1, 1, "AllGather (size = total output)"),
    ("reducescatter", "reduce_scatter_perf", 1, 2, "ReduceScatter (float sum; size = total input)"),
    ("broadcast", "broadcast_perf", 0, 0, "Broadcast (root 0)"),
    ("alltoall", "alltoall_perf", 1, 3, "AlltoAll (size = whole send buffer)"),
    ("reduce", "reduce_perf", 0, 0, "Reduce (float sum, root 0)"),
    ("gather", "gather_perf", 0, 1, "Gather (root 0; size = total output)"),
    ("scatter", "scatter_perf", 0, 2, "Scatter (root 0; size = root's input)"),
    ("sendrecv", "sendrecv_perf", 0, 0, "SendRecv (ring shift: send to rank+1, recv from rank-1)"),
]
COLL_BY_OPT = {c[0]: c for c in COLLS}
# Chorus programs timed in place: MPI_Bcast and Gloo's broadcast have one
# buffer, so in place Chorus does the work they do. Out of place the root
# also copies its input to its output, a copy their calls cannot ask for.
CHORUS_IN_PLACE = {"broadcast_perf"}
LIBS = ["chorus", "chorusbase", "ompi", "gloo"]
LIB_TITLE = {"chorus": "Chorus", "chorusbase": "Base", "ompi": "OMPI", "gloo": "Gloo"}


# ---- small helpers ---------------------------------------------------------

def parse_size(text):
    """'8', '64K', '256M', '1G' -> bytes."""
    text = str(text).strip()
    mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(text[-1:].upper(), 1)
    return int(float(text[:-1] if mult > 1 else text) * mult)


def size_label(b):
    for unit, shift in (("G", 30), ("M", 20), ("K", 10)):
        if b >= 1 << shift and b % (1 << shift) == 0:
            return "%d%s" % (b >> shift, unit)
    return str(b)


def size_text(b):
    """Size for tables: 8 B, 64 KiB, 256 MiB."""
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if b >= 1 << shift and b % (1 << shift) == 0:
            return "%d %s" % (b >> shift, unit)
    return "%d B" % b


def requested_sizes(lo, hi):
    out, s = [], lo
    while s <= hi:
        out.append(s)
        s *= 2
    return out


def actual_size(coll, req, n):
    """Bytes of the row that a requested size gives (as the perf programs)."""
    count = req // 4
    per = count // n
    shape = coll[3]
    if shape == 0:
        return count * 4
    return per * n * 4


def bus_factor(coll, n):
    return {0: 1.0, 1: (n - 1) / n, 2: 2.0 * (n - 1) / n}[coll[2]]


def fmt_time(us):
    if us is None:
        return "-"
    if us >= 1000:
        return "%.0f" % us
    if us >= 100:
        return "%.0f" % us
    if us >= 10:
        return "%.1f" % us
    return "%.2f" % us


def fmt_bw(gbs):
    if gbs is None:
        return "-"
    if gbs >= 10:
        return "%.1f" % gbs
    if gbs >= 0.01:
        return "%.2f" % gbs
    if gbs == 0:
        return "0"
    return "%.1e" % gbs


def fmt_ratio(r):
    if r is None:
        return "-"
    if r < 0.1:
        return "%.2g" % r
    if r >= 100:
        return "%.0f" % r
    if r >= 10:
        return "%.1f" % r
    return "%.2f" % r


def log(msg):
    print(msg, flush=True)


def run_cmd(cmd, timeout, log_path, env=None):
    """Runs cmd in its own process group; returns (rc, output, timed_out).

    On timeout the whole group (which this script started) gets SIGTERM, then
    SIGKILL after 5 s. Output (stdout+stderr) goes to log_path as well.
    """
    t0 = time.time()
    json_path = cmd[cmd.index("-J") + 1] if "-J" in cmd else None
    if json_path and os.path.exists(json_path):
        os.remove(json_path)  # only this invocation's rows
    with open(log_path, "w") as logf:
        logf.write("$ " + " ".join(cmd) + "\n")
        logf.flush()
        try:
            proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                    env=env, start_new_session=True, cwd=REPO)
        except OSError as e:
            logf.write("cannot start: %s\n" % e)
            return 127, "cannot start %s: %s" % (cmd[0], e), False
        timed_out = False
        try:
            out, _ = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            timed_out = True
            for sig, wait in ((signal.SIGTERM, 5), (signal.SIGKILL, 10)):
                try:
                    os.killpg(proc.pid, sig)
                except ProcessLookupError:
                    break
                try:
                    out, _ = proc.communicate(timeout=wait)
                    break
                except subprocess.TimeoutExpired:
                    out = b""
        text = (out or b"").decode("utf-8", "replace")
        logf.write(text)
        logf.write("\n# rc=%s timed_out=%s wall=%.1fs\n" % (proc.returncode, timed_out,
                                                           time.time() - t0))
    return proc.returncode, text, timed_out


def read_jsonl(path):
    rows = []
    if not os.path.exists(path):
        return rows
    with open(path) as f:
        for line in f:
            line = line.strip()
            if not line:
                continue
            try:
                rows.append(json.loads(line))
            except ValueError:
                pass  # a line cut short by a crash
    return rows


def row_result(row):
    """The measured placement of a row: out of place, else in place (in
    place first for CHORUS_IN_PLACE)."""
    if row.get("collective") in CHORUS_IN_PLACE and row.get("in_place"):
        return row["in_place"]
    return row.get("out_of_place") or row.get("in_place")


def failure_text(rc, out, timed_out, limit):
    if timed_out:
        return "timed out after %d s" % limit
    lines = [l.strip() for l in out.splitlines() if l.strip()]
    why = [l for l in lines if "fail" in l.lower() or "error" in l.lower() or "WARN" in l]
    last = (why or lines or ["(no output)"])[-1]
    return "exit status %s: %s" % (rc, last[:300])


# ---- the three libraries ---------------------------------------------------

class Runner:
    """Runs one library; subclasses build the command lines."""

    lib = None

    def __init__(self, args, rawdir):
        self.args = args
        self.rawdir = rawdir
        self.sizes = requested_sizes(args.min_bytes, args.max_bytes)

    def paths(self, coll, n, rnd, tag=""):
        base = os.path.join(self.rawdir, "%s_%s_n%d_r%d%s" % (self.lib, coll[0], n, rnd, tag))
        return base + ".json", base + ".log"

    def env(self):
        env = dict(os.environ)
        env.setdefault("NCCL_SOCKET_IFNAME", "lo")
        env.setdefault("CHORUS_HOST_COMM", "1")
        return env

    def finish(self, rows, coll, n):
        """Rows of this collective only, with wrong results turned into a failure."""
        rows = [r for r in rows if r.get("collective") == coll[1] and r.get("nranks") == n]
        wrong = [r["size"] for r in rows if (row_result(r) or {}).get("wrong")]
        return rows, ("wrong results at sizes %s" % wrong if wrong else None)


class ChorusRunner(Runner):
    """Runs the Chorus perf programs, calibrating their iteration counts.

    The perf programs take a fixed -n, so the per-size loop length comes from
    an estimate of the time per operation: the median of every time seen for
    that size and rank count (a short probe first, then every pass and round).
    Iterations = target / estimate, rounded to a power of two; consecutive
    sizes with the same count share one invocation. A size whose loop ran for
    less than a quarter of the target is run again with the new estimate (up
    to PASSES passes). Times can jump by 100x when the machine is busy, so a
    loop may also run far too long: every invocation has a timeout (limit()),
    and sizes lost to a timeout are run again one by one with 1/32 of the
    iterations (rescue()).
    """

    lib = "chorus"
    MAX_ITERS = 1 << 22
    PASSES = 3
    SIZE_BUDGET = 10    # targets per size before an invocation times out
    GROUP_SLACK_S = 10  # plus this (start-up, filling and checking buffers)

    def __init__(self, args, rawdir):
        super().__init__(args, rawdir)
        build = os.path.join(REPO, args.build) if not os.path.isabs(args.build) else args.build
        self.launcher = os.path.join(build, "tools", "chorusrun")
        self.perfdir = os.path.join(build, "tools", "perf")
        self.seen = {}  # (coll, n) -> {actual size: [seconds per op, ...]}

    def cmd(self, coll, n, lo, hi, iters, warm, check, json_path, limit):
        hosts = ["--hosts", str(n)] if self.args.hosts else []
        launch = [self.launcher, "-n", str(n)] + hosts + ["--timeout", str(limit), "--"]
        return launch + netns_prefix(self.args) + [
                os.path.join(self.perfdir, coll[1]), "-b", str(lo), "-e", str(hi), "-f", "2",
                "-n", str(iters), "-w", str(warm), "-c", str(check), "-a", "3",
                "-I", "1" if self.args.chorus_inplace or coll[1] in CHORUS_IN_PLACE else "0",
                "-J", json_path]

    def limit(self, coll, n, sizes, iters, warm):
        """Seconds an invocation over these requested sizes may take: per size
        SIZE_BUDGET targets or 4x its planned operations, whichever is more,
        plus GROUP_SLACK_S (start-up, filling and checking buffers)."""
        total = self.GROUP_SLACK_S
        for req in sizes:
            t = self.estimate(coll, n, actual_size(coll, req, n))
            total += max(self.SIZE_BUDGET * self.args.target, 4 * (iters + warm + 2) * t)
        return int(min(self.args.timeout, total))

    def invoke(self, coll, n, sizes, iters, warm, check, tag, rnd):
        """One perf program run over consecutive requested sizes; returns
        (rows, rc, output, timed_out, limit)."""
        limit = self.limit(coll, n, sizes, iters, warm)
        json_path, log_path = self.paths(coll, n, rnd, tag)
        cmd = self.cmd(coll, n, sizes[0], sizes[-1], iters, warm, check, json_path, limit)
        rc, out, to = run_cmd(cmd, limit + 15, log_path, self.env())
        to = to or rc == 124  # chorusrun --timeout stopped the ranks
        rows, _ = self.finish(read_jsonl(json_path), coll, n)
        seen = self.seen.setdefault((coll[0], n), {})
        for r in rows:
            r["iters"], r["warmup"] = iters, warm
            seen.setdefault(r["size"], []).append(row_result(r)["time_us"] * 1e-6)
        return rows, rc, out, to, limit

    def probe(self, coll, n, rnd):
        """Times of sizes up to 32 MiB from a short unchecked run (-n 5)."""
        sizes = [s for s in self.sizes if s <= 32 << 20]
        self.seen[(coll[0], n)] = {}
        rows, rc, out, to, limit = self.invoke(coll, n, sizes, 5, 1, 0, "_probe", rnd)
        if rc != 0 or not rows:
            return failure_text(rc, out, to, limit)
        return None

    def estimate(self, coll, n, size):
        seen = self.seen.get((coll[0], n), {})
        if seen.get(size):
            return max(statistics.median(seen[size]), 1e-7)
        known = sorted(s for s in seen if s > 0 and seen[s])
        if not known:
            return 1e-5
        ref = known[-1] if size > known[-1] else known[0]  # linear in size beyond
        return max(statistics.median(seen[ref]) * max(size, 1) / ref, 1e-7)

    def iterations(self, coll, n, req, scale=1.0):
        t = self.estimate(coll, n, actual_size(coll, req, n))
        iters = 2 ** round(math.log2(max(self.args.target / t * scale, 1)))
        iters = int(min(max(iters, self.args.min_iters), self.MAX_ITERS))
        return iters, max(2, iters // 10)

    def plan(self, coll, n, sizes):
        """Groups [lo, hi, iterations, warm-up] of consecutive sizes with the
        same counts."""
        groups = []
        for req in sizes:
            iters, warm = self.iterations(coll, n, req)
            if groups and groups[-1][2:] == [iters, warm] and groups[-1][1] * 2 == req:
                groups[-1][1] = req
            else:
                groups.append([req, req, iters, warm])
        return groups

    def run(self, coll, n, rnd):
        if (coll[0], n) not in self.seen:
            why = self.probe(coll, n, rnd)
            if why:
                return [], why
        req_of = {actual_size(coll, req, n): req for req in self.sizes}
        best, fail, todo = {}, None, list(self.sizes)
        for attempt in range(self.PASSES):
            redo = []
            for gi, (lo, hi, iters, warm) in enumerate(self.plan(coll, n, todo)):
                group = [s for s in todo if lo <= s <= hi]
                rows, rc, out, to, limit = self.invoke(coll, n, group, iters, warm, 1,
                                                       "_p%d_g%d" % (attempt, gi), rnd)
                got = set()
                for r in rows:
                    best[r["size"]] = r
                    got.add(req_of.get(r["size"]))
                    t = row_result(r)["time_us"] * 1e-6
                    if t * iters < self.args.target / 4 and iters < self.MAX_ITERS:
                        redo.append(req_of.get(r["size"]))
                if to:  # a loop ran far longer than planned: the rest, one by one
                    fail = self.rescue(coll, n, rnd, [s for s in group if s not in got],
                                       best, "_p%d_g%d" % (attempt, gi)) or fail
                elif rc != 0:
                    fail = failure_text(rc, out, to, limit)
                    if not rows:  # nothing ran (init failed, not implemented, crash)
                        break
            redo = [s for s in redo if s is not None]
            if fail or not redo:
                break
            todo = sorted(set(redo))
        rows, wrong = self.finish([best[s] for s in sorted(best)], coll, n)
        return rows, wrong or fail

    def rescue(self, coll, n, rnd, sizes, best, tag):
        """Runs sizes lost to a timeout one by one with 1/32 of the iterations;
        returns an error text, or None when all of them completed."""
        for req in sizes:
            iters, warm = self.iterations(coll, n, req, scale=1 / 32)
            rows, rc, out, to, limit = self.invoke(coll, n, [req], iters, warm, 1,
                                                   "%s_rescue%d" % (tag, req), rnd)
            for r in rows:
                best[r["size"]] = r
            if rc != 0 or not rows:
                return "size %s: %s" % (size_text(req), failure_text(rc, out, to, limit))
        return None


class ChorusBaseRunner(ChorusRunner):
    """The same perf programs on another Chorus build's libnccl.so.2
    (--base-lib: an earlier commit's), for a before/after in one run."""

    lib = "chorusbase"

    def env(self):
        env = super().env()
        lib = self.args.base_lib
        env["LD_LIBRARY_PATH"] = lib + (":" + env["LD_LIBRARY_PATH"]
                                        if env.get("LD_LIBRARY_PATH") else "")
        return env


class OmpiRunner(Runner):
    lib = "ompi"

    def run(self, coll, n, rnd):
        json_path, log_path = self.paths(coll, n, rnd)
        a = self.args
        cmd = [a.mpirun, "--oversubscribe", "--allow-run-as-root"]
        if a.netns:  # a daemon per namespace host, started through netns_hosts.sh agent
            hostfile = os.path.join(self.rawdir, "netns_hosts")
            with open(hostfile, "w") as f:
                f.writelines("%s slots=1\n" % netns_addr(i) for i in range(n))
            # rtc ^hwloc: writing the shared topology segment (of no use
            # when nothing binds) crashed some daemons at start-up, a
            # segfault in hwloc_shmem_topology_write.
            cmd += ["--hostfile", hostfile, "--bind-to", "none", "--mca", "rtc", "^hwloc",
                    "--mca", "plm_rsh_agent", "sh %s agent %s" % (NETNS_SCRIPT, a.netns),
                    "--mca", "btl_tcp_if_include", NETNS_SUBNET,
                    "--mca", "oob_tcp_if_include", NETNS_SUBNET]
            # Each daemon sees one rank on the whole machine, so it never
            # lets its rank yield; where ranks outnumber cores they yield,
            # as when mpirun starts them on one host (oversubscribed).
            if n > (os.cpu_count() or 1):
                cmd += ["--mca", "mpi_yield_when_idle", "1"]
        else:
            cmd += ["--mca", "btl_tcp_if_include", "lo", "--mca", "oob_tcp_if_include", "lo"]
        if a.hosts:  # every pair over TCP, as between machines
            cmd += ["--mca", "btl", "tcp,self"]
        cmd += a.mpirun_args.split() + ["-np", str(n)]
        cmd += [a.mpi_bench, "-c", coll[0], "-b", str(a.min_bytes), "-e", str(a.max_bytes),
                "-D", str(a.target), "-m", str(a.min_iters), "-T", str(a.timeout),
                "-J", json_path]
        rc, out, to = run_cmd(cmd, a.timeout + 30, log_path, self.env())
        rows, wrong = self.finish(read_jsonl(json_path), coll, n)
        return rows, (failure_text(rc, out, to, a.timeout) if rc != 0 and not wrong else wrong)


class GlooRunner(Runner):
    lib = "gloo"

    def run(self, coll, n, rnd):
        json_path, log_path = self.paths(coll, n, rnd)
        a = self.args
        launcher = os.path.join(REPO, a.build, "tools", "chorusrun")
        cmd = [launcher, "-n", str(n), "--timeout", str(a.timeout), "--"] + netns_prefix(a)
        cmd += [a.gloo_bench, "-c", coll[0], "-b", str(a.min_bytes), "-e", str(a.max_bytes),
                "-x", str(a.gloo_cap), "-S", str(a.gloo_slow), "-D", str(a.target),
                "-m", str(a.gloo_min_iters), "-T", str(a.timeout), "-J", json_path]
        rc, out, to = run_cmd(cmd, a.timeout + 30, log_path, self.env())
        rows, wrong = self.finish(read_jsonl(json_path), coll, n)
        return rows, (failure_text(rc, out, to, a.timeout) if rc != 0 and not wrong else wrong)


NETNS_SCRIPT = os.path.join(REPO, "bench", "netns_hosts.sh")
NETNS_SUBNET = "10.233.0.0/24"  # netns_hosts.sh's addresses


def netns_addr(i):
    """Host i's address, as netns_hosts.sh gives it."""
    return "10.233.0.%d" % (i + 1)


@contextlib.contextmanager
def netns_hosts(args):
    """The namespaces of --netns for as long as the run lasts; yields whether
    they are there (always true without --netns)."""
    if not args.netns:
        yield True
        return
    n = str(max(args.ranks))
    subprocess.run(["sh", NETNS_SCRIPT, "down", args.netns, n])
    made = subprocess.run(["sh", NETNS_SCRIPT, "up", args.netns, n, str(args.netns_mtu)] +
                          ([args.netns_cc] if args.netns_cc else []))
    try:
        yield made.returncode == 0
    finally:
        subprocess.run(["sh", NETNS_SCRIPT, "down", args.netns, n])


def system_cc():
    """The system's default TCP congestion control (namespaces start with it)."""
    try:
        with open("/proc/sys/net/ipv4/tcp_congestion_control") as f:
            return f.read().strip()
    except OSError:
        return "unknown"


def netns_prefix(args):
    """What a rank's command starts with under --netns: its namespace."""
    return ["sh", NETNS_SCRIPT, "exec", args.netns] if args.netns else []


# ---- aggregation -----------------------------------------------------------

class Results:
    """Rows of all libraries and rounds, and what failed."""

    def __init__(self):
        self.rows = []     # JSON rows with "lib" and "round" added
        self.status = []   # {"lib", "coll", "nranks", "round", "error"}
        self.meta = {}

    def add(self, lib, rnd, rows):
        for r in rows:
            r = dict(r)
            r["lib"], r["round"] = lib, rnd
            self.rows.append(r)

    def fail(self, lib, coll, n, rnd, error):
        self.status.append({"record": "status", "lib": lib, "coll": coll, "nranks": n,
                            "round": rnd, "error": error})

    def save(self, path):
        with open(path, "w") as f:
            f.write(json.dumps(dict(self.meta, record="meta")) + "\n")
            for s in self.status:
                f.write(json.dumps(s) + "\n")
            for r in self.rows:
                f.write(json.dumps(r) + "\n")

    @staticmethod
    def load(path):
        res = Results()
        for rec in read_jsonl(path):
            kind = rec.get("record")
            if kind == "meta":
                res.meta = rec
            elif kind == "status":
                res.status.append(rec)
            elif "collective" in rec:
                res.rows.append(rec)
        return res

    def cell(self, lib, coll, n, size):
        """Median over rounds: dict(time_us, busbw, rounds, lo, hi) or None."""
        results = [row_result(r) for r in self.rows
                   if r["lib"] == lib and r["collective"] == coll[1] and r["nranks"] == n
                   and r["size"] == size and row_result(r)]
        if not results:
            return None
        times = [x["time_us"] for x in results]
        wrong = sum(x.get("wrong") or 0 for x in results)
        med = statistics.median(times)
        bw = size / 1e9 / (med * 1e-6) * bus_factor(coll, n) if med > 0 else 0.0
        return {"time_us": med, "busbw": bw, "rounds": len(times),
                "lo": min(times), "hi": max(times), "wrong": wrong}

    def errors(self, lib, coll, n):
        return [s for s in self.status
                if s["lib"] == lib and s["coll"] == coll[0] and s["nranks"] == n]

    def sizes(self, coll, n):
        return sorted({r["size"] for r in self.rows
                       if r["collective"] == coll[1] and r["nranks"] == n})


def table_rows(res, coll, n, libs, sizes):
    """[size, per-lib cells..., ratio vs OMPI, ratio vs Gloo] as strings."""
    out = []
    for size in sizes:
        cells = {lib: res.cell(lib, coll, n, size) for lib in libs}
        line = [size_text(size)]
        for lib in libs:
            c = cells[lib]
            failed = c is None and res.errors(lib, coll, n)
            if failed:
                line += ["FAIL", "FAIL"]
            elif c and c["wrong"]:
                line += ["WRONG", "WRONG"]
            else:
                line += [fmt_time(c and c["time_us"]), fmt_bw(c and c["busbw"])]
        ch = cells.get("chorus")
        for ref in ("chorusbase", "ompi", "gloo"):
            if ref not in libs or "chorus" not in libs:
                continue
            rc = cells[ref]
            ok = ch and rc and not ch["wrong"] and not rc["wrong"]
            ratio = (rc["time_us"] / ch["time_us"]
                     if ok and ch["time_us"] > 0 and size > 0 else None)
            line.append(fmt_ratio(ratio))
        out.append(line)
    return out


def table_header(libs):
    head = ["size"]
    for lib in libs:
        head += ["%s us" % LIB_TITLE[lib], "%s GB/s" % LIB_TITLE[lib]]
    for ref in ("chorusbase", "ompi", "gloo"):
        if ref in libs and "chorus" in libs:
            head.append("Chorus/%s" % LIB_TITLE[ref])
    return head


def print_text_table(title, head, rows):
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h)
              for i, h in enumerate(head)]
    log("")
    log(title)
    log("  ".join(h.rjust(w) for h, w in zip(head, widths)))
    for r in rows:
        log("  ".join(c.rjust(w) for c, w in zip(r, widths)))


def markdown_table(head, rows):
    lines = ["| " + " | ".join(head) + " |",
             "|" + "|".join("---:" for _ in head) + "|"]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines)


# ---- plots -----------------------------------------------------------------

PLOT_STYLE = {"chorus": 'lw 3 pt 7 ps 0.8 lc rgb "#d62728"',
              "ompi": 'lw 2 pt 5 ps 0.7 lc rgb "#1f77b4"',
              "gloo": 'lw 2 pt 9 ps 0.8 lc rgb "#2ca02c"'}


def write_plot_data(res, coll, n, libs, outdir):
    """One file per library with points (size, time us, busbw); returns
    {lib: path} for the libraries that have any."""
    paths = {}
    for lib in libs:
        pts = []
        for size in res.sizes(coll, n):
            c = res.cell(lib, coll, n, size)
            if size > 0 and c and c["busbw"] > 0 and not c["wrong"]:
                pts.append("%d %.9g %.9g" % (size, c["time_us"], c["busbw"]))
        if pts:
            path = os.path.join(outdir, "%s_n%d_%s.dat" % (coll[0], n, lib))
            with open(path, "w") as f:
                f.write("# size_bytes time_us busbw_gbs (median over rounds)\n")
                f.write("\n".join(pts) + "\n")
            paths[lib] = path
    return paths


def xtics(lo, hi):
    tics, s = [], 8
    while s <= hi * 2:
        if s >= lo / 2:
            tics.append('"%s" %d' % (size_label(s), s))
        s *= 8
    return "(" + ", ".join(tics) + ")"


def plot_commands(res, coll, n, data, with_time):
    """gnuplot commands drawing busbw (and, with_time, time) of coll at n
    ranks from data = {lib: data file}."""
    sizes = [s for s in res.sizes(coll, n) if s > 0] or [8]
    cmds = ["set logscale x 2", "set xtics %s" % xtics(min(sizes), max(sizes)),
            'set format y "%g"', "set grid", "set key top left opaque box",
            'set xlabel "size (bytes)"']
    panels = [(2, "time per op (us, slowest rank)")] if with_time else []
    panels.append((3, "bus bandwidth (GB/s)"))
    for col, ylabel in panels:
        cmds += ["set logscale y", 'set ylabel "%s"' % ylabel,
                 'set title "%s, %d ranks"' % (coll[0], n)]
        if not data:
            cmds += ['set label 1 "no data" at graph 0.4, 0.5', "plot 1/0 notitle",
                     "unset label 1"]
            continue
        plots = []
        for lib in LIBS:
            if lib not in data:
                continue
            part = " (partial)" if res.errors(lib, coll, n) else ""
            plots.append("'%s' using 1:%d with linespoints %s title '%s%s'"
                         % (data[lib], col, PLOT_STYLE[lib], LIB_TITLE[lib], part))
        cmds.append("plot " + ", \\\n     ".join(plots))
    return cmds


def make_plots(res, libs, ranks, colls, outdir, stamp):
    """PNGs per collective and rank count (time and busbw), and one busbw
    overview per rank count. Returns {key: relative path} of what was made."""
    gnuplot = shutil.which("gnuplot")
    if not gnuplot:
        log("# gnuplot not found: no plots (apt-get install -y gnuplot-nox)")
        return {}
    made, data = {}, {}
    script = ['set terminal pngcairo size 1300,480 font "sans,10"',
              "set datafile missing '?'"]
    for n in ranks:
        for coll in colls:
            if not res.sizes(coll, n):
                continue
            png = os.path.join(outdir, "%s_n%d.png" % (coll[0], n))
            data[(coll[0], n)] = write_plot_data(res, coll, n, libs, outdir)
            script += ["reset", "set output '%s'" % png, "set multiplot layout 1,2"]
            script += plot_commands(res, coll, n, data[(coll[0], n)], True)
            script += ["unset multiplot", "set output"]
            made[(coll[0], n)] = os.path.join(stamp, os.path.basename(png))
        present = [c for c in colls if res.sizes(c, n)]
        if present:
            png = os.path.join(outdir, "overview_n%d.png" % n)
            rows_ = (len(present) + 2) // 3
            script += ['set terminal pngcairo size 1500,%d font "sans,9"' % (380 * rows_),
                       "reset", "set output '%s'" % png,
                       'set multiplot layout %d,3 title "busbw vs size, %d ranks"' % (rows_, n)]
            for coll in present:
                script += plot_commands(res, coll, n, data[(coll[0], n)], False)
            script += ["unset multiplot", "set output",
                       'set terminal pngcairo size 1300,480 font "sans,10"']
            made[("overview", n)] = os.path.join(stamp, os.path.basename(png))
    gp = os.path.join(outdir, "plots.gp")
    with open(gp, "w") as f:
        f.write("\n".join(script) + "\n")
    proc = subprocess.run([gnuplot, gp], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          timeout=300)
    if proc.returncode != 0:
        log("# gnuplot failed (%s): %s" % (proc.returncode, proc.stdout.decode()[-500:]))
    return made


# ---- report ----------------------------------------------------------------

def report(res, args, outdir, stamp, md_path):
    meta = res.meta
    libs = [lib for lib in LIBS if lib in meta.get("libs", LIBS)]
    ranks = meta.get("ranks", [2, 4])
    colls = [COLL_BY_OPT[c] for c in meta.get("colls", [c[0] for c in COLLS])]
    plots = {} if args.no_plot else make_plots(res, libs, ranks, colls, outdir, stamp)
    head = table_header(libs)
    md = ["# Chorus vs Open MPI vs Gloo, host memory, %s" % meta.get("date", stamp), ""]
    md += ["Machine: %s. %s." % (meta.get("machine", "?"), meta.get("versions", "")), "",
           "Command: `%s`" % meta.get("command", "?"), "",
           "Rounds (interleaved Chorus, OMPI, Gloo per collective): %s. Sizes %s..%s, "
           "factor 2. Each size: checked once, calibrated, warmed up, timed for ~%.2f s; "
           "time = per-op average of the slowest rank, median over rounds; busbw = "
           "size/time x nccl-tests factor (allreduce 2(n-1)/n; allgather, reducescatter, "
           "alltoall (n-1)/n; others 1); GB/s = 1e9 B/s. Chorus and OMPI out of place "
           "but Broadcast (MPI_Bcast has one buffer: Chorus in place there); "
           "Gloo allreduce, broadcast, reduce and reducescatter in place (as PyTorch calls "
           "them), the rest out of place. Gloo is capped at %s per op and stops a sweep "
           "after an op slower than %s s (`-` = not run). Chorus/X = X time / Chorus time "
           "= Chorus busbw / X busbw: above 1, Chorus is faster."
           % (meta.get("rounds", "?"), size_text(meta.get("min_bytes", 8)),
              size_text(meta.get("max_bytes", 0)), meta.get("target", 0.2),
              size_text(meta.get("gloo_cap", 0)), meta.get("gloo_slow", "?")), "",
           "4 ranks on 2 cores are oversubscribed for every library. Expect run-to-run "
           "noise of tens of percent at small and mid sizes (bimodal fast/slow runs) and "
           "order-of-magnitude jitter for Gloo: see bench/README.md.", ""]
    for n in ranks:
        if ("overview", n) in plots:
            md += ["![busbw, %d ranks](%s)" % (n, plots[("overview", n)]), ""]
    for coll in colls:
        for n in ranks:
            sizes = res.sizes(coll, n)
            title = "%s, %d ranks" % (coll[4], n)
            errs = [e for lib in libs for e in res.errors(lib, coll, n)]
            rows = table_rows(res, coll, n, libs, sizes)
            if rows:
                print_text_table("## " + title, head, rows)
            for e in errs:
                log("   FAIL %s round %d: %s" % (LIB_TITLE[e["lib"]], e["round"], e["error"]))
            md += ["## " + title, ""]
            if (coll[0], n) in plots:
                md += ["![%s](%s)" % (title, plots[(coll[0], n)]), ""]
            for e in errs:
                md.append("- **%s FAILED** (round %d): %s" % (LIB_TITLE[e["lib"]], e["round"],
                                                              e["error"].replace("|", "/")))
            if errs:
                md.append("")
            md += [markdown_table(head, rows) if rows else "(no data)", ""]
    with open(md_path, "w") as f:
        f.write("\n".join(md))
    log("")
    log("# markdown: %s" % os.path.relpath(md_path, REPO))
    for key in sorted(plots, key=str):
        if key[0] == "overview":
            log("# plot: %s" % os.path.relpath(os.path.join(os.path.dirname(md_path),
                                                            plots[key]), REPO))


# ---- main ------------------------------------------------------------------

def machine_text():
    model = "?"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return "%s, %d CPUs (%s), kernel %s" % (platform.node(), os.cpu_count() or 0, model,
                                            platform.release())


def git_commit():
    """The Chorus commit measured, '+' when the tree has changes; None outside git."""
    try:
        head = subprocess.run(["git", "-C", REPO, "rev-parse", "--short", "HEAD"],
                              capture_output=True, text=True, timeout=10)
        if head.returncode != 0:
            return None
        dirty = subprocess.run(["git", "-C", REPO, "status", "--porcelain",
                                "--untracked-files=no"],
                               capture_output=True, text=True, timeout=10).stdout.strip()
        return head.stdout.strip() + ("+" if dirty else "")
    except (OSError, subprocess.SubprocessError):
        return None


def versions_text(args, res):
    seen = {}
    for r in res.rows:
        if r["lib"] == "chorus" and r.get("nccl_library"):
            seen["chorus"] = "Chorus (NCCL API %s)" % r["nccl_library"]
        elif r.get("library"):
            seen[r["lib"]] = r["library"]
    return ", ".join(seen[lib] for lib in LIBS if lib in seen)


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--build", default=os.environ.get("CHORUS_BUILD", "build"),
                   help="Chorus build folder, relative to the repository (default: "
                        "$CHORUS_BUILD or build)")
    p.add_argument("--ranks", default="2,4", help="rank counts (default 2,4)")
    p.add_argument("--colls", default="all", help="collectives, comma separated, or all")
    p.add_argument("--libs", default="chorus,ompi,gloo", help="libraries (chorus,ompi,gloo)")
    p.add_argument("-b", "--min-bytes", default="8")
    p.add_argument("-e", "--max-bytes", default=None, help="largest size (256M)")
    p.add_argument("--rounds", type=int, default=None, help="rounds of Chorus and OMPI (3)")
    p.add_argument("--gloo-rounds", type=int, default=None, help="rounds of Gloo (1)")
    p.add_argument("--target", type=float, default=None,
                   help="seconds per timed loop (0.2)")
    p.add_argument("--min-iters", type=int, default=5, help="fewest timed iterations (5)")
    p.add_argument("--gloo-cap", default="16M", help="largest Gloo size (16M)")
    p.add_argument("--gloo-slow", type=float, default=2.0,
                   help="Gloo: stop a sweep after an op slower than this (2 s)")
    p.add_argument("--gloo-min-iters", type=int, default=3, help="Gloo: fewest iterations (3)")
    p.add_argument("--timeout", type=int, default=900,
                   help="seconds one invocation (one library, collective, rank count) may "
                        "take (900)")
    p.add_argument("--hosts", action="store_true",
                   help="every rank a host of its own: Chorus through chorusrun --hosts (TCP "
                        "between all ranks), Open MPI with --mca btl tcp,self; Gloo is TCP anyway")
    p.add_argument("--netns", nargs="?", const="chorus-bench", default=None, metavar="PREFIX",
                   help="every rank a host of its own in a network namespace (PREFIX-<rank>, "
                        "default prefix chorus-bench), joined by veth pairs on one bridge "
                        "(bench/netns_hosts.sh; needs root); implies --hosts")
    p.add_argument("--netns-mtu", type=int, default=9000, help="the veth links' MTU (9000)")
    p.add_argument("--netns-cc", default="", metavar="ALG",
                   help="the namespace hosts' default TCP congestion control (reno, bbr; "
                        "default: the system's)")
    p.add_argument("--chorus-inplace", action="store_true",
                   help="also time Chorus in place (reported: out of place)")
    p.add_argument("--mpirun", default="mpirun.openmpi")
    p.add_argument("--mpirun-args", default="", help="extra mpirun arguments, e.g. "
                   "'--bind-to none' or '--mca mpi_yield_when_idle 1'")
    p.add_argument("--mpi-bench", default=os.path.join(REPO, "bench", "build", "mpi_bench"))
    p.add_argument("--gloo-bench", default=os.path.join(REPO, "bench", "build", "gloo_bench"))
    p.add_argument("--out", default=os.environ.get("BENCH_OUT"),
                   help="folder for the raw output (default: $BENCH_OUT, else "
                        "<build>/bench-results); bench/summarize.py condenses a run for "
                        "bench/results/")
    p.add_argument("--stamp", default=None, help="name of the outputs (default: date-time)")
    p.add_argument("--base-lib", default=None,
                   help="folder of another Chorus build's libnccl.so.2, timed with the same "
                        "perf programs as library chorusbase (--libs chorus,chorusbase,...)")
    p.add_argument("--quick", action="store_true",
                   help="development run: 8 B..1 MiB, 1 round each, 0.02 s loops")
    p.add_argument("--no-plot", action="store_true")
    p.add_argument("--report", metavar="JSONL",
                   help="no runs: rebuild tables, markdown and plots from a saved .jsonl")
    args = p.parse_args(argv)
    # Defaults, and the smaller ones of --quick where an option is not given.
    for name, full, quick in (("max_bytes", "256M", "1M"), ("rounds", 3, 1),
                              ("gloo_rounds", 1, 1), ("target", 0.2, 0.02)):
        if getattr(args, name) is None:
            setattr(args, name, quick if args.quick else full)
    if args.out is None:  # beside the build, so raw output stays out of the source tree
        build = args.build if os.path.isabs(args.build) else os.path.join(REPO, args.build)
        args.out = os.path.join(build, "bench-results")
    if args.netns:
        args.hosts = True
    args.min_bytes = parse_size(args.min_bytes)
    args.max_bytes = parse_size(args.max_bytes)
    args.gloo_cap = parse_size(args.gloo_cap)
    for attr in ("mpi_bench", "gloo_bench"):
        path = getattr(args, attr)
        setattr(args, attr, path if os.path.isabs(path) else os.path.join(REPO, path))
    args.ranks = [int(x) for x in args.ranks.split(",") if x]
    args.libs = [x for x in args.libs.split(",") if x]
    args.colls = [c[0] for c in COLLS] if args.colls == "all" else args.colls.split(",")
    bad = [c for c in args.colls if c not in COLL_BY_OPT] + [l for l in args.libs
                                                              if l not in LIBS]
    if bad:
        p.error("unknown collective or library: %s" % ", ".join(bad))
    return args


def main(argv):
    args = parse_args(argv)
    os.makedirs(args.out, exist_ok=True)
    if args.report:
        res = Results.load(args.report)
        stamp = os.path.splitext(os.path.basename(args.report))[0]
        outdir = os.path.join(os.path.dirname(os.path.abspath(args.report)), stamp)
        os.makedirs(outdir, exist_ok=True)
        report(res, args, outdir, stamp, os.path.splitext(args.report)[0] + ".md")
        return 0

    stamp = args.stamp or datetime.datetime.now().strftime("%Y-%m-%d_%H%M")
    outdir = os.path.join(args.out, stamp)
    rawdir = os.path.join(outdir, "raw")
    os.makedirs(rawdir, exist_ok=True)
    res = Results()
    rounds = {"chorus": args.rounds, "chorusbase": args.rounds, "ompi": args.rounds,
              "gloo": args.gloo_rounds}
    runners = {"chorus": ChorusRunner(args, rawdir), "chorusbase": ChorusBaseRunner(args, rawdir),
               "ompi": OmpiRunner(args, rawdir), "gloo": GlooRunner(args, rawdir)}
    missing = {"chorus": [runners["chorus"].launcher,
                          os.path.join(runners["chorus"].perfdir, "all_reduce_perf")],
               "chorusbase": [os.path.join(args.base_lib or "/nonexistent", "libnccl.so.2")],
               "ompi": [args.mpi_bench], "gloo": [args.gloo_bench, runners["chorus"].launcher]}
    colls = [COLL_BY_OPT[c] for c in args.colls]
    res.meta = {"date": datetime.datetime.now().isoformat(timespec="seconds"),
                "commit": git_commit(),
                "command": os.environ.get("BENCH_COMMAND") or " ".join(["bench/compare.py"] + argv), "machine": machine_text(),
                "libs": args.libs, "ranks": args.ranks, "colls": args.colls,
                "rounds": ", ".join("%s %d" % (LIB_TITLE[l], rounds[l]) for l in args.libs),
                "min_bytes": args.min_bytes, "max_bytes": args.max_bytes,
                "target": args.target, "gloo_cap": args.gloo_cap, "gloo_slow": args.gloo_slow,
                "hosts": ("every rank its own host in a network namespace, TCP over veth "
                          "pairs on one bridge (MTU %d), TCP congestion control %s" %
                          (args.netns_mtu, args.netns_cc or system_cc()) if args.netns else
                          "every rank its own host, TCP over loopback" if args.hosts else
                          "one host")}
    failed = set()  # (lib, coll, n): not retried in later rounds
    with netns_hosts(args) as ready:
        if not ready:
            log("# --netns: could not make the namespaces (root and iproute2 needed)")
            return 1
        t_start = time.time()
        for rnd in range(1, max(rounds[l] for l in args.libs) + 1):
            for n in args.ranks:
                for coll in colls:
                    for lib in args.libs:
                        if rnd > rounds[lib] or (lib, coll[0], n) in failed:
                            continue
                        absent = [p for p in missing[lib] if not os.path.exists(p)]
                        t0 = time.time()
                        if absent:
                            rows, err = [], "not built: %s missing (run bench/run.sh)" % absent[0]
                        else:
                            rows, err = runners[lib].run(coll, n, rnd)
                        res.add(lib, rnd, rows)
                        state = "ok" if not err else "FAIL: " + err
                        log("# round %d  n=%d  %-13s %-6s %3d rows  %6.1f s  %s"
                            % (rnd, n, coll[0], LIB_TITLE[lib], len(rows), time.time() - t0,
                               state[:160]))
                        if err:
                            res.fail(lib, coll[0], n, rnd, err)
                            if not err.startswith("wrong results"):  # those may be transient
                                failed.add((lib, coll[0], n))
            res.save(os.path.join(args.out, stamp + ".jsonl"))  # partial results survive
        res.meta["versions"] = versions_text(args, res)
        res.meta["wall_s"] = round(time.time() - t_start, 1)
        jsonl = os.path.join(args.out, stamp + ".jsonl")
        res.save(jsonl)
        log("# all runs done in %.0f s; raw rows: %s" % (time.time() - t_start,
                                                          os.path.relpath(jsonl, REPO)))
        report(res, args, outdir, stamp, os.path.join(args.out, stamp + ".md"))
        log("# summary for the repository: python3 bench/summarize.py host %s "
            "-o bench/results/host_%s.csv" % (os.path.relpath(jsonl, REPO), stamp))
        return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
