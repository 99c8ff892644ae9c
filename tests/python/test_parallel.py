"""mpirun -np 2 python3 script.py trains data-parallel with the engine of `strata train`: a Python data layer
feeding 2 ranks gives the weights of one rank with the whole batch (to rounding: the two halves' gradients are
summed by the allreduce instead of in one product)."""

import os
import subprocess
import sys

import numpy as np

import strata
from conftest import HERE


def run(args, tmp_path):
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT='1', OMPI_ALLOW_RUN_AS_ROOT_CONFIRM='1')
    proc = subprocess.run(args, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=300)
    return proc.returncode, proc.stdout.decode(errors='replace')


def test_two_ranks_equal_one_with_the_whole_batch(tmp_path):
    script = os.path.join(HERE, 'dp_train.py')
    one, two = str(tmp_path / 'one.caffemodel'), str(tmp_path / 'two.caffemodel')
    (tmp_path / 'a').mkdir()
    (tmp_path / 'b').mkdir()
    status, log = run([sys.executable, script, one, str(tmp_path / 'a')], tmp_path)
    assert status == 0, log
    assert 'rank 0 of 1' in log
    status, log = run(['mpirun', '-np', '2', '--oversubscribe', '--bind-to', 'none', '--mca', 'btl', 'self,vader',
                       sys.executable, script, two, str(tmp_path / 'b')], tmp_path)
    assert status == 0, log
    assert 'rank 0 of 2' in log and 'rank 1 of 2' in log, log
    model = str(tmp_path / 'a' / 'dp_net.prototxt')
    a = strata.Net(model, strata.TEST, weights=one).params['ip'][0].data.copy()
    b = strata.Net(model, strata.TEST, weights=two).params['ip'][0].data.copy()
    np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def test_python_data_layer_in_strata_train_under_mpirun(tmp_path):
    """The same net and solver under `mpirun -np 2 strata train`: the tool embeds the interpreter on each rank, and
    strata.rank()/size() in the Python data layer give the tool's ranks."""
    from conftest import BINARY_DIR, LAYERS_DIR
    script = os.path.join(HERE, 'dp_train.py')
    one = str(tmp_path / 'one.caffemodel')
    status, log = run([sys.executable, script, one, str(tmp_path)], tmp_path)
    assert status == 0, log
    env_path = os.pathsep.join([HERE, LAYERS_DIR])
    status, log = run(['mpirun', '-np', '2', '--oversubscribe', '--bind-to', 'none', '--mca', 'btl', 'self,vader',
                       '-x', 'PYTHONPATH=' + env_path, os.path.join(BINARY_DIR, 'bin', 'strata'), 'train',
                       '--solver=' + str(tmp_path / 'dp_solver.prototxt')], tmp_path)
    assert status == 0, log
    assert 'Data-parallel training on 2 ranks' in log, log
    model = str(tmp_path / 'dp_net.prototxt')
    a = strata.Net(model, strata.TEST, weights=one).params['ip'][0].data.copy()
    b = strata.Net(model, strata.TEST, weights=str(tmp_path / 'dp_iter_8.caffemodel')).params['ip'][0].data.copy()
    np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
