#!/usr/bin/env python3
"""Forward+backward time of Strata vs PyTorch (Debian's python3-torch) on the CPU, same shapes, same threads,
measured in one run, alternating the two frameworks so both see the same machine state.

    STRATA_WITH_BENCH=1 bash scripts/install_deps.sh   # python3-torch
    /usr/bin/python3 benchmarks/cpu_vs_pytorch.py [--threads 2] [--rounds 3] [--models lenet,alexnet,resnet50]
        [--strata PATH] [--per-layer] [--bf16]

Prints a table: model, batch, Strata ms, PyTorch ms, ratio (PyTorch / Strata; > 1 means Strata is faster); with
--bf16 also Strata's time with `strata time --precision=BF16` (bfloat16 convolutions) against PyTorch's float.
Before timing a model that names its output blob (Model.out), it checks that Strata's blob (read off `strata draw`)
and the PyTorch module's output have the same shape. --per-layer also prints, per model, Strata's time per layer
type (from the last round's `strata time`) and PyTorch's own profile (torch.profiler) of up to 5 steps.

Adding a case: a Model entry in MODELS (prototxt, batch, iterations, output blob) and a TorchCase in torch_models()
under the same name (a module whose forward returns what the prototxt's loss layer sees, and the input shape).
The loss follows the prototxt: a SoftmaxWithLoss there is CrossEntropyLoss here, against random labels of the
output's shape without its channel axis (per image, or per pixel for a segmentation net); TorchCase.classes None
means the prototxt puts `loss_weight: 1` on the output blob (loss = sum of the outputs). `force_backward: true` in
the prototxt makes the PyTorch input require its gradient too."""
import argparse
import collections
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
STRATA = os.path.join(ROOT, "build", "bin", "strata")  # the README's build folder; --strata picks another

# prototxt, batch (the prototxt's), timed iterations, the blob whose shape must equal the PyTorch module's output
Model = collections.namedtuple("Model", "prototxt batch iters out", defaults=(None,))
MODELS = {
    "lenet": Model("models/lenet/deploy.prototxt", 64, 200, "ip2"),
    "cifar10_quick": Model("models/cifar10_quick/deploy.prototxt", 100, 20, "ip2"),
    "alexnet": Model("models/alexnet/deploy.prototxt", 32, 3, "fc8"),
    "googlenet": Model("models/googlenet/deploy.prototxt", 16, 3, "loss3/classifier"),
    "resnet50": Model("models/resnet50/deploy.prototxt", 8, 3, "fc1000"),
    # FCN-8s's structure, small: Convolution + PReLU + Pooling, Deconvolution, Crop, Eltwise SUM, per-pixel loss.
    "fcn_style": Model("models/fcn_style/deploy.prototxt", 4, 4, "score"),
    # One layer each: PReLU and a learned Deconvolution with backward to the input and the parameters; FCN's
    # fixed bilinear up-sampling (upscore8) with backward to the input only.
    "prelu": Model("models/layer_bench/prelu.prototxt", 8, 20, "prelu"),
    "deconv_learned": Model("models/layer_bench/deconv_learned.prototxt", 4, 10, "upscore"),
    "deconv_bilinear": Model("models/layer_bench/deconv_bilinear.prototxt", 2, 8, "upscore8"),
    # An LSTM over T = 32 steps of 32 streams (the batch is axis 1), 512 -> 512, backward to weights and input.
    "lstm": Model("models/layer_bench/lstm.prototxt", 32, 10, "lstm"),
}


def prototxt(model):
    with open(os.path.join(ROOT, MODELS[model].prototxt)) as f:
        return f.read()


def forces_backward(model):
    return re.search(r"^\s*force_backward:\s*true", prototxt(model), re.M) is not None


def layer_types(model):
    """Layer name -> type, from the prototxt (name and type come first in every layer block here)."""
    return dict(re.findall(r'layer\s*\{\s*name:\s*"([^"]+)"\s*type:\s*"([^"]+)"', prototxt(model)))


def strata_env(threads):
    return dict(os.environ, OPENBLAS_NUM_THREADS=str(threads), OMP_NUM_THREADS=str(threads))


def strata_run(model, iters, threads, precision="FP32"):
    """(forward+backward ms, {layer: (forward ms, backward ms)}) from one `strata time`."""
    out = subprocess.run([STRATA, "time", f"--model={os.path.join(ROOT, MODELS[model].prototxt)}",
                          f"--iterations={iters}", "--warmup=1", "--step=false", f"--precision={precision}"],
                         env=strata_env(threads), capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"strata time failed for {model}:\n{out.stderr}")
    layers = collections.defaultdict(lambda: [0.0, 0.0])
    for name, kind, ms in re.findall(r"^\s*(\S+)\t(forward|backward): ([0-9.]+) ms", out.stdout, re.M):
        layers[name][kind == "backward"] += float(ms)
    return float(re.search(r"Average Forward-Backward: ([0-9.]+) ms", out.stdout).group(1)), dict(layers)


def strata_blob_shape(model, blob):
    """The shape of one blob of the model's TRAIN net, as `strata draw` labels it."""
    with tempfile.TemporaryDirectory() as tmp:
        dot = os.path.join(tmp, "net.dot")
        out = subprocess.run([STRATA, "draw", f"--model={os.path.join(ROOT, MODELS[model].prototxt)}",
                              f"--out={dot}", "--phase=TRAIN"], env=strata_env(1), capture_output=True, text=True)
        if out.returncode != 0:
            sys.exit(f"strata draw failed for {model}:\n{out.stderr}")
        with open(dot) as f:
            text = f.read()
    m = re.search(r'label="' + re.escape(blob) + r'\\n\(([0-9, ]+)\)"', text)
    if m is None:
        sys.exit(f"{model}: no shape for blob '{blob}' in `strata draw`'s output")
    return tuple(int(d) for d in m.group(1).split(","))


# build() -> module; shape: the input without its batch axis, or a function of the batch giving the whole shape (a
# recurrent net's T x N x ...); classes: labels for CrossEntropyLoss (with loss_args), None: loss = output.sum().
TorchCase = collections.namedtuple("TorchCase", "build shape classes loss_args", defaults=({},))


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

    def bilinear_(weight):
        """Caffe's "bilinear" filler: every (in, out) kernel the same bilinear up-sampling kernel."""
        k = weight.shape[-1]
        f = (k + 1) // 2
        c = (2 * f - 1 - f % 2) / (2.0 * f)
        r = 1 - (torch.arange(k, dtype=torch.float32) / f - c).abs()
        with torch.no_grad():
            weight.copy_((r[:, None] * r[None, :]).expand_as(weight))
        return weight

    def crop(x, offset, like):
        """Caffe's Crop with axis 2: the same offset on both spatial axes, to `like`'s height and width."""
        return x[:, :, offset:offset + like.shape[2], offset:offset + like.shape[3]]

    class FCNStyle(nn.Module):
        """models/fcn_style/deploy.prototxt."""

        def __init__(self, classes=21):
            super().__init__()
            stage = lambda cin, cout, pad=1: [nn.Conv2d(cin, cout, 3, padding=pad), nn.PReLU(cout, 0.25),  # noqa
                                              nn.MaxPool2d(2, 2, ceil_mode=True)]
            self.to_pool3 = nn.Sequential(*stage(3, 16, 100), *stage(16, 32), *stage(32, 64))
            self.to_pool4 = nn.Sequential(*stage(64, 128))
            self.to_fc7 = nn.Sequential(*stage(128, 128), nn.Conv2d(128, 256, 7), nn.PReLU(256, 0.25),
                                        nn.Conv2d(256, 256, 1), nn.PReLU(256, 0.25))
            self.score_fr = nn.Conv2d(256, classes, 1)
            self.score_pool4 = nn.Conv2d(128, classes, 1)
            self.score_pool3 = nn.Conv2d(64, classes, 1)
            self.upscore2 = nn.ConvTranspose2d(classes, classes, 4, 2, bias=False)
            self.upscore_pool4 = nn.ConvTranspose2d(classes, classes, 4, 2, bias=False)
            self.upscore8 = nn.ConvTranspose2d(classes, classes, 16, 8, groups=classes, bias=False)
            for up in (self.upscore2, self.upscore_pool4, self.upscore8):
                bilinear_(up.weight)
            self.upscore8.weight.requires_grad_(False)  # lr_mult: 0

        def forward(self, x):
            pool3 = self.to_pool3(x)
            pool4 = self.to_pool4(pool3)
            up2 = self.upscore2(self.score_fr(self.to_fc7(pool4)))
            fuse4 = up2 + crop(self.score_pool4(pool4), 5, up2)
            up4 = self.upscore_pool4(fuse4)
            fuse3 = up4 + crop(self.score_pool3(pool3), 9, up4)
            return crop(self.upscore8(fuse3), 31, x)

    def prelu():
        return nn.PReLU(64, 0.25)

    def deconv_learned():
        return nn.ConvTranspose2d(64, 64, 4, 2, bias=False)

    class ChannelBias(nn.Module):
        """Caffe's Bias layer with one bottom: a learned value per channel."""

        def __init__(self, channels):
            super().__init__()
            self.bias = nn.Parameter(torch.zeros(channels))

        def forward(self, x):
            return x + self.bias.view(1, -1, 1, 1)

    def deconv_bilinear():
        up = nn.ConvTranspose2d(21, 21, 16, 8, groups=21, bias=False)
        bilinear_(up.weight).requires_grad_(False)  # lr_mult: 0
        return nn.Sequential(ChannelBias(21), up)

    class LSTM(nn.Module):
        """torch.nn.LSTM (time-major, as Caffe's), returning the output sequence."""

        def __init__(self):
            super().__init__()
            self.lstm = nn.LSTM(512, 512)

        def forward(self, x):
            return self.lstm(x)[0]

    def lstm():
        return LSTM()

    return {"lenet": TorchCase(lenet, (1, 28, 28), 10),
            "cifar10_quick": TorchCase(cifar10_quick, (3, 32, 32), 10),
            "alexnet": TorchCase(alexnet, (3, 227, 227), 1000),
            "googlenet": TorchCase(googlenet, (3, 224, 224), 1000),
            "resnet50": TorchCase(resnet50, (3, 224, 224), 1000),
            # SoftmaxWithLoss with ignore_label 255 and normalize: false
            "fcn_style": TorchCase(FCNStyle, (3, 224, 224), 21, dict(ignore_index=255, reduction="sum")),
            "prelu": TorchCase(prelu, (64, 112, 112), None),
            "deconv_learned": TorchCase(deconv_learned, (64, 56, 56), None),
            "deconv_bilinear": TorchCase(deconv_bilinear, (21, 38, 38), None),
            "lstm": TorchCase(lstm, lambda batch: (32, batch, 512), None)}


def torch_setup(model, batch, threads):
    """The module in training mode, its input, and the step (zeroed gradients, forward, loss, backward)."""
    import torch
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    case = torch_models()[model]
    net = case.build().train()
    shape = case.shape(batch) if callable(case.shape) else (batch, *case.shape)
    x = (torch.rand(*shape) * 2 - 1).requires_grad_(forces_backward(model))
    with torch.no_grad():
        out_shape = tuple(net(x).shape)
    if case.classes is None:
        loss = lambda out: out.sum()  # noqa: E731  (Caffe's loss_weight: 1 on the output)
    else:
        y = torch.randint(0, case.classes, (out_shape[0],) + out_shape[2:])
        loss_fn = torch.nn.CrossEntropyLoss(**case.loss_args)
        loss = lambda out: loss_fn(out, y)  # noqa: E731

    def step():
        net.zero_grad(set_to_none=False)
        x.grad = None
        loss(net(x)).backward()

    return step, out_shape


def torch_ms(model, batch, iters, threads):
    step, _ = torch_setup(model, batch, threads)
    step()
    times = []
    for _ in range(iters):
        t0 = time.perf_counter()
        step()
        times.append((time.perf_counter() - t0) * 1000)
    return statistics.mean(times)


def check_shapes(model, threads):
    """Asserts that Strata's output blob and the PyTorch module's output have the same shape; prints it."""
    m = MODELS[model]
    if m.out is None:
        return
    strata_shape = strata_blob_shape(model, m.out)
    _, torch_shape = torch_setup(model, m.batch, threads)
    if strata_shape != torch_shape:
        sys.exit(f"{model}: Strata's '{m.out}' is {strata_shape} but PyTorch's output is {torch_shape}")
    print(f"# {model}: output '{m.out}' {strata_shape} in both", flush=True)


def per_layer_report(model, strata_layers, iters, threads):
    """Strata's time per layer type (sum over the layers of that type) and PyTorch's profile of a few steps."""
    import torch
    types = layer_types(model)
    by_type = collections.defaultdict(lambda: [0.0, 0.0, 0])
    for name, (fwd, bwd) in strata_layers.items():
        # Split layers are Net's own, inserted where a blob feeds several layers: "<blob>_<blob>_<k>_split".
        t = by_type[types.get(name, "Split (inserted)" if name.endswith("_split") else name)]
        t[0] += fwd
        t[1] += bwd
        t[2] += 1
    print(f"#   Strata per layer type (ms per iteration, last round): {'forward':>10}{'backward':>10}{'layers':>8}")
    for t, (fwd, bwd, n) in sorted(by_type.items(), key=lambda kv: -(kv[1][0] + kv[1][1])):
        print(f"#     {t:<48}{fwd:>10.2f}{bwd:>10.2f}{n:>8}")
    step, _ = torch_setup(model, MODELS[model].batch, threads)
    step()
    steps = max(1, min(iters, 5))
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        for _ in range(steps):
            step()
    print(f"#   PyTorch profile, {steps} step(s), total over them, top ops by self CPU time:")
    table = prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=14)
    print("\n".join("#     " + line for line in table.splitlines()), flush=True)


def main():
    global STRATA
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=3, help="alternations of Strata and PyTorch per model")
    ap.add_argument("--models", default="lenet,alexnet,resnet50", help=f"comma-separated, of {','.join(MODELS)}")
    ap.add_argument("--strata", default=STRATA, help="the strata binary (default: %(default)s)")
    ap.add_argument("--bf16", action="store_true",
                    help="also time Strata with --precision=BF16 (bfloat16 convolutions) in each round")
    ap.add_argument("--per-layer", action="store_true",
                    help="also print Strata's time per layer type and PyTorch's profile, per model")
    args = ap.parse_args()
    STRATA = os.path.abspath(args.strata)
    if not os.access(STRATA, os.X_OK):
        sys.exit(f"no strata binary at {STRATA} (build it, or give --strata PATH)")
    models = args.models.split(",")
    unknown = [m for m in models if m not in MODELS]
    if unknown:
        sys.exit(f"unknown model(s) {', '.join(unknown)}; known: {', '.join(MODELS)}")
    os.environ["OPENBLAS_NUM_THREADS"] = "1"  # PyTorch's fastest setting here (see shared/NOTES.md)
    import torch
    print(f"# PyTorch {torch.__version__}, {args.threads} threads, {os.cpu_count()} cores; "
          f"best of {args.rounds} alternating rounds; Strata: {STRATA}")
    for model in models:
        check_shapes(model, args.threads)
    bf16_head = f"{'Strata bf16 ms':>16}{'PyTorch/bf16':>14}" if args.bf16 else ""
    print(f"{'model':<16}{'batch':>6}{'Strata ms':>12}{'PyTorch ms':>12}{'PyTorch/Strata':>16}" + bf16_head)
    for model in models:
        batch, iters = MODELS[model].batch, MODELS[model].iters
        s, t, b = [], [], []
        for _ in range(args.rounds):
            ms, layers = strata_run(model, iters, args.threads)
            s.append(ms)
            t.append(torch_ms(model, batch, iters, args.threads))
            if args.bf16:
                b.append(strata_run(model, iters, args.threads, "BF16")[0])
        bf16 = f"{min(b):>16.1f}{min(t) / min(b):>14.2f}" if args.bf16 else ""
        print(f"{model:<16}{batch:>6}{min(s):>12.1f}{min(t):>12.1f}{min(t) / min(s):>16.2f}" + bf16, flush=True)
        if args.per_layer:
            per_layer_report(model, layers, iters, args.threads)


if __name__ == "__main__":
    main()
