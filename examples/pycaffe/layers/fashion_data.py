"""Fashion-MNIST as a Python data layer: images (N x 1 x 28 x 28, scaled to [0, 1]) and labels from the idx files
of Debian's dataset-fashion-mnist, read with NumPy, shuffled each epoch. A pycaffe user writes the same layer for
data no Caffe layer reads.

    python_param { module: "fashion_data" layer: "FashionMnistData"
                   param_str: "{'split': 'train', 'batch_size': 64}" }

param_str is a Python dict: split ('train' or 't10k'), batch_size (the whole batch, over all ranks), root (the
idx files' folder), shuffle (default: for the train split) and seed. Under mpirun each rank's top holds its
share of the batch (self.data_shard: shard index of count, the net's), so N ranks train on the batch one rank
would."""

import ast
import gzip
import os

import numpy as np

import strata


def read_idx(path):
    """The array in an idx file (gzip'd or not): big-endian magic, its last byte the number of dimensions."""
    with (gzip.open if path.endswith('.gz') else open)(path, 'rb') as f:
        data = f.read()
    dims = data[3]
    shape = tuple(int.from_bytes(data[4 + 4 * i:8 + 4 * i], 'big') for i in range(dims))
    return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * dims).reshape(shape)


class FashionMnistData(strata.Layer):
    def setup(self, bottom, top):
        if bottom or len(top) != 2:
            raise ValueError('FashionMnistData has no bottoms and two tops (data, label)')
        params = ast.literal_eval(self.param_str) if self.param_str else {}
        split = params.get('split', 'train')
        root = params.get('root', '/usr/share/datasets/fashion-mnist')
        self.images = read_idx(os.path.join(root, '%s-images-idx3-ubyte.gz' % split))
        self.labels = read_idx(os.path.join(root, '%s-labels-idx1-ubyte.gz' % split))
        batch = int(params.get('batch_size', 64))
        rank, size = self.data_shard
        if batch % size:
            raise ValueError('batch_size %d does not split over %d ranks' % (batch, size))
        self.batch, self.share = batch, slice(rank * batch // size, (rank + 1) * batch // size)
        self.shuffle = params.get('shuffle', split == 'train')
        self.rng = np.random.RandomState(params.get('seed', 1701))  # the same order on every rank
        self.order, self.cursor = self.new_epoch(), 0

    def new_epoch(self):
        n = len(self.labels)
        return self.rng.permutation(n) if self.shuffle else np.arange(n)

    def reshape(self, bottom, top):
        rows = self.share.stop - self.share.start
        top[0].reshape(rows, 1, 28, 28)
        top[1].reshape(rows)

    def forward(self, bottom, top):
        if self.cursor + self.batch > len(self.order):
            self.order, self.cursor = self.new_epoch(), 0
        rows = self.order[self.cursor:self.cursor + self.batch][self.share]
        self.cursor += self.batch
        top[0].data[...] = self.images[rows, None].astype(np.float32) / 256.0  # the LMDB net's scale
        top[1].data[...] = self.labels[rows]

    def backward(self, top, propagate_down, bottom):
        pass
