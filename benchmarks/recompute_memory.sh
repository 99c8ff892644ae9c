#!/usr/bin/env bash
# Measured activation memory and iteration time of a net under each recomputation planner, in one run:
# store_all, sqrt(n), the DP at several budgets and dp_memory, each a fresh `strata time` process, with ratios
# against store_all measured the same way (the same executor, gradients and saved state freed as it goes).
# "no plan" is Net without a schedule, which holds every gradient for the whole run.
#
#   benchmarks/recompute_memory.sh MODEL [ITERATIONS] [BUDGETS]
#   e.g. chrt -r 10 benchmarks/recompute_memory.sh models/resnet50/deploy.prototxt 2 "0.5 0.4 0.3"
#
# STRATA (default build-cpu/bin/strata) picks the binary. Peaks are MemoryTracker's activation category over
# the timed iterations (data + gradients + layers' saved state); times are the mean forward-backward.
set -euo pipefail
model=${1:?usage: $0 MODEL [ITERATIONS] [BUDGETS]}
iterations=${2:-2}
budgets=${3:-0.5 0.4 0.3}
strata=${STRATA:-build-cpu/bin/strata}

run() {  # planner budget -> "predicted measured ms"
  local args=(time --model="$model" --iterations="$iterations" --warmup=1)
  [[ $1 != none ]] && args+=(--planner="$1" --budget="$2")
  local out
  if ! out=$("$strata" "${args[@]}" 2>&1); then
    # A budget no plan meets: the error names the smallest feasible one.
    echo "error $(grep -o 'smallest feasible budget is [0-9]* bytes' <<<"$out" | head -1)"
    return
  fi
  local measured ms predicted
  measured=$(sed -n 's/^Peak activation memory: \([0-9]*\) bytes.*/\1/p' <<<"$out")
  ms=$(sed -n 's/^Average Forward-Backward: \([0-9.]*\) ms.*/\1/p' <<<"$out")
  predicted=$(sed -n 's/^Recompute plan: .*predicted peak activation memory \([0-9]*\) bytes.*/\1/p' <<<"$out")
  echo "${predicted:--} $measured $ms"
}

mib() { awk -v b="$1" 'BEGIN { if (b == "-") print "-"; else printf "%.0f", b / 1048576 }'; }

read -r base_pred base_mem base_ms < <(run store_all 1.0)
echo "model: $model, $iterations timed iteration(s) after 1 warm-up, $(nproc) cores"
echo
echo "| planner | budget | predicted peak (MiB) | measured peak (MiB) | memory vs store_all | forward-backward (ms) | time vs store_all |"
echo "|---|---|---|---|---|---|---|"
row() {  # label budget planner
  local predicted mem ms
  if [[ $3 == store_all ]]; then
    read -r predicted mem ms < <(run store_all 1.0)
    # The baseline itself, run again: its spread shows how far the time ratios can be trusted.
  else
    read -r predicted mem ms < <(run "$3" "${2/-/1.0}")
  fi
  if [[ $predicted == error ]]; then
    echo "| $1 | $2 | infeasible: $mem $ms | - | - | - | - |"
    return
  fi
  awk -v l="$1" -v b="$2" -v p="$(mib "$predicted")" -v m="$mem" -v t="$ms" -v bm="$base_mem" -v bt="$base_ms" \
    'BEGIN { printf "| %s | %s | %s | %.0f | %.1f%% (%+.1f%%) | %.0f | %.3fx |\n", l, b, p, m / 1048576,
             100 * m / bm, 100 * m / bm - 100, t, t / bt }'
}
row "no plan (Net alone)" - none
printf '| store_all (baseline run) | - | %s | %.0f | 100.0%% | %.0f | 1.000x |\n' "$(mib "$base_pred")" "$(awk -v m="$base_mem" 'BEGIN{print m/1048576}')" "$base_ms"
row store_all - store_all
row "sqrt(n)" - sqrt
for b in $budgets; do row dp "$b" dp; done
row dp_memory - dp_memory
