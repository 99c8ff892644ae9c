"""Detector, with pycaffe's name and behaviour (R-CNN style): a TEST-phase Net from a deploy prototxt and weights
that classifies windows of images. Each window ([ymin, xmin, ymax, xmax], in pixels of the image) is cropped,
optionally with context_pad pixels of surrounding context, warped to the net's input size, preprocessed by the
Transformer, and run through the net; the first output's scores are that window's prediction."""

import numpy as np

from . import io
from ._strata import Net, TEST, Error
from .classifier import input_transformer


class Detector(Net):
    def __init__(self, model_file, pretrained_file, mean=None, input_scale=None, raw_scale=None,
                 channel_swap=None, context_pad=None):
        Net.__init__(self, model_file, pretrained_file, TEST)
        self.transformer = input_transformer(self, mean, input_scale, raw_scale, channel_swap)
        self.configure_crop(context_pad)

    def detect_windows(self, images_windows):
        """[(image file, windows)] -> one dict per window, in order: {'window', 'prediction', 'filename'}."""
        window_inputs, index = [], []
        for filename, windows in images_windows:
            image = io.load_image(filename).astype(np.float32)
            for window in windows:
                window_inputs.append(self.crop(image, window))
                index.append((filename, window))
        if not window_inputs:
            return []
        in_ = self.inputs[0]
        net_in = np.stack([self.transformer.preprocess(in_, w) for w in window_inputs])
        predictions = self.forward_all(**{in_: net_in})[self.outputs[0]]
        return [{'window': window, 'prediction': predictions[i], 'filename': filename}
                for i, (filename, window) in enumerate(index)]

    def detect_selective_search(self, image_fnames):
        """Windows proposed by selective search (R-CNN's selective_search_ijcv_with_python module, which needs
        MATLAB), then detect_windows."""
        try:
            import selective_search_ijcv_with_python as selective_search
        except ImportError as e:
            raise Error('detect_selective_search needs the selective_search_ijcv_with_python module (R-CNN\'s, '
                        'with MATLAB): %s; detect_windows takes windows from anywhere else' % e)
        image_fnames = [str(f) for f in image_fnames]
        windows_list = selective_search.get_windows(image_fnames, cmd='selective_search_rcnn')
        return self.detect_windows(zip(image_fnames, windows_list))

    def crop(self, im, window):
        """The window [ymin, xmin, ymax, xmax] of image im (height x width x channels). With context_pad, the window
        grows so that after warping to the net's input size context_pad pixels of context surround it; what falls
        outside the image is the mean (crop_mean)."""
        window = np.asarray(window)
        if not self.context_pad:
            return im[int(window[0]):int(window[2]), int(window[1]):int(window[3])]
        crop_size = self.blobs[self.inputs[0]].width   # a square input, as R-CNN's
        scale = crop_size / (1.0 * crop_size - self.context_pad * 2)
        # The window scaled about its centre so that its border lands context_pad pixels inside the warped crop.
        half = np.array([window[2] - window[0] + 1, window[3] - window[1] + 1]) / 2.0
        centre = np.array([window[0], window[1]]) + half
        box = np.round(np.concatenate([centre - scale * half, centre + scale * half]))
        # Where the box leaves the image, the warped crop is padded; the part inside is warped in place.
        full_h, full_w = box[2] - box[0] + 1, box[3] - box[1] + 1
        scale_h, scale_w = crop_size / full_h, crop_size / full_w
        pad_y = int(round(max(0, -box[0]) * scale_h))
        pad_x = int(round(max(0, -box[1]) * scale_w))
        im_h, im_w = im.shape[:2]
        box = np.clip(box, 0.0, [im_h, im_w, im_h, im_w])
        clip_h, clip_w = box[2] - box[0] + 1, box[3] - box[1] + 1
        if clip_h <= 0 or clip_w <= 0:
            raise Error('Detector.crop: window %s lies outside the %dx%d image' % (list(window), im_h, im_w))
        crop_h = min(int(round(clip_h * scale_h)), crop_size - pad_y)
        crop_w = min(int(round(clip_w * scale_w)), crop_size - pad_x)
        box = box.astype(int)
        context = io.resize_image(im[box[0]:box[2], box[1]:box[3]], (crop_h, crop_w))
        crop = np.ones(self.crop_dims, dtype=np.float32) * self.crop_mean
        crop[pad_y:pad_y + crop_h, pad_x:pad_x + crop_w] = context
        return crop

    def configure_crop(self, context_pad):
        """Sets context_pad, the crop's dimensions (image order: height x width x channels) and crop_mean, the
        Transformer's mean in image order and [0, 1] scale, which fills the context outside the image."""
        in_ = self.inputs[0]
        transpose = self.transformer.transpose[in_]
        to_image = np.argsort(transpose)
        self.crop_dims = np.array(self.blobs[in_].data.shape[1:])[to_image]
        self.context_pad = context_pad
        if not context_pad:
            return
        mean = self.transformer.mean.get(in_)
        if mean is None:
            self.crop_mean = np.zeros(self.crop_dims, dtype=np.float32)
            return
        swap = self.transformer.channel_swap.get(in_)
        if swap is not None:
            mean = mean[np.argsort(swap)]
        mean = mean.transpose(to_image)
        raw_scale = self.transformer.raw_scale.get(in_)
        self.crop_mean = mean / raw_scale if raw_scale is not None else mean
