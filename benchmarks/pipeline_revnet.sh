#!/usr/bin/env bash
# models/revnet trained as a 2-stage pipeline (docs/pipeline.md) on Fashion-MNIST: the accuracy against the single
# rank's (docs/benchmarks.md, "RevNet on Fashion-MNIST": 90.6%), with the per-stage table at the end.
#
#   bash benchmarks/pipeline_revnet.sh [BUILD_DIR] [SYNC|ASYNC]
#
# The single-rank run takes batches of 64; here a micro-batch is 16 images and iter_size 4 micro-batches flow
# between updates, so an update sees the same 64 images (BatchNorm's batch statistics are over 16). The cut falls
# before down1: stage 0 is the stem and the first two Reversible blocks (a reversible stage: it keeps only its
# input images), stage 1 the rest.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build}
SCHEDULE=${2:-SYNC}
[ -d data/fashion_mnist_train_lmdb ] && [ -d data/fashion_mnist_test_lmdb ] || ITERATIONS=0 bash scripts/quickstart.sh
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
sed '/include { phase: TRAIN }/,/batch_size/ s/batch_size: 64/batch_size: 16/' models/revnet/revnet_train_test.prototxt \
  > "$tmp/net.prototxt"
grep -q "batch_size: 16" "$tmp/net.prototxt" || { echo "pipeline_revnet: the train batch size was not found" >&2; exit 1; }
sed -e "s|^net: .*|net: \"$tmp/net.prototxt\"|" -e "s|^snapshot_prefix: .*|snapshot_prefix: \"$tmp/revnet\"|" \
  -e "s|^snapshot: .*|snapshot: 0|" models/revnet/revnet_solver.prototxt > "$tmp/solver.prototxt"
cat >> "$tmp/solver.prototxt" <<PARAM
snapshot_after_train: false
iter_size: 4
pipeline_param { stages: 2 cut: "down1" schedule: $SCHEDULE }
PARAM
echo "pipeline_revnet: 2 stages, $SCHEDULE, $(date -u '+%Y-%m-%d %H:%M UTC')"
start=$(date +%s)
OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 \
  mpirun --oversubscribe --bind-to none --mca btl self,vader -np 2 "$BUILD/bin/strata" train \
  --solver="$tmp/solver.prototxt" 2>&1 | tee "$tmp/log" | grep -E "accuracy =|Pipeline: |stage [0-9]|^ *[0-9]+ +[0-9.]+ " || true
grep -q "accuracy =" "$tmp/log" || { tail -20 "$tmp/log" >&2; exit 1; }
echo "wall: $(( $(date +%s) - start )) s"
