"""Python layers the tests use (the module named by python_param in the tests' nets)."""

import numpy as np

import strata


class Scale(strata.Layer):
    """top = w * bottom, with one learnable scalar w (a parameter blob added in setup): param_str is w's start."""

    def setup(self, bottom, top):
        self.blobs.add_blob(1)
        self.blobs[0].data[...] = float(self.param_str or 1.0)

    def reshape(self, bottom, top):
        top[0].reshape(*bottom[0].shape)

    def forward(self, bottom, top):
        top[0].data[...] = self.blobs[0].data[0] * bottom[0].data

    def backward(self, top, propagate_down, bottom):
        self.blobs[0].diff[0] += np.sum(top[0].diff * bottom[0].data)
        if propagate_down[0]:
            bottom[0].diff[...] = self.blobs[0].data[0] * top[0].diff


class Square(strata.Layer):
    def reshape(self, bottom, top):
        top[0].reshape(*bottom[0].shape)

    def forward(self, bottom, top):
        top[0].data[...] = bottom[0].data ** 2

    def backward(self, top, propagate_down, bottom):
        bottom[0].diff[...] = 2 * bottom[0].data * top[0].diff


class Raises(strata.Layer):
    def reshape(self, bottom, top):
        top[0].reshape(*bottom[0].shape)

    def forward(self, bottom, top):
        raise ValueError('forward went wrong on purpose')


class PhaseAndParam(strata.Layer):
    """Writes its phase into its top and keeps param_str, so the test can see what Strata set."""

    def setup(self, bottom, top):
        self.seen = (self.param_str, self.phase)

    def reshape(self, bottom, top):
        top[0].reshape(1)

    def forward(self, bottom, top):
        top[0].data[0] = self.phase


class ShardedData(strata.Layer):
    """A Python data layer for data-parallel runs: each forward makes the next global batch (param_str: its size)
    of inputs x (4 values) and targets t (2), the same on every rank, and keeps this rank's block of it, so N ranks
    together see what one rank with the whole batch sees."""

    def setup(self, bottom, top):
        self.global_batch = int(self.param_str)
        if self.global_batch % strata.size():
            raise ValueError('a global batch of %d does not split over %d ranks' % (self.global_batch, strata.size()))
        self.batch = self.global_batch // strata.size()
        self.iteration = 0

    def reshape(self, bottom, top):
        top[0].reshape(self.batch, 4)
        top[1].reshape(self.batch, 2)

    def forward(self, bottom, top):
        rng = np.random.RandomState(self.iteration)
        self.iteration += 1
        x = rng.uniform(-1, 1, (self.global_batch, 4)).astype(np.float32)
        t = x @ np.array([[1, -2], [0.5, 0], [0, 1], [-1, 1]], np.float32)
        block = slice(strata.rank() * self.batch, (strata.rank() + 1) * self.batch)
        top[0].data[...] = x[block]
        top[1].data[...] = t[block]

    def backward(self, top, propagate_down, bottom):
        pass
