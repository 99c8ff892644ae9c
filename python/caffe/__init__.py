"""`import caffe` for Caffe's own scripts: the strata package under Caffe's names (caffe.Net, caffe.TEST,
caffe.io, caffe.net_spec, caffe.draw, caffe.Layer, the solvers...)."""

import sys

import strata
from strata import *  # noqa: F401,F403
from strata import Layer, io, net_spec, draw, coord_map, layers, params, NetSpec, to_proto  # noqa: F401

for _name in ('io', 'net_spec', 'draw', 'coord_map', 'classifier', 'detector'):
    sys.modules['caffe.' + _name] = getattr(strata, _name)
sys.modules['caffe.pycaffe'] = strata.net
try:
    from .proto import caffe_pb2  # noqa: F401  (caffe.proto.caffe_pb2, as pycaffe has it; needs python3-protobuf)
except ImportError:
    pass

__all__ = strata.__all__
