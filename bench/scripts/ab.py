#!/usr/bin/env python3
"""Interleaved A/B of two gosched-bench binaries (e.g. before/after a change).

usage: ab.py BIN_A BIN_B [--reps N] [--procs P] [--rows w1:gosched-go,...] [--sorted]

Runs `BIN run <workload> <impl> <procs> <size>` alternately A, B, A, B, ... N times per
row (each run its own process), and prints the median of each side, the ratio B/A, and
the min/max, as a markdown table; `--sorted` also prints every run of each side,
sorted (for bimodal rows, compare the modes, not only the medians). W12 rows also get a
line with each side's median round-trip p99. Interleaving makes slow drifts of the machine hit both
sides alike; compare only rows measured in the same invocation.
"""
import json, statistics, subprocess, sys

SIZES = {"w1": 1_000_000, "w2": 1_000_000, "w3": 1_000_000, "w4": 1_000_000,
         "w5": 10_000_000, "w5-0": 10_000_000, "w7": 100_000,
         "w8": 100_000, "w9": 1_000_000, "w9t": 1_000_000, "w9p": 1_000_000, "w9s": 1_000_000, "w12": 5_000, "w13": 100_000, "s1": 100_000, "s2": 1_000_000, "t1": 1_000_000}
DEFAULT_ROWS = [(w, i) for w in ["w1", "w2", "w3", "w4", "w5", "w5-0", "w7"]
                for i in ["gosched-go", "gosched-async"]]


def unit(w, size, ns):
    # ms for whole-run workloads, ns per unit where the workload is a rate
    if w in ("w3",):
        return ns / size, "ns/rt"
    if w in ("w5", "w5-0"):
        return ns / size, "ns/msg"
    if w == "w12":
        return ns / size / 100, "ns/msg"
    if w in ("s1", "s2"):
        return ns / size, "ns/call"
    if w == "w13":
        return ns / 3 / 1e6, "ms/round"
    if w == "w4":
        return ns / size, "ns/yield-unit"
    return ns / 1e6, "ms"


def main():
    args = sys.argv[1:]
    a, b = args[0], args[1]
    reps, procs, rows, show = 5, 2, DEFAULT_ROWS, False
    it = iter(args[2:])
    for x in it:
        if x == "--reps":
            reps = int(next(it))
        elif x == "--procs":
            procs = int(next(it))
        elif x == "--sorted":
            show = True
        elif x == "--rows":
            rows = [tuple(r.split(":")) for r in next(it).split(",")]
    print(f"| row | A median | B median | B/A | A min–max | B min–max |")
    print("|---|--:|--:|--:|--:|--:|")
    for w, imp in rows:
        size = SIZES[w]
        res = {a: [], b: []}
        p99 = {a: [], b: []}  # W12: each run's round-trip p99 (µs)
        for _ in range(reps):
            for binary in (a, b):
                out = subprocess.run([binary, "run", w, imp, str(procs), str(size)],
                                     capture_output=True, text=True, timeout=120)
                line = [l for l in out.stdout.splitlines() if l.startswith("{")]
                if not line:
                    print(f"{w} {imp} {binary}: no result: {out.stderr[-300:]}", file=sys.stderr)
                    continue
                d = json.loads(line[-1])
                res[binary].append(d["elapsed_ns"])
                if w == "w12":
                    p99[binary].append(d["x1"] / 1000)
                # (runs alternate A, B within each repetition)
        ma, mb = statistics.median(res[a]), statistics.median(res[b])
        va, u = unit(w, size, ma)
        vb, _ = unit(w, size, mb)
        lo_a, hi_a = unit(w, size, min(res[a]))[0], unit(w, size, max(res[a]))[0]
        lo_b, hi_b = unit(w, size, min(res[b]))[0], unit(w, size, max(res[b]))[0]
        print(f"| {w} {imp} ({u}) | {va:.1f} | {vb:.1f} | {mb / ma:.2f}× | {lo_a:.1f}–{hi_a:.1f} | {lo_b:.1f}–{hi_b:.1f} |",
              flush=True)
        if w == "w12" and p99[a] and p99[b]:
            pa, pb = statistics.median(p99[a]), statistics.median(p99[b])
            print(f"| {w} {imp} (p99 µs) | {pa:.0f} | {pb:.0f} | {pb / pa:.2f}× | {min(p99[a]):.0f}–{max(p99[a]):.0f} | {min(p99[b]):.0f}–{max(p99[b]):.0f} |",
                  flush=True)
        if show:
            for name, side in (("A", a), ("B", b)):
                runs = " ".join(f"{unit(w, size, x)[0]:.1f}" for x in sorted(res[side]))
                print(f"|  {name} runs | {runs} | | | | |", flush=True)


if __name__ == "__main__":
    main()
