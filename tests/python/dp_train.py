"""Trains a small net whose data is a Python layer (py_test_layers.ShardedData) for 8 SGD steps and saves the
weights from rank 0: run alone, or as `mpirun -np N python3 dp_train.py OUT DIR`, where it trains data-parallel.
Used by test_parallel.py."""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import strata  # noqa: E402

out, work = sys.argv[1], sys.argv[2]
net = os.path.join(work, 'dp_net.prototxt')
solver_file = os.path.join(work, 'dp_solver.prototxt')
if strata.rank() == 0:
    with open(net, 'w') as f:
        f.write("""
name: "dp"
layer { name: "data" type: "Python" top: "x" top: "t"
        python_param { module: "py_test_layers" layer: "ShardedData" param_str: "8" } }
layer { name: "ip" type: "InnerProduct" bottom: "x" top: "y"
        inner_product_param { num_output: 2 weight_filler { type: "gaussian" std: 0.5 } } }
layer { name: "loss" type: "EuclideanLoss" bottom: "y" bottom: "t" top: "loss" }
""")
    with open(solver_file, 'w') as f:
        f.write('net: "%s"\nbase_lr: 0.1\nmomentum: 0.9\nlr_policy: "fixed"\nmax_iter: 8\ndisplay: 0\n'
                'snapshot_prefix: "%s"\nrandom_seed: 5\nsolver_mode: CPU\n' % (net, os.path.join(work, 'dp')))
else:
    import time
    while not os.path.exists(solver_file):
        time.sleep(0.05)
    time.sleep(0.2)
solver = strata.SGDSolver(solver_file)
solver.step(8)
print('rank %d of %d: loss %g' % (strata.rank(), strata.size(), float(solver.net.blobs['loss'].data)))
if strata.rank() == 0:
    solver.net.save(out)
