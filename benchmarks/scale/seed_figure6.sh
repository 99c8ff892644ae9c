#!/usr/bin/env bash
# The seed paper's figure 6 (002: AlexNet, one K20X per node, batch b per node, InfiniBand) beside what
# `strata scale` predicts, as docs/benchmarks.md "The scaling model against the seed paper" records it:
#   1. the paper's implementation: its hybrid (BRD or VHD by the model), 3 communication threads taking the
#      lowest layer's chunk first (its overtaking, figure 5), copies on the computation's stream (Caffe of
#      2016 copied with cudaMemcpy), and one calibrated figure: the link rate its allreduce reached, fitted so
#      that t(64,32) matches (BANDWIDTH, default 0.93 GB/s);
#   2. Strata's own engine on the same machine: the hybrid with hier, chunks dealt round-robin, copies on copy
#      streams beside the computation (Strata's GPU staging), the same calibrated link.
#   bash benchmarks/scale/seed_figure6.sh [build_dir]        (default: build)
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${1:-build}
bandwidth=${BANDWIDTH:-0.93}
here=benchmarks/scale
machine=$(mktemp)
trap 'rm -f "$machine"' EXIT
sed "s/^bandwidth_GBps .*/bandwidth_GBps $bandwidth   # calibrated on t(64,32)/" "$here/tsubame25_fdr.machine" > "$machine"

ratio() {  # BATCH NODES EXTRA_FLAGS... -> t(N,b)/t(1,256)
  local batch=$1 nodes=$2
  shift 2
  "$build/bin/strata" scale --model=models/alexnet/deploy.prototxt --times="$here/alexnet_k20x_b256.times" \
    --network="$machine" --batch="$batch" --nodes="$nodes" "$@" 2>/dev/null |
    awk -F'|' -v n="$nodes" '$2 + 0 == n { printf "%.3f", $10 }'
}

paper=(--allreduce=seed --comm_threads=3 --dispatch=lowest_layer_first --copies_block_compute)
strata=(--allreduce=hybrid --comm_threads=8)
echo "AlexNet, one K20X per node (benchmarks/scale/alexnet_k20x_b256.times), $here/tsubame25_fdr.machine with"
echo "bandwidth_GBps $bandwidth; t(N,b)/t(1,256) and the speed-up s = N b / 256 / that"
echo
echo "| N | b | paper t/t1 | paper s | predicted, the paper's implementation | error | s | predicted, Strata's engine | s |"
echo "|---|---|---|---|---|---|---|---|---|"
for point in "64 256 1.060" "256 256 1.180" "64 64 0.525" "64 32 0.516"; do
  read -r n b measured <<< "$point"
  p=$(ratio "$b" "$n" "${paper[@]}")
  q=$(ratio "$b" "$n" "${strata[@]}")
  awk -v n="$n" -v b="$b" -v m="$measured" -v p="$p" -v q="$q" 'BEGIN {
    printf "| %d | %d | %.3f | %.1f | %.3f | %+.1f%% | %.1f | %.3f | %.1f |\n", n, b, m, n * b / 256 / m, p,
           100 * (p - m) / m, n * b / 256 / p, q, n * b / 256 / q }'
done
