#!/usr/bin/env python3
"""A training loop driven from Python against the tool's own loop: the same solver (LeNet on Fashion-MNIST by
default) runs N iterations as one solver.step(N) (Solver::Step's loop, what `strata train` runs) and as N calls
of solver.step(1) from Python, alternating, R rounds; prints a table of the median time per iteration.

    PYTHONPATH=build/python OMP_NUM_THREADS=1 python3 benchmarks/python_step_loop.py \\
        [--solver=models/lenet_fashion/lenet_solver.prototxt] [--iterations=100] [--rounds=5]
(needs data/fashion_mnist_*_lmdb, as scripts/quickstart.sh writes them)"""

import argparse
import os
import statistics
import sys
import tempfile
import time

import strata


def main():
    p = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    p.add_argument('--solver', default='models/lenet_fashion/lenet_solver.prototxt')
    p.add_argument('--iterations', type=int, default=100)
    p.add_argument('--rounds', type=int, default=5)
    args = p.parse_args()
    # No snapshots or tests inside the timed iterations: a copy of the solver with those turned off.
    drop = ('test_interval', 'snapshot', 'display', 'max_iter', 'test_initialization')
    text = ''.join(line for line in open(args.solver, encoding='utf-8').readlines()
                   if line.split(':')[0].strip() not in drop)
    with tempfile.NamedTemporaryFile('w', suffix='.prototxt', delete=False) as f:
        f.write(text + '\ntest_interval: 1000000000\nsnapshot: 0\ndisplay: 0\nmax_iter: 1000000000\n'
                'test_initialization: false\n')
    solver = strata.get_solver(f.name)
    os.unlink(f.name)
    solver.step(10)  # warm up: allocations, oneDNN primitives, the data layer's prefetch
    whole, single = [], []
    for _ in range(args.rounds):
        t = time.perf_counter()
        solver.step(args.iterations)
        whole.append((time.perf_counter() - t) / args.iterations)
        t = time.perf_counter()
        for _ in range(args.iterations):
            solver.step(1)
        single.append((time.perf_counter() - t) / args.iterations)
    a, b = statistics.median(whole), statistics.median(single)
    print('| loop | ms / iteration (median of %d rounds of %d) |' % (args.rounds, args.iterations))
    print('| --- | --- |')
    print('| solver.step(%d) (Solver::Step, as strata train) | %.3f |' % (args.iterations, a * 1e3))
    print('| %d x solver.step(1) from Python | %.3f |' % (args.iterations, b * 1e3))
    print('| Python-driven / one step(N) | %.3f |' % (b / a))
    return 0


if __name__ == '__main__':
    sys.exit(main())
