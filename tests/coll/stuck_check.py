#!/usr/bin/env python3
"""stuck_check.py - the stuck report against a rank known to hold the others up.

usage: stuck_check.py STUCK_RANK threads|procs SCENARIO NRANKS
       stuck_check.py STUCK_RANK hosts SCENARIO NRANKS NSA:IFA:IPA NSB:IFB:IPB

Runs stuck_rank.c's SCENARIO (late, stop or branch; its comment says what
each does) with CHORUS_STUCK_WARN=2: as threads of one process, as one
process per rank, or as processes on two namespace hosts (stuck_hosts.sh
makes them; the culprit, the last rank, on the second). The stall begins
when the last of the waiting ranks is ready for call #3 (for `stop`, when
the driver lets them go after stopping the culprit with SIGSTOP). Checks:
every waiting rank writes its report within the threshold plus 2 s, and
the report names the culprit with its host and pid and says why (not
issued, with its last call; stopped; waiting in another communicator's
call), and sorts the ranks (not issued / inside); the culprit of `late`
writes none; every rank ends as the scenario plans. With processes, `late`
first sends garbage to rank 0's status service, which must go on answering,
and checks the state dump: chorus_info --dump (CHORUS_INFO) on rank 0 while
it stalls, and the culprit's own through chorusDumpState.
"""
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time

WARN_S = 2
LATE_S = 6


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def reports(text):
    """The stuck reports in a log: each the 'stuck:' line and its indented lines."""
    out, cur = [], None
    for line in text.splitlines():
        if "stuck: " in line:
            cur = [line]
            out.append(cur)
        elif cur is not None and line.startswith("  "):
            cur.append(line)
        else:
            cur = None
    return ["\n".join(r) for r in out]


def garbage(log):
    """Garbage, a short query and a silent connection to rank 0's status
    service, which must go on answering (the reports that follow show it)."""
    m = re.search(r"answers its peers on ([0-9.]+):(\d+)", open(log).read())
    if not m:
        fail("rank 0 does not say where it answers:\n" + open(log).read())
    addr = (m.group(1), int(m.group(2)))
    for payload in (os.urandom(4096), b"CHST", b""):
        s = socket.create_connection(addr, timeout=5)
        s.sendall(payload)
        if payload:
            s.close()
        else:
            garbage.silent = s  # held open across the stall


def dump_checks(tmp, procs, culprit):
    """The state dump, both ways: chorus_info --dump on rank 0 while it
    stalls; the culprit's own, written by chorusDumpState before its nap."""
    info = os.environ.get("CHORUS_INFO")
    if not info:
        fail("set CHORUS_INFO to chorus_info's path")
    time.sleep(0.5)  # rank 0's call stalls
    out = subprocess.run([info, "--dump", str(procs[0].pid)], stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, text=True, timeout=30).stdout
    print("chorus_info --dump %d:\n%s" % (procs[0].pid, out))
    for pat in [r"Chorus state of pid %d at " % procs[0].pid,
                r"comm main: rank 0 of %d on 1 host\(s\), host memory; working" % len(procs),
                r"collectives: 4 issued, 3 ended",
                r"stalled: AllReduce\(count=1024, float, sum\) #3 for [\d.]+ s, waiting for ",
                r"recent collectives: AllReduce\(count=1024, float, sum\) #3 [\d.]+ s ago; "
                r"AllReduce\(count=1024, float, sum\) #2",
                r"comm side: rank 0 of %d" % len(procs),
                r"peers: 1 \(host [^,]+, pid %d, SHM, sent \d+ B, received \d+ B\)" % procs[1].pid,
                r"node memory: \d+ B staged for the peers to read"]:
        if not re.search(pat, out):
            fail("chorus_info --dump lacks /%s/" % pat)
    path = os.path.join(tmp, "dump.%d.txt" % procs[culprit].pid)
    own = open(path).read() if os.path.exists(path) else ""
    for pat in [r"comm main: rank %d of %d" % (culprit, len(procs)),
                r"collectives: 3 issued, 3 ended"]:
        if not re.search(pat, own):
            fail("the culprit's chorusDumpState file lacks /%s/:\n%s" % (pat, own))
    if "stalled:" in own.split("comm main")[1].split("comm ")[0]:
        fail("the culprit's dump shows a stall on main")


def report_rank(rep):
    """The rank a report is about: 'rank R of N' style prefixes vary, so the
    report's first line says which rank's call it is through [R]."""
    m = re.search(r"\[(\d+)\]", rep.split("\n", 1)[0])
    return int(m.group(1)) if m else None


def main():
    if len(sys.argv) not in (5, 7):
        print(__doc__)
        return 2
    prog, mode, scen, n = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    hosts = [h.split(":") for h in sys.argv[5:7]] if mode == "hosts" else None
    if scen == "stop" and mode == "threads":
        fail("stop needs a process per rank")
    culprit = n - 1
    waiting = list(range(n - 1))
    tmp = tempfile.mkdtemp(prefix="stuck.")
    env = dict(os.environ, CHORUS_STUCK_WARN=str(WARN_S), READY_DIR=tmp, LATE_S=str(LATE_S),
               CHORUS_OP_TIMEOUT="8" if scen == "branch" else "60", NCCL_DEBUG="INFO",
               NCCL_DEBUG_SUBSYS="INIT", CHORUS_DUMP_SIGNAL="USR1",
               CHORUS_DUMP_FILE=os.path.join(tmp, "dump.%p.txt"))
    procs, logs = [], []
    if mode == "threads":
        logs.append(os.path.join(tmp, "all.log"))
        with open(logs[0], "w") as log:
            procs.append(subprocess.Popen([prog, scen, "threads", str(n)], env=env, stdout=log,
                                          stderr=subprocess.STDOUT))
    else:
        port = 10000 + os.getpid() % 20000  # below the ephemeral range (32768 up)
        root_ip = hosts[0][2] if hosts else "127.0.0.1"
        for r in range(n):
            e = dict(env, RANK=str(r), WORLD_SIZE=str(n), NCCL_COMM_ID="%s:%d" % (root_ip, port))
            cmd = [prog, scen]
            if hosts:
                ns, ifn, _ = hosts[0] if r < n // 2 else hosts[1]
                e["NCCL_SOCKET_IFNAME"] = ifn
                cmd = ["ip", "netns", "exec", ns] + cmd
            else:
                e["NCCL_SOCKET_IFNAME"] = "lo"
            logs.append(os.path.join(tmp, "%d.log" % r))
            with open(logs[-1], "w") as log:
                procs.append(subprocess.Popen(cmd, env=e, stdout=log, stderr=subprocess.STDOUT))
    stopped = False
    try:
        # The stall begins when the last waiting rank is ready for call #3.
        ready = [os.path.join(tmp, "ready.%d" % r) for r in (range(n) if scen == "stop" else waiting)]
        deadline = time.time() + 90
        while not all(os.path.exists(p) for p in ready):
            if time.time() > deadline or any(p.poll() is not None for p in procs):
                fail("the ranks never got to call #3:\n" + "".join(open(l).read() for l in logs))
            time.sleep(0.02)
        start = max(os.stat(p).st_mtime for p in ready)
        if mode == "procs" and scen == "late":
            garbage(logs[0])
            dump_checks(tmp, procs, culprit)
        if scen == "stop":
            procs[culprit].send_signal(signal.SIGSTOP)
            stopped = True
            open(os.path.join(tmp, "go"), "w").close()
            start = time.time()
        # Each waiting rank's report, as soon as it shows.
        seen = {}
        want = set(waiting) | ({culprit} if scen == "branch" else set())
        while time.time() < start + WARN_S + 2.0 and set(seen) != want:
            for i, l in enumerate(logs):
                for rep in reports(open(l).read()):
                    r = i if mode != "threads" else report_rank(rep)
                    if r in want and r not in seen:
                        seen[r] = (time.time() - start, rep)
            time.sleep(0.05)
        if set(seen) != want:
            fail("no report within %d + 2 s from ranks %s:\n%s" % (
                WARN_S, sorted(want - set(seen)), "".join(open(l).read() for l in logs)))
        pid = procs[culprit].pid if mode != "threads" else procs[0].pid
        who = r"culprit: rank %d \(host [^,]+, pid %d\)" % (culprit, pid)
        for r, (after, rep) in sorted(seen.items()):
            print("rank %d reported after %.2f s:\n%s" % (r, after, rep))
            if r == culprit:  # branch: the culprit waits on side for rank 0
                need = [r"stuck: Broadcast\(count=1024, float, root=0\) #0 on comm side",
                        r"culprit: rank 0 \(host [^,]+, pid \d+\) has not issued Broadcast #0; "
                        r"it has issued no collective on this communicator; its process waits "
                        r"in AllReduce\(count=1024, float, sum\) #3 on comm main"]
            else:
                need = [r"stuck: AllReduce\(count=1024, float, sum\) #3 on comm main has made no "
                        r"progress for [\d.]+ s"]
                if scen == "stop":
                    need.append(who + " is stopped")
                    need.append(r"silent or different: %d\b" % culprit)
                else:
                    need.append(who + r" has not issued AllReduce #3; its last call was "
                                r"AllReduce\(count=1024, float, sum\) #2, [\d.]+ s ago")
                    need.append(r"not issued: %d;" % culprit)
                if scen == "branch":
                    need.append(r"its process waits in Broadcast\(count=1024, float, root=0\) #0 "
                                r"on comm side")
                if scen != "stop" or mode != "threads":
                    need.append(r"inside: %s;" % ("0" if n == 2 else "0-%d" % (n - 2) if n > 3
                                                  else "0,1"))
            for pat in need:
                if not re.search(pat, rep):
                    fail("rank %d's report lacks /%s/" % (r, pat))
        if scen == "stop":
            time.sleep(0.5)
            procs[culprit].send_signal(signal.SIGCONT)
            stopped = False
        end = time.time() + 60
        for p in procs:
            try:
                p.wait(timeout=max(1, end - time.time()))
            except subprocess.TimeoutExpired:
                fail("a rank did not end:\n" + "".join(open(l).read() for l in logs))
        text = "".join(open(l).read() for l in logs)
        for r in range(n):
            if "rank %d: ok" % r not in text:
                fail("rank %d did not end as planned:\n%s" % (r, text))
        if any(p.returncode != 0 for p in procs):
            fail("exit statuses %s:\n%s" % ([p.returncode for p in procs], text))
        if scen == "late" and mode != "threads" and reports(open(logs[culprit]).read()):
            fail("the late rank reported a stall of its own")
        print("PASS: %s %s %d: every waiting rank named rank %d within %d + 2 s" % (
            mode, scen, n, culprit, WARN_S))
        return 0
    finally:
        for p in procs:
            if p.poll() is None:
                if stopped:
                    p.send_signal(signal.SIGCONT)
                p.kill()
                p.wait()
        subprocess.run(["rm", "-rf", tmp])


if __name__ == "__main__":
    sys.exit(main())
