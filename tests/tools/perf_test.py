#!/usr/bin/env python3
"""Tests of the Chorus tools: the perf programs and chorusrun.

usage: perf_test.py CASE --perf PATH/all_reduce_perf --chorusrun PATH/chorusrun

Each case starts its processes itself, with a time limit on every one; on
timeout it kills only the process groups it started. Traffic stays on
loopback (NCCL_SOCKET_IFNAME=lo). Exit status: 0 pass, 1 fail, 77 skip.
"""
import argparse
import json
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

SKIP = 77
LIMIT_S = 120  # per process started here
LIMIT_SCALE = 1.0  # --limit-scale: sanitizer builds run several times slower

# The table header of nccl-tests 2.19, rebuilt from its printf formats.
HEADER = [
    "#",
    "# %10s  %12s  %8s  %6s  %6s           out-of-place                       in-place          "
    % ("", "", "", "", ""),
    "# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s "
    % ("size", "count", "type", "redop", "root", "time", "algbw", "busbw", "#wrong", "time",
       "algbw", "busbw", "#wrong"),
    "# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s "
    % ("(B)", "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)",
       "(GB/s)", ""),
]
CELL = r"  [ \d.e+-]{7}  [ \d.e+-]{6}  [ \d.e+-]{6}  ([ \d.e+]{6}|   N/A)"
ROW = re.compile(r"^[ \d]{12}  [ \d]{12}  [ \w]{8}  [ \w]{6}  [ \d-]{6}(" + CELL + "){1,2}$")
TYPES = ["int8", "uint8", "int32", "uint32", "int64", "uint64", "half", "float", "double",
         "bfloat16", "f8e4m3", "f8e5m2"]
OPS = ["sum", "prod", "max", "min", "avg", "mulsum"]


class Failure(Exception):
    pass


def check(cond, msg):
    if not cond:
        raise Failure(msg)


def base_env(**extra):
    env = dict(os.environ)
    for k in ("NCCL_COMM_ID", "MASTER_ADDR", "MASTER_PORT", "RANK", "WORLD_SIZE", "LOCAL_RANK",
              "LOCAL_WORLD_SIZE", "CHORUS_PERF_INJECT_ERROR"):
        env.pop(k, None)
    env["NCCL_SOCKET_IFNAME"] = "lo"
    env.update({k: str(v) for k, v in extra.items()})
    return env


def start(cmd, env):
    return subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, start_new_session=True)


def finish(p, limit=LIMIT_S):
    """Waits for p (its own session); kills its process group on timeout."""
    limit = int(limit * LIMIT_SCALE)
    try:
        out, err = p.communicate(timeout=limit)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        out, err = p.communicate()
        raise Failure("timed out after %d s: %s\n%s\n%s" % (limit, p.args, out, err))
    return p.returncode, out, err


def run(cmd, env, limit=LIMIT_S):
    print("+", " ".join(cmd), flush=True)
    return finish(start(cmd, env), limit)


def free_port():
    """A port free now, below the ephemeral range (32768 up), where no
    connection made before the rank binds it is handed it; it and the
    next one are used."""
    for _ in range(64):
        port = random.randint(10000, 30000)
        try:
            with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s, \
                    socket.socket(socket.AF_INET, socket.SOCK_STREAM) as t:
                s.bind(("127.0.0.1", port))
                t.bind(("127.0.0.1", port + 1))
                return port
        except OSError:
            continue
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def parse(out, nranks, prog="all_reduce_perf", inplace=True):
    """Checks the layout of a perf program's output; returns the table rows."""
    lines = out.splitlines()
    while lines and lines[0].startswith("# Writing JSON output"):
        lines.pop(0)
    check(len(lines) > 12, "output too short:\n" + out)
    check(re.match(r"^# chorus perf tests \S+ nccl-headers=\d+ nccl-library=\d+$", lines[0]),
          "bad version line: " + lines[0])
    check(lines[1] == "# Collective test starting: " + prog, "bad start line: " + lines[1])
    check(re.match(r"^# nThread \d+ nGpus \d+ minBytes \d+ maxBytes \d+ step: \d+\((factor|bytes)\)"
                   r" warmup iters: \d+ iters: \d+ agg iters: \d+ validation: \d+ graph: 0"
                   r" unalign: 0$", lines[2]), "bad parameter line: " + lines[2])
    i = 3
    while lines[i].startswith("# ") and lines[i] != "# Using devices":
        i += 1  # optional notes (-z, -I)
    check(lines[i] == "#" or lines[i - 1] == "#", "missing '#' before the devices")
    i = lines.index("# Using devices") + 1
    devs = lines[i:i + nranks]
    for d in devs:
        check(re.match(r"^#  Rank +\d+ Group +0 Pid +\d+ on +\S+ device +-?\d+ \[[^]]+\] \S+",
                       d), "bad device line: " + d)
    ranks = sorted(int(d.split()[2]) for d in devs)
    check(ranks == list(range(nranks)), "device lines do not list ranks 0..%d" % (nranks - 1))
    i += nranks
    check(lines[i:i + 4] == HEADER, "bad table header:\n" + "\n".join(lines[i:i + 4]))
    i += 4
    rows = []
    while i < len(lines) and not lines[i].startswith("#"):
        check(ROW.match(lines[i]), "bad row: %r" % lines[i])
        f = lines[i].split()
        check(len(f) == (13 if inplace else 9), "row has %d fields: %r" % (len(f), lines[i]))
        rows.append(f)
        i += 1
    foot = lines[i:]
    check(len(foot) == 4, "bad footer:\n" + "\n".join(foot))
    check(re.match(r"^# Out of bounds values : \d+ (OK|FAILED)$", foot[0]), "bad: " + foot[0])
    check(re.match(r"^# Avg bus bandwidth    : \S+ $", foot[1]), "bad: %r" % foot[1])
    check(foot[2] == "#" and foot[3] == "# Collective test concluded: " + prog,
          "bad end: %r" % foot[2:])
    return rows, foot


def expect_clean(rc, out, err, nranks, nrows=None, inplace=True, prog="all_reduce_perf"):
    check(rc == 0, "exit status %d\n%s\n%s" % (rc, out, err))
    rows, foot = parse(out, nranks, prog, inplace)
    if nrows is not None:
        check(len(rows) == nrows, "%d rows, expected %d" % (len(rows), nrows))
    for f in rows:
        wrong = [f[8]] + ([f[12]] if inplace else [])
        check(all(w == "0" for w in wrong), "wrong elements in row: %s" % " ".join(f))
    check(foot[0] == "# Out of bounds values : 0 OK", foot[0])
    return rows


def nsizes(lo, hi, factor):
    n, s = 0, lo
    while s <= hi:
        n, s = n + 1, s * factor
    return n


# ---- cases --------------------------------------------------------------------------
def case_threads(a):
    args = ["-t", "4", "-b", "8", "-e", "1M", "-f", "4", "-c", "1", "-d", "all", "-o", "all",
            "-n", "2", "-w", "1"]
    rc, out, err = run([a.perf] + args, base_env())
    rows = expect_clean(rc, out, err, 4, len(TYPES) * len(OPS) * nsizes(8, 1 << 20, 4))
    seen = {(f[2], f[3]) for f in rows}
    check(seen == {(t, o) for t in TYPES for o in OPS}, "not every type and op ran")
    check(all(f[4] == "-1" for f in rows), "allreduce rows must show root -1")


def case_groups(a):
    args = ["-t", "2", "-g", "2", "-b", "8", "-e", "64K", "-f", "8", "-d", "all", "-o", "all",
            "-n", "2", "-w", "1", "-m", "2"]
    rc, out, err = run([a.perf] + args, base_env())
    expect_clean(rc, out, err, 4, len(TYPES) * len(OPS) * nsizes(8, 64 << 10, 8))


def case_options(a):
    """Nonblocking communicators, -N cycles, -a, -i steps, -c 2, -I 0."""
    common = ["-b", "8", "-e", "64K", "-n", "2", "-w", "1", "-d", "float", "-o", "all"]
    rc, out, err = run([a.perf, "-t", "2", "-g", "2", "-z", "0", "-N", "2", "-a", "3", "-f", "8"]
                       + common, base_env())
    expect_clean(rc, out, err, 4, 2 * len(OPS) * nsizes(8, 64 << 10, 8))
    check("# Communicators: ncclConfig_t.blocking = 0 " in out, "missing -z note")
    rc, out, err = run([a.perf, "-t", "3", "-i", "16384", "-a", "0", "-c", "2"] + common,
                       base_env())
    rows = expect_clean(rc, out, err, 3, len(OPS) * len(range(8, (64 << 10) + 1, 16 << 10)))
    check(sorted({int(f[0]) for f in rows}) == list(range(8, (64 << 10) + 1, 16 << 10)),
          "-i steps: sizes %s" % sorted({int(f[0]) for f in rows}))
    rc, out, err = run([a.perf, "-t", "2", "-I", "0", "-f", "8"] + common, base_env())
    expect_clean(rc, out, err, 2, len(OPS) * nsizes(8, 64 << 10, 8), inplace=False)


def case_json(a):
    d = tempfile.mkdtemp(prefix="chorus-perf-json.")
    try:
        path = os.path.join(d, "r.json")
        rc, out, err = run([a.perf, "-t", "3", "-b", "8", "-e", "1K", "-f", "2", "-d", "int32",
                            "-o", "all", "-n", "1", "-w", "0", "-J", path], base_env())
        rows = expect_clean(rc, out, err, 3, len(OPS) * nsizes(8, 1024, 2))
        with open(path) as f:
            recs = [json.loads(line) for line in f]
        check(len(recs) == len(rows), "%d JSON lines for %d rows" % (len(recs), len(rows)))
        for r, f in zip(recs, rows):
            check(r["collective"] == "all_reduce_perf" and r["nranks"] == 3, str(r))
            check((r["size"], r["count"], r["type"], r["redop"], r["root"])
                  == (int(f[0]), int(f[1]), f[2], f[3], int(f[4])), str(r))
            for place in ("out_of_place", "in_place"):
                check(r[place]["wrong"] == 0 and r[place]["time_us"] > 0, str(r))
            check(r["nccl_library"] > 0 and "chorus_perf" in r, str(r))
    finally:
        shutil.rmtree(d)


def case_inject(a):
    """A spoiled result must show in #wrong, the footer and the exit status."""
    rc, out, err = run([a.perf, "-t", "2", "-b", "64", "-e", "256", "-f", "2", "-n", "1",
                        "-w", "0"], base_env(CHORUS_PERF_INJECT_ERROR=1))
    check(rc != 0, "exit status 0 despite wrong results")
    rows, foot = parse(out, 2)
    check(all(f[8] == "1" and f[12] == "1" for f in rows), "expected #wrong 1 everywhere")
    check(foot[0] == "# Out of bounds values : %d FAILED" % (2 * len(rows)), foot[0])


def case_usage(a):
    rc, out, _ = run([a.perf, "-h"], base_env())
    check(rc == 0 and "USAGE" in out, "-h")
    for bad in (["-d", "nosuchtype"], ["-o", "nosuchop"], ["-b", "1X"], ["-b", "2M", "-e", "1M"],
                ["-a", "7"], ["extra"]):
        rc, _, err = run([a.perf] + bad, base_env())
        check(rc != 0, "accepted %s" % bad)
    bcast = os.path.join(os.path.dirname(a.perf), "broadcast_perf")
    rc, _, err = run([bcast, "-t", "2", "-r", "2"], base_env())
    check(rc != 0 and "root 2 is not a rank" in err, "root outside the ranks: %s" % err)


def case_chorusrun(a):
    args = ["-b", "8", "-e", "256K", "-f", "4", "-c", "1"]
    rc, out, err = run([a.chorusrun, "-n", "4", a.perf] + args, base_env())
    expect_clean(rc, out, err, 4, nsizes(8, 256 << 10, 4))
    pids = {int(line.split()[6]) for line in out.splitlines() if line.startswith("#  Rank")}
    check(len(pids) == 4, "expected 4 processes, got pids %s" % pids)


def spawn_ranks(a, n, env_of, args):
    """Starts n processes of the perf program directly (their parent is us)."""
    procs = [start([a.perf] + args, env_of(r)) for r in range(n)]
    results = [finish(p) for p in procs]
    for r, (rc, out, err) in enumerate(results):
        check(rc == 0, "rank %d: exit status %d\n%s\n%s" % (r, rc, out, err))
        if r > 0:
            check(out == "", "rank %d printed: %s" % (r, out))
    return results[0]


def case_torchrun_env(a):
    port = free_port()  # NCCL_COMM_ID will use MASTER_PORT + 1
    # torchrun gives every rank the job's run id, which keys the rendezvous.
    env_of = lambda r: base_env(RANK=r, WORLD_SIZE=3, LOCAL_RANK=r, LOCAL_WORLD_SIZE=3,
                                MASTER_ADDR="127.0.0.1", MASTER_PORT=port - 1,
                                TORCHELASTIC_RUN_ID="perf-test-%d" % port)
    rc, out, err = spawn_ranks(a, 3, env_of, ["-b", "8", "-e", "64K", "-f", "8", "-n", "2"])
    expect_clean(rc, out, err, 3, nsizes(8, 64 << 10, 8))


def case_file_rendezvous(a):
    tmp = tempfile.mkdtemp(prefix="chorus-perf-rdv.")
    try:
        env_of = lambda r: base_env(RANK=r, WORLD_SIZE=3, LOCAL_RANK=r, LOCAL_WORLD_SIZE=3,
                                    TMPDIR=tmp)
        rc, out, err = spawn_ranks(a, 3, env_of, ["-b", "8", "-e", "64K", "-f", "8", "-n", "2"])
        expect_clean(rc, out, err, 3, nsizes(8, 64 << 10, 8))
        check(os.listdir(tmp) == [], "rendezvous file left behind: %s" % os.listdir(tmp))
    finally:
        shutil.rmtree(tmp)


def case_mpirun(a):
    mpirun = shutil.which("mpirun")
    if not mpirun:
        print("SKIP: mpirun is not installed (apt-get install openmpi-bin to run this test)")
        return SKIP
    rc, ver, _ = run([mpirun, "--version"], base_env(), 30)
    env = base_env(OMPI_ALLOW_RUN_AS_ROOT=1, OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1)
    if "Open MPI" in ver or "OpenRTE" in ver:
        cmd = [mpirun, "--oversubscribe", "-np", "3", "-x", "NCCL_SOCKET_IFNAME"]
    elif "HYDRA" in ver:
        cmd = [mpirun, "-np", "3"]
    else:
        print("SKIP: mpirun is neither Open MPI nor MPICH/Hydra:\n" + ver)
        return SKIP
    rc, out, err = run(cmd + [a.perf, "-b", "8", "-e", "64K", "-f", "8", "-n", "2"], env)
    expect_clean(rc, out, err, 3, nsizes(8, 64 << 10, 8))


def case_chorusrun_failure(a):
    """A rank that exits 3: chorusrun exits 3 at once and stops the others."""
    script = 'if [ "$RANK" = 1 ]; then sleep 0.3; exit 3; fi; exec sleep 60'
    t0 = time.monotonic()
    rc, out, err = run([a.chorusrun, "-n", "3", "sh", "-c", script], base_env(), 30)
    dt = time.monotonic() - t0
    check(rc == 3, "exit status %d, expected 3\n%s" % (rc, err))
    check(dt < 10, "took %.1f s: the other ranks were not stopped" % dt)
    check("rank 1" in err and "status 3" in err, "no message naming rank 1: " + err)
    rc, _, err = run([a.chorusrun, "-n", "2", "sh", "-c", "kill -9 $$"], base_env(), 30)
    check(rc == 128 + 9, "killed child: exit status %d, expected 137" % rc)
    rc, _, err = run([a.chorusrun, "-n", "2", "/nonexistent/program"], base_env(), 30)
    check(rc == 127, "missing program: exit status %d" % rc)


def case_chorusrun_timeout(a):
    t0 = time.monotonic()
    rc, _, err = run([a.chorusrun, "--timeout", "1", "-n", "2", "sleep", "60"], base_env(), 30)
    check(rc == 124, "exit status %d, expected 124" % rc)
    check(time.monotonic() - t0 < 10, "the timeout did not stop the ranks in time")
    # SIGTERM ignored: SIGKILL after the grace period
    rc, _, _ = run([a.chorusrun, "--timeout", "1", "--grace", "1", "-n", "2", "sh", "-c",
                    "trap '' TERM; sleep 60"], base_env(), 30)
    check(rc == 124, "exit status %d, expected 124" % rc)


def case_watchdog(a):
    """-T: a call that never returns (rank 1 stopped with SIGSTOP for 6 s in
    the timing loop) fails rank 0 with 'Test timeout' within -T seconds, long
    before the library's own CHORUS_OP_TIMEOUT; rank 1 goes on by itself."""
    script = ('if [ "$RANK" = 1 ]; then "$0" "$@" & pid=$!; sleep 1.5; kill -STOP $pid; sleep 6; '
              'kill -CONT $pid; wait $pid; else exec "$0" "$@"; fi')
    args = ["-b", "8", "-e", "8", "-n", "50000000", "-w", "1", "-c", "0", "-T", "2"]
    t0 = time.monotonic()
    rc, out, err = run([a.chorusrun, "--timeout", "60", "-n", "2", "sh", "-c", script, a.perf] +
                       args, base_env(CHORUS_OP_TIMEOUT=120), 60)
    dt = time.monotonic() - t0
    check(rc != 0, "a stopped peer did not fail the run:\n" + out)
    check("Test timeout: an NCCL call took more than 2 s (-T)" in out + err,
          "no watchdog message:\n%s\n%s" % (out, err))
    check(dt < 30, "took %.1f s: the watchdog did not fire" % dt)


def case_chorusrun_env(a):
    script = 'echo "$RANK $WORLD_SIZE $LOCAL_RANK $LOCAL_WORLD_SIZE $NCCL_COMM_ID"'
    rc, out, err = run([a.chorusrun, "-n", "3", "--", "sh", "-c", script], base_env(), 30)
    check(rc == 0, "exit status %d: %s" % (rc, err))
    got = sorted(line.split() for line in out.splitlines())
    check([g[:4] for g in got] == [[str(r), "3", str(r), "3"] for r in range(3)], out)
    check(len({g[4] for g in got}) == 1 and re.match(r"^127\.0\.0\.1:\d+$", got[0][4]), out)
    # The port rank 0 binds later is below the range the kernel gives
    # connections on its own, so none can take it in between.
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            low = int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        low = 0
    if low > 11000:
        port = int(got[0][4].split(":")[1])
        check(port < low, "port %d is in the ephemeral range (from %d)" % (port, low))
    rc, out, _ = run([a.chorusrun, "-n", "2", "sh", "-c", 'echo "$NCCL_COMM_ID"'],
                     base_env(NCCL_COMM_ID="10.1.2.3:4567"), 30)
    check(rc == 0 and out.split() == ["10.1.2.3:4567"] * 2, "NCCL_COMM_ID not kept: " + out)
    rc, _, _ = run([a.chorusrun], base_env(), 30)
    check(rc == 2, "no arguments: exit status %d" % rc)
    # --hosts: a host identity per block of ceil(n / H) ranks, LOCAL_RANK kept
    rc, out, err = run([a.chorusrun, "-n", "5", "--hosts", "2", "sh", "-c",
                        'echo "$RANK $LOCAL_RANK $NCCL_HOSTID"'], base_env(), 30)
    check(rc == 0, "--hosts: exit status %d: %s" % (rc, err))
    got = sorted(line.split() for line in out.splitlines())
    want = [[str(r), str(r), "chorusrun-host-%d" % (r // 3)] for r in range(5)]
    check(got == want, "--hosts 2 of 5 ranks: " + out)
    rc, _, _ = run([a.chorusrun, "-n", "2", "--hosts", "3", "true"], base_env(), 30)
    check(rc == 2, "more hosts than ranks: exit status %d" % rc)


ROOTED = ("broadcast", "reduce", "gather", "scatter")
REDUCING = ("reduce_scatter", "reduce")


def case_coll(a):
    """One perf program on the library: every type, operator and root, with
    threads and then with processes."""
    check(a.coll, "the coll case needs --coll")
    name = a.coll + "_perf"
    prog = os.path.join(os.path.dirname(a.perf), name)
    env = base_env()
    rooted, reduces = a.coll in ROOTED, a.coll in REDUCING
    args = ["-b", "8", "-e", "64K", "-f", "8", "-n", "1", "-w", "1", "-d", "all", "-o", "all"]
    args += ["-r", "all"] if rooted else []
    rc, out, err = run([prog, "-t", "3"] + args, env)
    per_type = (len(OPS) if reduces else 1) * (3 if rooted else 1) * nsizes(8, 64 << 10, 8)
    rows = expect_clean(rc, out, err, 3, len(TYPES) * per_type, prog=name)
    check(all((f[3] in OPS) == reduces and (f[4] != "-1") == rooted for f in rows),
          "redop/root columns do not fit %s" % name)
    rc, out, err = run([a.chorusrun, "-n", "4", prog, "-b", "8", "-e", "64K", "-f", "8",
                        "-n", "1", "-w", "1", "-r", "3" if rooted else "0"], env)
    expect_clean(rc, out, err, 4, nsizes(8, 64 << 10, 8), prog=name)


CASES = {name[5:]: fn for name, fn in globals().items() if name.startswith("case_")}


def main():
    p = argparse.ArgumentParser()
    p.add_argument("case", choices=sorted(CASES))
    p.add_argument("--perf", required=True, help="path of all_reduce_perf")
    p.add_argument("--chorusrun", required=True)
    p.add_argument("--coll", help="coll case: the collective, e.g. all_gather")
    p.add_argument("--limit-scale", type=float, default=1.0,
                   help="multiplies every process's time limit (sanitizer builds)")
    a = p.parse_args()
    global LIMIT_SCALE
    LIMIT_SCALE = a.limit_scale
    try:
        rc = CASES[a.case](a)
    except Failure as e:
        print("FAIL:", e)
        return 1
    if rc == SKIP:
        return SKIP
    print("PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
