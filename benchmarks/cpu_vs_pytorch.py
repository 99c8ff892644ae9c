#!/usr/bin/env python3
"""Forward+backward time of Strata vs PyTorch (Debian's python3-torch) on the CPU, same shapes, same threads,
measured in one run, alternating the two frameworks so both see the same machine state.

    STRATA_WITH_BENCH=1 bash scripts/install_deps.sh   # python3-torch
    /usr/bin/python3 benchmarks/cpu_vs_pytorch.py [--threads 2] [--rounds 3] [--models lenet,alexnet,resnet50]

Prints a table: model, batch, Strata ms, PyTorch ms, ratio (PyTorch / Strata; > 1 means Strata is faster)."""
import argparse
import os
import re
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
STRATA = os.path.join(ROOT, "build", "bin", "strata")

# model -> (prototxt, batch, timed iterations)
MODELS = {
    "lenet": ("models/lenet/deploy.prototxt", 64, 200),
    "cifar10_quick": ("models/cifar10_quick/deploy.prototxt", 100, 20),
    "alexnet": ("models/alexnet/deploy.prototxt", 32, 3),
    "googlenet": ("models/googlenet/deploy.prototxt", 16, 3),
    "resnet50": ("models/resnet50/deploy.prototxt", 8, 3),
}


def strata_ms(model, iters, threads):
    env = dict(os.environ, OPENBLAS_NUM_THREADS=str(threads), OMP_NUM_THREADS=str(threads))
    out = subprocess.run([STRATA, "time", f"--model={os.path.join(ROOT, MODELS[model][0])}",
                          f"--iterations={iters}", "--warmup=1", "--step=false"],
                         env=env, capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"strata time failed for {model}:\n{out.stderr}")
    return float(re.search(r"Average Forward-Backward: ([0-9.]+) ms", out.stdout).group(1))


def torch_models():
    import torch
    from torch import nn

    def lenet():
        return nn.Sequential(nn.Conv2d(1, 20, 5), nn.MaxPool2d(2, 2), nn.Conv2d(20, 50, 5), nn.MaxPool2d(2, 2),
                             nn.Flatten(), nn.Linear(800, 500), nn.ReLU(inplace=True), nn.Linear(500, 10))

    def cifar10_quick():
        return nn.Sequential(nn.Conv2d(3, 32, 5, padding=2), nn.MaxPool2d(3, 2, ceil_mode=True), nn.ReLU(),
                             nn.Conv2d(32, 32, 5, padding=2), nn.ReLU(), nn.AvgPool2d(3, 2, ceil_mode=True),
                             nn.Conv2d(32, 64, 5, padding=2), nn.ReLU(), nn.AvgPool2d(3, 2, ceil_mode=True),
                             nn.Flatten(), nn.Linear(64 * 4 * 4, 64), nn.Linear(64, 10))

    def alexnet():
        lrn = lambda: nn.LocalResponseNorm(5, alpha=1e-4, beta=0.75, k=1.0)  # noqa: E731
        return nn.Sequential(
            nn.Conv2d(3, 96, 11, stride=4), nn.ReLU(inplace=True), lrn(), nn.MaxPool2d(3, 2),
            nn.Conv2d(96, 256, 5, padding=2, groups=2), nn.ReLU(inplace=True), lrn(), nn.MaxPool2d(3, 2),
            nn.Conv2d(256, 384, 3, padding=1), nn.ReLU(inplace=True),
            nn.Conv2d(384, 384, 3, padding=1, groups=2), nn.ReLU(inplace=True),
            nn.Conv2d(384, 256, 3, padding=1, groups=2), nn.ReLU(inplace=True), nn.MaxPool2d(3, 2),
            nn.Flatten(), nn.Linear(9216, 4096), nn.ReLU(inplace=True), nn.Dropout(0.5),
            nn.Linear(4096, 4096), nn.ReLU(inplace=True), nn.Dropout(0.5), nn.Linear(4096, 1000))

    class Inception(nn.Module):
        def __init__(self, cin, c1, c3r, c3, c5r, c5, pp):
            super().__init__()
            r = lambda: nn.ReLU(inplace=True)  # noqa: E731
            self.b1 = nn.Sequential(nn.Conv2d(cin, c1, 1), r())
            self.b3 = nn.Sequential(nn.Conv2d(cin, c3r, 1), r(), nn.Conv2d(c3r, c3, 3, padding=1), r())
            self.b5 = nn.Sequential(nn.Conv2d(cin, c5r, 1), r(), nn.Conv2d(c5r, c5, 5, padding=2), r())
            self.bp = nn.Sequential(nn.MaxPool2d(3, 1, padding=1), nn.Conv2d(cin, pp, 1), r())

        def forward(self, x):
            return torch.cat([self.b1(x), self.b3(x), self.b5(x), self.bp(x)], 1)

    def googlenet():
        lrn = lambda: nn.LocalResponseNorm(5, alpha=1e-4, beta=0.75, k=1.0)  # noqa: E731
        pool = lambda: nn.MaxPool2d(3, 2, ceil_mode=True)  # noqa: E731
        return nn.Sequential(
            nn.Conv2d(3, 64, 7, 2, 3), nn.ReLU(inplace=True), pool(), lrn(),
            nn.Conv2d(64, 64, 1), nn.ReLU(inplace=True), nn.Conv2d(64, 192, 3, padding=1), nn.ReLU(inplace=True),
            lrn(), pool(),
            Inception(192, 64, 96, 128, 16, 32, 32), Inception(256, 128, 128, 192, 32, 96, 64), pool(),
            Inception(480, 192, 96, 208, 16, 48, 64), Inception(512, 160, 112, 224, 24, 64, 64),
            Inception(512, 128, 128, 256, 24, 64, 64), Inception(512, 112, 144, 288, 32, 64, 64),
            Inception(528, 256, 160, 320, 32, 128, 128), pool(),
            Inception(832, 256, 160, 320, 32, 128, 128), Inception(832, 384, 192, 384, 48, 128, 128),
            nn.AvgPool2d(7, 1), nn.Dropout(0.4), nn.Flatten(), nn.Linear(1024, 1000))

    class Bottleneck(nn.Module):
        def __init__(self, cin, mid, cout, stride):
            super().__init__()
            self.body = nn.Sequential(
                nn.Conv2d(cin, mid, 1, stride, bias=False), nn.BatchNorm2d(mid), nn.ReLU(inplace=True),
                nn.Conv2d(mid, mid, 3, 1, 1, bias=False), nn.BatchNorm2d(mid), nn.ReLU(inplace=True),
                nn.Conv2d(mid, cout, 1, bias=False), nn.BatchNorm2d(cout))
            self.short = (nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))
                          if stride != 1 or cin != cout else nn.Identity())

        def forward(self, x):
            return torch.relu(self.body(x) + self.short(x))

    def resnet50():
        layers = [nn.Conv2d(3, 64, 7, 2, 3, bias=False), nn.BatchNorm2d(64), nn.ReLU(inplace=True),
                  nn.MaxPool2d(3, 2, ceil_mode=True)]
        cin = 64
        for blocks, mid, cout, stride in [(3, 64, 256, 1), (4, 128, 512, 2), (6, 256, 1024, 2), (3, 512, 2048, 2)]:
            for b in range(blocks):
                layers.append(Bottleneck(cin, mid, cout, stride if b == 0 else 1))
                cin = cout
        layers += [nn.AvgPool2d(7, 1), nn.Flatten(), nn.Linear(2048, 1000)]
        return nn.Sequential(*layers)

    return {"lenet": (lenet, (1, 28, 28), 10), "cifar10_quick": (cifar10_quick, (3, 32, 32), 10),
            "alexnet": (alexnet, (3, 227, 227), 1000), "googlenet": (googlenet, (3, 224, 224), 1000),
            "resnet50": (resnet50, (3, 224, 224), 1000)}


def torch_ms(model, batch, iters, threads):
    import torch
    torch.set_num_threads(threads)
    build, shape, classes = torch_models()[model]
    net = build().train()
    x = torch.rand(batch, *shape) * 2 - 1
    y = torch.randint(0, classes, (batch,))
    loss_fn = torch.nn.CrossEntropyLoss()

    def step():
        net.zero_grad(set_to_none=False)
        loss_fn(net(x), y).backward()

    step()
    times = []
    for _ in range(iters):
        t0 = time.perf_counter()
        step()
        times.append((time.perf_counter() - t0) * 1000)
    return statistics.mean(times)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=3, help="alternations of Strata and PyTorch per model")
    ap.add_argument("--models", default="lenet,alexnet,resnet50")
    args = ap.parse_args()
    os.environ["OPENBLAS_NUM_THREADS"] = "1"  # PyTorch's fastest setting here (see shared/NOTES.md)
    import torch
    print(f"# PyTorch {torch.__version__}, {args.threads} threads, {os.cpu_count()} cores; "
          f"best of {args.rounds} alternating rounds")
    print(f"{'model':<14}{'batch':>6}{'Strata ms':>12}{'PyTorch ms':>12}{'PyTorch/Strata':>16}")
    for model in args.models.split(","):
        _, batch, iters = MODELS[model]
        s, t = [], []
        for _ in range(args.rounds):
            s.append(strata_ms(model, iters, args.threads))
            t.append(torch_ms(model, batch, iters, args.threads))
        print(f"{model:<14}{batch:>6}{min(s):>12.1f}{min(t):>12.1f}{min(t) / min(s):>16.2f}", flush=True)


if __name__ == "__main__":
    main()
