"""PyTorch on the GPU, for the GPU rows of docs/benchmarks.md: the same nets as models/alexnet and
models/resnet50 (Caffe's AlexNet with LRN and grouped convolutions; torchvision's ResNet-50, which is the
Caffe ResNet-50's layer graph), float32 with TF32 allowed, cudnn.benchmark on, random inputs.

Prints milliseconds per forward+backward (what `strata time` measures) and per full SGD step (forward, backward,
momentum update), and images/s of the step, each the median of --iters timed iterations after warm-up,
timed with CUDA events.

    python3 benchmarks/gpu_pytorch.py --net alexnet --batch 256
    python3 benchmarks/gpu_pytorch.py --net resnet50 --batch 64
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
    ap.add_argument("--net", choices=["alexnet", "resnet50"], required=True)
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
        model, size = torchvision.models.resnet50(), 224
    model = model.to(dev).train()
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9, weight_decay=5e-4)
    x = torch.rand(args.batch, 3, size, size, device=dev) * 2 - 1
    y = torch.randint(0, 1000, (args.batch,), device=dev)

    def fwd_bwd():
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
    st = time_ms(step)
    print(f"pytorch {torch.__version__} {torch.cuda.get_device_name()} {args.net} batch {args.batch} "
          f"tf32={not args.no_tf32}: forward+backward {fb:.2f} ms, SGD step {st:.2f} ms, "
          f"{args.batch / st * 1000:.0f} images/s")


if __name__ == "__main__":
    main()
