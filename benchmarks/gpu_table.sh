#!/usr/bin/env bash
# Issue 36's GPU table in one call: for each net and batch, Strata's SGD step in TF32 (channels-first, the default,
# and channels-last: --gpu_channels_last=all) and in bfloat16 (channels-last, the default) beside PyTorch's three
# modes (float NCHW, float channels-last, bfloat16 autocast channels-last), the same call on both sides (forward,
# backward, SGD with momentum 0.9 and weight decay 5e-4, random inputs, TF32 on), run one after the other on one GPU;
# then the ratio of Strata's bfloat16 step to PyTorch's fastest (the issue's goal: at most 0.9) and peak device memory
# (Strata: activations, `strata time`'s figure; PyTorch: the whole step's max_memory_allocated, weights and optimizer
# state included).
#
#   bash benchmarks/gpu_table.sh [DIR]          # logs and table.md in DIR (default /tmp/gpu_table)
#   NETS="resnet50:64 alexnet:256" ITERS=20 bash benchmarks/gpu_table.sh
#   bash benchmarks/gpu_table.sh --table DIR    # the table again from DIR's logs, running nothing
#
# Needs `strata` on PATH (scripts/gpu_unpack.sh sets it) and PyTorch with torchvision for python3.
set -uo pipefail
cd "$(dirname "$0")/.."

table_only=0
if [ "${1:-}" = --table ]; then
  table_only=1
  shift
fi
out=${1:-/tmp/gpu_table}
nets=${NETS:-resnet50:64 resnet50:256 alexnet:256 googlenet:128 resnet152:64}
iters=${ITERS:-20}
modes="nchw channels_last bf16"
if [ "$table_only" = 1 ]; then
  [ -d "$out" ] || { echo "gpu_table: no such folder of logs: $out" >&2; exit 1; }
else
  mkdir -p "$out"
fi

# The first value of a pattern's group in a log (empty when the run printed none).
value() { sed -nE "s#.*$2.*#\1#p" "$1" 2>/dev/null | head -1; }

if [ "$table_only" = 0 ]; then
  for nb in $nets; do
    net=${nb%%:*} batch=${nb##*:}
    model=$out/${net}_$batch.prototxt
    # The deploy files' first input shape is the images', the second the labels'.
    sed -E "0,/shape \{ dim: [0-9]+ dim: 3/s//shape { dim: $batch dim: 3/;
            0,/shape \{ dim: [0-9]+ \}/s//shape { dim: $batch }/" "models/$net/deploy.prototxt" >"$model"
    # RUN:PRECISION:CHANNELS_LAST, each into strata_NET_BATCH_RUN.txt.
    for run in FP32:FP32:bf16 FP32_last:FP32:all BF16:BF16:bf16; do
      IFS=: read -r name precision last <<<"$run"
      timeout "${TIME_TIMEOUT:-300}" strata time --model="$model" --gpu=0 --tf32=true --precision=$precision \
        --gpu_channels_last=$last --iterations="$iters" --warmup=3 >"$out/strata_${net}_${batch}_$name.txt" 2>&1
      echo "strata $net $batch $precision channels_last=$last: exit $?" >&2
    done
    for mode in $modes; do
      # PyTorch brings its own CUDA libraries: not the bundle's path.
      env -u LD_LIBRARY_PATH timeout "${TORCH_TIMEOUT:-300}" python3 benchmarks/gpu_pytorch.py --net "$net" \
        --batch "$batch" --mode "$mode" --iters "$iters" >"$out/pytorch_${net}_${batch}_$mode.txt" 2>&1
      echo "pytorch $net $batch $mode: exit $?" >&2
    done
  done
fi

{
  echo "| net | batch | Strata TF32 | Strata TF32 channels-last | Strata bf16 | PyTorch TF32 NCHW |" \
    "PyTorch TF32 channels-last | PyTorch bf16 channels-last | Strata bf16 / PyTorch's fastest | Strata bf16 img/s |" \
    "peak: Strata bf16 activations | peak: PyTorch bf16 step |"
  echo "|---|---|---|---|---|---|---|---|---|---|---|---|"
  for nb in $nets; do
    net=${nb%%:*} batch=${nb##*:}
    step='Average SGD step[^:]*: ([0-9.]+) ms'
    s32=$(value "$out/strata_${net}_${batch}_FP32.txt" "$step")
    s32_last=$(value "$out/strata_${net}_${batch}_FP32_last.txt" "$step")
    s16=$(value "$out/strata_${net}_${batch}_BF16.txt" "$step")
    s16_rate=$(value "$out/strata_${net}_${batch}_BF16.txt" ' ([0-9.]+) images/s')
    s16_peak=$(value "$out/strata_${net}_${batch}_BF16.txt" 'Peak activation memory: [0-9]+ bytes \(([^)]+)\)')
    torch=() fastest=
    for mode in $modes; do
      t=$(value "$out/pytorch_${net}_${batch}_$mode.txt" 'SGD step ([0-9.]+) ms')
      torch+=("${t:--}")
      if [ -n "$t" ] && { [ -z "$fastest" ] || awk -v a="$t" -v b="$fastest" 'BEGIN { exit !(a < b) }'; }; then
        fastest=$t
      fi
    done
    t16_peak=$(value "$out/pytorch_${net}_${batch}_bf16.txt" 'peak ([0-9.]+ GiB)')
    ratio=-
    if [ -n "$s16" ] && [ -n "$fastest" ]; then ratio=$(awk -v a="$s16" -v b="$fastest" 'BEGIN { printf "%.2fx", a / b }'); fi
    ms() { if [ -n "$1" ] && [ "$1" != - ]; then awk -v t="$1" 'BEGIN { printf "%.2f ms", t }'; else echo -; fi; }
    echo "| $net | $batch | $(ms "$s32") | $(ms "$s32_last") | $(ms "$s16") | $(ms "${torch[0]}") |" \
      "$(ms "${torch[1]}") | $(ms "${torch[2]}") | $ratio | ${s16_rate:--} | ${s16_peak:--} | ${t16_peak:--} |"
  done
} | tee "$out/table.md"
