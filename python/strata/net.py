"""pycaffe's conveniences over strata.Net: ordered views of its blobs, parameters and layers, and forward and
backward with NumPy arrays by blob name. They only name and loop: the passes are Net's own
(ForwardFromTo, BackwardFromTo)."""

from collections import OrderedDict

import numpy as np

from ._strata import Net


def _blobs(self):
    """Every blob by name, in the order the net made them."""
    return OrderedDict(zip(self._blob_names, self._blobs))


def _layer_dict(self):
    return OrderedDict(zip(self._layer_names, self.layers))


def _params(self):
    """Each layer's parameter blobs (weights, bias...) by layer name, in layer order; layers without any left
    out."""
    return OrderedDict((name, layer.blobs) for name, layer in zip(self._layer_names, self.layers)
                       if len(layer.blobs) > 0)


def _top_names(self):
    return OrderedDict((name, self._top_names(i)) for i, name in enumerate(self._layer_names))


def _bottom_names(self):
    return OrderedDict((name, self._bottom_names(i)) for i, name in enumerate(self._layer_names))


def _layer_index(self, name):
    names = list(self._layer_names)
    if name not in names:
        raise KeyError("net '%s' has no layer '%s'" % (self.name, name))
    return names.index(name)


def _copy_in(self, arrays, names, field, what, mismatch):
    """Copies the keyword arrays into the .data (or .diff) of the blobs of those names, which must be `names`
    exactly, each array with the blob's batch size."""
    if not arrays:
        return
    if set(arrays) != set(names):
        raise Error(mismatch % (sorted(arrays), sorted(names)))
    net_blobs = self.blobs
    for name, array in arrays.items():
        blob = net_blobs[name]
        if np.shape(array)[:1] != blob.shape[:1]:
            raise Error((what + " has %s items, the net's batch is %d") % (name, np.shape(array)[:1] or 'no',
                                                                        blob.shape[0]))
        getattr(blob, field)[...] = array


def _forward(self, blobs=None, start=None, end=None, **kwargs):
    """Runs layers start..end (names; the whole net by default) after copying the keyword arrays into the net's
    inputs of those names. Returns {blob name: its .data} for the net's outputs (or end's tops) and `blobs`."""
    blobs = list(blobs or [])
    start_ind = 0 if start is None else _layer_index(self, start)
    if end is None:
        end_ind = len(self._layer_names) - 1
        outputs = set(self.outputs + blobs)
    else:
        end_ind = _layer_index(self, end)
        outputs = set(self._top_names(end_ind) + blobs)
    _copy_in(self, kwargs, self.inputs, 'data', "forward: input '%s'", 'forward: the keyword arrays %s must be '
             'the net inputs %s')
    self._forward(start_ind, end_ind)
    net_blobs = self.blobs
    return {name: net_blobs[name].data for name in outputs}


def _backward(self, diffs=None, start=None, end=None, **kwargs):
    """Runs backward from layer start down to end (names; the whole net by default) after copying the keyword
    arrays into the gradients of the net's outputs of those names. Returns {blob name: its .diff} for the net's
    inputs (or end's bottoms) and `diffs`."""
    diffs = list(diffs or [])
    start_ind = len(self._layer_names) - 1 if start is None else _layer_index(self, start)
    if end is None:
        end_ind = 0
        outputs = set(self.inputs + diffs)
    else:
        end_ind = _layer_index(self, end)
        outputs = set(self._bottom_names(end_ind) + diffs)
    _copy_in(self, kwargs, self.outputs, 'diff', "backward: gradient '%s'", 'backward: the keyword arrays %s '
             'must be the net outputs %s')
    self._backward(start_ind, end_ind)
    net_blobs = self.blobs
    return {name: net_blobs[name].diff for name in outputs}


def _batches(self, arrays):
    """Splits equal-length arrays into the net's batch size, padding the last batch with zeros."""
    first = next(iter(arrays))
    num = len(arrays[first])
    batch = self.blobs[first].shape[0]
    for start in range(0, num, batch):
        chunk = {}
        for name, array in arrays.items():
            part = np.asarray(array[start:start + batch])
            if len(part) < batch:
                pad = np.zeros((batch - len(part),) + part.shape[1:], dtype=part.dtype)
                part = np.concatenate([part, pad])
            chunk[name] = part
        yield chunk


def _forward_all(self, blobs=None, **kwargs):
    """forward over inputs of any length: batch by batch, the outputs (copies) joined, the padding dropped."""
    names = set(self.outputs + list(blobs or []))
    if not kwargs:
        return {name: out.copy() for name, out in self.forward(blobs=blobs).items()}
    lengths = {len(a) for a in kwargs.values()}
    if len(lengths) != 1:
        raise Error('forward_all: the input arrays differ in length: %s' % sorted(lengths))
    num = lengths.pop()
    outs = {name: [] for name in names}
    for chunk in _batches(self, kwargs):
        for name, out in self.forward(blobs=blobs, **chunk).items():
            outs[name].extend(out.copy())
    return {name: np.asarray(values[:num]) for name, values in outs.items()}


def _forward_backward_all(self, blobs=None, diffs=None, **kwargs):
    """forward_all and backward, batch by batch; keyword arrays go to the inputs (forward) or to the outputs'
    gradients (backward) by name. Returns (outputs, input gradients), each joined over the batches."""
    forward_in = {k: v for k, v in kwargs.items() if k in self.inputs}
    backward_in = {k: v for k, v in kwargs.items() if k in self.outputs}
    fwd = {name: [] for name in set(self.outputs + list(blobs or []))}
    bwd = {name: [] for name in set(self.inputs + list(diffs or []))}
    fb = list(_batches(self, forward_in)) if forward_in else [{}]
    bb = list(_batches(self, backward_in)) if backward_in else [{}] * len(fb)
    for f, b in zip(fb, bb):
        for name, out in self.forward(blobs=blobs, **f).items():
            fwd[name].extend(out.copy())
        for name, out in self.backward(diffs=diffs, **b).items():
            bwd[name].extend(out.copy())
    num = len(next(iter(forward_in.values()))) if forward_in else None
    return ({k: np.asarray(v[:num]) for k, v in fwd.items()}, {k: np.asarray(v[:num]) for k, v in bwd.items()})


from ._strata import Error  # noqa: E402

Net.blobs = property(_blobs)
Net.params = property(_params)
Net.layer_dict = property(_layer_dict)
Net.top_names = property(_top_names)
Net.bottom_names = property(_bottom_names)
Net.forward = _forward
Net.backward = _backward
Net.forward_all = _forward_all
Net.forward_backward_all = _forward_backward_all
