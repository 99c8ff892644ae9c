#!/usr/bin/env python3
"""Trains Caffe's LeNet on Fashion-MNIST with Strata (1 and 2 ranks) and with PyTorch 1.13 (Debian's
python3-torch), same hyper-parameters and data order, in one run, and prints a table: images/s, wall time,
final and best test accuracy, and the first tested iteration that reaches 88%, 89% and 90%.

    STRATA_WITH_BENCH=1 bash scripts/install_deps.sh          # python3-torch
    ITERATIONS=0 bash scripts/quickstart.sh                   # build + the LMDBs under data/ (or run it fully)
    /usr/bin/python3 benchmarks/lenet_train_vs_pytorch.py [--iterations 10000] [--runs strata1,strata2,torch]
    (a run strataN-bf16 trains with precision: BF16, bfloat16 convolutions)

What "the same" means here:
  * data: the training images in file order (convert_mnist_data writes the LMDB in IDX order; Strata's Data layer
    reads it sequentially, wrapping around), pixels scaled by 1/256, batch 64; the full test set every 500
    iterations in batches of 100.
  * model and initialisation: conv(20,5) - maxpool 2 - conv(50,5) - maxpool 2 - ip(500) - ReLU - ip(10), Caffe's
    "xavier" filler (uniform +-sqrt(3 / fan_in)) for weights, zero biases.
  * update: Caffe's SGD (v = momentum v + lr (g + decay w); w -= v), bias lr_mult 2, lr policy "inv".
  * 2 Strata ranks use batch 32 each, so the global batch and every update are the ones of 1 rank x 64.
Each framework computes with 2 threads on the 2 cores (Strata with 2 ranks: one BLAS thread per rank).
images/s is the median over the 100-iteration display windows (windows without a test pass dominate);
wall time covers the whole run including the 21 test passes. "peak MB" is the peak resident memory: of the largest
rank (GNU time's maximum RSS, as /usr/bin/time -v reports it), and of the Python process for PyTorch."""
import argparse
import gzip
import os
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
STRATA = os.path.join(ROOT, "build", "bin", "strata")
SOLVER = os.path.join(ROOT, "models", "lenet_fashion", "lenet_solver.prototxt")
NET = os.path.join(ROOT, "models", "lenet_fashion", "lenet_train_test.prototxt")
DATA = "/usr/share/datasets/fashion-mnist"
THRESHOLDS = (0.88, 0.89, 0.90)


def summarise(name, curve, rates, wall, peak_mb):
    """curve: [(iteration, accuracy)], rates: images/s per display window; peak_mb: peak resident memory (of the
    largest rank)."""
    first = {t: next((it for it, acc in curve if acc >= t), None) for t in THRESHOLDS}
    return {"name": name, "images_s": statistics.median(rates) if rates else float("nan"), "wall_s": wall,
            "final": curve[-1][1] if curve else float("nan"), "best": max(a for _, a in curve) if curve else 0,
            "first": first, "curve": curve, "peak_mb": peak_mb}


def run_strata(ranks, iterations, threads, precision="FP32"):
    workdir = tempfile.mkdtemp(prefix="strata_lenet_")
    net = open(NET).read()
    net = net.replace('"data/', f'"{ROOT}/data/')
    if ranks > 1:
        per_rank = 64 // ranks
        net = net.replace("batch_size: 64", f"batch_size: {per_rank}")
    net_path = os.path.join(workdir, "net.prototxt")
    open(net_path, "w").write(net)
    solver = open(SOLVER).read()
    solver = re.sub(r'net: ".*"', f'net: "{net_path}"', solver)
    solver = re.sub(r'snapshot_prefix: ".*"', f'snapshot_prefix: "{workdir}/lenet"', solver)
    solver = re.sub(r"max_iter: \d+", f"max_iter: {iterations}", solver)
    solver += f"\nprecision: {precision}\n"
    solver_path = os.path.join(workdir, "solver.prototxt")
    open(solver_path, "w").write(solver)
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
               OPENBLAS_NUM_THREADS=str(max(1, threads // ranks)), OMP_NUM_THREADS=str(max(1, threads // ranks)))
    # Each rank under GNU time: its peak resident memory (the measure, /usr/bin/time -v's maximum RSS).
    cmd = ["mpirun", "-np", str(ranks), "--bind-to", "none", "--mca", "btl", "self,vader",
           "/usr/bin/time", "-f", "strata-peak-rss-kb %M", STRATA, "train", f"--solver={solver_path}"]
    t0 = time.perf_counter()
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, cwd=ROOT)
    wall = time.perf_counter() - t0
    log = out.stdout + out.stderr
    open(os.path.join(workdir, "train.log"), "w").write(log)
    if out.returncode != 0:
        sys.exit(f"strata train failed ({workdir}/train.log):\n{log[-3000:]}")
    curve, rates, it, peak_kb = [], [], 0, 0
    for line in log.splitlines():
        m = re.match(r"strata-peak-rss-kb (\d+)", line)
        if m:
            peak_kb = max(peak_kb, int(m.group(1)))
        m = re.search(r"Iteration (\d+), Testing net", line)
        if m:
            it = int(m.group(1))
        m = re.search(r"Test net output #\d+: accuracy = ([0-9.]+)", line)
        if m:
            curve.append((it, float(m.group(1))))
        m = re.search(r"Iteration \d+, (\d+) images/s", line)
        if m:
            rates.append(float(m.group(1)))
    name = f"Strata, {ranks} rank{'s' if ranks > 1 else ''}" + (", bf16" if precision == "BF16" else "")
    return summarise(name, curve, rates, wall, peak_kb / 1024)


def read_idx(path):
    with gzip.open(path, "rb") as f:
        raw = f.read()
    magic = int.from_bytes(raw[0:4], "big")
    dims = [int.from_bytes(raw[4 + 4 * i:8 + 4 * i], "big") for i in range(magic & 0xFF)]
    return raw[4 + 4 * len(dims):], dims


def run_torch(iterations, threads, test_interval=500, display=100):
    os.environ["OPENBLAS_NUM_THREADS"] = "1"  # PyTorch's fastest setting here (shared/NOTES.md): OpenMP only
    import torch
    from torch import nn
    torch.set_num_threads(threads)
    torch.manual_seed(1701)

    def load(split):
        images, dims = read_idx(f"{DATA}/{split}-images-idx3-ubyte.gz")
        labels, _ = read_idx(f"{DATA}/{split}-labels-idx1-ubyte.gz")
        x = torch.frombuffer(bytearray(images), dtype=torch.uint8).float().mul_(0.00390625)
        return x.view(dims[0], 1, dims[1], dims[2]), torch.frombuffer(bytearray(labels), dtype=torch.uint8).long()

    xtr, ytr = load("train")
    xte, yte = load("t10k")
    net = nn.Sequential(nn.Conv2d(1, 20, 5), nn.MaxPool2d(2, 2), nn.Conv2d(20, 50, 5), nn.MaxPool2d(2, 2),
                        nn.Flatten(), nn.Linear(800, 500), nn.ReLU(inplace=True), nn.Linear(500, 10))
    for m in net:
        if isinstance(m, (nn.Conv2d, nn.Linear)):
            fan_in = m.weight[0].numel()
            bound = (3.0 / fan_in) ** 0.5
            nn.init.uniform_(m.weight, -bound, bound)
            nn.init.zeros_(m.bias)
    params = [(p, 2.0 if name.endswith("bias") else 1.0) for name, p in net.named_parameters()]
    history = [torch.zeros_like(p) for p, _ in params]
    loss_fn = nn.CrossEntropyLoss()
    base_lr, momentum, decay, gamma, power = 0.01, 0.9, 0.0005, 1e-4, 0.75

    def test():
        net.eval()
        correct = 0
        with torch.no_grad():
            for i in range(0, xte.shape[0], 100):
                correct += (net(xte[i:i + 100]).argmax(1) == yte[i:i + 100]).sum().item()
        net.train()
        return correct / xte.shape[0]

    curve, rates = [], []
    batch, pos, n = 64, 0, xtr.shape[0]
    t_start = time.perf_counter()
    window = time.perf_counter()
    for it in range(iterations + 1):
        if it % test_interval == 0:
            curve.append((it, test()))
        if it == iterations:
            break
        if it % display == 0 and it > 0:
            now = time.perf_counter()
            rates.append(display * batch / (now - window))
            window = now
        if pos + batch <= n:
            x, y = xtr[pos:pos + batch], ytr[pos:pos + batch]
        else:  # wrap around, as Strata's Data layer does
            x = torch.cat([xtr[pos:], xtr[:pos + batch - n]])
            y = torch.cat([ytr[pos:], ytr[:pos + batch - n]])
        pos = (pos + batch) % n
        net.zero_grad(set_to_none=False)
        loss_fn(net(x), y).backward()
        lr = base_lr * (1 + gamma * it) ** (-power)
        with torch.no_grad():
            for (p, mult), v in zip(params, history):
                v.mul_(momentum).add_(p.grad, alpha=lr * mult).add_(p, alpha=lr * mult * decay)
                p.sub_(v)
    # This process is PyTorch's run alone: the Strata runs are child processes, counted apart.
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return summarise("PyTorch 1.13", curve, rates, time.perf_counter() - t_start, peak_mb)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--iterations", type=int, default=10000)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--runs", default="strata1,strata2,torch")
    ap.add_argument("--curve", action="store_true", help="also print every test accuracy")
    args = ap.parse_args()
    if not os.path.isdir(os.path.join(ROOT, "data", "fashion_mnist_train_lmdb")):
        sys.exit("no data/fashion_mnist_train_lmdb: run scripts/quickstart.sh first (ITERATIONS=0 converts only)")
    results = []
    for run in args.runs.split(","):
        m = re.fullmatch(r"strata(\d*)(-bf16)?", run)
        if m:
            results.append(run_strata(int(m.group(1) or 1), args.iterations, args.threads,
                                      "BF16" if m.group(2) else "FP32"))
        elif run == "torch":
            results.append(run_torch(args.iterations, args.threads))
        else:
            sys.exit(f"unknown run '{run}' (strataN, strataN-bf16 or torch)")
        r = results[-1]
        print(f"# {r['name']}: done in {r['wall_s']:.0f} s", file=sys.stderr, flush=True)
    head = f"{'run':<24}{'images/s':>10}{'wall s':>9}{'peak MB':>9}{'final %':>9}{'best %':>8}" + "".join(
        f"{'first ' + str(int(t * 100)) + '%':>11}" for t in THRESHOLDS)
    print(head)
    for r in results:
        firsts = "".join(f"{(str(r['first'][t]) if r['first'][t] is not None else '-'):>11}" for t in THRESHOLDS)
        print(f"{r['name']:<24}{r['images_s']:>10.0f}{r['wall_s']:>9.1f}{r['peak_mb']:>9.0f}{100 * r['final']:>9.2f}"
              f"{100 * r['best']:>8.2f}{firsts}")
    if args.curve:
        for r in results:
            print(r["name"] + ": " + " ".join(f"{it}:{100 * a:.2f}" for it, a in r["curve"]))


if __name__ == "__main__":
    main()
