#!/usr/bin/env bash
# Builds the libFuzzer targets (fuzz/: clang, ASan + UBSan) in build-fuzz/ (or STRATA_FUZZ_BUILD, a build
# configured with -DSTRATA_FUZZ=ON: scripts/test.sh passes its sanitizer build) and runs each for a bounded time
# from its seed corpus, fuzz/corpus/<target>/; prints the inputs executed per target. Exits non-zero at the
# first target that finds a crash, leaving the input in build-fuzz/crashes/<target>/ (fuzz/README.md).
#   bash scripts/fuzz.sh                    # every target, 30 s each
#   FUZZ_SECONDS=5 bash scripts/fuzz.sh net_prototxt datum
#   FUZZ_SEED=0 FUZZ_SECONDS=600 bash scripts/fuzz.sh   # longer, with a random seed: exploring, not CI
# Inputs found along the way are kept in build-fuzz/corpus/<target>/ (not in the repository), so a rerun
# starts from where the last one got to.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${FUZZ_SECONDS:-30}
jobs=$(nproc)

build=${STRATA_FUZZ_BUILD:-build-fuzz}

if [ ! -f "$build/CMakeCache.txt" ]; then
  CC=clang CXX=clang++ cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSTRATA_FUZZ=ON \
    -DSTRATA_USE_CUDA=OFF -DSTRATA_BUILD_TESTS=OFF >/dev/null
fi
grep -q '^STRATA_FUZZ:BOOL=ON' "$build/CMakeCache.txt" ||
  { echo "fuzz.sh: $build is not configured with -DSTRATA_FUZZ=ON" >&2; exit 2; }
cmake --build "$build" -j "$jobs" --target fuzzers

targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  for f in fuzz/*.cpp; do targets+=("$(basename "$f" .cpp)"); done
fi

# One BLAS/OpenMP thread: inputs are tiny, and threads would only make runs less reproducible.
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
failed=0
printf '%-18s %12s  %s\n' target inputs result
for t in "${targets[@]}"; do
  [ -f "fuzz/$t.cpp" ] || { echo "fuzz.sh: no target '$t' (fuzz/*.cpp)" >&2; exit 2; }
  work=$build/corpus/$t crashes=$build/crashes/$t log=$build/logs/$t.log
  mkdir -p "$work" "$crashes" "$build/logs"
  # A dictionary named for the target or for the format after its last _ (prototxt.dict serves both nets and solvers).
  dict=()
  for d in "fuzz/$t.dict" "fuzz/${t##*_}.dict"; do
    if [ -f "$d" ]; then dict=(-dict="$d"); break; fi
  done
  # -timeout: one input running 10 s is a hang. -seed: a fixed one (FUZZ_SEED, default 1) makes CI explore the
  # same way every run, so a result does not change with the draw; FUZZ_SEED=0 draws one.
  if "$build"/fuzz/fuzz_"$t" -max_total_time="$seconds" -timeout=10 -seed="${FUZZ_SEED:-1}" -print_final_stats=1 \
       -artifact_prefix="$crashes/" "${dict[@]}" "$work" "fuzz/corpus/$t" >"$log" 2>&1; then
    result=ok
  else
    result="FAILED (log: $log)"
    failed=1
  fi
  inputs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  printf '%-18s %12s  %s\n' "$t" "${inputs:-?}" "$result"
  if [ "$result" != ok ]; then
    tail -n 60 "$log"
    ls "$crashes"
  fi
done
exit $failed
