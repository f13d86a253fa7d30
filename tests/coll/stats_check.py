#!/usr/bin/env python3
"""stats_check.py - the live statistics against a known sequence of calls.

usage: stats_check.py TEST_COMM threads|procs NRANKS

Runs test_comm's stats_calls case with CHORUS_STATS_INTERVAL=1 and
CHORUS_STATS_FILE in a fresh folder, then checks what the library wrote
against the calls the case makes (its comment lists them): every line is
JSON; each rank's last line counts exactly those calls, bytes, size
classes, timed calls and the one error; a line written during the pause
(before the communicator ended) counts the first five calls; and each
Prometheus file parses and agrees with the last line of every
communicator it shows.
"""
import glob
import json
import os
import re
import subprocess
import sys
import tempfile

KIB = 1024


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def expected(nranks):
    """{func: (calls, bytes, timed, {size: (calls, bytes, timed)})}, errors."""
    return {
        "AllReduce": (7, 5 * 4000 + 2 * 40, 5,
                      {"1K-64K": (5, 5 * 4000, 5), "0-1K": (2, 2 * 40, 0)}),
        "Broadcast": (3, 3 * 64 * KIB, 3, {"1K-64K": (3, 3 * 64 * KIB, 3)}),
        "AllGather": (1, 400 * nranks, 1,
                      {("0-1K" if 400 * nranks <= KIB else "1K-64K"): (1, 400 * nranks, 1)}),
    }, 1


def check_line(line, nranks, where):
    want, errors = expected(nranks)
    if line["errors"] != errors:
        fail("%s: errors %d, want %d" % (where, line["errors"], errors))
    if set(line["funcs"]) != set(want):
        fail("%s: functions %s, want %s" % (where, sorted(line["funcs"]), sorted(want)))
    for f, (calls, nbytes, timed, sizes) in want.items():
        got = line["funcs"][f]
        if (got["calls"], got["bytes"], got["timed"]) != (calls, nbytes, timed):
            fail("%s: %s calls/bytes/timed %d/%d/%d, want %d/%d/%d" % (
                where, f, got["calls"], got["bytes"], got["timed"], calls, nbytes, timed))
        if set(got["sizes"]) != set(sizes):
            fail("%s: %s size classes %s, want %s" % (where, f, sorted(got["sizes"]),
                                                        sorted(sizes)))
        for k, (c, b, t) in sizes.items():
            g = got["sizes"][k]
            if (g["calls"], g["bytes"], g["timed"]) != (c, b, t):
                fail("%s: %s %s: %d/%d/%d, want %d/%d/%d" % (
                    where, f, k, g["calls"], g["bytes"], g["timed"], c, b, t))
            if (g["time_us"] > 0) != (t > 0):
                fail("%s: %s %s: time %.3f us for %d timed calls" % (
                    where, f, k, g["time_us"], t))


PROM_LINE = re.compile(r'^([a-z_]+)\{([^}]*)\} ([0-9.e+-]+)$')


def check_prom(path, last):
    """Each sample of path against the last JSON line of its (comm, rank)."""
    seen = 0
    with open(path) as fh:
        for raw in fh:
            raw = raw.rstrip("\n")
            if raw.startswith("# HELP ") or raw.startswith("# TYPE "):
                continue
            m = PROM_LINE.match(raw)
            if not m:
                fail("%s: not Prometheus text: %r" % (path, raw))
            name, labels, value = m.group(1), m.group(2), float(m.group(3))
            lab = dict(re.findall(r'([a-z]+)="([^"]*)"', labels))
            key = (lab["comm"], int(lab["rank"]))
            if key not in last:
                fail("%s: comm %s rank %s has no JSON line" % (path, key[0], key[1]))
            line = last[key]
            if name == "chorus_errors_total":
                got = line["errors"]
            else:
                cell = line["funcs"][lab["func"]]["sizes"][lab["size"]]
                got = {"chorus_calls_total": cell["calls"], "chorus_bytes_total": cell["bytes"],
                       "chorus_timed_calls_total": cell["timed"],
                       "chorus_call_seconds_total": cell["time_us"] / 1e6}[name]
            if abs(got - value) > 1e-6 * max(1.0, abs(got)):
                fail("%s: %s{%s} = %s, the JSON line says %s" % (path, name, labels, value, got))
            seen += 1
    if not seen:
        fail("%s: no samples" % path)


def main():
    if len(sys.argv) != 4:
        print(__doc__)
        return 2
    prog, mode, nranks = sys.argv[1], sys.argv[2], int(sys.argv[3])
    with tempfile.TemporaryDirectory() as tmp:
        env = dict(os.environ, CHORUS_STATS_INTERVAL="1",
                   CHORUS_STATS_FILE=os.path.join(tmp, "s.%h.%p.jsonl"))
        run = subprocess.run([prog, "stats_calls", mode, str(nranks)], env=env, timeout=120,
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        if run.returncode != 0:
            print(run.stdout)
            fail("test_comm stats_calls exited %d" % run.returncode)
        files = sorted(glob.glob(os.path.join(tmp, "s.*.jsonl")))
        want_files = 1 if mode == "threads" else nranks
        if len(files) != want_files:
            fail("%d JSON files, want %d" % (len(files), want_files))
        last, early = {}, {}
        comms = set()
        for path in files:
            with open(path) as fh:
                for n, raw in enumerate(fh, 1):
                    try:
                        line = json.loads(raw)
                    except ValueError as e:
                        fail("%s:%d: not JSON (%s): %r" % (path, n, e, raw))
                    key = (line["comm"], line["rank"])
                    comms.add(line["comm"])
                    if line["nranks"] != nranks or line["device"] != -1:
                        fail("%s:%d: nranks %d device %d" % (path, n, line["nranks"],
                                                             line["device"]))
                    if line["last"]:
                        if key in last:
                            fail("%s:%d: a second last line for rank %d" % (path, n, key[1]))
                        last[key] = line
                    elif key not in last:
                        early.setdefault(key, line)
        if len(comms) != 1:
            fail("communicator ids %s: one communicator, alike on every rank" % sorted(comms))
        if sorted(r for _, r in last) != list(range(nranks)):
            fail("last lines for ranks %s" % sorted(r for _, r in last))
        for key, line in last.items():
            check_line(line, nranks, "rank %d's last line" % key[1])
        # The pause lasts past one interval: a line then counts the first
        # five AllReduce and nothing else.
        for key in last:
            line = early.get(key)
            if not line:
                fail("rank %d: no line written during the pause" % key[1])
            f = line["funcs"]
            if list(f) != ["AllReduce"] or f["AllReduce"]["calls"] != 5 or line["errors"]:
                fail("rank %d: the line in the pause says %s" % (key[1], json.dumps(line)))
        proms = sorted(glob.glob(os.path.join(tmp, "s.*.prom")))
        if len(proms) != want_files:
            fail("%d Prometheus files, want %d" % (len(proms), want_files))
        for path in proms:
            check_prom(path, last)
    print("PASS: %d ranks (%s): JSON lines and Prometheus text agree with the calls made"
          % (nranks, mode))
    return 0


if __name__ == "__main__":
    sys.exit(main())
