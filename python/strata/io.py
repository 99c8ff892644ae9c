"""Images, arrays and protobuf blobs, with pycaffe's io names: Transformer (a net input's preprocessing),
load_image, resize_image, oversample, and the conversions between NumPy arrays and BlobProto / Datum
(net_spec.Message objects with SerializeToString and ParseFromString)."""

import numpy as np

from .net_spec import Message


def blobproto_to_array(blob, return_diff=False):
    """A BlobProto's values (or gradients) as an array of its shape (the legacy num/channels/height/width when
    the blob has no shape)."""
    values = np.array(blob.diff if return_diff else blob.data, dtype=np.float32)
    if blob.HasField('num') or blob.HasField('channels') or blob.HasField('height') or blob.HasField('width'):
        shape = tuple(getattr(blob, k) if blob.HasField(k) else 1 for k in ('num', 'channels', 'height', 'width'))
    else:
        shape = tuple(blob.shape.dim)
    return values.reshape(shape)


def array_to_blobproto(arr, diff=None):
    """A BlobProto holding `arr` (and `diff`, of the same shape, as its gradient)."""
    arr = np.asarray(arr)
    blob = Message('strata.BlobProto')
    blob.shape.dim = [int(d) for d in arr.shape]
    blob.data = arr.astype(np.float32).ravel().tolist()
    if diff is not None:
        diff = np.asarray(diff)
        if diff.shape != arr.shape:
            raise ValueError('array_to_blobproto: diff has shape %s, the array %s' % (diff.shape, arr.shape))
        blob.diff = diff.astype(np.float32).ravel().tolist()
    return blob


def arraylist_to_blobprotovector_str(arraylist):
    """A serialized BlobProtoVector of the arrays."""
    vec = Message('strata.BlobProtoVector')
    vec.blobs = [array_to_blobproto(a) for a in arraylist]
    return vec.SerializeToString()


def blobprotovector_str_to_arraylist(data):
    vec = Message('strata.BlobProtoVector')
    vec.ParseFromString(data)
    return [blobproto_to_array(b) for b in vec.blobs]


def array_to_datum(arr, label=None):
    """A Datum of a channels x height x width array: bytes for uint8 values, float_data otherwise."""
    arr = np.asarray(arr)
    if arr.ndim != 3:
        raise ValueError('array_to_datum: the array must be channels x height x width, got shape %s' % (arr.shape,))
    datum = Message('strata.Datum')
    datum.channels, datum.height, datum.width = (int(d) for d in arr.shape)
    if arr.dtype == np.uint8:
        datum.data = arr.tobytes()
    else:
        datum.float_data = arr.astype(np.float32).ravel().tolist()
    if label is not None:
        datum.label = int(label)
    return datum


def datum_to_array(datum):
    """A Datum's values as a channels x height x width array (uint8 from its bytes, else float)."""
    shape = (datum.channels, datum.height, datum.width)
    if datum.HasField('data') and len(datum.data):
        return np.frombuffer(datum.data, dtype=np.uint8).reshape(shape)
    return np.array(datum.float_data, dtype=np.float32).reshape(shape)


def load_image(filename, color=True):
    """An image file as a height x width x channels float32 array in [0, 1], RGB (3 channels) when color, else
    one gray channel."""
    from PIL import Image  # python3-pil
    with Image.open(filename) as im:
        im = im.convert('RGB' if color else 'L')
        img = np.asarray(im, dtype=np.float32) / 255.0
    if img.ndim == 2:
        img = img[:, :, np.newaxis]
    return img


def resize_image(im, new_dims, interp_order=1):
    """im (height x width x channels) resized to new_dims (height, width): bilinear (interp_order 1) or
    nearest (0), sampling at pixel centres. Returns float32."""
    im = np.asarray(im, dtype=np.float32)
    if interp_order not in (0, 1):
        raise ValueError('resize_image: interp_order must be 0 (nearest) or 1 (bilinear), got %r' % interp_order)
    h, w = im.shape[:2]
    nh, nw = int(new_dims[0]), int(new_dims[1])
    if (nh, nw) == (h, w):
        return im.copy()
    ys = (np.arange(nh) + 0.5) * h / nh - 0.5
    xs = (np.arange(nw) + 0.5) * w / nw - 0.5
    if interp_order == 0:
        yi = np.clip(np.round(ys).astype(int), 0, h - 1)
        xi = np.clip(np.round(xs).astype(int), 0, w - 1)
        return im[yi][:, xi]
    ys = np.clip(ys, 0, h - 1)
    xs = np.clip(xs, 0, w - 1)
    y0 = np.floor(ys).astype(int)
    x0 = np.floor(xs).astype(int)
    y1 = np.minimum(y0 + 1, h - 1)
    x1 = np.minimum(x0 + 1, w - 1)
    wy = (ys - y0)[:, None, None]
    wx = (xs - x0)[None, :, None]
    top = im[y0][:, x0] * (1 - wx) + im[y0][:, x1] * wx
    bottom = im[y1][:, x0] * (1 - wx) + im[y1][:, x1] * wx
    return (top * (1 - wy) + bottom * wy).astype(np.float32)


def oversample(images, crop_dims):
    """Ten crops of each image (height x width x channels): the four corners and the centre, then the same
    five mirrored left to right. Returns an array of 10 x len(images) crops."""
    crop_h, crop_w = int(crop_dims[0]), int(crop_dims[1])
    im_h, im_w = images[0].shape[:2]
    starts = [(i, j) for i in (0, im_h - crop_h) for j in (0, im_w - crop_w)]
    starts.append((int((im_h - crop_h) / 2.0), int((im_w - crop_w) / 2.0)))
    crops = np.empty((10 * len(images), crop_h, crop_w, images[0].shape[-1]), dtype=np.float32)
    ix = 0
    for im in images:
        for i, j in starts:
            crops[ix] = im[i:i + crop_h, j:j + crop_w, :]
            ix += 1
        crops[ix:ix + 5] = crops[ix - 5:ix, :, ::-1, :]
        ix += 5
    return crops


class Transformer:
    """Turns images (height x width x channels, RGB in [0, 1], as load_image gives) into a net's input and
    back: resize to the input's size, transpose, channel swap, raw scale, mean subtraction, input scale, in
    that order. `inputs` maps input names to their shapes (net.blobs[name].data.shape)."""

    def __init__(self, inputs):
        self.inputs = dict(inputs)
        self.transpose = {}
        self.channel_swap = {}
        self.raw_scale = {}
        self.mean = {}
        self.input_scale = {}

    def __check_input(self, in_):
        if in_ not in self.inputs:
            raise KeyError('%s is not one of the net inputs: %s' % (in_, sorted(self.inputs)))

    def preprocess(self, in_, data):
        self.__check_input(in_)
        x = np.asarray(data, dtype=np.float32)
        in_dims = self.inputs[in_][2:]
        if x.shape[:2] != tuple(in_dims):
            x = resize_image(x, in_dims)
        if in_ in self.transpose:
            x = x.transpose(self.transpose[in_])
        if in_ in self.channel_swap:
            x = x[self.channel_swap[in_], :, :]
        if in_ in self.raw_scale:
            x = x * self.raw_scale[in_]
        if in_ in self.mean:
            x = x - self.mean[in_]
        if in_ in self.input_scale:
            x = x * self.input_scale[in_]
        return x

    def deprocess(self, in_, data):
        self.__check_input(in_)
        x = np.array(data, dtype=np.float32).squeeze()
        if in_ in self.input_scale:
            x = x / self.input_scale[in_]
        if in_ in self.mean:
            x = x + self.mean[in_]
        if in_ in self.raw_scale:
            x = x / self.raw_scale[in_]
        if in_ in self.channel_swap:
            x = x[np.argsort(self.channel_swap[in_]), :, :]
        if in_ in self.transpose:
            x = x.transpose(np.argsort(self.transpose[in_]))
        return x

    def set_transpose(self, in_, order):
        """The axes order taking an image (H x W x K) to the input (K x H x W): usually (2, 0, 1)."""
        self.__check_input(in_)
        if len(order) != len(self.inputs[in_]) - 1:
            raise ValueError('set_transpose: %s has %d axes per image, the order %s' %
                             (in_, len(self.inputs[in_]) - 1, tuple(order)))
        self.transpose[in_] = order

    def set_channel_swap(self, in_, order):
        """The channel order of the input, e.g. (2, 1, 0) for RGB images into a BGR net."""
        self.__check_input(in_)
        if len(order) != self.inputs[in_][1]:
            raise ValueError('set_channel_swap: %s has %d channels, the order %s' %
                             (in_, self.inputs[in_][1], tuple(order)))
        self.channel_swap[in_] = order

    def set_raw_scale(self, in_, scale):
        """Multiplies images in [0, 1] by scale (255 for nets trained on [0, 255])."""
        self.__check_input(in_)
        self.raw_scale[in_] = scale

    def set_mean(self, in_, mean):
        """A mean to subtract: one value per channel (shape (K,)) or a whole K x H x W image."""
        self.__check_input(in_)
        mean = np.asarray(mean, dtype=np.float32)
        ms = mean.shape
        if mean.ndim == 1:
            if ms[0] != self.inputs[in_][1]:
                raise ValueError('set_mean: %s has %d channels, the mean %d values' % (in_, self.inputs[in_][1],
                                                                                     ms[0]))
            mean = mean[:, np.newaxis, np.newaxis]
        elif ms != tuple(self.inputs[in_][1:]):
            raise ValueError('set_mean: the mean has shape %s, %s takes %s' % (ms, in_, tuple(self.inputs[in_][1:])))
        self.mean[in_] = mean

    def set_input_scale(self, in_, scale):
        """Multiplies the input by scale after the mean is subtracted."""
        self.__check_input(in_)
        self.input_scale[in_] = scale
