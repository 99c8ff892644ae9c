#!/usr/bin/env python3
"""Peak activation memory and forward-backward time of a stack of reversible blocks against the same stack
written with ordinary layers (Slice, the branches, Eltwise sums, Concat: every activation stored), at several
depths, measured by `strata time` in one run (alternating the two kinds).

    cmake --build build -j2 --target strata
    /usr/bin/python3 benchmarks/revnet_depth.py [--depths 8,32,128] [--batch 16] [--iterations 3] [--gpu 0]

Each net: 28x28 input -> 3x3 stride-2 convolution to 32 channels (14x14) -> D coupling blocks, whose F and G are
conv 3x3 (16 -> 16) + BatchNorm + ReLU on half the channels -> global average pooling -> 10-way inner product
-> softmax loss. Prints depth, kind, peak activation MiB, ms per forward-backward, and the ratios."""
import argparse
import os
import re
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
STRATA = os.path.join(ROOT, "build", "bin", "strata")


def branch_layers(prefix, bottom, top, half):
    return [f'name: "{prefix}_conv" type: "Convolution" bottom: "{bottom}" top: "{top}" '
            f'convolution_param {{ num_output: {half} kernel_size: 3 pad: 1 bias_term: false '
            f'weight_filler {{ type: "msra" }} }}',
            f'name: "{prefix}_bn" type: "BatchNorm" bottom: "{top}" top: "{top}"',
            f'name: "{prefix}_relu" type: "ReLU" bottom: "{top}" top: "{top}"']


def net(depth, batch, reversible, channels=32):
    half = channels // 2
    out = ['name: "depth"',
           f'layer {{ name: "in" type: "Input" top: "data" top: "label" input_param {{ shape {{ dim: {batch} dim: 1 '
           f'dim: 28 dim: 28 }} shape {{ dim: {batch} }} }} }}',
           f'layer {{ name: "stem" type: "Convolution" bottom: "data" top: "x0" convolution_param {{ num_output: '
           f'{channels} kernel_size: 3 stride: 2 pad: 1 weight_filler {{ type: "msra" }} }} }}']
    for b in range(depth):
        x, y = f"x{b}", f"x{b + 1}"
        if reversible:
            f = " ".join(f"f {{ {l} }}" for l in branch_layers(f"b{b}_f", "in", "t", half))
            g = " ".join(f"g {{ {l} }}" for l in branch_layers(f"b{b}_g", "in", "t", half))
            out.append(f'layer {{ name: "b{b}" type: "Reversible" bottom: "{x}" top: "{y}" '
                       f'reversible_param {{ {f} {g} }} }}')
        else:
            out.append(f'layer {{ name: "b{b}_slice" type: "Slice" bottom: "{x}" top: "{x}a" top: "{x}b" }}')
            out += [f"layer {{ {l} }}" for l in branch_layers(f"b{b}_f", f"{x}b", f"{x}f", half)]
            out.append(f'layer {{ name: "b{b}_y1" type: "Eltwise" bottom: "{x}a" bottom: "{x}f" top: "{x}y1" }}')
            out += [f"layer {{ {l} }}" for l in branch_layers(f"b{b}_g", f"{x}y1", f"{x}g", half)]
            out.append(f'layer {{ name: "b{b}_y2" type: "Eltwise" bottom: "{x}b" bottom: "{x}g" top: "{x}y2" }}')
            out.append(f'layer {{ name: "b{b}_cat" type: "Concat" bottom: "{x}y1" bottom: "{x}y2" top: "{y}" }}')
    out += [f'layer {{ name: "pool" type: "Pooling" bottom: "x{depth}" top: "pool" pooling_param {{ pool: AVE '
            f'global_pooling: true }} }}',
            'layer { name: "ip" type: "InnerProduct" bottom: "pool" top: "score" inner_product_param { '
            'num_output: 10 weight_filler { type: "xavier" } } }',
            'layer { name: "loss" type: "SoftmaxWithLoss" bottom: "score" bottom: "label" top: "loss" }']
    return "\n".join(out) + "\n"


def measure(path, iterations, gpu):
    device = [] if gpu is None else [f"--gpu={gpu}"]  # on the GPU: the device's activation bytes
    out = subprocess.run([STRATA, "time", f"--model={path}", f"--iterations={iterations}", "--warmup=1",
                          "--step=false"] + device, capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"strata time failed on {path}:\n{out.stderr[-2000:]}")
    ms = float(re.search(r"Average Forward-Backward: ([0-9.]+) ms", out.stdout).group(1))
    peak = int(re.search(r"Peak activation memory: (\d+) bytes", out.stdout).group(1))
    return ms, peak


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--depths", default="8,32,128")
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--iterations", type=int, default=3)
    ap.add_argument("--gpu", type=int, default=None, help="time on this GPU instead of the CPU")
    args = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="revnet_depth_")
    where = "CPU" if args.gpu is None else f"GPU {args.gpu}"
    print(f"# {where}, batch {args.batch}, {args.iterations} timed iterations after 1 warm-up; peak = all activation "
          "bytes")
    print(f"{'blocks':>7}{'stored MiB':>12}{'reversible MiB':>16}{'memory ratio':>14}"
          f"{'stored ms':>11}{'reversible ms':>15}{'time ratio':>12}")
    for depth in [int(d) for d in args.depths.split(",")]:
        results = {}
        for reversible in (False, True):
            path = os.path.join(tmp, f"{'rev' if reversible else 'stored'}_{depth}.prototxt")
            with open(path, "w") as f:
                f.write(net(depth, args.batch, reversible))
            results[reversible] = measure(path, args.iterations, args.gpu)
        (ms_s, mem_s), (ms_r, mem_r) = results[False], results[True]
        print(f"{depth:>7}{mem_s / 2**20:>12.1f}{mem_r / 2**20:>16.1f}{mem_r / mem_s:>14.3f}"
              f"{ms_s:>11.1f}{ms_r:>15.1f}{ms_r / ms_s:>12.2f}", flush=True)


if __name__ == "__main__":
    main()
