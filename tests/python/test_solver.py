"""Solvers from Python against `strata train`: the same iterations give the same weights, to the bit; and Caffe's
linreg example (a Python loss) trains both ways."""

import os
import re

import numpy as np
import pytest

import strata
from conftest import write, SOURCE_DIR

NET = """
name: "lin"
layer { name: "data" type: "DummyData" top: "x" top: "t"
        dummy_data_param { shape { dim: 8 dim: 5 } shape { dim: 8 dim: 2 }
                           data_filler { type: "gaussian" } data_filler { type: "gaussian" } } }
layer { name: "ip" type: "InnerProduct" bottom: "x" top: "y"
        inner_product_param { num_output: 2 weight_filler { type: "xavier" } bias_filler { type: "constant" } } }
layer { name: "loss" type: "EuclideanLoss" bottom: "y" bottom: "t" top: "loss" }
"""


def solver_file(tmp_path, type_name, max_iter=6, extra=''):
    write(tmp_path / 'net.prototxt', NET)
    return write(tmp_path / ('%s_solver.prototxt' % type_name), """
net: "%s"
type: "%s"
base_lr: 0.05
momentum: 0.9
lr_policy: "fixed"
max_iter: %d
display: 1
snapshot_prefix: "%s"
random_seed: 11
solver_mode: CPU
%s
""" % (tmp_path / 'net.prototxt', type_name, max_iter, tmp_path / ('py_' + type_name), extra))


def weights(path, model):
    net = strata.Net(model, strata.TEST, weights=path)
    return [b.data.copy() for blobs in net.params.values() for b in blobs]


@pytest.mark.parametrize('type_name', ['SGD', 'Adam', 'KFAC'])
def test_step_equals_strata_train(tmp_path, tool, type_name):
    extra = {'Adam': 'momentum2: 0.999', 'KFAC': 'kfac_param { fisher: EMPIRICAL }'}.get(type_name, '')
    solver_path = solver_file(tmp_path, type_name, extra=extra)
    solver = getattr(strata, type_name + 'Solver')(solver_path)
    assert solver.type == type_name and solver.iter == 0
    solver.step(2)
    solver.step(4)
    assert solver.iter == 6
    solver.snapshot()
    snapshot = str(tmp_path / ('py_%s_iter_6.caffemodel' % type_name))
    os.replace(snapshot, snapshot + '.python')
    # the tool's final snapshot lands under the same name
    status, log = tool('train', '--solver=' + solver_path)
    assert status == 0, log
    model = str(tmp_path / 'net.prototxt')
    python_weights, tool_weights = weights(snapshot + '.python', model), weights(snapshot, model)
    assert len(python_weights) == 2
    for a, b in zip(python_weights, tool_weights):
        np.testing.assert_array_equal(a, b)


def test_get_solver_net_test_nets_restore(tmp_path):
    path = solver_file(tmp_path, 'Nesterov', extra='test_iter: 1\ntest_interval: 100\ntest_net: "%s"' %
                       (tmp_path / 'net.prototxt'))
    solver = strata.get_solver(path)
    assert solver.type == 'Nesterov' and len(solver.test_nets) == 1
    solver.step(3)
    solver.snapshot()
    w3 = solver.net.params['ip'][0].data.copy()
    solver.step(2)
    w5 = solver.net.params['ip'][0].data.copy()
    again = strata.get_solver(path)
    again.restore(str(tmp_path / 'py_Nesterov_iter_3.solverstate'))
    assert again.iter == 3
    np.testing.assert_array_equal(again.net.params['ip'][0].data, w3)
    again.step(2)
    np.testing.assert_array_equal(again.net.params['ip'][0].data, w5)
    # the test net shares the train net's weights
    assert np.shares_memory(solver.test_nets[0].params['ip'][0].data, solver.net.params['ip'][0].data)


@pytest.mark.parametrize('lifetime', ['', 'blob_lifetime: KEEP', 'blob_lifetime: FREE_AFTER_USE'])
def test_blobs_after_a_step(tmp_path, lifetime):
    # Caffe's way unless the file says otherwise: the last step's values and gradients stay readable.
    solver = strata.SGDSolver(solver_file(tmp_path, 'SGD', extra=lifetime))
    solver.step(1)
    kept = lifetime != 'blob_lifetime: FREE_AFTER_USE'
    assert solver.net.blobs['y'].diff.any() == kept and solver.net.blobs['y'].data.any() == kept
    # the data layer's blobs and the loss stay in either case
    assert solver.net.blobs['x'].data.any() and solver.net.blobs['loss'].data.any()


def test_an_array_holds_the_memory_a_step_would_free(tmp_path):
    # While a NumPy array views a blob, freeing after use leaves the blob's memory to it (the array never dangles):
    # the next steps write into it as if it were kept.
    solver = strata.SGDSolver(solver_file(tmp_path, 'SGD', extra='blob_lifetime: FREE_AFTER_USE'))
    solver.step(1)
    y, dy = solver.net.blobs['y'].data, solver.net.blobs['y'].diff
    solver.step(1)
    assert y.any() and dy.any()
    assert np.shares_memory(y, solver.net.blobs['y'].data) and np.shares_memory(dy, solver.net.blobs['y'].diff)
    last = y.copy()
    solver.step(1)
    assert not np.array_equal(y, last)  # a new batch's values
    del y, dy
    solver.step(1)
    assert not solver.net.blobs['y'].data.any()  # freed again once no array holds it


def test_solver_errors(tmp_path):
    with pytest.raises(strata.Error, match='nope.prototxt'):
        strata.SGDSolver(str(tmp_path / 'nope.prototxt'))


def losses(log):
    return [float(v) for v in re.findall(r'Iteration \d+.*, loss = (\S+)', log)]


def test_linreg_trains_with_the_tool_and_from_python(tool, monkeypatch):
    status, log = tool('train', '--solver=examples/pycaffe/linreg_solver.prototxt')
    assert status == 0, log
    tool_losses = losses(log)
    assert len(tool_losses) >= 4 and tool_losses[-1] < tool_losses[0] / 2, log
    monkeypatch.chdir(SOURCE_DIR)
    solver = strata.SGDSolver('examples/pycaffe/linreg_solver.prototxt')
    solver.step(1)
    first = float(solver.net.blobs['loss'].data[0])
    solver.step(19)
    assert float(solver.net.blobs['loss'].data[0]) < first / 2
    # the first loss the tool logged is the same iteration's
    assert first == pytest.approx(tool_losses[0], rel=1e-5)


def test_solver_weights_field_fine_tunes(tmp_path):
    """Caffe's solver-level `weights:` loads before the first iteration, as pycaffe's solvers (Caffe's Solver) do."""
    trained = strata.SGDSolver(solver_file(tmp_path, 'SGD', max_iter=3))
    trained.solve()
    trained.snapshot()
    model = str(tmp_path / 'py_SGD_iter_3.caffemodel')
    want = weights(model, str(tmp_path / 'net.prototxt'))
    # base_lr 0: the fine-tuning solver's weights are the file's, not its fillers'.
    path = solver_file(tmp_path, 'SGD', max_iter=1, extra='weights: "%s"' % model)
    text = open(path).read().replace('base_lr: 0.05', 'base_lr: 0')
    write(tmp_path / 'ft_solver.prototxt', text)
    tuned = strata.SGDSolver(str(tmp_path / 'ft_solver.prototxt'))
    got = [b.data.copy() for blobs in tuned.net.params.values() for b in blobs]
    assert len(got) == len(want) == 2
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)
    fresh = strata.SGDSolver(solver_file(tmp_path, 'SGD', max_iter=1))
    assert not np.array_equal(fresh.net.params['ip'][0].data, want[0])


def test_lenet_fine_tunes_from_a_python_data_layer(tmp_path, monkeypatch):
    """The worked example's net (examples/pycaffe/lenet_pydata.prototxt): Fashion-MNIST from a Python data layer
    feeds LeNet, which learns from it; the script saves weights that load into the net again."""
    import fashion_data
    monkeypatch.chdir(SOURCE_DIR)
    solver = strata.get_solver('examples/pycaffe/lenet_pydata_solver.prototxt')
    test = solver.test_nets[0]
    test.forward()
    # The TEST split is read in order: the first batch is the first 100 test images, scaled as the LMDB net's.
    root = '/usr/share/datasets/fashion-mnist'
    images = fashion_data.read_idx(root + '/t10k-images-idx3-ubyte.gz')[:100, None] / 256.0
    np.testing.assert_array_equal(test.blobs['data'].data, images.astype(np.float32))
    labels = fashion_data.read_idx(root + '/t10k-labels-idx1-ubyte.gz')[:100]
    np.testing.assert_array_equal(test.blobs['label'].data, labels)

    def accuracy():
        return np.mean([test.forward()['accuracy'] for _ in range(10)])
    before = accuracy()
    solver.step(100)
    after = accuracy()
    assert before < 0.3 and after > 0.55, (before, after)
    out = str(tmp_path / 'ft.caffemodel')
    solver.net.save(out)
    again = strata.Net('examples/pycaffe/lenet_pydata.prototxt', out, strata.TEST)
    np.testing.assert_array_equal(again.params['ip2'][0].data, solver.net.params['ip2'][0].data)
