"""Classifier, with pycaffe's name and behaviour: a Net made for the TEST phase from a deploy prototxt and weights,
whose predict takes images (height x width x channels, as io.load_image gives) and returns the first output's
class scores, averaged over ten crops (io.oversample) or from the centre crop."""

import numpy as np

from . import io
from ._strata import Net, TEST


def input_transformer(net, mean=None, input_scale=None, raw_scale=None, channel_swap=None):
    """The io.Transformer that makes images (height x width x channels) into the net's first input, as pycaffe's
    Classifier and Detector set it up."""
    in_ = net.inputs[0]
    transformer = io.Transformer({in_: net.blobs[in_].data.shape})
    transformer.set_transpose(in_, (2, 0, 1))
    if mean is not None:
        transformer.set_mean(in_, mean)
    if input_scale is not None:
        transformer.set_input_scale(in_, input_scale)
    if raw_scale is not None:
        transformer.set_raw_scale(in_, raw_scale)
    if channel_swap is not None:
        transformer.set_channel_swap(in_, channel_swap)
    return transformer


class Classifier(Net):
    def __init__(self, model_file, pretrained_file, image_dims=None, mean=None, input_scale=None, raw_scale=None,
                 channel_swap=None):
        Net.__init__(self, model_file, pretrained_file, TEST)
        in_ = self.inputs[0]
        self.transformer = input_transformer(self, mean, input_scale, raw_scale, channel_swap)
        self.crop_dims = np.array(self.blobs[in_].data.shape[2:])
        self.image_dims = np.array(image_dims if image_dims is not None else self.crop_dims)

    def predict(self, inputs, oversample=True):
        """Class scores for each image: resized to image_dims, then the mean over ten crops of the net's input size
        (oversample) or the centre crop alone."""
        images = np.zeros((len(inputs), self.image_dims[0], self.image_dims[1], inputs[0].shape[2]), np.float32)
        for ix, im in enumerate(inputs):
            images[ix] = io.resize_image(im, self.image_dims)
        if oversample:
            images = io.oversample(images, self.crop_dims)
        else:
            start = ((self.image_dims - self.crop_dims) / 2.0).astype(int)
            images = images[:, start[0]:start[0] + self.crop_dims[0], start[1]:start[1] + self.crop_dims[1], :]
        in_ = self.inputs[0]
        net_in = np.stack([self.transformer.preprocess(in_, im) for im in images])
        scores = self.forward_all(**{in_: net_in})[self.outputs[0]]
        if oversample:
            scores = scores.reshape((len(scores) // 10, 10, -1)).mean(1)
        return scores
