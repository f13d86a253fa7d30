#!/usr/bin/env python3
"""dump_check.py - the state dump's per-peer byte counts against calls of known sizes.

usage: dump_check.py DUMP_BYTES N

Runs dump_bytes.c on N ranks (threads) twice and reads the dump it makes:
- NCCL_ALGO=ring: every byte moves over connections. For every pair, what
  one rank says it sent the other says it received; the sums over ranks
  are what the calls move: N Sends of SEND bytes, a ring AllGather's
  N(N-1) blocks and a ring AllReduce's 2(N-1) buffers' worth (its blocks
  partition the buffer in both halves).
- the planner's own choice (one host: node memory for the collectives):
  the pairs still agree, the Sends' bytes are on the connections, and each
  rank says how much it staged for its peers.
"""
import os
import re
import subprocess
import sys
import tempfile

SEND, GATHER, REDUCE = 1000, 3000 * 4, 5000 * 4


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def dump(prog, n, tmp, extra):
    path = os.path.join(tmp, "dump-%s.txt" % extra.get("NCCL_ALGO", "auto"))
    env = dict(os.environ, CHORUS_DUMP_SIGNAL="USR1", CHORUS_DUMP_FILE=path, NCCL_DEBUG="WARN",
               **extra)
    r = subprocess.run([prog, str(n)], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       text=True, timeout=60)
    if r.returncode != 0 or "ok" not in r.stdout.split():
        fail("dump_bytes: exit %d:\n%s" % (r.returncode, r.stdout))
    text = open(path).read()
    sent, got, staged = {}, {}, {}
    for sec in re.split(r"\n(?=comm )", text):
        m = re.match(r"comm counted: rank (\d+) of %d" % n, sec)
        if not m:
            continue
        me = int(m.group(1))
        peers = re.search(r"\n  peers:(.*)\n", sec)
        if not peers:
            fail("rank %d: no peers line:\n%s" % (me, sec))
        for p, s, g in re.findall(r" (\d+) \(host [^,]+, pid \d+, \w+, sent (\d+) B, "
                                  r"received (\d+) B\)", peers.group(1)):
            sent[(me, int(p))], got[(me, int(p))] = int(s), int(g)
        st = re.search(r"\n  node memory: (\d+) B staged for the peers to read", sec)
        staged[me] = int(st.group(1)) if st else None
    if sorted(staged) != list(range(n)) or len(sent) != n * (n - 1):
        fail("dump lacks ranks or peers (ranks %s, %d pairs):\n%s" % (sorted(staged), len(sent),
                                                                      text))
    for (a, b), s in sent.items():
        if got[(b, a)] != s:
            fail("rank %d says it sent %d B to rank %d, which says it received %d B"
                 % (a, s, b, got[(b, a)]))
    print("%s: every pair agrees; %d B sent in all; staged %s" % (
        extra.get("NCCL_ALGO", "auto"), sum(sent.values()), staged))
    return sent, staged


def main():
    if len(sys.argv) != 3:
        print(__doc__)
        return 2
    prog, n = sys.argv[1], int(sys.argv[2])
    with tempfile.TemporaryDirectory() as tmp:
        sent, _ = dump(prog, n, tmp, {"NCCL_ALGO": "ring"})
        want = n * SEND + n * (n - 1) * GATHER + 2 * (n - 1) * REDUCE
        if sum(sent.values()) != want:
            fail("ring: %d B sent in all, the calls move %d" % (sum(sent.values()), want))
        sent, staged = dump(prog, n, tmp, {})
        if sum(sent.values()) < n * SEND:
            fail("auto: %d B on the connections, the Sends alone move %d" % (
                sum(sent.values()), n * SEND))
        if any(v is None or v < REDUCE // n for v in staged.values()):
            fail("auto: staged %s" % staged)
    print("PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
