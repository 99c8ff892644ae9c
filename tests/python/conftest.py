"""The Python interface's tests: run by ctest (test `python`) with PYTHONPATH=BUILD/python, or by hand:
    PYTHONPATH=build/python STRATA_BINARY_DIR=build python3 -m pytest -q tests/python
The tests that run the strata tool (marked `tool`) take it from STRATA_BINARY_DIR/bin."""

import os
import subprocess
import sys

import pytest

SOURCE_DIR = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BINARY_DIR = os.environ.get('STRATA_BINARY_DIR', os.path.join(SOURCE_DIR, 'build'))
LAYERS_DIR = os.path.join(SOURCE_DIR, 'examples', 'pycaffe', 'layers')
HERE = os.path.dirname(os.path.abspath(__file__))

for d in (LAYERS_DIR, HERE):
    if d not in sys.path:
        sys.path.insert(0, d)


def run_tool(*args, cwd=SOURCE_DIR, extra_env=None):
    """Runs build/bin/strata with the example's layers on PYTHONPATH; returns (exit status, output)."""
    env = dict(os.environ)
    env['PYTHONPATH'] = os.pathsep.join([LAYERS_DIR, HERE, env.get('PYTHONPATH', '')])
    env.update(extra_env or {})
    proc = subprocess.run([os.path.join(BINARY_DIR, 'bin', 'strata')] + list(args), cwd=cwd, env=env,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=300)
    return proc.returncode, proc.stdout.decode(errors='replace')


@pytest.fixture
def tool():
    return run_tool


def pytest_configure(config):
    config.addinivalue_line('markers', 'tool: runs the strata tool (scripts/test.sh runs these against the '
                                       'sanitizer build: -m tool)')


def pytest_collection_modifyitems(items):
    for item in items:
        if 'tool' in getattr(item, 'fixturenames', ()):
            item.add_marker(pytest.mark.tool)


def write(path, text):
    with open(path, 'w') as f:
        f.write(text)
    return str(path)
