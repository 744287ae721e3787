#!/usr/bin/env python3
"""Alternates `llmserve bench` between binaries and reports median ratios.

On a shared host the same command runs up to 2x faster or slower from one
minute to the next, so binaries are compared in rounds: each round runs
every binary once (the order rotating from round to round) and divides each
one's result by the first binary's from the same round. The medians of
those ratios are what to quote, not the medians of the raw numbers.

  scripts/ab_bench.py --field pp_tps --rounds 6 OLD/llmserve NEW/llmserve \
      -- -m /tmp/t-q4_0.gguf -t 2 --reps 1 -n 1

Everything after `--` goes to `bench` (which gets --json added).
"""
import argparse
import json
import statistics
import subprocess
import sys


def run(binary, bench_args):
    out = subprocess.run([binary, "bench", *bench_args, "--json"], capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main():
    argv = sys.argv[1:]
    bench_args = argv[argv.index("--") + 1:] if "--" in argv else []
    argv = argv[:argv.index("--")] if "--" in argv else argv
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--field", default="pp_tps", help="bench JSON field to compare (pp_tps, tg_tps, roofline_frac, ...)")
    p.add_argument("--rounds", type=int, default=6)
    p.add_argument("binaries", nargs="+", help="llmserve binaries; the first is the baseline")
    a = p.parse_args(argv)

    values = {b: [] for b in a.binaries}
    for r in range(a.rounds):
        k = r % len(a.binaries)
        for b in a.binaries[k:] + a.binaries[:k]:
            values[b].append(run(b, bench_args)[a.field])
        print(f"round {r}: " + "  ".join(f"{values[b][-1]:.4g}" for b in a.binaries), flush=True)
    base = values[a.binaries[0]]
    for b in a.binaries:
        ratios = [v / w for v, w in zip(values[b], base)]
        print(f"{b}: median {a.field} {statistics.median(values[b]):.4g}, "
              f"ratio to the first {statistics.median(ratios):.3f} (range {min(ratios):.3f}-{max(ratios):.3f})")


if __name__ == "__main__":
    main()
