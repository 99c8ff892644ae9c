#!/usr/bin/env python3
"""K-FAC against SGD on LeNet / Fashion-MNIST (docs/kfac.md), in one run: the same net, data, batch (64 in all;
32 per rank on 2 ranks), lr policy, momentum and weight decay; the full test set every --test-interval
iterations. Prints, per run: training ms per iteration, the first tested iteration reaching 88% and 90% with
the training seconds spent to get there (test passes excluded), the final and best accuracy, and for K-FAC the
average per-iteration cost of its parts (from its progress lines).

    ITERATIONS=0 bash scripts/quickstart.sh     # build + the LMDBs under data/
    chrt -r 10 /usr/bin/python3 benchmarks/kfac_vs_sgd.py --runs sgd1,kfac1,sgd2,kfac2
    /usr/bin/python3 benchmarks/kfac_vs_sgd.py --runs kfac1 --intervals 1/10,10/100,50/500   # the interval trade

--intervals F/I runs K-FAC with factor_interval F and inverse_interval I (default: the solver file's)."""
import argparse
import datetime
import os
import re
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
STRATA = os.path.join(ROOT, "build", "bin", "strata")
SGD = os.path.join(ROOT, "models", "lenet_fashion", "lenet_solver.prototxt")
KFAC = os.path.join(ROOT, "models", "lenet_fashion", "lenet_kfac_solver.prototxt")
NET = os.path.join(ROOT, "models", "lenet_fashion", "lenet_train_test.prototxt")
THRESHOLDS = (0.88, 0.90)


def stamp(line):
    """The glog time of a line (I20261123 15:02:08.498279 ...), in seconds."""
    m = re.match(r"[IWEF]\d{8} (\d\d):(\d\d):(\d\d\.\d+)", line)
    return None if not m else int(m.group(1)) * 3600 + int(m.group(2)) * 60 + float(m.group(3))


def parse(log):
    """Returns [(iteration, accuracy, training seconds before that test)], K-FAC part averages."""
    curve, tests, it = [], [], 0
    kfac = {}
    test_start = None
    for line in log.splitlines():
        t = stamp(line)
        m = re.search(r"Iteration (\d+), Testing net", line)
        if m:
            it, test_start = int(m.group(1)), t
            continue
        m = re.search(r"Test net output #\d+: accuracy = ([0-9.]+)", line)
        if m:
            curve.append([it, float(m.group(1)), test_start])
        if re.search(r"Test net output", line) and test_start is not None:
            if tests and tests[-1][0] == test_start:
                tests[-1][1] = t
            else:
                tests.append([test_start, t])
        m = re.search(r"K-FAC per iteration \(last \d+\): (.*)", line)
        if m:
            for name, value in re.findall(r"([a-zA-Z -]+?) ([0-9.]+) ms", m.group(1)):
                kfac.setdefault(name.strip(" ,"), []).append(float(value))
    if not curve:
        return [], {}
    t0 = curve[0][2]
    out = []
    for it, acc, start in curve:
        spent_testing = sum(end - begin for begin, end in tests if end <= start + 1e-9)
        out.append((it, acc, max(0.0, start - t0 - spent_testing)))
    return out, {k: sum(v) / len(v) for k, v in kfac.items()}


def run(strata, kind, ranks, iterations, test_interval, intervals, workdir):
    net = open(NET).read().replace('"data/', f'"{ROOT}/data/')
    if ranks > 1:
        net = net.replace("batch_size: 64", f"batch_size: {64 // ranks}")
    tag = f"{kind}{ranks}" + (f"_{intervals[0]}_{intervals[1]}" if intervals else "")
    net_path = os.path.join(workdir, f"{tag}_net.prototxt")
    open(net_path, "w").write(net)
    solver = open(KFAC if kind == "kfac" else SGD).read()
    solver = re.sub(r'net: ".*"', f'net: "{net_path}"', solver)
    solver = re.sub(r'snapshot_prefix: ".*"', f'snapshot_prefix: "{workdir}/{tag}"', solver)
    solver = re.sub(r"max_iter: \d+", f"max_iter: {iterations}", solver)
    solver = re.sub(r"test_interval: \d+", f"test_interval: {test_interval}", solver)
    solver = re.sub(r"snapshot: \d+", "snapshot: 0", solver) + "\nsnapshot_after_train: false\n"
    if intervals:
        solver = re.sub(r"factor_interval: \d+", f"factor_interval: {intervals[0]}", solver)
        solver = re.sub(r"inverse_interval: \d+", f"inverse_interval: {intervals[1]}", solver)
    solver_path = os.path.join(workdir, f"{tag}_solver.prototxt")
    open(solver_path, "w").write(solver)
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    cmd = ["mpirun", "-np", str(ranks), "--bind-to", "none", "--mca", "btl", "self,vader", strata, "train",
           f"--solver={solver_path}"]
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, cwd=ROOT)
    log = out.stdout + out.stderr
    open(os.path.join(workdir, f"{tag}.log"), "w").write(log)
    if out.returncode != 0:
        sys.exit(f"strata train failed ({workdir}/{tag}.log):\n{log[-3000:]}")
    curve, parts = parse(log)
    name = ("K-FAC" if kind == "kfac" else "SGD") + f", {ranks} rank{'s' if ranks > 1 else ''}"
    if intervals:
        name += f", factors/{intervals[0]} inverses/{intervals[1]}"
    return name, curve, parts


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", default="sgd1,kfac1,sgd2,kfac2")
    ap.add_argument("--sgd-iterations", type=int, default=6000)
    ap.add_argument("--kfac-iterations", type=int, default=3000)
    ap.add_argument("--test-interval", type=int, default=250)
    ap.add_argument("--intervals", default="", help="comma-separated F/I pairs for the K-FAC runs")
    ap.add_argument("--strata", default=STRATA, help="the strata binary")
    args = ap.parse_args()
    workdir = tempfile.mkdtemp(prefix="strata_kfac_")
    intervals = [tuple(int(x) for x in p.split("/")) for p in args.intervals.split(",") if p] or [None]
    rows = []
    for spec in args.runs.split(","):
        kind, ranks = spec[:-1], int(spec[-1])
        for iv in (intervals if kind == "kfac" else [None]):
            iterations = args.kfac_iterations if kind == "kfac" else args.sgd_iterations
            name, curve, parts = run(args.strata, kind, ranks, iterations, args.test_interval, iv, workdir)
            rows.append((name, iterations, curve, parts))
            print(f"{datetime.datetime.now():%H:%M:%S} {name}: " +
                  " ".join(f"{it}:{acc * 100:.2f}" for it, acc, _ in curve), flush=True)
    print(f"\nlogs: {workdir}\n")
    print("| run | ms/iter | first >= 88% (iter, train s) | first >= 90% (iter, train s) | final % | best % |")
    print("|---|---|---|---|---|---|")
    for name, iterations, curve, _ in rows:
        ms = curve[-1][2] / iterations * 1000 if curve else float("nan")
        cells = []
        for t in THRESHOLDS:
            hit = next(((it, s) for it, acc, s in curve if acc >= t), None)
            cells.append(f"{hit[0]:,}, {hit[1]:.1f} s" if hit else "not reached")
        print(f"| {name} | {ms:.1f} | {cells[0]} | {cells[1]} | {curve[-1][1] * 100:.2f} | "
              f"{max(a for _, a, _ in curve) * 100:.2f} |")
    for name, _, _, parts in rows:
        if parts:
            print(f"\n{name}, K-FAC's own ms per iteration: " + ", ".join(f"{k} {v:.2f}" for k, v in parts.items()))


if __name__ == "__main__":
    main()
