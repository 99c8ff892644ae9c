"""Caffe's caffe_pb2: strata.proto's message classes, which have caffe.proto's names and field numbers (and
Strata's additions), so `text_format.Merge(open(f).read(), caffe_pb2.NetParameter())` reads a Caffe prototxt."""

from strata.proto.strata_pb2 import *  # noqa: F401,F403
from strata.proto.strata_pb2 import DESCRIPTOR  # noqa: F401
