"""Coordinate maps between the tops of a NetSpec, with pycaffe's coord_map names, for fully convolutional nets:
where a pixel of one top lies in another's coordinates, and a Crop layer that aligns one top with another.

A map is (axis, a, b): along each spatial axis after `axis` (the last non-spatial one), the coordinate y in the
later top is a * x + b for the coordinate x in the earlier. A convolution or pooling of stride s, extent k
(dilated) and pad p maps x to (x + p - (k - 1) / 2) / s: the top's pixel centres on its window's centre.
"""

from collections import deque

import numpy as np

from .net_spec import layers as L

# Layers whose top has its bottom's coordinates.
PASS_THROUGH_LAYERS = {'AbsVal', 'BatchNorm', 'Bias', 'BNLL', 'Clip', 'Dropout', 'Eltwise', 'ELU', 'Exp', 'Log',
                       'LRN', 'MVN', 'Power', 'PReLU', 'ReLU', 'Scale', 'Sigmoid', 'Softmax', 'Split', 'Swish',
                       'TanH', 'Threshold'}


class AxisMismatchException(Exception):
    """Two maps along a path disagree on which axes are spatial."""


class UndefinedMapException(Exception):
    """A layer's tops have no coordinate map to its bottoms (an InnerProduct, say)."""


def _param(fn, name, message, default=None):
    """A parameter of a NetSpec layer, given as a keyword (kernel_size=3) or inside its parameter message
    (convolution_param=dict(kernel_size=3))."""
    if name in fn.params:
        return fn.params[name]
    return dict(fn.params.get(message, {})).get(name, default)


def conv_params(fn):
    """(axis, stride, extent, pad) of a Convolution, Deconvolution, Pooling or Im2col layer, each per spatial
    axis; extent is the dilated kernel's, (kernel_size - 1) * dilation + 1."""
    message = 'pooling_param' if fn.type_name == 'Pooling' else 'convolution_param'
    for name in ('kernel_h', 'kernel_w', 'stride_h', 'stride_w', 'pad_h', 'pad_w'):
        if _param(fn, name, message) is not None:
            raise UndefinedMapException('%s: coord_map reads kernel_size, stride and pad, not %s' %
                                        (fn.type_name, name))
    if _param(fn, 'global_pooling', message):
        raise UndefinedMapException('Pooling: a global pooling has no coordinate map')
    axis = _param(fn, 'axis', message, 1)
    kernel = np.array(_param(fn, 'kernel_size', message, 1), ndmin=1)
    dilation = np.array(_param(fn, 'dilation', message, 1), ndmin=1)
    stride = np.array(_param(fn, 'stride', message, 1), ndmin=1)
    pad = np.array(_param(fn, 'pad', message, 0), ndmin=1)
    return axis, stride, (kernel - 1) * dilation + 1, pad


def crop_params(fn):
    """(axis, offset) of a Crop layer."""
    return _param(fn, 'axis', 'crop_param', 2), np.array(_param(fn, 'offset', 'crop_param', 0), ndmin=1)


def coord_map(fn):
    """The map from a layer's (first) bottom to its tops."""
    if fn.type_name in ('Convolution', 'Pooling', 'Im2col'):
        axis, stride, extent, pad = conv_params(fn)
        return axis, 1.0 / stride, (pad - (extent - 1) / 2.0) / stride
    if fn.type_name == 'Deconvolution':
        axis, stride, extent, pad = conv_params(fn)
        return axis, stride, (extent - 1) / 2.0 - pad
    if fn.type_name in PASS_THROUGH_LAYERS:
        return None, 1, 0
    if fn.type_name == 'Crop':
        axis, offset = crop_params(fn)
        return axis - 1, 1, -offset
    raise UndefinedMapException('%s has no coordinate map' % fn.type_name)


def compose(base_map, next_map):
    """The map of base_map followed by next_map."""
    ax1, a1, b1 = base_map
    ax2, a2, b2 = next_map
    if ax1 is not None and ax2 is not None and ax1 != ax2:
        raise AxisMismatchException('maps over spatial axes after %d and after %d do not compose' % (ax1, ax2))
    return (ax2 if ax1 is None else ax1), a1 * a2, a2 * b1 + b2


def inverse(coord_map):
    ax, a, b = coord_map
    return ax, 1.0 / a, -b / a


def _maps_from_ancestors(top):
    """{ancestor top: the map from it to `top`} over every path of layers that have maps, nearest first. A Crop's
    second bottom only gives the size, so its coordinates do not come from there."""
    maps = {top: (None, 1, 0)}
    queue = deque([top])
    while queue:
        t = queue.popleft()
        try:
            step = coord_map(t.fn)
        except UndefinedMapException:
            continue
        bottoms = t.fn.inputs[:1] if t.fn.type_name == 'Crop' else t.fn.inputs
        for bottom in bottoms:
            if bottom not in maps:
                maps[bottom] = compose(step, maps[t])
                queue.append(bottom)
    return maps


def coord_map_from_to(top_from, top_to):
    """The map from top_from's coordinates to top_to's, through their nearest common ancestor."""
    from_maps = _maps_from_ancestors(top_from)
    for ancestor, to_map in _maps_from_ancestors(top_to).items():
        if ancestor in from_maps:
            return compose(inverse(from_maps[ancestor]), to_map)
    raise UndefinedMapException('the two tops have no common ancestor through layers with coordinate maps')


def crop(top_from, top_to):
    """A Crop layer that crops top_from to top_to's size and coordinates (pycaffe's coord_map.crop)."""
    ax, a, b = coord_map_from_to(top_from, top_to)
    a, b = np.broadcast_to(a, np.shape(b)), np.asarray(b, dtype=float)
    if not (a == 1).all():
        raise ValueError('crop: the tops differ in scale (a = %s)' % (a,))
    if not (b <= 0).all():
        raise ValueError('crop: top_to starts outside top_from (offset %s)' % (-b,))
    if not (np.round(b) == b).all():
        raise ValueError('crop: the offset %s is not a whole number of pixels' % (-b,))
    return L.Crop(top_from, top_to, crop_param=dict(axis=ax + 1, offset=[int(v) for v in -np.round(b)]))
