#!/usr/bin/env python3
"""Writes alexnet_k20x_b256.times: per-layer forward and backward times of AlexNet (models/alexnet, Caffe's
bvlc_alexnet with its groups) on one Tesla K20X at batch 256, the GPU of the seed paper's figure 6 (docs/scale.md).

No per-layer timing of AlexNet on a K20X is published. The figures are built from two public ones:
  * the proportions: Caffe's `caffe time` of AlexNet at batch 128 on a Titan X (soumith/convnet-benchmarks,
    caffe/output_alexnet.log, commit 6f718db, 2016), the only complete per-layer log of that period; its AlexNet
    is the "one weird trick" variant (no groups, no LRN), so each convolution is re-weighted by its FLOPs in
    bvlc_alexnet over those in the variant (conv1 211/141, conv2 448/448, conv3 299/224, conv4 224/299, conv5
    150/199 MFLOP per image), and LRN, absent from the log, is estimated as memory-bound (2 passes over its
    input forward, 4 backward, at the ReLU's rate: norm1 2.0 / 4.0 ms, norm2 1.3 / 2.6 ms at batch 128);
  * the total: Caffe's documented K40 training with cuDNN, 19.2 s per 20 iterations of batch 256 (BVLC/caffe
    docs/performance_hardware.md), 960 ms an iteration, times the K40/K20X peak ratio (4.29 / 3.95 TFLOP/s)
    is 1,043 ms; less the data layer and the update, about 1,000 ms forward and backward.
So the file is "Titan X proportions scaled to a K20X total", not a measurement on a K20X.
"""
import os

TOTAL_MS = 1000.0  # forward + backward, batch 256, one K20X
# name, forward ms, backward ms (Titan X, batch 128), FLOP weight bvlc_alexnet / benchmark variant
TITAN_X_B128 = [
    ("data", 0.0, 0.0, 1), ("conv1", 4.6583, 14.4471, 211 / 141), ("relu1", 0.859, 1.263, 1),
    ("norm1", 2.0, 4.0, 1), ("pool1", 0.870, 3.434, 1), ("conv2", 11.562, 22.2473, 448 / 448),
    ("relu2", 0.605, 0.906, 1), ("norm2", 1.3, 2.6, 1), ("pool2", 0.633, 2.528, 1),
    ("conv3", 5.48363, 10.7821, 299 / 224), ("relu3", 0.298, 0.452, 1), ("conv4", 7.21521, 13.5, 224 / 299),
    ("relu4", 0.203, 0.306, 1), ("conv5", 4.91163, 9.03352, 150 / 199), ("relu5", 0.201, 0.305, 1),
    ("pool5", 0.220, 0.834, 1), ("fc6", 3.02144, 3.81615, 1), ("relu6", 0.05, 0.05, 1), ("drop6", 0.05, 0.05, 1),
    ("fc7", 0.996, 1.687, 1), ("relu7", 0.05, 0.05, 1), ("drop7", 0.05, 0.05, 1), ("fc8", 0.548, 0.597, 1),
    ("loss", 0.05, 0.05, 1),
]

def main():
    total = sum((f + b) * w for _, f, b, w in TITAN_X_B128)
    scale = TOTAL_MS / total
    out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "alexnet_k20x_b256.times")
    with open(out, "w") as f:
        f.write("# AlexNet (models/alexnet) on one Tesla K20X, batch 256: Titan X proportions scaled to a K20X\n")
        f.write("# total of %.0f ms (written by make_k20x_times.py, which says where each figure comes from)\n" % TOTAL_MS)
        f.write("batch 256\n")
        for name, fw, bw, w in TITAN_X_B128:
            f.write("%-9s %8.3f %8.3f\n" % (name, fw * w * scale, bw * w * scale))
    print("wrote", out)

if __name__ == "__main__":
    main()
