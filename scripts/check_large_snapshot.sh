#!/usr/bin/env bash
# A net of 2.5 GiB of parameters snapshots and resumes exactly, in both snapshot formats (docs/reliability.md):
#
#   bash scripts/check_large_snapshot.sh BUILD_DIR [FORMAT...]      (FORMAT: BINARYPROTO, HDF5; default both)
#
# Two InnerProduct layers of 2^25 inputs x 10 outputs on one DummyData input, 1.25 GiB of weights each: each layer
# is under protobuf's 2 GiB limit on one message, the BINARYPROTO caffemodel and solverstate are 2.5 GiB files,
# over its limit on one parse. For each format: 4 SGD iterations (momentum) straight with snapshots at 2 and 4; a
# second process resumes from iteration 2 to 4; the two iteration-4 caffemodels must be the same bytes. Prints a
# table (file sizes, seconds, peak memory of each process). Needs about 13 GiB of memory and 16 GiB of disk; too
# large for CI, so run by hand.
set -eu
build=${1:?usage: check_large_snapshot.sh BUILD_DIR [FORMAT...]}
shift
formats=("$@")
[ ${#formats[@]} -gt 0 ] || formats=(BINARYPROTO HDF5)
strata=$(cd "$build" && pwd)/bin/strata
work=$(mktemp -d /tmp/strata_large_XXXXXX)
trap 'rm -rf "$work"' EXIT
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1

cat > "$work/net.prototxt" <<'EOF'
name: "large"
layer { name: "in" type: "DummyData" top: "x" top: "y"
        dummy_data_param { shape { dim: 1 dim: 33554432 } shape { dim: 1 }
                           data_filler { type: "constant" value: 0.001 } data_filler { type: "constant" value: 3 } } }
layer { name: "fc_a" type: "InnerProduct" bottom: "x" top: "a"
        inner_product_param { num_output: 10 weight_filler { type: "uniform" min: -0.01 max: 0.01 } } }
layer { name: "fc_b" type: "InnerProduct" bottom: "x" top: "b"
        inner_product_param { num_output: 10 weight_filler { type: "uniform" min: -0.01 max: 0.01 } } }
layer { name: "sum" type: "Eltwise" bottom: "a" bottom: "b" top: "z" }
layer { name: "loss" type: "SoftmaxWithLoss" bottom: "z" bottom: "y" top: "loss" }
EOF

# Runs strata with ARGS, its log in LOG; prints "SECONDS PEAK_GIB".
timed() {
  local log=$1
  shift
  /usr/bin/time -f "%e %M" -o "$work/time" "$strata" "$@" > "$log" 2>&1 ||
    { tail -n 20 "$log" >&2; echo "FAILED: strata $*" >&2; exit 1; }
  read -r secs kib < "$work/time"
  awk -v s="$secs" -v k="$kib" 'BEGIN { printf "%.0f s, %.1f GiB", s, k / 1048576 }'
}

echo "| format | caffemodel | solverstate | 4 iterations, 2 snapshots | resume 2 -> 4 | iteration-4 caffemodels |"
echo "|---|---|---|---|---|---|"
for format in "${formats[@]}"; do
  case $format in
    BINARYPROTO) model=.caffemodel state=.solverstate ;;
    HDF5) model=.caffemodel.h5 state=.solverstate.h5 ;;
    *) echo "unknown format $format" >&2; exit 1 ;;
  esac
  mkdir -p "$work/$format"
  for run in straight resumed; do
    cat > "$work/$format/$run.prototxt" <<EOF
net: "$work/net.prototxt"
base_lr: 0.1
momentum: 0.9
max_iter: 4
snapshot: 2
snapshot_prefix: "$work/$format/$run"
snapshot_format: $format
random_seed: 1
display: 1
EOF
  done
  straight=$(timed "$work/$format/straight.log" train --solver="$work/$format/straight.prototxt")
  rm -f "$work/$format/straight_iter_4$state"
  resumed=$(timed "$work/$format/resumed.log" train --solver="$work/$format/resumed.prototxt" \
    --snapshot="$work/$format/straight_iter_2$state")
  same="differ"
  cmp -s "$work/$format/straight_iter_4$model" "$work/$format/resumed_iter_4$model" && same="the same bytes"
  size() { awk -v b="$(stat -c %s "$1")" 'BEGIN { printf "%.2f GiB", b / 1073741824 }'; }
  echo "| $format | $(size "$work/$format/straight_iter_2$model") | $(size "$work/$format/straight_iter_2$state") |" \
       "$straight | $resumed | $same |"
  rm -rf "${work:?}/$format"
  [ "$same" = "the same bytes" ] || exit 1
done
