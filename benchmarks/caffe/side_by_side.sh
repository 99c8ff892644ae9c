#!/usr/bin/env bash
# Strata against BVLC Caffe, side by side, on the same prototxt, weights and data (CPU, float).
#
#   benchmarks/caffe/side_by_side.sh [CAFFE_BUILD [STRATA_BUILD [WORK_DIR]]]
#     CAFFE_BUILD   a configured CPU-only Caffe build tree (default /work/caffe-build; RESULTS.md says how to
#                   make one, with benchmarks/caffe/debian12.patch)
#     STRATA_BUILD  a Strata build tree (default <repo>/build-caffecmp; configured here if it is not yet, with
#                   -DSTRATA_USE_CUDA=OFF -DSTRATA_BUILD_TESTS=OFF), installed into STRATA_BUILD/prefix
#     WORK_DIR      inputs, nets, dumps and logs (default /tmp/strata_caffe_cmp; the previous run's cases, dumps
#                   and logs there are removed)
#   Environment: JOBS (build parallelism, default 2), CASES / SOLVERS (a regular expression: run only the layer
#   cases / solver cases whose name matches; "none" runs none), SKIP_BUILD=1 (use what is built).
#
# Layer cases (make_cases.py): one tiny net per layer type, HDF5Data inputs, weights from Caffe's fillers
# (caffe_dump --write_weights), one forward and backward in each framework; every blob's data, every diff that
# Caffe's backward defines, and every parameter's data and diff compared (strata_dump). Solver cases: `caffe train`
# and `strata train` for 10 iterations from the same initial weights; the final snapshots compared per parameter.
# Prints one row per record (WORK_DIR/logs/*.cmp) and a summary table: the worst relative difference
# (max |strata - caffe| / max |caffe| per blob) of data and of gradients per case, of weights per solver.
# A case above 1e-5 relative is marked DIFFERS (RESULTS.md explains the ones known). Exit status: 0 when every case
# ran (whatever it found), 1 when a build or a case failed to run.
# Needs Debian's python3-numpy and python3-h5py (/usr/bin/python3).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
caffe_build=$(realpath "${1:-/work/caffe-build}")
strata_build=$(realpath -m "${2:-$repo/build-caffecmp}")
work=$(realpath -m "${3:-/tmp/strata_caffe_cmp}")
jobs=${JOBS:-2}
case_filter=${CASES:-.}
solver_filter=${SOLVERS:-.}
threshold=1e-5

say() { echo "side_by_side: $*" >&2; }
die() { echo "side_by_side: FAILED: $*" >&2; exit 1; }

# ---- build: Caffe's library and tool, Strata's library and tools (installed), the two dumpers ----
[ -f "$caffe_build/CaffeConfig.cmake" ] || die "$caffe_build is not a configured Caffe build tree (RESULTS.md)"
mkdir -p "$work"
strata_prefix=$strata_build/prefix
tools=$work/tools
if [ "${SKIP_BUILD:-0}" != 1 ]; then
  say "building Caffe in $caffe_build"
  cmake --build "$caffe_build" -j "$jobs" --target caffe.bin > "$work/caffe-build.log" 2>&1 ||
    { tail -30 "$work/caffe-build.log"; die "Caffe build"; }
  if [ ! -f "$strata_build/CMakeCache.txt" ]; then
    say "configuring Strata in $strata_build"
    cmake -S "$repo" -B "$strata_build" -DCMAKE_BUILD_TYPE=Release -DSTRATA_USE_CUDA=OFF \
      -DSTRATA_BUILD_TESTS=OFF > "$work/strata-build.log" 2>&1 || { cat "$work/strata-build.log"; die "configure"; }
  fi
  say "building and installing Strata ($strata_build -> $strata_prefix)"
  { cmake --build "$strata_build" -j "$jobs" && cmake --install "$strata_build" --prefix "$strata_prefix"; } \
    >> "$work/strata-build.log" 2>&1 || { tail -30 "$work/strata-build.log"; die "Strata build"; }
  rm -rf "$tools"
fi
rm -rf "$work/cases" "$work/dumps" "$work/logs" "$work/solvers"
mkdir -p "$work/dumps" "$work/logs" "$tools"
say "building caffe_dump and strata_dump in $tools"
{ [ -f "$tools/CMakeCache.txt" ] || cmake -S "$here" -B "$tools" -DCMAKE_BUILD_TYPE=Release \
    -DCaffe_DIR="$caffe_build" -DCMAKE_PREFIX_PATH="$strata_prefix"; } > "$work/logs/tools.log" 2>&1 &&
  cmake --build "$tools" -j "$jobs" >> "$work/logs/tools.log" 2>&1 || { cat "$work/logs/tools.log"; die "dumpers"; }
caffe_bin=$caffe_build/tools/caffe
strata_bin=$strata_prefix/bin/strata
[ -x "$caffe_bin" ] || die "no $caffe_bin"
[ -x "$strata_bin" ] || die "no $strata_bin"

# ---- inputs and nets ----
/usr/bin/python3 "$here/make_cases.py" "$work" || die "make_cases.py (python3-numpy, python3-h5py)"

summary=$work/summary.txt
: > "$summary"
failed=0

# ---- layer cases ----
while IFS='|' read -r name phase backward caffe_net caffe_args strata_args; do
  [[ $case_filter != none && $name =~ $case_filter ]] || continue
  d=$work/dumps/$name
  mkdir -p "$d"
  # shellcheck disable=SC2086  # the extra arguments are words
  if ! "$tools/caffe_dump" --model="$work/cases/$caffe_net.prototxt" --phase="$phase" --backward="$backward" \
      --out="$d/caffe.pb" --write_weights="$d/weights.caffemodel" $caffe_args > "$work/logs/$name.caffe.log" 2>&1; then
    echo "$name caffe_dump failed: see $work/logs/$name.caffe.log"; failed=1; continue
  fi
  # shellcheck disable=SC2086
  if ! "$tools/strata_dump" --model="$work/cases/$name.prototxt" --phase="$phase" --backward="$backward" \
      --weights="$d/weights.caffemodel" --reference="$d/caffe.pb" --out="$d/strata.pb" --case_name="$name" \
      $strata_args > "$work/logs/$name.cmp" 2> "$work/logs/$name.strata.log"; then
    echo "$name strata_dump failed: $(tail -1 "$work/logs/$name.strata.log")"; failed=1; continue
  fi
  grep -v '^SUMMARY' "$work/logs/$name.cmp" || true
  grep '^SUMMARY' "$work/logs/$name.cmp" | sed 's/^SUMMARY/layer/' >> "$summary"
done < "$work/cases.list"

# ---- solver cases ----
sdir=$work/solvers
if [[ $solver_filter != none ]]; then
  "$tools/caffe_dump" --model="$sdir/net.prototxt" --backward=false --out="$sdir/init_dump.pb" \
    --write_weights="$sdir/init.caffemodel" > "$work/logs/solver_init.log" 2>&1 || die "solver initial weights"
fi
while read -r name; do
  [[ $solver_filter != none && $name =~ $solver_filter ]] || continue
  "$caffe_bin" train --solver="$sdir/${name}_caffe.prototxt" --weights="$sdir/init.caffemodel" \
    > "$work/logs/$name.caffe-train.log" 2>&1 || { echo "$name: caffe train failed"; failed=1; continue; }
  "$strata_bin" train --solver="$sdir/${name}_strata.prototxt" --weights="$sdir/init.caffemodel" \
    > "$work/logs/$name.strata-train.log" 2>&1 || { echo "$name: strata train failed"; failed=1; continue; }
  iters=$(sed -n 's/^max_iter: //p' "$sdir/${name}_caffe.prototxt")
  snapshots="$sdir/${name}_caffe_iter_$iters.caffemodel,$sdir/${name}_strata_iter_$iters.caffemodel"
  "$tools/strata_dump" --compare_models="$snapshots" --case_name="solver_$name" > "$work/logs/$name.cmp" 2>&1 ||
    { echo "$name: compare failed"; failed=1; continue; }
  grep -v '^SUMMARY' "$work/logs/$name.cmp" || true
  # The final losses as each logs them (Caffe's "Iteration N, loss = X" lines).
  closs=$(grep -o 'Iteration [0-9]*, loss = [^ ]*' "$work/logs/$name.caffe-train.log" | tail -1 | sed 's/.*= //')
  sloss=$(grep -o 'Iteration [0-9]*, loss = [^ ]*' "$work/logs/$name.strata-train.log" | tail -1 | sed 's/.*= //')
  grep '^SUMMARY' "$work/logs/$name.cmp" | sed "s/^SUMMARY/solver/; s/\$/ caffe_loss=$closs strata_loss=$sloss/" \
    >> "$summary"
done < "$work/solvers.list"

# ---- the table ----
echo
printf '%-8s %-32s %-12s %-12s %-8s %s\n' kind case "data rel" "grad rel" verdict "worst record (compared)"
while read -r kind name data diff worst count rest; do
  verdict=ok
  awk -v a="$data" -v b="$diff" -v t="$threshold" 'BEGIN { exit !(a + 0 > t || (b != "-" && b + 0 > t)) }' &&
    verdict=DIFFERS
  [[ $data == inf || $diff == inf ]] && verdict=DIFFERS
  printf '%-8s %-32s %-12s %-12s %-8s %s (%s) %s\n' "$kind" "$name" "$data" "$diff" "$verdict" "$worst" "$count" \
    "$rest"
done < "$summary"
[ "$failed" = 0 ] || die "some cases did not run (above)"
