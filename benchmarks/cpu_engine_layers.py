#!/usr/bin/env python3
"""Strata's CAFFE engine against its oneDNN one, per layer, with one binary: `strata time` of each model run with
STRATA_DEFAULT_CPU_ENGINE=CAFFE and =ONEDNN in turn (docs/onednn.md), rounds alternating so that both see the same
machine state. Needs no PyTorch (the models and the parsing of `strata time` are cpu_vs_pytorch.py's).

    /usr/bin/python3 benchmarks/cpu_engine_layers.py [--threads 2] [--rounds 3] [--models lenet,alexnet]
        [--types InnerProduct,LRN] [--strata PATH]

Prints, per model, the whole step (forward + backward) under each engine, then each layer of the given types:
forward and backward ms per iteration under each engine (the best round of each), and the sum per type.
(SoftmaxWithLoss's inner softmax follows its softmax_param.engine: list that type to see Softmax in the nets.)"""
import argparse
import collections
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cpu_vs_pytorch as bench  # noqa: E402

ENGINES = ("CAFFE", "ONEDNN")


def run(model, engine, threads):
    os.environ["STRATA_DEFAULT_CPU_ENGINE"] = engine
    try:
        return bench.strata_run(model, bench.MODELS[model].iters, threads)
    finally:
        del os.environ["STRATA_DEFAULT_CPU_ENGINE"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=3, help="alternations of the two engines per model")
    ap.add_argument("--models", default="lenet,cifar10_quick,alexnet,googlenet")
    ap.add_argument("--types", default="InnerProduct,LRN", help="the layer types to list, comma-separated")
    ap.add_argument("--strata", default=bench.STRATA, help="the strata binary (default: %(default)s)")
    args = ap.parse_args()
    bench.STRATA = os.path.abspath(args.strata)
    if not os.access(bench.STRATA, os.X_OK):
        sys.exit(f"no strata binary at {bench.STRATA} (build it, or give --strata PATH)")
    types = args.types.split(",")
    print(f"# {args.threads} threads, best of {args.rounds} alternating rounds per engine; Strata: {bench.STRATA}")
    for model in args.models.split(","):
        if model not in bench.MODELS:
            sys.exit(f"unknown model {model}; known: {', '.join(bench.MODELS)}")
        steps = {e: [] for e in ENGINES}
        best = {e: {} for e in ENGINES}  # layer -> (forward, backward), the smallest sum over the rounds
        for _ in range(args.rounds):
            for engine in ENGINES:
                ms, layers = run(model, engine, args.threads)
                steps[engine].append(ms)
                for name, (fwd, bwd) in layers.items():
                    if name not in best[engine] or fwd + bwd < sum(best[engine][name]):
                        best[engine][name] = (fwd, bwd)
        kinds = bench.layer_types(model)
        print(f"## {model} (batch {bench.MODELS[model].batch}): step {min(steps['CAFFE']):.1f} ms CAFFE, "
              f"{min(steps['ONEDNN']):.1f} ms ONEDNN")
        print(f"#   {'layer':<36}{'type':<16}{'CAFFE fwd':>10}{'bwd':>8}{'ONEDNN fwd':>12}{'bwd':>8}")
        sums = collections.defaultdict(lambda: [0.0] * 4)
        for name, kind in kinds.items():
            if kind not in types or name not in best["CAFFE"]:
                continue
            row = best["CAFFE"][name] + best["ONEDNN"].get(name, (0.0, 0.0))
            sums[kind] = [a + b for a, b in zip(sums[kind], row)]
            print(f"#   {name:<36}{kind:<16}{row[0]:>10.2f}{row[1]:>8.2f}{row[2]:>12.2f}{row[3]:>8.2f}")
        for kind, row in sums.items():
            print(f"#   {'(sum)':<36}{kind:<16}{row[0]:>10.2f}{row[1]:>8.2f}{row[2]:>12.2f}{row[3]:>8.2f}", flush=True)


if __name__ == "__main__":
    main()
