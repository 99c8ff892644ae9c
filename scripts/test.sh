#!/usr/bin/env bash
# Installs the dependencies, checks docs/architecture.md's layering (scripts/check_layering.py), builds Strata,
# and runs every test: the unit tests and the MPI tests (under mpirun at 1-8 ranks) in the Release build, then
# the unit tests and the Python tests that run the tool again under AddressSanitizer and UndefinedBehaviorSanitizer,
# then every parser's libFuzzer target for 30 s each (scripts/fuzz.sh). The last two share one clang build
# (build-sanitize: ASan, UBSan and libFuzzer's coverage), so CI compiles the library twice, not three times.
# Exits non-zero if anything fails.
#   bash scripts/test.sh            # everything
#   STRATA_SKIP_SANITIZE=1 bash scripts/test.sh   # no sanitizer build (and so no fuzzing)
#   STRATA_SKIP_FUZZ=1 bash scripts/test.sh       # no fuzzing (bash scripts/fuzz.sh runs only that stage)
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/install_deps.sh

# docs/architecture.md's layer order against every #include, and the names its traces give (a second);
# first the checker against a planted fault of each kind.
python3 scripts/check_layering.py --self-test
python3 scripts/check_layering.py

# mpirun refuses root without both of these (CI runs as root).
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# Two cores: one BLAS thread per process keeps oversubscribed MPI tests from thrashing.
export OPENBLAS_NUM_THREADS=${OPENBLAS_NUM_THREADS:-1} OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
jobs=$(nproc)

cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j "$jobs"
(cd build && ctest --output-on-failure --timeout 900)

if [ "${STRATA_SKIP_SANITIZE:-0}" != 1 ]; then
  # STRATA_FUZZ: ASan and UBSan, with the coverage libFuzzer steers by (the unit tests link no fuzzer main).
  CC=clang CXX=clang++ cmake -S . -B build-sanitize -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSTRATA_FUZZ=ON \
    -DSTRATA_USE_CUDA=OFF >/dev/null
  cmake --build build-sanitize -j "$jobs" --target strata_tests
  # Leak checking covers our code; the MPI and protobuf runtimes keep global state until exit by design.
  export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}
  export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
  (cd build-sanitize && ctest --output-on-failure --timeout 1800 -R '^unit$')
  python=$(sed -n 's/^STRATA_PYTHON_EXECUTABLE:INTERNAL=//p' build/CMakeCache.txt)
  if [ -n "$python" ]; then
    # The tools' Python layer path (libstrata_python.so embeds the interpreter) under the sanitizers: the Python
    # tests that run the tool, with this build's. The interpreter's state at exit is not a leak
    # (tests/sanitizers/python_lsan.supp); the slow unwinder follows libpython's frames to match it.
    cmake --build build-sanitize -j "$jobs" --target strata strata_python strata_python_ext
    ASAN_OPTIONS=$ASAN_OPTIONS:fast_unwind_on_malloc=0 LSAN_OPTIONS=suppressions=$PWD/tests/sanitizers/python_lsan.supp \
      PYTHONPATH=build/python STRATA_BINARY_DIR=build-sanitize \
      "$python" -m pytest -q -p no:cacheprovider -m tool tests/python
  fi
  if [ "${STRATA_SKIP_FUZZ:-0}" != 1 ]; then
    STRATA_FUZZ_BUILD=build-sanitize bash scripts/fuzz.sh
  fi
fi
