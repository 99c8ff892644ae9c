"""The pure-Python companions: net_spec's output parses back to the NetParameter it means, io's conversions and
transforms, draw, and `import caffe` giving the same objects."""

import os

import numpy as np
import pytest

import strata
from strata import layers as L, params as P
from conftest import write


def lenet_spec(source, batch_size):
    n = strata.NetSpec()
    n.data, n.label = L.Data(batch_size=batch_size, backend=P.Data.LMDB, source=source,
                             transform_param=dict(scale=1. / 255), ntop=2)
    n.conv1 = L.Convolution(n.data, kernel_size=5, num_output=20, weight_filler=dict(type='xavier'))
    n.pool1 = L.Pooling(n.conv1, kernel_size=2, stride=2, pool=P.Pooling.MAX)
    n.ip1 = L.InnerProduct(n.pool1, num_output=500, weight_filler=dict(type='xavier'),
                           param=[dict(lr_mult=1), dict(lr_mult=2)])
    n.relu1 = L.ReLU(n.ip1, in_place=True)
    n.loss = L.SoftmaxWithLoss(n.relu1, n.label, loss_weight=1, include=dict(phase=strata.TRAIN))
    return n.to_proto()


EXPECTED = """
layer { name: "data" type: "Data" top: "data" top: "label" transform_param { scale: 0.00392156862745098 }
        data_param { source: "train_lmdb" batch_size: 64 backend: LMDB } }
layer { name: "conv1" type: "Convolution" bottom: "data" top: "conv1"
        convolution_param { num_output: 20 kernel_size: 5 weight_filler { type: "xavier" } } }
layer { name: "pool1" type: "Pooling" bottom: "conv1" top: "pool1" pooling_param { pool: MAX kernel_size: 2 stride: 2 } }
layer { name: "ip1" type: "InnerProduct" bottom: "pool1" top: "ip1" param { lr_mult: 1 } param { lr_mult: 2 }
        inner_product_param { num_output: 500 weight_filler { type: "xavier" } } }
layer { name: "relu1" type: "ReLU" bottom: "ip1" top: "ip1" }
layer { name: "loss" type: "SoftmaxWithLoss" bottom: "ip1" bottom: "label" top: "loss" loss_weight: 1
        include { phase: TRAIN } }
"""


def test_net_spec_parses_back_to_the_same_net():
    text = str(lenet_spec('train_lmdb', 64))
    assert strata._strata.canonical_net_text(text) == strata._strata.canonical_net_text(EXPECTED)


def test_net_spec_autonames_and_errors():
    top = L.InnerProduct(L.Input(shape=dict(dim=[2, 3])), num_output=4)
    text = str(strata.to_proto(top))
    assert 'name: "Input1"' in text and 'name: "InnerProduct1"' in text and 'bottom: "Input1"' in text
    with pytest.raises(AttributeError, match='no field no_such_field'):
        str(strata.to_proto(L.InnerProduct(L.Input(shape=dict(dim=[1])), no_such_field=3)))
    with pytest.raises(ValueError, match='MEAN'):
        str(strata.to_proto(L.Pooling(L.Input(shape=dict(dim=[1])), pool='MEAN')))


def test_net_spec_net_builds(tmp_path):
    n = strata.NetSpec()
    n.x = L.Input(shape=dict(dim=[2, 3]))
    n.y = L.InnerProduct(n.x, num_output=4, weight_filler=dict(type='constant', value=1))
    net = strata.Net(write(tmp_path / 'spec.prototxt', str(n.to_proto())), strata.TEST)
    assert net.forward(x=np.ones((2, 3), np.float32))['y'].tolist() == [[3] * 4] * 2


def test_blobproto_and_datum_round_trips(tmp_path):
    a = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    blob = strata.io.array_to_blobproto(a)
    data = blob.SerializeToString()
    back = strata.io.array_to_blobproto(np.zeros(1))
    back.ParseFromString(data)
    np.testing.assert_array_equal(strata.io.blobproto_to_array(back), a)
    # a mean file as compute_image_mean writes it loads as Strata's Blob::FromProto reads it
    net_text = 'layer { name: "in" type: "Input" top: "x" input_param { shape { dim: 2 dim: 3 dim: 4 } } }'
    arrays = strata.io.blobprotovector_str_to_arraylist(strata.io.arraylist_to_blobprotovector_str([a, 2 * a]))
    np.testing.assert_array_equal(arrays[1], 2 * a)
    u8 = (np.arange(60) % 256).astype(np.uint8).reshape(3, 4, 5)
    datum = strata.io.array_to_datum(u8, label=7)
    parsed = strata.io.array_to_datum(np.zeros((1, 1, 1)))
    parsed.ParseFromString(datum.SerializeToString())
    assert parsed.label == 7
    np.testing.assert_array_equal(strata.io.datum_to_array(parsed), u8)
    np.testing.assert_array_equal(strata.io.datum_to_array(strata.io.array_to_datum(a[:1] / 7)), a[:1] / 7)
    with pytest.raises(ValueError, match='channels x height x width'):
        strata.io.array_to_datum(np.zeros((2, 2)))
    assert net_text


def test_transformer_and_images(tmp_path):
    from PIL import Image
    rgb = (np.arange(6 * 8 * 3) % 256).astype(np.uint8).reshape(6, 8, 3)
    path = str(tmp_path / 'im.png')
    Image.fromarray(rgb).save(path)
    im = strata.io.load_image(path)
    assert im.shape == (6, 8, 3) and im.dtype == np.float32
    np.testing.assert_allclose(im, rgb / 255.0, rtol=1e-6)
    assert strata.io.load_image(path, color=False).shape == (6, 8, 1)
    t = strata.io.Transformer({'data': (1, 3, 6, 8)})
    t.set_transpose('data', (2, 0, 1))
    t.set_channel_swap('data', (2, 1, 0))
    t.set_raw_scale('data', 255)
    t.set_mean('data', np.array([10, 20, 30]))
    x = t.preprocess('data', im)
    np.testing.assert_allclose(x, rgb.transpose(2, 0, 1)[::-1] - np.array([10, 20, 30])[:, None, None], atol=1e-3)
    np.testing.assert_allclose(t.deprocess('data', x), im, atol=1e-5)
    assert strata.io.resize_image(im, (3, 4)).shape == (3, 4, 3)
    np.testing.assert_allclose(strata.io.resize_image(np.ones((5, 5, 2)), (9, 7)), np.ones((9, 7, 2)))
    crops = strata.io.oversample([im], (4, 4))
    assert crops.shape == (10, 4, 4, 3)
    np.testing.assert_array_equal(crops[0], im[:4, :4])
    np.testing.assert_array_equal(crops[4], im[1:5, 2:6])
    np.testing.assert_array_equal(crops[5], im[:4, :4][:, ::-1])
    with pytest.raises(ValueError, match='3 channels'):
        t.set_mean('data', np.zeros(4))


def test_draw_net_to_file(tmp_path):
    path = str(tmp_path / 'lenet.dot')
    strata.draw.draw_net_to_file(lenet_spec('train_lmdb', 64), path, 'TB', phase=strata.TEST)
    dot = open(path).read()
    assert 'conv1' in dot and 'rankdir=TB' in dot.replace(' ', '') and 'SoftmaxWithLoss' not in dot
    svg = str(tmp_path / 'lenet.svg')
    strata.draw.draw_net_to_file(lenet_spec('train_lmdb', 64), svg)
    assert open(svg).read().lstrip().startswith('<?xml') and os.path.getsize(svg) > 1000


def test_import_caffe_gives_strata():
    import caffe
    import caffe.io
    from caffe import layers as CL
    assert caffe.Net is strata.Net and caffe.TEST == strata.TEST and caffe.io is strata.io
    assert caffe.Layer is strata.Layer and CL is strata.layers and caffe.SGDSolver is strata.SGDSolver
    from caffe.net_spec import NetSpec
    assert NetSpec is strata.NetSpec


def test_caffe_pb2_reads_caffe_files_as_caffes_scripts_do(tmp_path):
    # What Caffe's draw_net.py and mean-file scripts do: text_format into caffe_pb2 messages, then caffe.draw
    # and caffe.io on those messages.
    from google.protobuf import text_format
    import caffe
    import caffe.draw
    from caffe.proto import caffe_pb2
    assert caffe.proto.caffe_pb2 is caffe_pb2 and caffe_pb2.TRAIN == caffe.TRAIN
    net = caffe_pb2.NetParameter()
    text_format.Merge(str(lenet_spec('train_lmdb', 64)), net)
    assert [layer.name for layer in net.layer] == ['data', 'conv1', 'pool1', 'ip1', 'relu1', 'loss']
    assert net.layer[1].convolution_param.kernel_size == [5]
    path = str(tmp_path / 'lenet.dot')
    caffe.draw.draw_net_to_file(net, path, 'TB', caffe.TRAIN)
    assert 'SoftmaxWithLoss' in open(path).read()
    solver = caffe_pb2.SolverParameter()
    text_format.Merge('base_lr: 0.01 solver_mode: GPU snapshot_format: HDF5', solver)
    assert solver.solver_mode == caffe_pb2.SolverParameter.GPU and solver.snapshot_format == solver.HDF5
    # A mean file: a BlobProto with the legacy num/channels/height/width, written by io and read by caffe_pb2.
    legacy = caffe_pb2.BlobProto(num=1, channels=2, height=1, width=3, data=range(6))
    np.testing.assert_array_equal(caffe.io.blobproto_to_array(legacy), np.arange(6).reshape(1, 2, 1, 3))
    mean = np.arange(12, dtype=np.float32).reshape(3, 2, 2)
    blob = caffe_pb2.BlobProto()
    blob.ParseFromString(caffe.io.array_to_blobproto(mean).SerializeToString())
    np.testing.assert_array_equal(caffe.io.blobproto_to_array(blob), mean)


def test_classifier_predicts_as_its_net(tmp_path):
    model = write(tmp_path / 'deploy.prototxt', """
name: "tiny"
layer { name: "data" type: "Input" top: "data" input_param { shape { dim: 10 dim: 3 dim: 4 dim: 4 } } }
layer { name: "ip" type: "InnerProduct" bottom: "data" top: "ip"
        inner_product_param { num_output: 5 weight_filler { type: "gaussian" std: 1 } } }
layer { name: "prob" type: "Softmax" bottom: "ip" top: "prob" }
""")
    weights = str(tmp_path / 'tiny.caffemodel')
    strata.Net(model, strata.TEST).save(weights)
    c = strata.Classifier(model, weights, image_dims=(6, 6), mean=np.array([0.1, 0.2, 0.3]), raw_scale=2.0,
                          channel_swap=(2, 1, 0))
    rng = np.random.RandomState(0)
    images = [rng.rand(6, 6, 3).astype(np.float32) for _ in range(3)]
    net = strata.Net(model, weights, strata.TEST)
    w = net.params['ip'][0].data
    mean = np.array([0.1, 0.2, 0.3], np.float32)[:, None, None]

    def scores(crop):  # the net's softmax of one HxWxC crop, prepared as the Classifier says
        x = (crop.transpose(2, 0, 1)[::-1] * 2.0 - mean).ravel()
        z = w @ x
        return np.exp(z - z.max()) / np.exp(z - z.max()).sum()
    centre = c.predict(images, oversample=False)
    assert centre.shape == (3, 5)
    np.testing.assert_allclose(centre, [scores(im[1:5, 1:5]) for im in images], rtol=1e-4, atol=1e-6)
    ten = c.predict(images)
    crops = strata.io.oversample(images, (4, 4))
    expected = [np.mean([scores(crops[10 * i + k]) for k in range(10)], axis=0) for i in range(3)]
    np.testing.assert_allclose(ten, expected, rtol=1e-4, atol=1e-6)
