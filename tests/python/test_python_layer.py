"""Python layers (type "Python"): forward and backward against finite differences, what Strata sets on the layer,
parameters added in setup, and errors as one message naming the layer and the exception's last line; in the
python3 process and in `strata train/test` (which load the interpreter module for them)."""

import numpy as np
import pytest

import strata
from conftest import write

CHAIN = """
name: "chain"
force_backward: true
layer { name: "in" type: "Input" top: "x" input_param { shape { dim: 2 dim: 3 dim: 4 } } }
layer { name: "scale" type: "Python" bottom: "x" top: "s"
        python_param { module: "py_test_layers" layer: "Scale" param_str: "1.5" } }
layer { name: "square" type: "Python" bottom: "s" top: "y"
        python_param { module: "py_test_layers" layer: "Square" } }
"""


def one_layer_net(tmp_path, module, layer, extra=''):
    return write(tmp_path / 'one.prototxt', """
name: "one"
layer { name: "in" type: "Input" top: "x" input_param { shape { dim: 2 dim: 3 } } }
layer { name: "py" type: "Python" bottom: "x" top: "y" %s
        python_param { module: "%s" layer: "%s" param_str: "hello" } }
""" % (extra, module, layer))


def objective(net, x, dy):
    return float(np.sum(net.forward(x=x)['y'].astype(np.float64) * dy))


def test_forward_backward_and_gradient_check(tmp_path):
    net = strata.Net(write(tmp_path / 'chain.prototxt', CHAIN), strata.TRAIN)
    assert list(net.params) == ['scale'] and net.params['scale'][0].data[0] == 1.5
    rng = np.random.RandomState(1)
    x = rng.uniform(-1, 1, (2, 3, 4)).astype(np.float32)
    dy = rng.uniform(-1, 1, (2, 3, 4)).astype(np.float32)
    y = net.forward(x=x)['y']
    np.testing.assert_allclose(y, (1.5 * x) ** 2, rtol=1e-6)
    net.clear_param_diffs()
    dx = net.backward(y=dy)['x'].copy()
    dw = net.params['scale'][0].diff[0]
    np.testing.assert_allclose(dx, 2 * 1.5 * 1.5 * x * dy, rtol=1e-5)
    # finite differences of sum(y * dy), in the inputs and in the layer's parameter
    eps = 1e-2
    for index in [(0, 0, 0), (1, 2, 3), (0, 1, 2)]:
        xp, xm = x.copy(), x.copy()
        xp[index] += eps
        xm[index] -= eps
        numeric = (objective(net, xp, dy) - objective(net, xm, dy)) / (2 * eps)
        assert dx[index] == pytest.approx(numeric, rel=1e-2, abs=1e-3)
    w = net.params['scale'][0].data
    w[0] = 1.5 + eps
    up = objective(net, x, dy)
    w[0] = 1.5 - eps
    down = objective(net, x, dy)
    w[0] = 1.5
    assert dw == pytest.approx((up - down) / (2 * eps), rel=1e-2)


def test_param_str_phase_and_layers(tmp_path):
    net = strata.Net(one_layer_net(tmp_path, 'py_test_layers', 'PhaseAndParam'), strata.TEST)
    layer = net.layer_dict['py']
    assert isinstance(layer, strata.Layer) and layer.type == 'Python'
    assert layer.seen == ('hello', strata.TEST)
    assert net.forward()['y'][0] == strata.TEST
    assert strata.Net(one_layer_net(tmp_path, 'py_test_layers', 'PhaseAndParam'), strata.TRAIN).forward()['y'][0] \
        == strata.TRAIN


def test_missing_module_is_one_clear_error(tmp_path):
    with pytest.raises(strata.Error) as e:
        strata.Net(one_layer_net(tmp_path, 'no_such_module', 'X'), strata.TEST)
    assert "layer 'py' (Python)" in str(e.value)
    assert "ModuleNotFoundError: No module named 'no_such_module'" in str(e.value)
    with pytest.raises(strata.Error, match="Python module 'py_test_layers' has no class 'Nope'"):
        strata.Net(one_layer_net(tmp_path, 'py_test_layers', 'Nope'), strata.TEST)


def test_exception_is_one_clear_error(tmp_path):
    net = strata.Net(one_layer_net(tmp_path, 'py_test_layers', 'Raises'), strata.TEST)
    with pytest.raises(strata.Error) as e:
        net.forward()
    message = str(e.value)
    assert "layer 'py' (Python)" in message and 'py_test_layers.Raises.forward' in message
    assert message.endswith('ValueError: forward went wrong on purpose')
    assert '\n' not in message


def test_tool_reports_python_errors(tmp_path, tool):
    model = one_layer_net(tmp_path, 'py_test_layers', 'Raises')
    status, log = tool('time', '--model=' + model, '--iterations=1')
    assert status == 1, log  # the tool's error exit, not a crash or a sanitizer's abort
    errors = [line for line in log.splitlines() if line.startswith('error:')]
    assert len(errors) == 1, log
    assert "layer 'py' (Python)" in errors[0] and errors[0].endswith('ValueError: forward went wrong on purpose')
    status, log = tool('time', '--model=' + one_layer_net(tmp_path, 'no_such_module', 'X'), '--iterations=1')
    errors = [line for line in log.splitlines() if line.startswith('error:')]
    assert status == 1 and len(errors) == 1 and "No module named 'no_such_module'" in errors[0], log
