"""strata.Net and strata.Blob against the C++ objects they bind: forward equals `strata test`, views are zero-copy,
the pycaffe conveniences name what the C++ net holds, bad input is one clear error."""

import os
import re

import numpy as np
import pytest

import strata
from conftest import write

# DummyData gives a constant batch, so `strata test` (a process of its own) sees the same input.
NET = """
name: "small"
layer { name: "data" type: "DummyData" top: "data" top: "label"
        dummy_data_param { shape { dim: 4 dim: 3 dim: 5 dim: 5 } shape { dim: 4 }
                           data_filler { type: "constant" value: 0.5 } data_filler { type: "constant" value: 1 } } }
layer { name: "conv" type: "Convolution" bottom: "data" top: "conv"
        convolution_param { num_output: 16 kernel_size: 3 weight_filler { type: "gaussian" std: 0.1 }
                            bias_filler { type: "constant" value: 0.1 } } }
layer { name: "relu" type: "ReLU" bottom: "conv" top: "conv" }
layer { name: "ip" type: "InnerProduct" bottom: "conv" top: "ip"
        inner_product_param { num_output: 3 weight_filler { type: "gaussian" std: 0.1 } } }
layer { name: "loss" type: "SoftmaxWithLoss" bottom: "ip" bottom: "label" top: "loss" }
layer { name: "prob" type: "Softmax" bottom: "ip" top: "prob" include { phase: TEST } }
"""

INPUT_NET = """
name: "input"
force_backward: true
layer { name: "in" type: "Input" top: "x" input_param { shape { dim: 2 dim: 3 } } }
layer { name: "ip" type: "InnerProduct" bottom: "x" top: "y"
        inner_product_param { num_output: 4 weight_filler { type: "gaussian" std: 1 }
                              bias_filler { type: "gaussian" std: 1 } } }
"""


@pytest.fixture
def small(tmp_path):
    return write(tmp_path / 'small.prototxt', NET)


@pytest.fixture
def input_net(tmp_path):
    return write(tmp_path / 'input.prototxt', INPUT_NET)


def test_forward_equals_strata_test(small, tmp_path, tool):
    strata.set_random_seed(3)
    net = strata.Net(small, strata.TEST)
    out = net.forward()
    weights = str(tmp_path / 'small.caffemodel')
    net.save(weights)
    status, log = tool('test', '--model=' + small, '--weights=' + weights, '--iterations=1')
    assert status == 0, log
    logged = [float(v) for v in re.findall(r'Batch 0, prob = (\S+)', log)]
    assert len(logged) == out['prob'].size
    np.testing.assert_allclose(out['prob'].ravel(), logged, rtol=1e-5)
    loss = float(re.search(r'Batch 0, loss = (\S+)', log).group(1))
    assert out['loss'].shape == () and float(out['loss']) == pytest.approx(loss, rel=1e-5)


def test_names_as_pycaffe(small):
    net = strata.Net(small, strata.TRAIN)
    assert list(net.blobs) == ['data', 'label', 'conv', 'ip', 'loss']
    assert list(net.params) == ['conv', 'ip']
    assert [b.shape for b in net.params['conv']] == [(16, 3, 3, 3), (16,)]
    assert list(net.layer_dict) == ['data', 'conv', 'relu', 'ip', 'loss']
    assert net.layer_dict['conv'].type == 'Convolution'
    assert net.top_names['data'] == ['data', 'label'] and net.bottom_names['loss'] == ['ip', 'label']
    assert net.outputs == ['loss'] and net.inputs == []
    assert net.blobs['conv'].count == 4 * 16 * 3 * 3 and net.blobs['ip'].shape == (4, 3)
    assert 'Python' in strata.layer_type_list() and 'Convolution' in strata.layer_type_list()


def test_input_forward_backward_against_numpy(input_net):
    net = strata.Net(input_net, strata.TEST)
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    w, b = (p.data.copy() for p in net.params['ip'])
    y = net.forward(x=x)['y']
    np.testing.assert_allclose(y, x @ w.T + b, rtol=1e-6)
    dy = np.ones((2, 4), dtype=np.float32)
    dx = net.backward(y=dy)['x']
    np.testing.assert_allclose(dx, dy @ w, rtol=1e-6)
    np.testing.assert_allclose(net.params['ip'][0].diff, dy.T @ x, rtol=1e-6)


def test_forward_all_batches_and_drops_padding(input_net):
    net = strata.Net(input_net, strata.TEST)
    x = np.random.RandomState(0).rand(5, 3).astype(np.float32)
    w, b = (p.data.copy() for p in net.params['ip'])
    out = net.forward_all(x=x)['y']
    assert out.shape == (5, 4)
    np.testing.assert_allclose(out, x @ w.T + b, rtol=1e-5)


def test_an_array_outlives_a_reshape_that_replaces_the_memory():
    b = strata.Blob(2, 3)
    a = b.data
    a[...] = 7
    b.reshape(40, 30)  # a larger block: the array keeps the old one
    assert (a == 7).all() and not b.data.any()


def test_data_is_a_view_of_the_nets_memory(input_net):
    net = strata.Net(input_net, strata.TEST)
    w = net.params['ip'][0].data
    w[...] = 0
    net.params['ip'][1].data[...] = np.arange(4)
    net.blobs['x'].data[...] = 1
    net.forward()
    np.testing.assert_array_equal(net.blobs['y'].data, np.tile(np.arange(4, dtype=np.float32), (2, 1)))
    # the same memory through a second view
    assert np.shares_memory(net.params['ip'][0].data, w)


def test_reshape_copy_from_share_with(input_net, tmp_path):
    a = strata.Net(input_net, strata.TEST)
    a.blobs['x'].reshape(7, 3)
    a.reshape()
    assert a.blobs['y'].shape == (7, 4)
    weights = str(tmp_path / 'a.caffemodel')
    a.save(weights)
    b = strata.Net(input_net, strata.TEST)
    b.copy_from(weights)
    np.testing.assert_array_equal(a.params['ip'][0].data, b.params['ip'][0].data)
    c = strata.Net(input_net, weights, strata.TEST)
    np.testing.assert_array_equal(a.params['ip'][1].data, c.params['ip'][1].data)
    d = strata.Net(input_net, strata.TEST)
    d.share_with(a)
    assert np.shares_memory(d.params['ip'][0].data, a.params['ip'][0].data)


def test_save_hdf5_and_load_hdf5(input_net, tmp_path):
    a = strata.Net(input_net, strata.TEST)
    a.params['ip'][0].data[...] = np.arange(12, dtype=np.float32).reshape(4, 3)
    h5 = str(tmp_path / 'a.caffemodel.h5')
    a.save_hdf5(h5)
    with open(h5, 'rb') as f:
        assert f.read(8) == b'\x89HDF\r\n\x1a\n'   # Caffe's HDF5 layout, which Caffe's load_hdf5 reads
    b = strata.Net(input_net, strata.TEST)
    b.load_hdf5(h5)
    for j in range(2):
        np.testing.assert_array_equal(a.params['ip'][j].data, b.params['ip'][j].data)
    c = strata.Net(input_net, h5, strata.TEST)          # copy_from and the constructor tell the format themselves
    np.testing.assert_array_equal(a.params['ip'][0].data, c.params['ip'][0].data)
    binary = str(tmp_path / 'a.caffemodel')
    a.save(binary)
    with pytest.raises(strata.Error, match='is not an HDF5 file'):
        b.load_hdf5(binary)
    with pytest.raises(strata.Error, match='cannot open'):
        b.load_hdf5(str(tmp_path / 'missing.h5'))


def test_wrong_shape_is_one_clear_error(input_net):
    net = strata.Net(input_net, strata.TEST)
    with pytest.raises(strata.Error, match=r'cannot assign an array of shape \(3, 3\) to \.data of a blob of '
                                           r'shape \(2, 3\)'):
        net.blobs['x'].data = np.zeros((3, 3), dtype=np.float32)
    net.blobs['x'].data = np.ones((2, 3))
    assert net.blobs['x'].data.sum() == 6
    with pytest.raises(strata.Error, match=r"input 'x' has \(5,\) items, the net's batch is 2"):
        net.forward(x=np.zeros((5, 3), dtype=np.float32))
    with pytest.raises(strata.Error, match='must be the net inputs'):
        net.forward(z=np.zeros((2, 3)))


def test_missing_files_are_errors(tmp_path, input_net):
    with pytest.raises(strata.Error, match='nope.prototxt'):
        strata.Net(str(tmp_path / 'nope.prototxt'), strata.TEST)
    with pytest.raises(strata.Error, match='phase must be'):
        strata.Net(input_net, 5)


def test_params_outlive_the_expression_that_made_them(input_net):
    w = strata.Net(input_net, strata.TEST).params['ip'][0]
    assert w.shape == (4, 3) and w.data.shape == (4, 3)
    blobs = strata.Net(input_net, strata.TEST).layer_dict['ip'].blobs
    assert [b.shape for b in blobs] == [(4, 3), (4,)]
