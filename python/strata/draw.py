"""Nets as pictures, with pycaffe's draw names: the same Graphviz drawing as `strata draw` (layers as boxes,
blobs as ellipses), from a NetParameter (net_spec.Message) or prototxt text."""

import os
import subprocess

from ._strata import _net_to_dot, Error


def _text(caffe_net):
    return caffe_net if isinstance(caffe_net, str) else str(caffe_net)


def draw_net(caffe_net, rankdir='LR', ext='png', phase=None, display_lrm=False):
    """The picture's bytes in Graphviz format `ext` (png, svg, pdf, or dot for the graph's text). phase
    (strata.TRAIN or TEST) keeps that phase's layers only; None keeps all. display_lrm is accepted for
    pycaffe's signature: the boxes always show what shapes a layer."""
    dot = _net_to_dot(_text(caffe_net), rankdir, -1 if phase is None else int(phase))
    if ext == 'dot':
        return dot.encode()
    try:
        result = subprocess.run(['dot', '-T' + ext], input=dot.encode(), capture_output=True, check=False)
    except FileNotFoundError:
        raise Error("draw_net: Graphviz's dot is not installed (the graphviz package)")
    if result.returncode != 0:
        raise Error('draw_net: dot -T%s failed: %s' % (ext, result.stderr.decode(errors='replace').strip()))
    return result.stdout


def draw_net_to_file(caffe_net, filename, rankdir='LR', phase=None, display_lrm=False):
    """Draws the net into filename, in the format its extension names (.png, .svg, .pdf, .dot)."""
    ext = os.path.splitext(filename)[1][1:] or 'png'
    with open(filename, 'wb') as f:
        f.write(draw_net(caffe_net, rankdir, ext, phase, display_lrm))
