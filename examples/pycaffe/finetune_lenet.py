#!/usr/bin/env python3
"""Fine-tunes LeNet on Fashion-MNIST from Python, its data from a Python layer (layers/fashion_data.py): loads a
caffemodel (the one scripts/quickstart.sh trains, when there is one), measures the test accuracy, trains, measures
again and saves the weights.

    PYTHONPATH=build/python:examples/pycaffe/layers python3 examples/pycaffe/finetune_lenet.py \\
        [--weights=data/lenet_fashion_iter_10000.caffemodel] [--iterations=1000] [--out=data/lenet_pydata.caffemodel]
"""

import argparse
import os

import numpy as np

import strata


def test_accuracy(solver, batches):
    net = solver.test_nets[0]   # shares the training net's weights
    return float(np.mean([net.forward()['accuracy'] for _ in range(batches)]))


def main():
    p = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    p.add_argument('--solver', default='examples/pycaffe/lenet_pydata_solver.prototxt')
    p.add_argument('--weights', default='data/lenet_fashion_iter_10000.caffemodel',
                   help='the caffemodel to start from; training starts from scratch when it does not exist')
    p.add_argument('--iterations', type=int, default=1000)
    p.add_argument('--test-batches', type=int, default=100, help='batches of 100 test images per measurement')
    p.add_argument('--out', default='data/lenet_pydata.caffemodel')
    args = p.parse_args()
    strata.set_mode_cpu()
    solver = strata.get_solver(args.solver)
    if os.path.exists(args.weights):
        solver.net.copy_from(args.weights)
        print('weights from %s' % args.weights)
    else:
        print('%s does not exist: training from scratch' % args.weights)
    print('test accuracy before: %.4f' % test_accuracy(solver, args.test_batches))
    solver.step(args.iterations)
    print('iteration %d, training loss %.4f' % (solver.iter, float(solver.net.blobs['loss'].data)))
    print('test accuracy after: %.4f' % test_accuracy(solver, args.test_batches))
    solver.net.save(args.out)
    print('saved %s' % args.out)


if __name__ == '__main__':
    main()
