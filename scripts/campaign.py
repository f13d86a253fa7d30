#!/usr/bin/env python3
"""The fault campaign: runs trials of every fault class with bounded time and
writes docs/RELIABILITY.md from what it measured (--short: a few trials of
each, no report; CTest runs that as campaign.short).

Classes: SIGKILL of a random rank at a random moment (shared memory, TCP,
two hosts, a process of two ranks), SIGSTOP below and above the op
timeout, ncclCommAbort from another thread, random mismatches
(tests/coll/test_mismatch), strangers on every port, a host allocation or
shared-memory segment that fails, a /dev/shm too small (a tmpfs of its own
in a mount namespace, where unshare works), the bad-argument table
(--badtable), a soak of a million calls, and the libFuzzer harnesses
(--fuzzers DIR, from build-fuzz). Each trial is a process tree with its
own deadline; a trial that does not end is a hang.

On the GPU machine, --gpu-only runs the GPU classes alone and rewrites
the GPU section of the report (the host's stays): SIGKILL of a random rank
of 2-4 processes, one per GPU, and of a process driving 2 GPUs
(campaign_trial_gpu), a failed device allocation or shared-memory
segment, and random mismatches on 2-4 GPUs driven by one process
(gpu_mismatch_rand).

usage: campaign.py [--short] --trial BIN --mismatch BIN [--fuzzers DIR] [--badtable BIN]
                   [--kills N] [--aborts N] [--stops N] [--mismatches N]
                   [--soak-calls N] [--fuzz-runs N] [--out FILE]
       campaign.py --gpu-only --gpu-trial BIN --gpu-mismatch BIN
                   [--gpu-kills N] [--gpu-mismatches N] [--out FILE]
"""
import argparse
import datetime
import os
import re
import signal
import socket
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run(cmd, env, limit):
    e = dict(os.environ)
    e.update({k: str(v) for k, v in env.items()})
    t0 = time.time()
    # Its own process group: a trial that does not end is ended with every
    # process it started, so none is left to load the next trials.
    # Bytes that are not UTF-8 become U+FFFD, which trial_class counts as
    # a failure: a message of the library's with garbage in it.
    p = subprocess.Popen(cmd, env=e, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         errors="replace", start_new_session=True)
    try:
        out, err = p.communicate(timeout=limit)
        return p.returncode, out, err, time.time() - t0
    except subprocess.TimeoutExpired:
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        out, err = p.communicate()
        return None, out or "", err or "", time.time() - t0


class Tally:
    def __init__(self, name, what):
        self.name, self.what = name, what
        self.trials = self.failures = self.hangs = self.crashes = self.leftovers = 0
        self.times = []
        self.extra = []
        self.examples = []

    def row(self):
        med = "%.1f" % statistics.median(self.times) if self.times else "-"
        mx = "%.1f" % max(self.times) if self.times else "-"
        return "| %s | %s | %d | %d | %d | %d | %d | %s | %s |" % (
            self.name, self.what, self.trials, self.failures, self.hangs, self.crashes,
            self.leftovers, med, mx)


def small_shm(i, seed):
    """A command prefix that runs a trial where /dev/shm is a tmpfs of its
    own (a mount namespace), from 256 KiB to 40 MiB: too small for every
    rank's segment in most trials, enough in some."""
    kib = 256 + (seed * 7919 + i * 104729) % (40 * 1024 - 256)
    return ["unshare", "-m", "sh", "-c",
            'mount -t tmpfs -o size=%dk tmpfs /dev/shm && exec "$0" "$@"' % kib]


def can_unshare():
    return subprocess.run(["unshare", "-m", "true"], capture_output=True).returncode == 0


def trial_class(args, tally, mode, n_of, env, count, limit=60, trial=None, prefix=None):
    for i in range(count):
        seed = 1000 * len(tally.name) + i + args.seed
        n = n_of(i)
        pre = prefix(i, seed) if prefix else []
        rc, out, err, _ = run(pre + [trial or args.trial, mode, str(n), str(seed)], env, limit)
        tally.trials += 1
        line = next((l for l in out.splitlines() if l.startswith("trial ")), "")
        kv = dict(re.findall(r"(\w+)=(\S+)", line))
        if rc is None:
            tally.hangs += 1
        else:
            tally.hangs += int(kv.get("hangs", 0))
            tally.crashes += int(kv.get("crashes", 0))
            tally.leftovers += int(kv.get("leftovers", 0))
        garbage = "\ufffd" in out or "\ufffd" in err
        if rc != 0 or garbage:
            tally.failures += 1
            if len(tally.examples) < 3:
                tally.examples.append(("garbage in the output: " if garbage else "") +
                                      (line or "(no result line)") + "\n" + err.strip()[-600:])
        for t in kv.get("detect_ms", "-").split(","):
            if t not in ("-", "") and float(t) >= 0:
                tally.times.append(float(t))
        if "abort_return_ms" in kv and float(kv["abort_return_ms"]) >= 0:
            tally.extra.append(float(kv["abort_return_ms"]))
        if mode == "soak":
            tally.extra.append(line)


def mismatch_class(args, tally, mode, n, env, trials):
    seed = args.seed + 7 * tally.trials + len(tally.name)
    rc, out, err, took = run([args.mismatch, mode, str(n), str(seed), str(trials)], env, 900)
    tally.trials += trials
    got = re.findall(r"detected (\d+) of (\d+) in time; median ([\d.]+) ms, max ([\d.]+) ms", err)
    worst = [float(m[3]) for m in got]
    missed = re.findall(r"(\d+) of (\d+) trials not detected in time", err)
    if rc is None:
        tally.hangs += 1
    if missed:
        tally.failures += max(int(m[0]) for m in missed)
        if len(tally.examples) < 3:
            tally.examples.append("\n".join(l for l in err.splitlines() if "trial " in l)[:600])
    elif rc != 0:
        tally.failures += 1
    tally.crashes += len(re.findall(r"failed \(signal", err))
    tally.times += [float(m[2]) for m in got]
    if worst:
        tally.extra.append(max(worst))


def badtable_class(args, tally):
    rc, out, err, took = run([args.badtable], {}, 900)
    m = re.search(r"badtable: (\d+) cases, (\d+) right, (\d+) crashes, (\d+) hangs, (\d+) wrong",
                  out)
    if not m:
        tally.trials += 1
        tally.hangs += rc is None
        tally.failures += rc is not None
        return
    cases, right, crashes, hangs, wrong = (int(g) for g in m.groups())
    tally.trials += cases
    tally.failures += wrong
    tally.crashes += crashes
    tally.hangs += hangs
    if wrong and len(tally.examples) < 3:
        tally.examples.append("\n".join(l for l in out.splitlines()
                                        if l.startswith(("WRONG", "CRASH", "HANG")))[:600])


def gpu_mismatch_class(args, tally, trials):
    rc, out, err, took = run([args.gpu_mismatch, str(trials), str(args.seed)], {}, 1800)
    m = re.search(r"(\d+) of (\d+) ranks' trials caught within [\d.]+ s, worst ([\d.]+) s", out)
    tally.trials += int(m.group(2)) if m else 0
    if rc is None:
        tally.hangs += 1
    elif m:
        tally.failures += int(m.group(2)) - int(m.group(1))
        tally.times.append(float(m.group(3)) * 1000)
    elif rc != 0:
        tally.failures += 1
    if rc not in (0, None) and len(tally.examples) < 3:
        tally.examples.append("\n".join(l for l in err.splitlines() if l.startswith("FAIL"))[:600])


def print_tallies(tallies, label, took):
    """Prints each class's row and examples; returns the problems."""
    bad = sum(t.failures + t.hangs + t.crashes + t.leftovers for t in tallies)
    for t in tallies:
        print(t.row())
        for ex in t.examples:
            print("   e.g. " + ex.replace("\n", "\n        "))
    print("%s: %d problem(s) in %.0f s" % (label, bad, took))
    return bad


def gpu_count():
    try:
        out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True).stdout
        return sum(1 for l in out.splitlines() if l.startswith("GPU"))
    except OSError:
        return 0


def replace_section(path, title, body):
    """The report with section `## title` (up to the next `## `) replaced by
    body, or added at the end."""
    old = open(path).read().splitlines() if os.path.exists(path) else ["# Reliability"]
    head = "## " + title
    if head in old:
        i = old.index(head)
        j = next((k for k in range(i + 1, len(old)) if old[k].startswith("## ")), len(old))
        new = old[:i] + body + ([""] + old[j:] if j < len(old) else [])
    else:
        new = old + [""] + body
    while new and new[-1] == "":
        new.pop()
    with open(path, "w") as f:
        f.write("\n".join(new) + "\n")


HEADER = [
    "| class | fault | trials | failures | hangs | crashes | leftovers | detection median (ms) | max (ms) |",
    "|---|---|---|---|---|---|---|---|---|",
]


def gpu_main(args):
    ngpu = min(gpu_count(), 4)
    if ngpu < 2:
        print("campaign --gpu-only: fewer than two GPUs")
        return 1
    t0 = time.time()
    env = {"CHORUS_OP_TIMEOUT": 20, "NCCL_NVLS_ENABLE": 0}
    k = Tally("gpu-kill", "SIGKILL of a random rank, 2-%d processes, one per GPU" % ngpu)
    trial_class(args, k, "kill", lambda i: 2 + i % (ngpu - 1), env, args.gpu_kills,
                trial=args.gpu_trial)
    tallies = [k]
    if ngpu >= 3:
        k2 = Tally("gpu-kill-shared", "SIGKILL of a process driving 2 GPUs (a thread per rank), "
                   "3-%d GPUs" % ngpu)
        trial_class(args, k2, "kill", lambda i: 3 + i % (ngpu - 2),
                    dict(env, TRIAL_RANKS_PER_PROC=2), args.gpu_kills // 2, trial=args.gpu_trial)
        tallies.append(k2)
    al = Tally("gpu-alloc", "a random rank's n-th device allocation fails (CHORUS_FAULT_DEVICE: "
               "cudaMalloc, cuMemCreate, cudaHostAlloc), n up to 3, 2-%d GPUs" % ngpu)
    trial_class(args, al, "alloc", lambda i: 2 + i % (ngpu - 1), dict(env, ALLOC_KIND="device"),
                args.gpu_kills // 2, trial=args.gpu_trial)
    tallies.append(al)
    al = Tally("gpu-alloc-shm", "a random rank's shared-memory segment cannot be made "
               "(CHORUS_FAULT_SHM), 2-%d GPUs" % ngpu)
    trial_class(args, al, "alloc", lambda i: 2 + i % (ngpu - 1),
                dict(env, ALLOC_KIND="shm", ALLOC_MAX=1), args.gpu_kills // 4, trial=args.gpu_trial)
    tallies.append(al)
    m = Tally("gpu-mismatch", "one rank changes function, count, op or root; 2-%d GPUs, one "
              "process (max: the worst trial)" % ngpu)
    gpu_mismatch_class(args, m, args.gpu_mismatches)
    tallies.append(m)
    took = time.time() - t0
    bad = print_tallies(tallies, "campaign (GPUs)", took)
    gpus = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"],
                          capture_output=True, text=True).stdout.splitlines()
    body = [
        "## GPUs",
        "",
        "What `scripts/campaign.py --gpu-only` measured on %dx %s, commit %s, %s, in %.0f s. "
        "Regenerate there with `python3 scripts/campaign.py --gpu-only --gpu-trial "
        "build-gpu/tests/campaign/campaign_trial_gpu --gpu-mismatch "
        "build-gpu/tests/gpu/gpu_mismatch_rand`. A kill's survivors wait for their stream and "
        "must then fail, naming the dead rank, within 1 s of the kill; a failed allocation "
        "must fail every rank within 1 s of the first failure, naming the rank it struck (or "
        "none fails, where n was past the last allocation); a mismatch must reach every rank "
        "within 1 s (through its call or, where its call ended cleanly, the next)."
        % (len(gpus), gpus[0] if gpus else "?", commit_of(), datetime.date.today().isoformat(),
           took),
        "",
    ] + HEADER + [t.row() for t in tallies]
    replace_section(args.out, "GPUs", body)
    print("wrote the GPU section of " + args.out)
    return 1 if bad else 0


def commit_of():
    # "-dirty": what ran is not the commit alone, and the report says so.
    return subprocess.run(["git", "-C", ROOT, "describe", "--always", "--dirty", "--abbrev=7"],
                          capture_output=True, text=True).stdout.strip() or "?"


def fuzz_class(args, tally, name, runs):
    exe = os.path.join(args.fuzzers, name)
    corpus = os.path.join(ROOT, "tests", "fuzz", "corpus", name)
    found = os.path.join("/tmp", "campaign-fuzz-" + name)
    os.makedirs(found, exist_ok=True)
    rc, out, err, took = run([exe, "-runs=%d" % runs, "-timeout=10", "-rss_limit_mb=2048",
                              "-print_final_stats=1", "-artifact_prefix=%s/" % found, found,
                              corpus], {}, 3 * 3600)
    m = re.search(r"stat::number_of_executed_units:\s*(\d+)", err)
    tally.trials += int(m.group(1)) if m else 0
    if rc is None:
        tally.hangs += 1
    elif rc != 0:
        tally.crashes += 1
        tally.examples.append(err.strip()[-600:])
    tally.extra.append("%.0f s" % took)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--short", action="store_true")
    ap.add_argument("--trial")
    ap.add_argument("--mismatch")
    ap.add_argument("--gpu-only", action="store_true")
    ap.add_argument("--gpu-trial")
    ap.add_argument("--gpu-mismatch")
    ap.add_argument("--gpu-kills", type=int, default=100)
    ap.add_argument("--gpu-mismatches", type=int, default=100)
    ap.add_argument("--fuzzers")
    ap.add_argument("--netplug", help="a network plugin (.so, e.g. build/tests/netplug/"
                    "libnccl-net-loop8.so): kills across hosts over it")
    ap.add_argument("--badtable")
    ap.add_argument("--kills", type=int, default=1000)
    ap.add_argument("--stops", type=int, default=40)
    ap.add_argument("--aborts", type=int, default=1000)
    ap.add_argument("--mismatches", type=int, default=1000)
    ap.add_argument("--allocs", type=int, default=300)
    ap.add_argument("--strangers", type=int, default=100)
    ap.add_argument("--shmfulls", type=int, default=100)
    ap.add_argument("--soak-calls", type=int, default=1000000)
    ap.add_argument("--fuzz-runs", type=int, default=10000000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--out", default=os.path.join(ROOT, "docs", "RELIABILITY.md"))
    args = ap.parse_args()
    if args.gpu_only:
        if not (args.gpu_trial and args.gpu_mismatch):
            ap.error("--gpu-only needs --gpu-trial and --gpu-mismatch")
        return gpu_main(args)
    if not (args.trial and args.mismatch):
        ap.error("--trial and --mismatch are needed")
    if args.short:
        args.kills, args.stops, args.aborts, args.mismatches = 6, 2, 3, 60
        args.allocs, args.shmfulls, args.strangers = 6, 3, 4
        args.soak_calls, args.fuzz_runs = 20000, 20000
    t0 = time.time()
    tallies = []
    quick = {"CHORUS_OP_TIMEOUT": 20}  # a miss shows as slow, not as a hang

    k = Tally("kill", "SIGKILL of a random rank, shared memory")
    trial_class(args, k, "kill", lambda i: 2 + i % 3, quick, (args.kills + 2) // 3)
    tallies.append(k)
    k = Tally("kill-tcp", "SIGKILL, TCP only")
    trial_class(args, k, "kill", lambda i: 2 + i % 3, dict(quick, NCCL_SHM_DISABLE=1),
                (args.kills + 2) // 3)
    tallies.append(k)
    k = Tally("kill-hosts", "SIGKILL, 4 ranks on 2 hosts")
    trial_class(args, k, "kill", lambda i: 4, dict(quick, TRIAL_HOSTS=2), args.kills // 3)
    tallies.append(k)
    if args.netplug:
        k = Tally("kill-netplug", "SIGKILL, 4 ranks on 2 hosts joined by a network plugin (%s)"
                  % os.path.basename(args.netplug))
        trial_class(args, k, "kill", lambda i: 4,
                    dict(quick, TRIAL_HOSTS=2, NCCL_NET_PLUGIN=os.path.abspath(args.netplug)),
                    max(1, args.kills // 10))
        tallies.append(k)
    k = Tally("kill-threads", "SIGKILL of a process of 2 ranks (threads), 3-4 ranks, shared "
              "memory and TCP")
    trial_class(args, k, "kill", lambda i: 3 + i % 2,
                dict(quick, TRIAL_RANKS_PER_PROC=2), max(1, args.kills // 20))
    trial_class(args, k, "kill", lambda i: 3 + i % 2,
                dict(quick, TRIAL_RANKS_PER_PROC=2, NCCL_SHM_DISABLE=1), max(1, args.kills // 20))
    tallies.append(k)
    s = Tally("stop", "SIGSTOP for 0.5 s or 3.5 s, op timeout 2 s")
    trial_class(args, s, "stop", lambda i: 3, {"CHORUS_OP_TIMEOUT": 2}, args.stops)
    tallies.append(s)
    a = Tally("abort", "ncclCommAbort from another thread")
    trial_class(args, a, "abort", lambda i: 2 + i % 3, quick, args.aborts)
    tallies.append(a)
    m = Tally("mismatch", "one rank changes function, count, type, op or root")
    per = max(20, args.mismatches // 6)
    for how, mode, n in (("shm", "threads", 3), ("shm", "procs", 4), ("tcp", "threads", 4),
                         ("tcp", "procs", 3), ("hosts", "procs", 4), ("shm", "threads", 8)):
        env = {"NCCL_SHM_DISABLE": 1} if how == "tcp" else ({"HARNESS_HOSTS": 2} if how == "hosts" else {})
        mismatch_class(args, m, mode, n, env, per)
    tallies.append(m)
    st = Tally("strangers", "junk on every listening port (the root's, the ranks') during "
               "init and after: random bytes, huge lengths, bad hellos, idle connections")
    trial_class(args, st, "strangers", lambda i: 2 + i % 3,
                quick, args.strangers // 2)
    trial_class(args, st, "strangers", lambda i: 2 + i % 3, dict(quick, NCCL_SHM_DISABLE=1),
                args.strangers - args.strangers // 2)
    tallies.append(st)
    al = Tally("alloc", "a random rank's n-th host allocation fails, n up to 60 (its init)")
    trial_class(args, al, "alloc", lambda i: 2 + i % 3, dict(quick, ALLOC_MAX=60), args.allocs)
    tallies.append(al)
    al = Tally("alloc-shm", "a random rank's shared-memory segment cannot be made "
               "(CHORUS_FAULT_SHM; a process of 2 ranks in a third of the trials)")
    trial_class(args, al, "alloc", lambda i: 2 + i % 3, dict(quick, ALLOC_KIND="shm", ALLOC_MAX=1),
                args.allocs // 3 - args.allocs // 9)
    trial_class(args, al, "alloc", lambda i: 4, dict(quick, ALLOC_KIND="shm", ALLOC_MAX=2,
                TRIAL_RANKS_PER_PROC=2), args.allocs // 9)
    tallies.append(al)
    if can_unshare():
        sf = Tally("shm-full", "/dev/shm of 256 KiB-40 MiB (a tmpfs of its own), 2-4 ranks")
        trial_class(args, sf, "shmfull", lambda i: 2 + i % 3, quick, args.shmfulls,
                    prefix=small_shm)
        tallies.append(sf)
    so = Tally("soak", "%d calls, 4 B-256 KiB, 2 ranks" % args.soak_calls)
    trial_class(args, so, "soak", lambda i: 2, dict(quick, SOAK_CALLS=args.soak_calls), 1,
                limit=3600)
    tallies.append(so)
    if args.badtable:
        b = Tally("bad-arguments", "every public function x every class of bad argument, a "
                  "process per case (trials: cases)")
        badtable_class(args, b)
        tallies.append(b)
    if args.fuzzers:
        for name in ("fuzz_uid", "fuzz_hello", "fuzz_config", "fuzz_settings", "fuzz_netplug"):
            f = Tally(name, "libFuzzer, executions")
            fuzz_class(args, f, name, args.fuzz_runs)
            tallies.append(f)
    took = time.time() - t0
    bad = print_tallies(tallies, "campaign", took)
    if args.short:
        return 1 if bad else 0

    commit = commit_of()
    lines = [
        "## Host memory",
        "",
        "What `scripts/campaign.py` measured, on %s (%d cores), commit %s, %s, in %.0f s. "
        "Regenerate with `python3 scripts/campaign.py --trial build/tests/campaign/campaign_trial "
        "--mismatch build/tests/coll/test_mismatch --badtable build/tests/coll/test_badtable "
        "--fuzzers build-fuzz/tests/fuzz --netplug build/tests/netplug/libnccl-net-loop8.so`."
        % (socket.gethostname(), os.cpu_count(), commit,
           datetime.date.today().isoformat(), took),
        "",
        "Host memory, ranks as processes (mismatches: threads and processes). A failure is a "
        "trial that broke its promise: a survivor that did not fail within 1 s naming the dead "
        "rank, a rank that ran on wrongly, an abort that did not return within 1 s; for "
        "allocation failures and a full /dev/shm, ranks that did not all fail within 1 s of the "
        "first failure (or all finish, where nothing failed). Detection is per survivor, from "
        "the fault (for a stop above the op timeout: from the timeout; allocation and /dev/shm: "
        "from the first rank's failure) to its call's return; for mismatches, per rank and "
        "trial, from its call to its error.",
        "",
    ] + HEADER
    lines += [t.row() for t in tallies]
    ab = next(t for t in tallies if t.name == "abort")
    if ab.extra:
        lines += ["", "ncclCommAbort from another thread returned the blocked call in %.1f ms "
                  "(median), %.1f ms (max) over %d trials." % (statistics.median(ab.extra),
                                                             max(ab.extra), len(ab.extra))]
    so = next(t for t in tallies if t.name == "soak")
    if so.extra:
        lines += ["", "Soak: `%s`." % so.extra[0]]
    replace_section(args.out, "Host memory", lines)
    print("wrote the host section of " + args.out)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
