#!/usr/bin/env python3
"""The pipeline engine (docs/pipeline.md) on a deep RevNet-style stack: per-stage peak activation memory, and
speed against one rank, read from the per-stage table `strata train` logs at the end of a pipeline run.

    cmake --build build -j2 --target strata
    /usr/bin/python3 benchmarks/pipeline_bench.py memory [--depths 32,128] [--stages 2,4] [--micro 1,8] [--k 8]
    /usr/bin/python3 benchmarks/pipeline_bench.py speed [--depth 16] [--micro 16] [--k 8] [--iterations 20] [--rounds 3]

The nets are benchmarks/revnet_depth.py's (28x28 input, a stride-2 convolution stem to 32 channels, D coupling
blocks with F, G = conv 3x3 + BatchNorm + ReLU on 16 channels, pooling, inner product, softmax loss), fed by a
DummyData layer. Cut into S stages of D / S blocks each (stage 0 also holds the stem, the last the classifier).

memory: one iteration of k micro-batches of b images, for each depth, S and b, three ways:
  reversible  Reversible blocks; every stage but the last keeps nothing (stage 0: its input, for the stem)
  store       the same blocks as ordinary layers (Slice, branches, Eltwise, Concat), STORE: a copy of the
              stage's activations per micro-batch in flight (GPipe without recomputation)
  recompute   the ordinary blocks, RECOMPUTE: each stage keeps its input and runs forward again (GPipe)
prints the largest stage's peak and every stage's.

speed: the reversible stack on 1 rank (S = 1) against 2 stages on 2 ranks, SYNC and ASYNC, `--rounds` rounds
alternating the three: images per second (k x b per iteration), and each stage's bubble."""
import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import revnet_depth  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
STRATA = os.environ.get("STRATA", os.path.join(ROOT, "build", "bin", "strata"))


def net_text(depth, batch, reversible):
    text = revnet_depth.net(depth, batch, reversible)
    dummy = (f'layer {{ name: "in" type: "DummyData" top: "data" top: "label" dummy_data_param {{ '
             f'shape {{ dim: {batch} dim: 1 dim: 28 dim: 28 }} shape {{ dim: {batch} }} '
             f'data_filler {{ type: "gaussian" std: 1 }} data_filler {{ type: "constant" value: 3 }} }} }}')
    return re.sub(r'layer \{ name: "in" type: "Input".*', dummy, text, count=1)


def cuts(depth, stages, reversible):
    names = []
    for s in range(1, stages):
        b = depth * s // stages
        names.append(f"b{b}" if reversible else f"b{b}_slice")
    return names


def run(workdir, depth, batch, reversible, stages, k, iterations, activations="STORE", schedule="SYNC"):
    """Trains `iterations` iterations on `stages` ranks; returns the per-stage rows of the final table."""
    net = os.path.join(workdir, "net.prototxt")
    with open(net, "w") as f:
        f.write(net_text(depth, batch, reversible))
    solver = os.path.join(workdir, "solver.prototxt")
    cut_lines = "".join(f' cut: "{c}"' for c in cuts(depth, stages, reversible))
    with open(solver, "w") as f:
        f.write(f'net: "{net}"\nbase_lr: 0.01\nmomentum: 0.9\nlr_policy: "fixed"\nmax_iter: {iterations}\n'
                f'iter_size: {k}\ndisplay: 0\nsnapshot_after_train: false\nsolver_mode: CPU\nrandom_seed: 1\n'
                f'pipeline_param {{ stages: {stages}{cut_lines} activations: {activations} schedule: {schedule} }}\n')
    env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", OMPI_ALLOW_RUN_AS_ROOT="1",
               OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    cmd = ["mpirun", "--oversubscribe", "--bind-to", "none", "--mca", "btl", "self,vader", "-np", str(stages),
           STRATA, "train", f"--solver={solver}"]
    out = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"failed: {' '.join(cmd)}\n{out.stderr[-3000:]}")
    log = out.stderr
    table = log[log.rindex("Pipeline stages:"):].splitlines()[2:2 + stages]
    rows = []
    for line in table:
        f = line.split()
        rows.append({"ms": float(f[1]), "compute": float(f[2]), "wait": float(f[3]), "bubble": f[4],
                     "peak": float(f[7]), "err": f[8]})
    return rows


def memory(args, workdir):
    print(f"per-stage peak activation memory (MiB), one iteration of k = {args.k} micro-batches")
    print(f"{'depth':>5} {'S':>2} {'b':>3} {'kind':>10} {'largest':>8}  each stage")
    for depth in args.depths:
        for stages in args.stages:
            for batch in args.micro:
                for kind, rev, act in (("reversible", True, "STORE"), ("store", False, "STORE"),
                                       ("recompute", False, "RECOMPUTE")):
                    rows = run(workdir, depth, batch, rev, stages, args.k, 1, act)
                    peaks = [r["peak"] for r in rows]
                    print(f"{depth:>5} {stages:>2} {batch:>3} {kind:>10} {max(peaks):>8.2f}  "
                          + " ".join(f"{p:.2f}" for p in peaks), flush=True)


def speed(args, workdir):
    configs = (("1 rank", 1, "SYNC"), ("2 stages SYNC", 2, "SYNC"), ("2 stages ASYNC", 2, "ASYNC"))
    results = {c[0]: [] for c in configs}
    for _ in range(args.rounds):
        for name, stages, schedule in configs:
            rows = run(workdir, args.depth, args.micro, True, stages, args.k, args.iterations, "STORE", schedule)
            ms = max(r["ms"] for r in rows)
            results[name].append((args.k * args.micro * 1000.0 / ms, [r["bubble"] for r in rows],
                                  [r["err"] for r in rows]))
    print(f"depth {args.depth}, micro-batch {args.micro}, k = {args.k}, {args.iterations} iterations, "
          f"{args.rounds} rounds")
    print(f"{'config':>16} {'images/s (median, min-max)':>28} {'vs 1 rank':>9}  bubble per stage, rebuild error")
    base = statistics.median(r[0] for r in results["1 rank"])
    for name, _, _ in configs:
        rates = [r[0] for r in results[name]]
        med = statistics.median(rates)
        last = results[name][-1]
        print(f"{name:>16} {med:>10.1f} ({min(rates):.1f}-{max(rates):.1f}){'':>6} {med / base:>8.2f}x  "
              f"{' '.join(last[1])}  {' '.join(last[2])}", flush=True)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("what", choices=["memory", "speed"])
    p.add_argument("--depths", default="32,128")
    p.add_argument("--stages", default="2,4")
    p.add_argument("--micro", default=None)
    p.add_argument("--k", type=int, default=8)
    p.add_argument("--depth", type=int, default=16)
    p.add_argument("--iterations", type=int, default=20)
    p.add_argument("--rounds", type=int, default=3)
    args = p.parse_args()
    args.depths = [int(x) for x in args.depths.split(",")]
    args.stages = [int(x) for x in args.stages.split(",")]
    if args.what == "memory":
        args.micro = [int(x) for x in (args.micro or "1,8").split(",")]
    else:
        args.micro = int(args.micro or 16)
    with tempfile.TemporaryDirectory() as workdir:
        (memory if args.what == "memory" else speed)(args, workdir)


if __name__ == "__main__":
    main()
