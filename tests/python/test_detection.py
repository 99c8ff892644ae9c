"""pycaffe's tools for detection and fully convolutional nets: Detector (windows cropped with context, warped and
classified) against the net run by hand, and coord_map's maps and crops against the geometry worked out by hand
and against the net itself."""

import numpy as np
import pytest

import strata
from strata import coord_map, io
from strata import layers as L
from conftest import write

DEPLOY = """
name: "tiny"
layer { name: "data" type: "Input" top: "data" input_param { shape { dim: 2 dim: 3 dim: 4 dim: 4 } } }
layer { name: "ip" type: "InnerProduct" bottom: "data" top: "ip"
        inner_product_param { num_output: 5 weight_filler { type: "gaussian" std: 1 } } }
layer { name: "prob" type: "Softmax" bottom: "ip" top: "prob" }
"""


@pytest.fixture
def detector_files(tmp_path):
    from PIL import Image
    model = write(tmp_path / 'deploy.prototxt', DEPLOY)
    weights = str(tmp_path / 'tiny.caffemodel')
    strata.Net(model, strata.TEST).save(weights)
    rng = np.random.RandomState(0)
    image_file = str(tmp_path / 'im.png')
    Image.fromarray(rng.randint(0, 256, (12, 12, 3)).astype(np.uint8)).save(image_file)
    return model, weights, image_file


def softmax_of(net, x):
    z = net.params['ip'][0].data @ x.ravel() + net.params['ip'][1].data
    return np.exp(z - z.max()) / np.exp(z - z.max()).sum()


def test_detector_classifies_each_window_as_its_net(detector_files):
    model, weights, image_file = detector_files
    mean = np.array([0.1, 0.2, 0.3])
    d = strata.Detector(model, weights, mean=mean, raw_scale=2.0, channel_swap=(2, 1, 0))
    windows = np.array([[0, 0, 6, 6], [2, 3, 12, 9], [5, 5, 9, 11]])
    out = d.detect_windows([(image_file, windows)])
    assert [o['filename'] for o in out] == [image_file] * 3
    net = strata.Net(model, weights, strata.TEST)
    im = io.load_image(image_file)
    for o, w in zip(out, windows):
        np.testing.assert_array_equal(o['window'], w)
        x = io.resize_image(im[w[0]:w[2], w[1]:w[3]], (4, 4)).transpose(2, 0, 1)[::-1] * 2.0 - mean[:, None, None]
        np.testing.assert_allclose(o['prediction'], softmax_of(net, x), rtol=1e-4, atol=1e-6)
    assert d.detect_windows([]) == []
    with pytest.raises(strata.Error, match='selective_search_ijcv_with_python'):
        d.detect_selective_search([image_file])


def test_detector_crops_with_context(detector_files):
    model, weights, image_file = detector_files
    mean = np.array([0.1, 0.2, 0.3])
    d = strata.Detector(model, weights, mean=mean, raw_scale=2.0, channel_swap=(2, 1, 0), context_pad=1)
    np.testing.assert_array_equal(d.crop_dims, [4, 4, 3])
    # The mean in image order (the net's channel 0 is the image's channel 2) and [0, 1] scale, as the crop's fill.
    np.testing.assert_allclose(d.crop_mean.ravel(), [0.15, 0.1, 0.05])
    im = io.load_image(image_file)
    # context_pad 1 of a 4-pixel input: the window doubles about its centre. [4, 4, 8, 8] (5 pixels, centre 6.5)
    # becomes the rows and columns 2 to 12; nothing lies outside the image.
    np.testing.assert_allclose(d.crop(im, [4, 4, 8, 8]), io.resize_image(im[2:12, 2:12], (4, 4)), rtol=1e-6)
    # [0, 0, 3, 3] grows to -2..6: 2 of its 9 rows and columns are outside, a pad of round(2 * 4 / 9) = 1 pixel
    # of mean; the 7 inside warp to round(7 * 4 / 9) = 3.
    crop = d.crop(im, [0, 0, 3, 3])
    np.testing.assert_allclose(crop[0], np.broadcast_to(d.crop_mean[0], (4, 3)))
    np.testing.assert_allclose(crop[:, 0], np.broadcast_to(d.crop_mean[0], (4, 3)))
    np.testing.assert_allclose(crop[1:, 1:], io.resize_image(im[0:6, 0:6], (3, 3)), rtol=1e-6)


def test_coord_map_composes_the_layers_geometry(tmp_path):
    n = strata.NetSpec()
    n.data = L.Input(shape=dict(dim=[1, 3, 20, 20]))
    n.conv = L.Convolution(n.data, kernel_size=3, pad=5, num_output=4)        # y = x + 4
    n.relu = L.ReLU(n.conv, in_place=True)
    n.pool = L.Pooling(n.relu, kernel_size=2, stride=2)                       # y = (x - 0.5) / 2
    n.up = L.Deconvolution(n.pool, convolution_param=dict(kernel_size=4, stride=2, num_output=4))  # y = 2x + 1.5
    ax, a, b = coord_map.coord_map_from_to(n.data, n.up)
    assert ax == 1 and a == pytest.approx(1) and b == pytest.approx(5)
    ax, a, b = coord_map.coord_map_from_to(n.up, n.data)
    assert a == pytest.approx(1) and b == pytest.approx(-5)
    ax, a, b = coord_map.coord_map_from_to(n.pool, n.data)
    assert a == pytest.approx(2) and b == pytest.approx(-3.5)
    n.crop = coord_map.crop(n.up, n.data)
    text = str(n.to_proto())
    assert 'bottom: "up"\n  bottom: "data"' in text and 'axis: 2' in text and 'offset: 5' in text
    net = strata.Net(write(tmp_path / 'fcn.prototxt', text), strata.TEST)
    assert net.blobs['up'].data.shape == (1, 4, 30, 30) and net.blobs['crop'].data.shape == (1, 4, 20, 20)
    with pytest.raises(ValueError, match='scale'):
        coord_map.crop(n.pool, n.conv)       # pool pixel i is conv pixel 2i + 0.5
    n.even = L.Convolution(n.data, kernel_size=2, num_output=4)                 # y = x - 0.5
    with pytest.raises(ValueError, match='whole number'):
        coord_map.crop(n.data, n.even)
    with pytest.raises(ValueError, match='outside'):
        coord_map.crop(n.data, n.conv)       # the conv starts 4 pixels before the data
    n.ip = L.InnerProduct(n.pool, num_output=2)
    with pytest.raises(coord_map.UndefinedMapException):
        coord_map.coord_map_from_to(n.ip, n.data)


def test_coord_map_crop_aligns_in_the_net(tmp_path):
    n = strata.NetSpec()
    n.data = L.Input(shape=dict(dim=[1, 1, 6, 7]))
    n.conv = L.Convolution(n.data, kernel_size=3, pad=5, num_output=1, bias_term=False)
    n.crop = coord_map.crop(n.conv, n.data)
    net = strata.Net(write(tmp_path / 'fcn.prototxt', str(n.to_proto())), strata.TEST)
    w = np.zeros((1, 1, 3, 3), np.float32)
    w[0, 0, 1, 1] = 1                       # the identity: conv is data with 4 pixels of zeros around it
    net.params['conv'][0].data[...] = w
    x = np.random.RandomState(1).rand(1, 1, 6, 7).astype(np.float32)
    out = net.forward(data=x)['crop']
    assert net.blobs['conv'].data.shape == (1, 1, 14, 15)
    np.testing.assert_array_equal(out, x)
