#!/usr/bin/python3
"""Writes the inputs and nets of the Caffe side-by-side comparison (side_by_side.sh runs it).

    /usr/bin/python3 make_cases.py OUT_DIR

OUT_DIR gets:
  in.h5, in.txt        the layer cases' inputs (HDF5Data reads the .txt list), float32, fixed seed
  H.h5, H.txt          InfogainLoss's H matrix (a third bottom, from its own HDF5Data layer)
  seq.h5, static.h5, hidden.h5 (and .txt)  the recurrent cases' sequences, static inputs and initial states
  train.h5, train.txt  the solver cases' data
  cases/NAME.prototxt  one tiny net per layer case
  cases.list           NAME|PHASE|BACKWARD|CAFFE_NET|CAFFE_ARGS|STRATA_ARGS   (CAFFE_NET: the net caffe_dump runs,
                       usually the same file; CAFFE_ARGS, STRATA_ARGS: extra caffe_dump / strata_dump flags)
  solvers/NAME.prototxt and solvers/net.prototxt, solvers.list (one NAME a line)

Every input is float32 (Strata's HDF5Data refuses integer datasets; Caffe's converts them). Weights come from
Caffe's fillers (caffe_dump --write_weights), so the values below only shape the data.
Needs Debian's python3-numpy and python3-h5py (hence /usr/bin/python3).
"""
import os
import sys

import h5py
import numpy as np

N = 4  # rows per batch in the layer cases


def write_h5(out, name, datasets):
    path = os.path.join(out, name + ".h5")
    with h5py.File(path, "w") as f:
        for key, value in datasets.items():
            f.create_dataset(key, data=np.asarray(value, dtype=np.float32))
    with open(os.path.join(out, name + ".txt"), "w") as f:
        f.write(path + "\n")
    return os.path.join(out, name + ".txt")


def make_inputs(out):
    rng = np.random.RandomState(20261125)
    x = rng.randn(N, 3, 4, 5)
    sig = rng.uniform(0, 1, (N, 3))
    sig_ignore = sig.copy()
    sig_ignore[0, 1] = -1  # ignored targets (ignore_label: -1)
    sig_ignore[2, 0] = -1
    inputs = {
        "x": x,                                        # general input, N(0, 1)
        "pos": rng.uniform(0.2, 2.0, (N, 3, 4, 5)),     # positive input (Log, Power, STOCHASTIC pooling)
        "ref": rng.randn(N, 3, 2, 3),                  # Crop's reference shape
        "t3": rng.randn(N, 3),                         # the head's Euclidean target
        "sel": [1, 0, 1, 1],                           # Filter's selector
        "lab3": [2, 0, 1, 2],                          # labels in {0, 1, 2}
        "idx": [[3, 0], [6, 2], [1, 1], [5, 4]],       # Embed's indices in [0, 7)
        "a": rng.randn(N, 6),                          # loss cases' features
        "b": rng.randn(N, 6),
        "sim": [1, 0, 0, 1],                           # ContrastiveLoss's similarity
        "sig": sig,                                    # SigmoidCrossEntropyLoss's targets in [0, 1]
        "sig_ignore": sig_ignore,
    }
    write_h5(out, "in", inputs)
    # InfogainLoss's H: a (1, 3, 3) blob, non-symmetric, positive.
    write_h5(out, "H", {"H": [[[1.0, 0.2, 0.1], [0.3, 0.8, 0.25], [0.05, 0.4, 1.2]]]})
    # Recurrent cases: T = 3 time steps (HDF5Data's rows) of N = 2 streams; the second stream restarts at t = 2.
    # cont_e (the expose_hidden cases) continues from the given initial states at t = 0.
    write_h5(out, "seq", {"xs": rng.randn(3, 2, 6), "cont": [[0, 0], [1, 1], [1, 0]], "ts": rng.randn(3, 3),
                          "cont_e": [[1, 1], [1, 0], [1, 1]]})
    write_h5(out, "static", {"xst": rng.randn(2, 4)})                  # x_static: one row per stream
    write_h5(out, "hidden", {"h0": rng.randn(1, 2, 5), "c0": rng.randn(1, 2, 5), "tu": rng.randn(1, 3),
                             "cprev": rng.randn(1, 2, 3), "xu": rng.randn(1, 2, 12), "cont1": [[1, 0]]})
    rng = np.random.RandomState(1701)
    train_x = rng.randn(8, 6)
    train_lab = np.argmax(train_x[:, :3] + 0.5 * train_x[:, 3:], axis=1)
    write_h5(out, "train", {"x": train_x, "lab": train_lab})


class Net:
    """A prototxt under construction: a name, force_backward, layers as text."""

    def __init__(self, name, source, tops, force_backward=False):
        self.name = name
        self.force_backward = force_backward
        self.layers = []
        self.add("data", "HDF5Data", [], tops,
                 'hdf5_data_param { source: "%s" batch_size: %d }' % (source, N))

    def add(self, name, type_, bottoms, tops, params="", extra=""):
        text = '  name: "%s"\n  type: "%s"\n' % (name, type_)
        text += "".join('  bottom: "%s"\n' % b for b in bottoms)
        text += "".join('  top: "%s"\n' % t for t in tops)
        if params:
            text += "  " + params + "\n"
        if extra:
            text += "  " + extra + "\n"
        self.layers.append("layer {\n" + text + "}\n")
        return tops[0] if tops else None

    def text(self):
        head = 'name: "%s"\n' % self.name
        if self.force_backward:
            head += "force_backward: true\n"
        return head + "".join(self.layers)


GAUSS = 'type: "gaussian" std: %g'
UNIFORM = 'type: "uniform" min: %g max: %g'


def pre_scale(net, bottom, bias=True, name="pre"):
    """A learnable per-channel Scale before the layer under test, so that its bottom gets a gradient."""
    params = "scale_param { axis: 1 filler { %s }" % (UNIFORM % (0.5, 1.5))
    if bias:
        params += " bias_term: true bias_filler { %s }" % (UNIFORM % (-0.2, 0.2))
    params += " }"
    return net.add(name, "Scale", [bottom], [name], params)


def ip(num_output, std=0.3):
    return "inner_product_param { num_output: %d weight_filler { %s } bias_filler { %s } }" % (
        num_output, GAUSS % std, UNIFORM % (-0.1, 0.1))


def head(net, bottom, target="t3"):
    """InnerProduct to 3 outputs, then EuclideanLoss against the target: non-trivial gradients for the top."""
    net.add("head", "InnerProduct", [bottom], ["head"], ip(3, 0.2))
    net.add("loss", "EuclideanLoss", ["head", target], ["loss"])


def make_cases(out, inputs_txt, h_txt):
    def d(name):
        return os.path.join(out, name)

    cases = []  # (name, phase, backward, caffe_net_name, caffe_args, strata_args)
    os.makedirs(os.path.join(out, "cases"), exist_ok=True)

    def save(net, phase="TRAIN", backward=True, caffe_args=""):
        with open(os.path.join(out, "cases", net.name + ".prototxt"), "w") as f:
            f.write(net.text())
        cases.append((net.name, phase, backward, net.name, caffe_args, ""))

    def neuron(name, type_, params="", source="x", bias=True, tops=None):
        net = Net(name, inputs_txt, tops or [source, "t3"])
        bottom = pre_scale(net, source, bias)
        net.add("layer", type_, [bottom], ["y"], params)
        head(net, "y")
        save(net)

    # Neurons.
    neuron("AbsVal", "AbsVal")
    neuron("BNLL", "BNLL")
    neuron("Clip", "Clip", "clip_param { min: -0.5 max: 0.7 }")
    neuron("ELU", "ELU", "elu_param { alpha: 0.7 }")
    neuron("Exp", "Exp", "exp_param { base: 2 scale: 0.5 shift: 0.1 }")
    neuron("Exp_e", "Exp", "exp_param { scale: -0.8 shift: 0.3 }")
    neuron("Log", "Log", "log_param { base: 10 scale: 1.5 shift: 0.2 }", "pos", False)
    neuron("Log_e", "Log", "log_param { scale: 0.7 }", "pos", False)
    neuron("Power", "Power", "power_param { power: 1.7 scale: 0.8 shift: 0.3 }", "pos", False)
    neuron("Power_sq", "Power", "power_param { power: 2 scale: -0.6 shift: 0.4 }")
    neuron("PReLU", "PReLU", "prelu_param { filler { %s } }" % (UNIFORM % (-0.5, 0.5)))
    neuron("PReLU_shared", "PReLU", "prelu_param { channel_shared: true filler { %s } }" % (UNIFORM % (0.1, 0.4)))
    neuron("Swish", "Swish", "swish_param { beta: 1.3 }")

    # Threshold: forward only (Caffe's backward is NOT_IMPLEMENTED; Strata's writes zeros, docs/caffe.md), so no
    # Scale before it: nothing asks Threshold for a gradient.
    net = Net("Threshold", inputs_txt, ["x", "t3"])
    net.add("layer", "Threshold", ["x"], ["y"], "threshold_param { threshold: 0.2 }")
    head(net, "y")
    save(net)

    # ArgMax: forward only (no gradient), several configurations.
    net = Net("ArgMax", inputs_txt, ["x"])
    net.add("argmax_top2_val", "ArgMax", ["x"], ["am1"], "argmax_param { top_k: 2 out_max_val: true }")
    net.add("argmax_top3", "ArgMax", ["x"], ["am2"], "argmax_param { top_k: 3 }")
    net.add("argmax_axis1", "ArgMax", ["x"], ["am3"], "argmax_param { axis: 1 }")
    net.add("argmax_axis3_val", "ArgMax", ["x"], ["am4"], "argmax_param { axis: 3 top_k: 2 out_max_val: true }")
    save(net)

    # Shape and reduction layers.
    neuron("Tile", "Tile", "tile_param { axis: 1 tiles: 3 }")
    neuron("Tile_axis3", "Tile", "tile_param { axis: -1 tiles: 2 }")
    for op in ["SUM", "ASUM", "SUMSQ", "MEAN"]:
        neuron("Reduction_" + op, "Reduction", "reduction_param { operation: %s axis: 2 coeff: 0.7 }" % op)
    # Reducing every axis gives a scalar: it is the loss itself.
    net = Net("Reduction_all_SUMSQ", inputs_txt, ["x"])
    pre = pre_scale(net, "x")
    net.add("layer", "Reduction", [pre], ["y"], "reduction_param { operation: SUMSQ coeff: -0.3 }", "loss_weight: 1")
    save(net)
    neuron("MVN", "MVN")
    neuron("MVN_across_novar", "MVN", "mvn_param { across_channels: true normalize_variance: false }")
    neuron("MVN_across", "MVN", "mvn_param { across_channels: true }")
    neuron("Im2col", "Im2col", "convolution_param { kernel_size: 3 pad: 1 stride: 1 }")
    neuron("Im2col_strided", "Im2col", "convolution_param { kernel_h: 2 kernel_w: 3 stride: 2 pad_w: 1 }")
    neuron("SPP_MAX", "SPP", "spp_param { pyramid_height: 2 pool: MAX }")
    neuron("SPP_AVE", "SPP", "spp_param { pyramid_height: 2 pool: AVE }")
    conv_fill = "weight_filler { %s } bias_filler { %s }" % (GAUSS % 0.3, UNIFORM % (-0.1, 0.1))
    neuron("Deconvolution", "Deconvolution",
           "convolution_param { num_output: 2 kernel_size: 3 stride: 2 pad: 1 %s }" % conv_fill)
    neuron("Deconvolution_group", "Deconvolution",
           "convolution_param { num_output: 6 group: 3 kernel_size: 2 dilation: 2 %s }" % conv_fill)

    # Filter: two data bottoms filtered by one selector, so that the target follows the features.
    net = Net("Filter", inputs_txt, ["x", "t3", "sel"])
    pre = pre_scale(net, "x")
    net.add("layer", "Filter", [pre, "t3", "sel"], ["y", "t3f"])
    head(net, "y", "t3f")
    save(net)

    # Parameter: a learnable top of its own.
    net = Net("Parameter", inputs_txt, ["t3"])
    net.add("layer", "Parameter", [], ["y"], "parameter_param { shape { dim: 4 dim: 3 dim: 2 dim: 2 } }")
    head(net, "y")
    # Caffe's Parameter layer has no filler (its blob starts at zero): caffe_dump fills it from N(0, 0.5^2).
    save(net, caffe_args="--fill_gaussian=layer")

    # Crop to a reference blob's shape (axis 2, offsets per axis).
    net = Net("Crop", inputs_txt, ["x", "ref", "t3"])
    pre = pre_scale(net, "x")
    net.add("layer", "Crop", [pre, "ref"], ["y"], "crop_param { axis: 2 offset: 1 offset: 2 }")
    head(net, "y")
    save(net)
    net = Net("Crop_axis1", inputs_txt, ["x", "ref", "t3"])
    pre = pre_scale(net, "x")
    net.add("layer", "Crop", [pre, "ref"], ["y"], "crop_param { axis: 1 offset: 0 offset: 1 offset: 1 }")
    head(net, "y")
    save(net)

    # Embed: indices in, no gradient to them.
    net = Net("Embed", inputs_txt, ["idx", "t3"])
    net.add("layer", "Embed", ["idx"], ["y"], "embed_param { num_output: 5 input_dim: 7 bias_term: true "
            "weight_filler { %s } bias_filler { %s } }" % (GAUSS % 0.5, UNIFORM % (-0.3, 0.3)))
    head(net, "y")
    save(net)

    # STOCHASTIC pooling in TEST phase (the probability-weighted mean sum(x^2)/sum(x) per window). Caffe's CPU
    # pooling has no STOCHASTIC (NOT_IMPLEMENTED), so Caffe computes the same quantity from AVE pooling:
    # AVE(x^2) * AVE(x)^-1 (without padding both divide by the same window size, which cancels).
    for name, pool in [("Pooling_STOCHASTIC_TEST", "kernel_size: 2 stride: 2"),
                       ("Pooling_STOCHASTIC_TEST_k3s2", "kernel_size: 3 stride: 2")]:
        net = Net(name, inputs_txt, ["pos"])
        net.add("pool", "Pooling", ["pos"], ["pool"], "pooling_param { pool: STOCHASTIC %s }" % pool)
        with open(os.path.join(out, "cases", name + ".prototxt"), "w") as f:
            f.write(net.text())
        ref = Net(name + "_caffe", inputs_txt, ["pos"])
        ref.add("sq", "Power", ["pos"], ["sq"], "power_param { power: 2 }")
        ref.add("avg_sq", "Pooling", ["sq"], ["avg_sq"], "pooling_param { pool: AVE %s }" % pool)
        ref.add("avg", "Pooling", ["pos"], ["avg"], "pooling_param { pool: AVE %s }" % pool)
        ref.add("inv", "Power", ["avg"], ["inv"], "power_param { power: -1 }")
        ref.add("stoch", "Eltwise", ["avg_sq", "inv"], ["stoch"], "eltwise_param { operation: PROD }")
        with open(os.path.join(out, "cases", name + "_caffe.prototxt"), "w") as f:
            f.write(ref.text())
        cases.append((name, "TEST", False, name + "_caffe", "", "--only=blob/pool --map=blob/pool=blob/stoch"))

    # Losses: features -> InnerProduct ("pre", learnable) -> the loss, so that the loss's bottom gets a gradient.
    def loss_net(name, ip_out=3):
        net = Net(name, inputs_txt, ["a", "b", "t3", "lab3", "sim", "sig", "sig_ignore"])
        net.add("pre", "InnerProduct", ["a"], ["logits"], ip(ip_out))
        return net

    net = loss_net("EuclideanLoss")
    net.add("pre_b", "InnerProduct", ["b"], ["logits_b"], ip(3))
    net.add("loss", "EuclideanLoss", ["logits", "logits_b"], ["loss"], extra="loss_weight: 2")
    save(net)
    net = loss_net("SigmoidCrossEntropyLoss")
    net.add("loss", "SigmoidCrossEntropyLoss", ["logits", "sig"], ["loss"])
    save(net)
    net = loss_net("SigmoidCrossEntropyLoss_ignore")
    net.add("loss", "SigmoidCrossEntropyLoss", ["logits", "sig_ignore"], ["loss"],
            "loss_param { ignore_label: -1 }")
    save(net)
    net = loss_net("SigmoidCrossEntropyLoss_batch")
    net.add("loss", "SigmoidCrossEntropyLoss", ["logits", "sig"], ["loss"], "loss_param { normalization: BATCH_SIZE }")
    save(net)
    for name, params in [("ContrastiveLoss", "contrastive_loss_param { margin: 3 }"),
                         ("ContrastiveLoss_legacy", "contrastive_loss_param { margin: 8 legacy_version: true }")]:
        net = loss_net(name, 5)
        net.add("pre_b", "InnerProduct", ["b"], ["logits_b"], ip(5))
        net.add("loss", "ContrastiveLoss", ["logits", "logits_b", "sim"], ["loss"], params)
        save(net)
    for norm in ["L1", "L2"]:
        net = loss_net("HingeLoss_" + norm)
        net.add("loss", "HingeLoss", ["logits", "lab3"], ["loss"], "hinge_loss_param { norm: %s }" % norm)
        save(net)
    net = loss_net("InfogainLoss")
    net.add("hdata", "HDF5Data", [], ["H"], 'hdf5_data_param { source: "%s" batch_size: 1 }' % h_txt)
    net.add("loss", "InfogainLoss", ["logits", "lab3", "H"], ["loss"])
    save(net)
    net = loss_net("MultinomialLogisticLoss")
    net.add("prob", "Softmax", ["logits"], ["prob"])
    net.add("loss", "MultinomialLogisticLoss", ["prob", "lab3"], ["loss"])
    save(net)

    # Recurrent layers: x -> InnerProduct over axis 2 (learnable, so x's path gets a gradient) -> RNN / LSTM.
    def seq_net(name, cont="cont"):
        net = Net(name, d("seq.txt"), ["xs", cont, "ts"])
        net.layers[0] = net.layers[0].replace("batch_size: %d" % N, "batch_size: 3")
        ip2 = ip(4).replace("num_output: 4", "num_output: 4 axis: 2")
        net.add("pre", "InnerProduct", ["xs"], ["pre"], ip2)
        return net

    def extra_data(net, name, source, tops, batch):
        net.add(name, "HDF5Data", [], tops, 'hdf5_data_param { source: "%s" batch_size: %d }' % (source, batch))

    rec = "recurrent_param { num_output: 5 weight_filler { %s } bias_filler { %s }%s }"
    for type_ in ["RNN", "LSTM"]:
        # _expose: initial states given (and continued from at t = 0), a loss on the final state too;
        # _expose_noloss_T: the same without the loss on the final state.
        for variant in ["", "_static", "_expose", "_expose_noloss_T"]:
            expose = variant.startswith("_expose")
            net = seq_net(type_ + variant, "cont_e" if expose else "cont")
            bottoms = ["pre", "cont_e" if expose else "cont"]
            tops = ["y"]
            extra = ""
            if variant == "_static":
                extra_data(net, "sdata", d("static.txt"), ["xst"], 2)
                net.add("pre_s", "InnerProduct", ["xst"], ["pre_s"], ip(3))
                bottoms.append("pre_s")
            if expose:
                states = ["h0", "c0"] if type_ == "LSTM" else ["h0"]
                extra_data(net, "hdata", d("hidden.txt"), states, 1)
                for st in states:  # a learnable scale per unit, so that the initial states get a gradient
                    net.add("pre_" + st, "Scale", [st], ["pre_" + st],
                            "scale_param { axis: 2 filler { %s } }" % (UNIFORM % (0.5, 1.5)))
                    bottoms.append("pre_" + st)
                    tops.append(st + "_T")
                extra = " expose_hidden: true"
            net.add("layer", type_, bottoms, tops, rec % (UNIFORM % (-0.5, 0.5), UNIFORM % (-0.3, 0.3), extra))
            head(net, "y", "ts")
            if variant == "_expose":  # a loss on the last state too (the last hidden state stays an output)
                net.add("loss_T", "Reduction", [tops[-1]], ["loss_T"], "reduction_param { operation: SUMSQ }",
                        "loss_weight: 0.5")
            save(net)
    net = Net("LSTMUnit", d("hidden.txt"), ["cprev", "xu", "cont1", "tu"])
    net.layers[0] = net.layers[0].replace("batch_size: %d" % N, "batch_size: 1")
    net.add("pre_c", "Scale", ["cprev"], ["pre_c"], "scale_param { axis: 2 filler { %s } }" % (UNIFORM % (0.5, 1.5)))
    net.add("pre_x", "Scale", ["xu"], ["pre_x"], "scale_param { axis: 2 filler { %s } }" % (UNIFORM % (0.5, 1.5)))
    net.add("layer", "LSTMUnit", ["pre_c", "pre_x", "cont1"], ["c", "h"])
    head(net, "h", "tu")
    net.add("loss_c", "Reduction", ["c"], ["loss_c"], "reduction_param { operation: SUMSQ }", "loss_weight: 0.5")
    save(net)

    with open(os.path.join(out, "cases.list"), "w") as f:
        for name, phase, backward, caffe_net, caffe_args, strata_args in cases:
            f.write("%s|%s|%s|%s|%s|%s\n" % (name, phase, "true" if backward else "false", caffe_net, caffe_args,
                                              strata_args))


SOLVER_NET = """name: "solver_net"
layer { name: "data" type: "HDF5Data" top: "x" top: "lab" hdf5_data_param { source: "%s" batch_size: 4 } }
layer { name: "ip1" type: "InnerProduct" bottom: "x" top: "h"
  param { lr_mult: 1 decay_mult: 1 } param { lr_mult: 2 decay_mult: 0 }
  inner_product_param { num_output: 5 weight_filler { type: "gaussian" std: 0.5 }
                        bias_filler { type: "uniform" min: -0.2 max: 0.2 } } }
layer { name: "act" type: "TanH" bottom: "h" top: "h" }
layer { name: "ip2" type: "InnerProduct" bottom: "h" top: "logits"
  param { lr_mult: 1 decay_mult: 1 } param { lr_mult: 2 decay_mult: 0 }
  inner_product_param { num_output: 3 weight_filler { type: "gaussian" std: 0.5 }
                        bias_filler { type: "uniform" min: -0.2 max: 0.2 } } }
layer { name: "loss" type: "SoftmaxWithLoss" bottom: "logits" bottom: "lab" top: "loss" }
"""

# name -> solver fields (besides net, max_iter, snapshot and mode). weight_decay everywhere, momentum where the
# solver has one (AdaGrad and RMSProp refuse it in Caffe; AdaDelta's momentum is its decay).
SOLVERS = {
    "SGD": 'type: "SGD" base_lr: 0.1 lr_policy: "fixed" momentum: 0.9 weight_decay: 0.01',
    "SGD_step": 'type: "SGD" base_lr: 0.1 lr_policy: "step" gamma: 0.5 stepsize: 3 momentum: 0.9 '
                'weight_decay: 0.01',
    "SGD_L1_clip": 'type: "SGD" base_lr: 0.1 lr_policy: "inv" gamma: 0.1 power: 0.75 momentum: 0.8 '
                   'weight_decay: 0.02 regularization_type: "L1" clip_gradients: 0.5',
    "SGD_iter_size2": 'type: "SGD" base_lr: 0.1 lr_policy: "fixed" momentum: 0.9 weight_decay: 0.01 iter_size: 2',
    "Nesterov": 'type: "Nesterov" base_lr: 0.1 lr_policy: "fixed" momentum: 0.9 weight_decay: 0.01',
    "AdaGrad": 'type: "AdaGrad" base_lr: 0.1 lr_policy: "fixed" weight_decay: 0.01 delta: 1e-6',
    "AdaGrad_step": 'type: "AdaGrad" base_lr: 0.1 lr_policy: "step" gamma: 0.5 stepsize: 4 weight_decay: 0.01',
    "RMSProp": 'type: "RMSProp" base_lr: 0.01 lr_policy: "fixed" rms_decay: 0.95 weight_decay: 0.01 delta: 1e-6',
    "RMSProp_step": 'type: "RMSProp" base_lr: 0.01 lr_policy: "step" gamma: 0.5 stepsize: 4 rms_decay: 0.9 '
                    'weight_decay: 0.01',
    "AdaDelta": 'type: "AdaDelta" base_lr: 1.0 lr_policy: "fixed" momentum: 0.95 weight_decay: 0.01 delta: 1e-6',
    "AdaDelta_step": 'type: "AdaDelta" base_lr: 1.0 lr_policy: "step" gamma: 0.5 stepsize: 4 momentum: 0.9 '
                     'weight_decay: 0.01 delta: 1e-6',
    "Adam": 'type: "Adam" base_lr: 0.01 lr_policy: "fixed" momentum: 0.9 momentum2: 0.999 delta: 1e-8 '
            'weight_decay: 0.01',
    "Adam_step": 'type: "Adam" base_lr: 0.01 lr_policy: "step" gamma: 0.5 stepsize: 4 momentum: 0.9 '
                 'momentum2: 0.999 delta: 1e-8 weight_decay: 0.01',
}
ITERATIONS = 10


def make_solvers(out, train_txt):
    d = os.path.join(out, "solvers")
    os.makedirs(d, exist_ok=True)
    net_file = os.path.join(d, "net.prototxt")
    with open(net_file, "w") as f:
        f.write(SOLVER_NET % train_txt)
    for name, fields in SOLVERS.items():
        for who in ["caffe", "strata"]:
            with open(os.path.join(d, "%s_%s.prototxt" % (name, who)), "w") as f:
                f.write('net: "%s"\n%s\nmax_iter: %d\ndisplay: 1\nsnapshot_after_train: true\n'
                        'snapshot_prefix: "%s"\nsolver_mode: CPU\nrandom_seed: 1701\n'
                        % (net_file, fields, ITERATIONS, os.path.join(d, "%s_%s" % (name, who))))
    with open(os.path.join(out, "solvers.list"), "w") as f:
        f.write("".join(name + "\n" for name in SOLVERS))


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    out = os.path.abspath(sys.argv[1])
    os.makedirs(out, exist_ok=True)
    make_inputs(out)
    make_cases(out, os.path.join(out, "in.txt"), os.path.join(out, "H.txt"))
    make_solvers(out, os.path.join(out, "train.txt"))


if __name__ == "__main__":
    main()
