#!/usr/bin/env bash
# Measured activation memory and iteration time of a net under each recomputation planner, in one run:
# store_all, sqrt(n), the DP at several budgets and dp_memory, each a fresh `strata time` process, with ratios
# against store_all measured the same way (the same executor, which frees gradients and saved state as backward
# passes them, as blob_lifetime FREE_AFTER_USE does). "no plan" is Net without a schedule (`strata time`'s default,
# --blob_lifetime=keep, Caffe's way): it holds every value, state and gradient all along.
#
#   benchmarks/recompute_memory.sh MODEL [ITERATIONS] [BUDGETS] [REPS]
#   e.g. chrt -r 10 benchmarks/recompute_memory.sh models/resnet50/deploy.prototxt 2 "0.5 0.4 0.3" 3
#
# Every configuration runs REPS times, the repetitions interleaved so that a burst of load elsewhere on the
# machine hits all of them alike; the time reported is the fastest repetition (the least disturbed), with the
# slowest beside it. Peaks are MemoryTracker's activation category over the timed iterations (data, gradients
# and layers' saved state) and do not vary between repetitions. STRATA (default build-cpu/bin/strata) picks
# the binary. WARMUP (default 3) passes run untimed first: the executor's first passes grow the heap to its peak
# (pages faulted in), which one warm-up pass left in the timed ones.
set -euo pipefail
model=${1:?usage: $0 MODEL [ITERATIONS] [BUDGETS] [REPS]}
iterations=${2:-2}
budgets=${3:-0.5 0.4 0.3}
reps=${4:-3}
warmup=${WARMUP:-3}
strata=${STRATA:-build-cpu/bin/strata}

# label|planner|budget
configs=("no plan (Net alone)|none|-" "store_all|store_all|-" "sqrt(n)|sqrt|-")
for b in $budgets; do configs+=("dp|dp|$b"); done
configs+=("dp_memory|dp_memory|-")

run() {  # planner budget -> "predicted measured ms", or "error MESSAGE"
  local args=(time --model="$model" --iterations="$iterations" --warmup="$warmup" --step=false)
  [[ $1 != none ]] && args+=(--planner="$1" --budget="${2/-/1.0}")
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

declare -A predicted measured fastest slowest
for ((r = 0; r < reps; ++r)); do
  for c in "${configs[@]}"; do
    IFS='|' read -r _ planner budget <<<"$c"
    read -r p m t <<<"$(run "$planner" "$budget")"
    predicted[$c]=$p
    measured[$c]=$m
    if [[ $p == error ]]; then
      measured[$c]="$m $t"
      continue
    fi
    fastest[$c]=$(awk -v a="${fastest[$c]:-}" -v t="$t" 'BEGIN { print (a == "" || t < a) ? t : a }')
    slowest[$c]=$(awk -v a="${slowest[$c]:-}" -v t="$t" 'BEGIN { print (a == "" || t > a) ? t : a }')
  done
done

base="store_all|store_all|-"
echo "model: $model; $iterations timed iteration(s) after $warmup untimed; fastest of $reps interleaved repetitions;" \
     "$(nproc) compute thread(s) on $(nproc --all) cores"
echo
echo "| planner | budget | predicted peak (MiB) | measured peak (MiB) | memory vs store_all | forward-backward (ms), fastest (slowest) | time vs store_all |"
echo "|---|---|---|---|---|---|---|"
for c in "${configs[@]}"; do
  IFS='|' read -r label planner budget <<<"$c"
  if [[ ${predicted[$c]} == error ]]; then
    echo "| $label | $budget | infeasible: ${measured[$c]} | - | - | - | - |"
    continue
  fi
  awk -v l="$label" -v b="$budget" -v p="${predicted[$c]}" -v m="${measured[$c]}" -v t="${fastest[$c]}" \
      -v s="${slowest[$c]}" -v bm="${measured[$base]}" -v bt="${fastest[$base]}" \
    'BEGIN { printf "| %s | %s | %s | %.0f | %.1f%% (%+.1f%%) | %.0f (%.0f) | %.3fx |\n", l, b,
             p == "-" ? "-" : sprintf("%.0f", p / 1048576), m / 1048576, 100 * m / bm, 100 * m / bm - 100, t, s,
             t / bt }'
done
