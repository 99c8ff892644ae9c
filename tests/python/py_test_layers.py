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
