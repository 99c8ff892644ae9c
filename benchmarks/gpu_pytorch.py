"""PyTorch on the GPU, for the GPU rows of docs/benchmarks.md: the same nets as models/alexnet and
models/resnet50 (Caffe's AlexNet with LRN and grouped convolutions; torchvision's ResNet-50, which is the
Caffe ResNet-50's layer graph), and torchvision's ResNet-152 and GoogLeNet; cudnn.benchmark on, random inputs.

--mode is how a PyTorch user would run it: nchw (float32, TF32 allowed unless --no-tf32), channels_last (the
same in channels-last memory format), bf16 (channels-last under torch.autocast with bfloat16: the two lines
a PyTorch user adds for mixed precision).

Prints milliseconds per forward+backward (what `strata time` measures) and per full SGD step (forward, backward,
momentum update), images/s of the step, each the median of --iters timed iterations after warm-up, timed with
CUDA events, and the step's peak allocated device memory (torch.cuda.max_memory_allocated).

    python3 benchmarks/gpu_pytorch.py --net alexnet --batch 256
    python3 benchmarks/gpu_pytorch.py --net resnet50 --batch 64 --mode bf16
"""
import argparse
import statistics

import torch
import torch.nn as nn
import torch.nn.functional as F


class CaffeAlexNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 96, 11, stride=4)
        self.conv2 = nn.Conv2d(96, 256, 5, padding=2, groups=2)
        self.conv3 = nn.Conv2d(256, 384, 3, padding=1)
        self.conv4 = nn.Conv2d(384, 384, 3, padding=1, groups=2)
        self.conv5 = nn.Conv2d(384, 256, 3, padding=1, groups=2)
        self.fc6 = nn.Linear(256 * 6 * 6, 4096)
        self.fc7 = nn.Linear(4096, 4096)
        self.fc8 = nn.Linear(4096, 1000)
        self.lrn = nn.LocalResponseNorm(5, alpha=1e-4, beta=0.75, k=1.0)

    def forward(self, x):
        x = F.max_pool2d(self.lrn(F.relu(self.conv1(x), inplace=True)), 3, 2, ceil_mode=True)
        x = F.max_pool2d(self.lrn(F.relu(self.conv2(x), inplace=True)), 3, 2, ceil_mode=True)
        x = F.relu(self.conv3(x), inplace=True)
        x = F.relu(self.conv4(x), inplace=True)
        x = F.max_pool2d(F.relu(self.conv5(x), inplace=True), 3, 2, ceil_mode=True)
        x = torch.flatten(x, 1)
        x = F.dropout(F.relu(self.fc6(x), inplace=True), 0.5, self.training)
        x = F.dropout(F.relu(self.fc7(x), inplace=True), 0.5, self.training)
        return self.fc8(x)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--net", choices=["alexnet", "resnet50", "resnet152", "googlenet"], required=True)
    ap.add_argument("--mode", choices=["nchw", "channels_last", "bf16"], default="nchw")
    ap.add_argument("--batch", type=int, required=True)
    ap.add_argument("--iters", type=int, default=30)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--no-tf32", action="store_true")
    args = ap.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = not args.no_tf32
    torch.backends.cudnn.allow_tf32 = not args.no_tf32
    torch.backends.cudnn.benchmark = True
    dev = torch.device("cuda")
    if args.net == "alexnet":
        model, size = CaffeAlexNet(), 227
    else:
        import torchvision
        if args.net == "googlenet":
            # Without the auxiliary classifiers, as Caffe's deploy net and `strata time` run it.
            model = torchvision.models.googlenet(aux_logits=False, init_weights=True)
        else:
            model = getattr(torchvision.models, args.net)()
        size = 224
    layout = torch.contiguous_format if args.mode == "nchw" else torch.channels_last
    model = model.to(dev).to(memory_format=layout).train()
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9, weight_decay=5e-4)
    x = (torch.rand(args.batch, 3, size, size, device=dev) * 2 - 1).contiguous(memory_format=layout)
    y = torch.randint(0, 1000, (args.batch,), device=dev)
    bf16 = args.mode == "bf16"

    def fwd_bwd():
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=bf16):
            loss = F.cross_entropy(model(x), y)
        loss.backward()

    def step():
        opt.zero_grad(set_to_none=False)
        fwd_bwd()
        opt.step()

    def time_ms(fn):
        for _ in range(args.warmup):
            fn()
        torch.cuda.synchronize()
        times = []
        for _ in range(args.iters):
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record()
            fn()
            b.record()
            b.synchronize()
            times.append(a.elapsed_time(b))
        return statistics.median(times)

    fb = time_ms(lambda: (opt.zero_grad(set_to_none=False), fwd_bwd()))
    torch.cuda.reset_peak_memory_stats()
    st = time_ms(step)
    peak = torch.cuda.max_memory_allocated() / 2**30
    print(f"pytorch {torch.__version__} {torch.cuda.get_device_name()} {args.net} batch {args.batch} "
          f"{args.mode} tf32={not args.no_tf32}: forward+backward {fb:.2f} ms, SGD step {st:.2f} ms, "
          f"{args.batch / st * 1000:.0f} images/s, peak {peak:.2f} GiB")


if __name__ == "__main__":
    main()
