#!/usr/bin/env python3
"""Strata against itself, side by side: one of its environment switches on and off (`--switch VAR`: VAR=1 is "on",
VAR=0 "off"), or this build against another one (`--base PATH`: --strata is "on", the base binary "off"). `strata
time` of each model, the two alternating in every round (this machine's speed drifts by 5-15% between minutes, so
the two are measured in turns rather than one after the other; which one goes first alternates too), in float
and, with --precisions, bfloat16.

    python3 benchmarks/env_switch_ab.py --switch STRATA_PARAM_LAYOUTS [--models resnet50,googlenet] \
        [--precisions FP32,BF16] [--rounds 3] [--iterations N] [--threads 2] [--strata PATH]
    python3 benchmarks/env_switch_ab.py --base OLD/bin/strata [...]    # a commit against an earlier one

Prints a table: model, precision, the forward+backward time (no update) and the whole SGD step (forward, backward,
momentum and weight decay update: `strata time`'s second figure), each the minimum over the rounds "on" and "off",
and off / on (> 1: "on" is faster), with every round's figures after it.
"""
import argparse
import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cpu_vs_pytorch import MODELS, ROOT, STRATA  # noqa: E402  (the models' prototxts and batch sizes)


def strata_time(strata, model, precision, threads, switch, iterations):
    m = MODELS[model]
    env = dict(os.environ, OMP_NUM_THREADS=str(threads), OPENBLAS_NUM_THREADS=str(threads), **switch)
    out = subprocess.run([strata, "time", f"--model={os.path.join(ROOT, m.prototxt)}", f"--iterations={iterations or m.iters}",
                          "--warmup=1", f"--precision={precision}"],
                         env=env, capture_output=True, text=True, check=True).stdout
    fb = float(re.search(r"Average Forward-Backward: ([0-9.]+) ms", out).group(1))
    step = float(re.search(r"Average SGD step [^:]*: ([0-9.]+) ms", out).group(1))
    return fb, step


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    which = ap.add_mutually_exclusive_group(required=True)
    which.add_argument("--switch", help="the environment variable, e.g. STRATA_PARAM_LAYOUTS")
    which.add_argument("--base", help="the strata binary of the build to compare against (\"off\")")
    ap.add_argument("--models", default="resnet50,googlenet,alexnet,cifar10_quick")
    ap.add_argument("--precisions", default="FP32")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--iterations", type=int, default=0, help="timed iterations (default: cpu_vs_pytorch.py's)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--strata", default=STRATA)
    args = ap.parse_args()
    for binary in (args.strata, args.base) if args.base else (args.strata,):
        if not os.access(binary, os.X_OK):
            ap.error(f"{binary}: no such executable (build it first, or pass its path)")
    if args.switch:
        runs = {"on": (args.strata, {args.switch: "1"}), "off": (args.strata, {args.switch: "0"})}
        print(f"{args.switch}: 1 (on) against 0 (off), {args.rounds} rounds alternating, {args.threads} threads; ms")
    else:
        runs = {"on": (args.strata, {}), "off": (args.base, {})}
        print(f"{args.strata} (on) against {args.base} (off), {args.rounds} rounds alternating, "
              f"{args.threads} threads; ms")
    print(f"{'model':<14}{'precision':>10}{'fwd+bwd on':>12}{'off':>9}{'off/on':>8}"
          f"{'step on':>10}{'off':>9}{'off/on':>8}   rounds (fwd+bwd on/off, step on/off)")
    for model in args.models.split(","):
        for precision in args.precisions.split(","):
            on, off = [], []
            for r in range(args.rounds):
                # Which goes first alternates too: the second of a pair may find the caches and the clock warmer.
                pair = (("on", on), ("off", off))
                for name, times in pair if r % 2 == 0 else reversed(pair):
                    strata, switch = runs[name]
                    times.append(strata_time(strata, model, precision, args.threads, switch, args.iterations))
            fb_on, fb_off = min(r[0] for r in on), min(r[0] for r in off)
            st_on, st_off = min(r[1] for r in on), min(r[1] for r in off)
            rounds = "; ".join(f"{a[0]:.0f}/{b[0]:.0f}, {a[1]:.0f}/{b[1]:.0f}" for a, b in zip(on, off))
            print(f"{model:<14}{precision:>10}{fb_on:>12.1f}{fb_off:>9.1f}{fb_off / fb_on:>8.3f}"
                  f"{st_on:>10.1f}{st_off:>9.1f}{st_off / st_on:>8.3f}   {rounds}", flush=True)


if __name__ == "__main__":
    main()
