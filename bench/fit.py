#!/usr/bin/env python3
"""Fits the cost model to calibration tables (the output of calibrate.py,
one table per collective and rank count, each headed by a line
"=== <coll> n=<ranks>"). For every algorithm it fits t = a + S / bw by least
squares on the relative error, so small sizes weigh as much as large ones,
then prints the rows for src/algo/tune.c and, per size, the algorithm the fit
picks against the one measured fastest, with the time lost by the pick.

usage: bench/fit.py calibration.txt
       bench/fit.py --wide calibration.txt   (tables at n=2, 4 and 8 of
           ranks with a core each: the two and eight curves of cost.c's
           fits, and how its interpolation picks at n=4 against that table)
"""
import re
import sys

HEAD = re.compile(r"^=== (\w+) n=(\d+)")
COLS = re.compile(r"^\s+bytes\s+(.*)\s+fastest")
ROW = re.compile(r"^\s+(\d+)\s+([\d.\s]+?)\s+(\w+)$")


def parse(path):
    tables = {}
    key, algos = None, None
    for line in open(path):
        m = HEAD.match(line)
        if m:
            key = (m.group(1), int(m.group(2)))
            tables[key] = {}
            continue
        m = COLS.match(line)
        if m and key:
            algos = m.group(1).split()
            for a in algos:
                tables[key][a] = []
            continue
        m = ROW.match(line)
        if m and key and algos:
            vals = [float(v) for v in m.group(2).split()]
            if len(vals) != len(algos):
                continue
            for a, v in zip(algos, vals):
                tables[key][a].append((int(m.group(1)), v))
    return tables


# Band edges in bytes of the perf tools' size: in L2, in L3, past L3 once
# ranks' buffers and stages add up, DRAM.
EDGES = [65536, 1 << 20, 8 << 20]


def features(s):
    """1, then the part of s that falls in each band."""
    out, lo = [1.0], 0.0
    for hi in EDGES + [float("inf")]:
        out.append(max(0.0, min(s, hi) - lo))
        lo = hi
    return out


def solve(rows, rhs):
    """Least squares through the normal equations; None when singular."""
    k = len(rows[0])
    m = [[sum(r[i] * r[j] for r in rows) for j in range(k)] for i in range(k)]
    v = [sum(r[i] * y for r, y in zip(rows, rhs)) for i in range(k)]
    for i in range(k):
        p = max(range(i, k), key=lambda r: abs(m[r][i]))
        m[i], m[p], v[i], v[p] = m[p], m[i], v[p], v[i]
        if abs(m[i][i]) < 1e-300:
            return None
        for r in range(k):
            if r != i:
                f = m[r][i] / m[i][i]
                m[r] = [x - f * y for x, y in zip(m[r], m[i])]
                v[r] -= f * v[i]
    return [v[i] / m[i][i] for i in range(k)]


def fit(points):
    """t = a + sum over bands of (bytes in band) / bw_band, least squares on
    the relative error, every coefficient >= 0 (a negative one is pinned to
    its floor and the rest refitted). Returns (a, [bw per band]). A band no
    point reaches gets the bandwidth of the band below."""
    k = len(EDGES) + 2
    floor = [0.0] + [1e-6] * (k - 1)  # 1e-6 us/B: 1 TB/s, never the answer
    free = list(range(k))
    coef = list(floor)
    for _ in range(k):
        used = [j for j in free if any(features(s)[j] > 0 for s, _ in points)]
        rows = [[features(s)[j] / t for j in used] for s, t in points]
        rhs = [1.0 - sum(features(s)[j] * floor[j] for j in range(k) if j not in used) / t
               for s, t in points]
        x = solve(rows, rhs) if used else []
        coef = list(floor)
        for j, c in zip(used, x or []):
            coef[j] = c
        bad = [j for j in used if coef[j] < floor[j]]
        if not bad:
            break
        free = [j for j in free if j not in bad]
    inv = coef[1:]
    for j in range(1, len(inv)):  # unreached bands
        if not any(features(s)[j + 1] > 0 for s, _ in points):
            inv[j] = inv[j - 1]
    return coef[0], [1.0 / x for x in inv]


def cost(f, s):
    a, bws = f
    return a + sum(x / bw for x, bw in zip(features(s)[1:], bws))


def wide(path):
    """Fits each algorithm at n=2 and n=8 (ranks with a core each) and
    prints them as cost.c's fits take them (two, eight); then checks the interpolation
    cost.c makes, sqrt(c2 * c8) at n=4, against the n=4 table, which the
    fits did not see."""
    tables = parse(path)
    colls = sorted({c for c, n in tables if (c, 2) in tables and (c, 8) in tables})
    rows, losses = [], []
    for coll in colls:
        algos = [a for a in tables[(coll, 2)] if a != "auto" and a in tables[(coll, 8)]]
        f2 = {a: fit(tables[(coll, 2)][a]) for a in algos}
        f8 = {a: fit(tables[(coll, 8)][a]) for a in algos}
        for a in algos:
            rows.append("    {CHORUS_FUNC_%s, CHORUS_ALGO_%s, %s, %s}," % (
                coll.upper(), a.upper(),
                "{%.3f, {%s}}" % (f2[a][0], ", ".join("%.0f" % b for b in f2[a][1])),
                "{%.3f, {%s}}" % (f8[a][0], ", ".join("%.0f" % b for b in f8[a][1]))))
        four = tables.get((coll, 4))
        if not four:
            continue
        for i, (s, _) in enumerate(four[algos[0]]):
            meas = {a: four[a][i][1] for a in algos}
            best = min(meas, key=meas.get)
            pick = min(algos, key=lambda a: cost(f2[a], s) * cost(f8[a], s))
            loss = meas[pick] / meas[best] - 1
            losses.append(loss)
            if pick != best:
                print("%s n=4 %10d picks %-8s fastest %-8s +%.0f%%" % (coll, s, pick, best,
                                                                      100 * loss))
    if losses:
        print("n=4: mean loss of the picks %.1f%%, worst %.0f%% over %d sizes" % (
            100 * sum(losses) / len(losses), 100 * max(losses), len(losses)))
    print("two and eight for src/algo/cost.c's fits (n=2, n=8):")
    print("\n".join(rows))


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "--wide":
        return wide(sys.argv[2])
    tables = parse(sys.argv[1])
    total = []
    for (coll, n), algos in sorted(tables.items()):
        if not all(algos.values()) or not algos:
            continue
        fits = {a: fit(p) for a, p in algos.items()}
        for a, (lat, bws) in fits.items():
            print("fit %s %s n=%d: %.3f us; B/us by band %s" % (
                coll, a, n, lat, " ".join("%.0f" % b for b in bws)))
        sizes = [s for s, _ in next(iter(algos.values()))]
        worst = 0.0
        for i, s in enumerate(sizes):
            meas = {a: algos[a][i][1] for a in algos}
            best = min(meas, key=meas.get)
            pick = min(fits, key=lambda a: cost(fits[a], s))
            loss = meas[pick] / meas[best] - 1
            worst = max(worst, loss)
            if pick != best:
                print("   %10d picks %-8s fastest %-8s  +%.0f%%" % (s, pick, best, 100 * loss))
        print("   %s n=%d: worst loss from the fit's picks %.0f%%" % (coll, n, 100 * worst))
        total.append(worst)
    print("worst over all tables %.0f%%" % (100 * max(total)))
    print("rows for src/algo/tune.c (a core per rank from n=2, oversubscribed from n=4):")
    pairs = sorted({(c, a) for (c, n), algos in tables.items() for a in algos})
    for coll, algo in pairs:
        own = tables.get((coll, 2), {}).get(algo)
        over = tables.get((coll, 4), {}).get(algo)
        if not own or not over:
            continue
        f2, f4 = fit(own), fit(over)
        print("    {CHORUS_FUNC_%s, CHORUS_ALGO_%s, %s, %s}," % (
            coll.replace("_", "").upper(), algo.upper(),
            "{%.3f, {%s}}" % (f2[0], ", ".join("%.0f" % b for b in f2[1])),
            "{%.3f, {%s}}" % (f4[0], ", ".join("%.0f" % b for b in f4[1]))))


if __name__ == "__main__":
    main()
