"""A Euclidean loss as a Python layer: loss = sum((a - b)^2) / (2 N) over the two bottoms, for linreg.prototxt."""

import numpy as np

import strata


class EuclideanLossLayer(strata.Layer):
    def setup(self, bottom, top):
        if len(bottom) != 2:
            raise ValueError('EuclideanLossLayer takes two bottoms, got %d' % len(bottom))

    def reshape(self, bottom, top):
        if bottom[0].count != bottom[1].count:
            raise ValueError('the bottoms differ in size: %d and %d values' % (bottom[0].count, bottom[1].count))
        self.diff = np.zeros_like(bottom[0].data, dtype=np.float32)
        top[0].reshape(1)

    def forward(self, bottom, top):
        self.diff[...] = bottom[0].data - bottom[1].data
        top[0].data[...] = np.sum(self.diff ** 2) / bottom[0].num / 2.0

    def backward(self, top, propagate_down, bottom):
        for i, sign in ((0, 1), (1, -1)):
            if propagate_down[i]:
                bottom[i].diff[...] = sign * top[0].diff[0] * self.diff / bottom[i].num
