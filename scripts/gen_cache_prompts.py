#!/usr/bin/env python3
"""Writes bench-serve datasets for the response cache (docs/performance.md).

  scripts/gen_cache_prompts.py --entries 10000 --probes 1500 --out /tmp/cache

OUT-fill.jsonl: `entries` distinct short prompts of made-up
words, so that no two are near each other for the n-gram embedder.
OUT-probe.jsonl: `probes` prompts spread over the fill's, in turn each
one repeated as is (an exact hit), in other case and punctuation (the same
n-gram embedding: a semantic hit if verification passes) and with one word
left out (near, around the default tau). Every line is deterministic
(temperature 0) with the same output_len, so all share one cache namespace.
"""
import argparse
import json
import random

SYLLABLES = [c + v for c in "bdfgklmnprstvz" for v in "aeiou"]


def word(rng):
    return "".join(rng.choice(SYLLABLES) for _ in range(rng.randint(2, 3)))


def line(prompt, output_len):
    return json.dumps({"prompt": prompt, "temperature": 0, "output_len": output_len})


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--entries", type=int, default=10000)
    p.add_argument("--probes", type=int, default=1500)
    p.add_argument("--words", type=int, default=6, help="made-up words per prompt")
    p.add_argument("--output-len", type=int, default=4)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--out", required=True, help="path prefix of the two files")
    a = p.parse_args()
    if a.entries < 1 or a.probes < 1 or a.words < 2:
        p.error("--entries and --probes must be >= 1, --words >= 2")

    rng = random.Random(a.seed)
    prompts, seen = [], set()
    while len(prompts) < a.entries:
        words = [word(rng) for _ in range(a.words)]
        if " ".join(words) not in seen:
            seen.add(" ".join(words))
            prompts.append(words)
    with open(a.out + "-fill.jsonl", "w") as f:
        for words in prompts:
            f.write(line("Tell me about " + " ".join(words) + ".", a.output_len) + "\n")
    with open(a.out + "-probe.jsonl", "w") as f:
        for k in range(a.probes):
            words = prompts[k * a.entries // a.probes]
            if k % 3 == 0:
                prompt = "Tell me about " + " ".join(words) + "."
            elif k % 3 == 1:
                prompt = "TELL ME ABOUT " + ", ".join(words).upper() + "!"
            else:
                prompt = "Tell me about " + " ".join(words[:-2] + words[-1:]) + "."
            f.write(line(prompt, a.output_len) + "\n")


if __name__ == "__main__":
    main()
