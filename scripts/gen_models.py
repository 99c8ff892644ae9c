#!/usr/bin/env python3
"""Writes the reference nets in models/ (deploy style: an Input layer for data and labels; SoftmaxWithLoss in
TRAIN so `strata time` times a real backward, Softmax in TEST). Run from the repository root:
    python3 scripts/gen_models.py
The output is committed; this script is how it was made and how to change it consistently."""
import os


def filler(spec):
    """'xavier' -> type: "xavier"; 'gaussian 0.01' -> type: "gaussian" std: 0.01"""
    parts = spec.split()
    return f'type: "{parts[0]}"' + (f" std: {parts[1]}" if len(parts) > 1 else "")


class Net:
    def __init__(self, name, shape, classes, label_shape=None):
        self.lines = [f'name: "{name}"']
        self.classes = classes
        label_shape = label_shape or [shape[0]]
        self.add(f'''layer {{
  name: "data"
  type: "Input"
  top: "data"
  top: "label"
  input_param {{
    shape {{ {" ".join(f"dim: {d}" for d in shape)} }}
    shape {{ {" ".join(f"dim: {d}" for d in label_shape)} }}
  }}
}}''')

    def add(self, text):
        self.lines.append(text)

    def conv(self, name, bottom, num, k, s=1, p=0, group=1, bias=True, weights="msra", top=None):
        top = top or name
        params = "  param { lr_mult: 1 decay_mult: 1 }\n" + ("  param { lr_mult: 2 decay_mult: 0 }\n" if bias else "")
        extra = f"    pad: {p}\n" if p else ""
        extra += f"    stride: {s}\n" if s != 1 else ""
        extra += f"    group: {group}\n" if group != 1 else ""
        extra += "    bias_term: false\n" if not bias else ""
        bias_filler = "    bias_filler { type: \"constant\" value: 0 }\n" if bias else ""
        self.add(f'''layer {{
  name: "{name}"
  type: "Convolution"
  bottom: "{bottom}"
  top: "{top}"
{params}  convolution_param {{
    num_output: {num}
    kernel_size: {k}
{extra}    weight_filler {{ {filler(weights)} }}
{bias_filler}  }}
}}''')
        return top

    def relu(self, name, blob):
        self.add(f'layer {{ name: "{name}" type: "ReLU" bottom: "{blob}" top: "{blob}" }}')
        return blob

    def pool(self, name, bottom, method, k, s, p=0, top=None, global_pool=False):
        top = top or name
        if global_pool:
            body = f"    pool: {method}\n    global_pooling: true\n"
        else:
            body = f"    pool: {method}\n    kernel_size: {k}\n    stride: {s}\n" + (f"    pad: {p}\n" if p else "")
        self.add(f'''layer {{
  name: "{name}"
  type: "Pooling"
  bottom: "{bottom}"
  top: "{top}"
  pooling_param {{
{body}  }}
}}''')
        return top

    def lrn(self, name, bottom, size=5, alpha=1e-4, beta=0.75):
        self.add(f'''layer {{
  name: "{name}"
  type: "LRN"
  bottom: "{bottom}"
  top: "{name}"
  lrn_param {{ local_size: {size} alpha: {alpha} beta: {beta} }}
}}''')
        return name

    def fc(self, name, bottom, num, weights="gaussian 0.005", top=None):
        top = top or name
        self.add(f'''layer {{
  name: "{name}"
  type: "InnerProduct"
  bottom: "{bottom}"
  top: "{top}"
  param {{ lr_mult: 1 decay_mult: 1 }}
  param {{ lr_mult: 2 decay_mult: 0 }}
  inner_product_param {{
    num_output: {num}
    weight_filler {{ {filler(weights)} }}
    bias_filler {{ type: "constant" value: 0 }}
  }}
}}''')
        return top

    def dropout(self, name, blob, ratio):
        self.add(f'layer {{ name: "{name}" type: "Dropout" bottom: "{blob}" top: "{blob}" '
                 f'dropout_param {{ dropout_ratio: {ratio} }} }}')
        return blob

    def bn_scale(self, prefix_bn, prefix_scale, blob):
        self.add(f'''layer {{
  name: "{prefix_bn}"
  type: "BatchNorm"
  bottom: "{blob}"
  top: "{blob}"
}}
layer {{
  name: "{prefix_scale}"
  type: "Scale"
  bottom: "{blob}"
  top: "{blob}"
  scale_param {{ bias_term: true }}
}}''')
        return blob

    def concat(self, name, bottoms):
        b = "\n".join(f'  bottom: "{x}"' for x in bottoms)
        self.add(f'layer {{\n  name: "{name}"\n  type: "Concat"\n{b}\n  top: "{name}"\n}}')
        return name

    def upsample(self, name, bottom):
        self.add(f'layer {{ name: "{name}" type: "Upsample" bottom: "{bottom}" top: "{name}" }}')
        return name

    def deconv(self, name, bottom, num, k, s, learn=True):
        # FCN's upsampling: no bias, bilinear initial weights (one filter per class: group = num_output),
        # fixed (lr_mult 0) where the net keeps plain bilinear interpolation.
        mult = 1 if learn else 0
        self.add(f'''layer {{
  name: "{name}"
  type: "Deconvolution"
  bottom: "{bottom}"
  top: "{name}"
  param {{ lr_mult: {mult} decay_mult: {mult} }}
  convolution_param {{
    num_output: {num}
    kernel_size: {k}
    stride: {s}
    group: {num}
    bias_term: false
    weight_filler {{ type: "bilinear" }}
  }}
}}''')
        return name

    def crop(self, name, bottom, like, offset):
        self.add(f'''layer {{
  name: "{name}"
  type: "Crop"
  bottom: "{bottom}"
  bottom: "{like}"
  top: "{name}"
  crop_param {{ axis: 2 offset: {offset} }}
}}''')
        return name

    def eltwise_sum(self, name, a, b):
        self.add(f'layer {{ name: "{name}" type: "Eltwise" bottom: "{a}" bottom: "{b}" top: "{name}" }}')
        return name

    def head(self, scores, loss_param=""):
        loss_param = f"\n  loss_param {{ {loss_param} }}" if loss_param else ""
        self.add(f'''layer {{
  name: "loss"
  type: "SoftmaxWithLoss"
  bottom: "{scores}"
  bottom: "label"
  top: "loss"{loss_param}
  include {{ phase: TRAIN }}
}}
layer {{
  name: "prob"
  type: "Softmax"
  bottom: "{scores}"
  top: "prob"
  include {{ phase: TEST }}
}}
layer {{
  name: "accuracy"
  type: "Accuracy"
  bottom: "{scores}"
  bottom: "label"
  top: "accuracy"
  include {{ phase: TEST }}
}}''')

    def write(self, path):
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            f.write("# Generated by scripts/gen_models.py; edit that script, not this file.\n")
            f.write("\n".join(self.lines) + "\n")


def lenet():
    n = Net("LeNet", [64, 1, 28, 28], 10)
    x = n.conv("conv1", "data", 20, 5, weights="xavier")
    x = n.pool("pool1", x, "MAX", 2, 2)
    x = n.conv("conv2", x, 50, 5, weights="xavier")
    x = n.pool("pool2", x, "MAX", 2, 2)
    x = n.fc("ip1", x, 500, weights='xavier')
    x = n.relu("relu1", x)
    x = n.fc("ip2", x, 10, weights='xavier')
    n.head(x)
    return n


def cifar10_quick():
    n = Net("CIFAR10_quick", [100, 3, 32, 32], 10)
    x = n.conv("conv1", "data", 32, 5, p=2, weights='gaussian 0.0001')
    x = n.pool("pool1", x, "MAX", 3, 2)
    x = n.relu("relu1", x)
    x = n.conv("conv2", x, 32, 5, p=2, weights='gaussian 0.01')
    x = n.relu("relu2", x)
    x = n.pool("pool2", x, "AVE", 3, 2)
    x = n.conv("conv3", x, 64, 5, p=2, weights='gaussian 0.01')
    x = n.relu("relu3", x)
    x = n.pool("pool3", x, "AVE", 3, 2)
    x = n.fc("ip1", x, 64, weights='gaussian 0.1')
    x = n.fc("ip2", x, 10, weights='gaussian 0.1')
    n.head(x)
    return n


def alexnet():
    # The 2012 paper's two-tower AlexNet as in Caffe's bvlc_alexnet: conv2, conv4, conv5 in two groups.
    n = Net("AlexNet", [32, 3, 227, 227], 1000)
    x = n.conv("conv1", "data", 96, 11, s=4, weights='gaussian 0.01')
    x = n.relu("relu1", x)
    x = n.lrn("norm1", x)
    x = n.pool("pool1", x, "MAX", 3, 2)
    x = n.conv("conv2", x, 256, 5, p=2, group=2, weights='gaussian 0.01')
    x = n.relu("relu2", x)
    x = n.lrn("norm2", x)
    x = n.pool("pool2", x, "MAX", 3, 2)
    x = n.conv("conv3", x, 384, 3, p=1, weights='gaussian 0.01')
    x = n.relu("relu3", x)
    x = n.conv("conv4", x, 384, 3, p=1, group=2, weights='gaussian 0.01')
    x = n.relu("relu4", x)
    x = n.conv("conv5", x, 256, 3, p=1, group=2, weights='gaussian 0.01')
    x = n.relu("relu5", x)
    x = n.pool("pool5", x, "MAX", 3, 2)
    x = n.fc("fc6", x, 4096)
    x = n.relu("relu6", x)
    x = n.dropout("drop6", x, 0.5)
    x = n.fc("fc7", x, 4096)
    x = n.relu("relu7", x)
    x = n.dropout("drop7", x, 0.5)
    x = n.fc("fc8", x, 1000, weights='gaussian 0.01')
    n.head(x)
    return n


def googlenet():
    n = Net("GoogleNet", [16, 3, 224, 224], 1000)
    x = n.conv("conv1/7x7_s2", "data", 64, 7, s=2, p=3, weights="xavier")
    x = n.relu("conv1/relu_7x7", x)
    x = n.pool("pool1/3x3_s2", x, "MAX", 3, 2)
    x = n.lrn("pool1/norm1", x)
    x = n.conv("conv2/3x3_reduce", x, 64, 1, weights="xavier")
    x = n.relu("conv2/relu_3x3_reduce", x)
    x = n.conv("conv2/3x3", x, 192, 3, p=1, weights="xavier")
    x = n.relu("conv2/relu_3x3", x)
    x = n.lrn("conv2/norm2", x)
    x = n.pool("pool2/3x3_s2", x, "MAX", 3, 2)

    def inception(name, x, c1, c3r, c3, c5r, c5, pp):
        p = f"inception_{name}"
        b1 = n.relu(f"{p}/relu_1x1", n.conv(f"{p}/1x1", x, c1, 1, weights="xavier"))
        b3 = n.relu(f"{p}/relu_3x3_reduce", n.conv(f"{p}/3x3_reduce", x, c3r, 1, weights="xavier"))
        b3 = n.relu(f"{p}/relu_3x3", n.conv(f"{p}/3x3", b3, c3, 3, p=1, weights="xavier"))
        b5 = n.relu(f"{p}/relu_5x5_reduce", n.conv(f"{p}/5x5_reduce", x, c5r, 1, weights="xavier"))
        b5 = n.relu(f"{p}/relu_5x5", n.conv(f"{p}/5x5", b5, c5, 5, p=2, weights="xavier"))
        bp = n.pool(f"{p}/pool", x, "MAX", 3, 1, p=1)
        bp = n.relu(f"{p}/relu_pool_proj", n.conv(f"{p}/pool_proj", bp, pp, 1, weights="xavier"))
        return n.concat(f"{p}/output", [b1, b3, b5, bp])

    x = inception("3a", x, 64, 96, 128, 16, 32, 32)
    x = inception("3b", x, 128, 128, 192, 32, 96, 64)
    x = n.pool("pool3/3x3_s2", x, "MAX", 3, 2)
    x = inception("4a", x, 192, 96, 208, 16, 48, 64)
    x = inception("4b", x, 160, 112, 224, 24, 64, 64)
    x = inception("4c", x, 128, 128, 256, 24, 64, 64)
    x = inception("4d", x, 112, 144, 288, 32, 64, 64)
    x = inception("4e", x, 256, 160, 320, 32, 128, 128)
    x = n.pool("pool4/3x3_s2", x, "MAX", 3, 2)
    x = inception("5a", x, 256, 160, 320, 32, 128, 128)
    x = inception("5b", x, 384, 192, 384, 48, 128, 128)
    x = n.pool("pool5/7x7_s1", x, "AVE", 7, 1)
    x = n.dropout("pool5/drop_7x7_s1", x, 0.4)
    x = n.fc("loss3/classifier", x, 1000, weights='xavier')
    n.head(x)
    return n


def resnet(title, blocks_per_stage):
    """The bottleneck ResNets (He et al. 2016) with Caffe's names: blocks a, b, c, ... or, in a stage of more than
    six (ResNet-101 and -152, as KaimingHe's deploy files name them), a, b1, b2, ..."""
    n = Net(title, [8, 3, 224, 224], 1000)
    x = n.conv("conv1", "data", 64, 7, s=2, p=3, bias=False)
    x = n.bn_scale("bn_conv1", "scale_conv1", x)
    x = n.relu("conv1_relu", x)
    x = n.pool("pool1", x, "MAX", 3, 2)

    def block(name, x, mid, out, stride, project):
        if project:
            sc = n.conv(f"res{name}_branch1", x, out, 1, s=stride, bias=False)
            sc = n.bn_scale(f"bn{name}_branch1", f"scale{name}_branch1", sc)
        else:
            sc = x
        y = n.conv(f"res{name}_branch2a", x, mid, 1, s=stride, bias=False)
        y = n.relu(f"res{name}_branch2a_relu", n.bn_scale(f"bn{name}_branch2a", f"scale{name}_branch2a", y))
        y = n.conv(f"res{name}_branch2b", y, mid, 3, p=1, bias=False)
        y = n.relu(f"res{name}_branch2b_relu", n.bn_scale(f"bn{name}_branch2b", f"scale{name}_branch2b", y))
        y = n.conv(f"res{name}_branch2c", y, out, 1, bias=False)
        y = n.bn_scale(f"bn{name}_branch2c", f"scale{name}_branch2c", y)
        z = n.eltwise_sum(f"res{name}", sc, y)
        return n.relu(f"res{name}_relu", z)

    widths = [(64, 256, 1), (128, 512, 2), (256, 1024, 2), (512, 2048, 2)]
    for stage, (blocks, (mid, out, stride)) in enumerate(zip(blocks_per_stage, widths), start=2):
        for b in range(blocks):
            letter = chr(ord('a') + b) if blocks <= 6 or b == 0 else f"b{b}"
            x = block(f"{stage}{letter}", x, mid, out, stride if b == 0 else 1, b == 0)
    x = n.pool("pool5", x, "AVE", 7, 1)
    x = n.fc("fc1000", x, 1000, weights='msra')
    n.head(x)
    return n


def unet():
    # Ronneberger et al. 2015 at CPU size: four resolutions (16 to 128 channels), two 3x3 conv + BatchNorm +
    # ReLU per level, max pooling down, nearest upsampling + 3x3 conv up, and the long skips that concatenate
    # each encoder level with the decoder level of the same resolution. Per-pixel labels, 4 classes.
    size, classes = 128, 4
    n = Net("U-Net", [4, 3, size, size], classes, label_shape=[4, size, size])

    def double_conv(name, x, c):
        for i in (1, 2):
            x = n.conv(f"{name}_conv{i}", x, c, 3, p=1, bias=False)
            x = n.relu(f"{name}_relu{i}", n.bn_scale(f"{name}_bn{i}", f"{name}_scale{i}", x))
        return x

    widths = [16, 32, 64]
    skips = []
    x = "data"
    for level, c in enumerate(widths, start=1):
        x = double_conv(f"enc{level}", x, c)
        skips.append(x)
        x = n.pool(f"pool{level}", x, "MAX", 2, 2)
    x = double_conv("bottom", x, 128)
    for level, c in reversed(list(enumerate(widths, start=1))):
        x = n.upsample(f"up{level}", x)
        x = n.conv(f"up{level}_conv", x, c, 3, p=1, bias=False)
        x = n.relu(f"up{level}_relu", n.bn_scale(f"up{level}_bn", f"up{level}_scale", x))
        x = n.concat(f"skip{level}", [skips[level - 1], x])
        x = double_conv(f"dec{level}", x, c)
    x = n.conv("score", x, classes, 1)
    n.head(x)
    return n


def fcn8s():
    # FCN-8s (Long, Shelhamer and Darrell 2015) after its published Caffe net: VGG-16 with 100 pixels of padding
    # on conv1_1 (so any input size works), fc6/fc7 as 7x7 and 1x1 convolutions, 21 PASCAL VOC classes scored at
    # strides 32, 16 and 8, fused by learned 2x Deconvolutions and Crops at FCN's offsets (5, 9, 31), a fixed
    # bilinear 8x upsampling, and an unnormalised per-pixel loss that ignores label 255. One departure: the
    # upsamplings are per class (group = 21) with Caffe's bilinear filler, where FCN's full 21 x 21 filters got
    # their bilinear diagonal from a Python net-surgery script. Input 500 x 500 as in FCN; tests shrink it.
    size, classes = 500, 21
    n = Net("FCN-8s", [1, 3, size, size], classes, label_shape=[1, 1, size, size])
    x = "data"
    pools = {}
    for stage, (width, convs) in enumerate([(64, 2), (128, 2), (256, 3), (512, 3), (512, 3)], start=1):
        for i in range(1, convs + 1):
            pad = 100 if (stage, i) == (1, 1) else 1
            x = n.relu(f"relu{stage}_{i}", n.conv(f"conv{stage}_{i}", x, width, 3, p=pad, weights="xavier"))
        x = pools[stage] = n.pool(f"pool{stage}", x, "MAX", 2, 2)
    x = n.dropout("drop6", n.relu("relu6", n.conv("fc6", x, 4096, 7, weights="xavier")), 0.5)
    x = n.dropout("drop7", n.relu("relu7", n.conv("fc7", x, 4096, 1, weights="xavier")), 0.5)
    x = n.conv("score_fr", x, classes, 1, weights="constant")
    x = n.deconv("upscore2", x, classes, 4, 2)
    pool4 = n.crop("score_pool4c", n.conv("score_pool4", pools[4], classes, 1, weights="constant"), x, 5)
    x = n.deconv("upscore_pool4", n.eltwise_sum("fuse_pool4", x, pool4), classes, 4, 2)
    pool3 = n.crop("score_pool3c", n.conv("score_pool3", pools[3], classes, 1, weights="constant"), x, 9)
    x = n.deconv("upscore8", n.eltwise_sum("fuse_pool3", x, pool3), classes, 16, 8, learn=False)
    x = n.crop("score", x, "data", 31)
    n.head(x, loss_param="ignore_label: 255 normalize: false")
    return n


if __name__ == "__main__":
    for name, build in [("lenet", lenet), ("cifar10_quick", cifar10_quick), ("alexnet", alexnet),
                        ("googlenet", googlenet), ("resnet50", lambda: resnet("ResNet-50", [3, 4, 6, 3])),
                        ("resnet152", lambda: resnet("ResNet-152", [3, 8, 36, 3])), ("unet", unet),
                        ("fcn8s", fcn8s)]:
        build().write(f"models/{name}/deploy.prototxt")
        print(f"wrote models/{name}/deploy.prototxt")
