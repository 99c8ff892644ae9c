"""Strata from Python, with pycaffe's names: Net, Blob, the solvers, Python layers (strata.Layer), io,
net_spec, draw, coord_map, Classifier, Detector. The objects are libstrata's own (strata._strata); docs/python.md
has a worked example."""

from ._strata import (TRAIN, TEST, Error, Blob, Net, Solver, set_mode_cpu, set_mode_gpu, set_device,
                      set_random_seed, layer_type_list, get_solver, SGDSolver, NesterovSolver, AdaGradSolver,
                      RMSPropSolver, AdaDeltaSolver, AdamSolver, KFACSolver, rank, size)
from .layer import Layer
from . import net  # noqa: F401  (adds blobs, params, forward, ... to Net)
from .net_spec import layers, params, NetSpec, to_proto
from . import io, net_spec, draw, coord_map  # noqa: F401
from .classifier import Classifier
from .detector import Detector

__all__ = ['TRAIN', 'TEST', 'Error', 'Blob', 'Net', 'Solver', 'Layer', 'set_mode_cpu', 'set_mode_gpu',
           'set_device', 'set_random_seed', 'layer_type_list', 'get_solver', 'SGDSolver', 'NesterovSolver',
           'AdaGradSolver', 'RMSPropSolver', 'AdaDeltaSolver', 'AdamSolver', 'KFACSolver', 'rank', 'size',
           'layers', 'params', 'NetSpec', 'to_proto', 'io', 'net_spec', 'draw', 'coord_map', 'Classifier',
           'Detector']
