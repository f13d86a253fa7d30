#!/usr/bin/env python3
"""Checks scripts/gpu_goals.py on made-up perf logs: each goal is met or
missed as the rows say, missing runs read "not measured", and the worst
size is the one named."""
import os
import subprocess
import sys
import tempfile

SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts",
                      "gpu_goals.py")


def row(size, time_us, busbw):
    # size count type redop root | time algbw busbw #wrong | in place ...
    return "%12d %12d float sum -1 %8.2f %6.2f %6.2f 0 %8.2f %6.2f %6.2f 0\n" % (
        size, size // 4, time_us, busbw, busbw, time_us, busbw, busbw)


def write(d, name, rows):
    with open(os.path.join(d, name), "w") as f:
        f.write("# header line\n")
        for r in rows:
            f.write(row(*r))


def main():
    failures = []
    with tempfile.TemporaryDirectory() as d:
        # AllReduce -g 4: small 3x faster (met), mid 1.2x at 4 MiB (missed),
        # large at 1.01x (met)
        write(d, "bench_all_reduce_g4_chorus.log",
              [(8, 9, 0), (65536, 9, 7), (262144, 10, 26), (4 << 20, 40, 100),
               (512 << 20, 1500, 350)])
        write(d, "bench_all_reduce_g4_nccl.log",
              [(8, 27, 0), (65536, 27, 2), (262144, 30, 9), (4 << 20, 48, 90),
               (512 << 20, 1515, 346.5)])
        # Broadcast -g 4 at 2 GiB: faster than NCCL but under 362 GB/s: missed
        write(d, "bench_broadcast_g4_chorus.log", [(2 << 30, 6000, 358)])
        write(d, "bench_broadcast_g4_nccl.log", [(2 << 30, 6100, 352)])
        # Send/Recv -g 4 at 2 GiB: 380 GB/s against 363: met
        write(d, "bench_sendrecv_g4_chorus.log", [(2 << 30, 5600, 380)])
        write(d, "bench_sendrecv_g4_nccl.log", [(2 << 30, 5900, 363)])
        out = subprocess.run([sys.executable, SCRIPT, d], capture_output=True, text=True,
                             timeout=60).stdout
    lines = {l.split(":")[0].strip(): l for l in out.splitlines() if l.startswith("  ")}

    def expect(goal, verdict, *parts):
        line = next((v for k, v in lines.items() if k.startswith(goal)), None)
        got = None if line is None else ("not measured" if "not measured" in line else
                                         "NOT met" if "NOT met" in line else "met")
        if got != verdict or not all(p in line for p in parts):
            failures.append("%s: expected %s and %s in %r" % (goal, verdict, parts, line))

    expect("AllReduce 8 B-64 KiB", "met", "worst 3.00x")
    expect("AllReduce 256 KiB-16 MiB", "NOT met", "worst 1.20x at 4 MiB")
    expect("AllReduce 256 MiB and up", "met", "worst 1.010x at 512 MiB")
    expect("Broadcast 2 GiB", "NOT met", "Chorus 358.0 GB/s")
    expect("Send/Recv 2 GiB", "met", "Chorus 380.0 GB/s (NCCL 363.0)")
    expect("AllGather 2 GiB", "not measured")
    if "-g 2" in out:
        failures.append("printed -g 2 goals without -g 2 logs")
    for f in failures:
        print("FAIL:", f)
    if not failures:
        print("PASS")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
