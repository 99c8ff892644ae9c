#!/usr/bin/env bash
# `strata scale` against measurement (docs/benchmarks.md, "The scaling model against measurement"): LeNet on
# Fashion-MNIST and the AlexNet-style net of bench_data_parallel.sh, overlap on and off, in two layouts:
#   host: 2 ranks on this machine (shared memory, one core each);
#   bed:  2 hosts of the multi-host test bed (scripts/cluster.sh, one rank each, every link shaped to RATE).
# For each layout it measures the training runs (bench_data_parallel.sh, interleaved reps), the per-layer times
# (strata scale --times_out: one thread, two processes at once, just before) and the machine (allreduce_bench --model
# --model_out), then predicts the same runs with strata scale and prints both side by side.
#
#   bash scripts/bench_scale.sh [build_dir] [out_dir]          (defaults: build, bench-out/scale; as root)
#   LAYOUTS="host bed" NETS="lenet alexnet" REPS=2 RATE=1gbit ...
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
out=${2:-bench-out/scale}
layouts=${LAYOUTS:-"host bed"}
nets=${NETS:-"lenet alexnet"}
reps=${REPS:-2}
rate=${RATE:-1gbit}
strata="$build/bin/strata"
[ -x "$strata" ] || { echo "bench_scale.sh: $strata not found; build first" >&2; exit 1; }
mkdir -p "$out"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1

model_of() {  # the training net bench_data_parallel.sh runs
  case $1 in
    lenet) echo models/lenet_fashion/lenet_train_test.prototxt ;;
    alexnet) echo "$out/$2/alexnet_train.prototxt" ;;
  esac
}

predict() {  # LAYOUT NET OVERLAP -> "iteration_ms exposed_ms"
  local layout=$1 net=$2 overlap=$3 nodes=1 per_node=2
  [ "$layout" = bed ] && nodes=2 per_node=1
  "$strata" scale --model="$(model_of "$net" "$layout")" --times="$out/$layout/$net.times" \
    --network="$out/$layout/machine" --nodes="$nodes" --ranks_per_node="$per_node" --overlap="$overlap" \
    --timeline="$out/$layout/${net}_overlap-$overlap.trace.json" 2>/dev/null |
    awk -F'|' -v n="$nodes" '$2 + 0 == n && $3 + 0 > 1 { printf "%.1f %.1f\n", $4, $6 }'
}

cleanup() { [[ " $layouts " == *" bed "* ]] && bash scripts/cluster.sh down >/dev/null 2>&1 || true; }
trap cleanup EXIT

for layout in $layouts; do
  dir=$out/$layout
  mkdir -p "$dir"
  if [ "$layout" = bed ]; then
    bash scripts/cluster.sh up 2 --slots 1 --rate "$rate"
    bash scripts/cluster.sh mpirun -np 2 --map-by node "$build/bin/allreduce_bench" --model \
      --model_out="$dir/machine" > "$dir/model.log"
    # The hosts of the bed share this machine's cores.
    sed -i "s/^cores .*/cores $(( $(nproc) / 2 > 0 ? $(nproc) / 2 : 1 ))  # this machine's cores shared by 2 hosts/" "$dir/machine"
    cluster=1
  else
    mpirun --oversubscribe --bind-to none --mca btl self,vader -np 2 "$build/bin/allreduce_bench" --model \
      --model_out="$dir/machine" > "$dir/model.log"
    cluster=0
  fi
  # The data and the nets (a short run of bench_data_parallel.sh makes them), then the per-layer times.
  SMOKE=1 NETS="$nets" CONFIGS="1" bash scripts/bench_data_parallel.sh "$build" "$dir" > "$dir/prepare.log" 2>&1
  # Both layouts put 2 ranks on this machine's cores, and a rank computes slower beside another than alone
  # (shared caches and memory bandwidth): the times are measured by 2 processes at once and averaged.
  for net in $nets; do
    iters=50
    [ "$net" = alexnet ] && iters=4
    for k in 0 1; do
      "$strata" scale --model="$(model_of "$net" "$layout")" --nodes=1 --iterations=$iters \
        --times_out="$dir/$net.times.$k" > "$dir/$net.times.$k.log" 2>&1 &
    done
    wait
    paste -d' ' "$dir/$net.times.0" "$dir/$net.times.1" |
      awk '/^#/ { print "# the average of 2 processes timing at once"; next } /^batch/ { print $1, $2; next } { printf "%s %.6g %.6g\n", $1, ($2 + $5) / 2, ($3 + $6) / 2 }' \
      > "$dir/$net.times"
  done
  CLUSTER=$cluster NETS="$nets" REPS="$reps" CONFIGS="2:on:1 2:off:1" \
    bash scripts/bench_data_parallel.sh "$build" "$dir" > "$dir/measure.log" 2>&1
done

echo "date: $(date -u '+%Y-%m-%d %H:%M UTC'); $(nproc) cores; bed links shaped to $rate"
echo
echo "| layout | net | overlap | measured ms | predicted ms | predicted / measured | measured exposed ms | predicted exposed ms |"
echo "|---|---|---|---|---|---|---|---|"
for layout in $layouts; do
  for net in $nets; do
    for overlap in on off; do
      read -r measured exposed < <(awk -F'|' -v net="$net" -v ov="overlap $overlap," \
        '$2 ~ " "net" " && index($3, ov) { printf "%s %s\n", $4 + 0, $8 + 0 }' "$out/$layout/table.md")
      read -r predicted pexposed < <(predict "$layout" "$net" "$( [ $overlap = on ] && echo true || echo false )")
      awk -v l="$layout" -v n="$net" -v o="$overlap" -v m="$measured" -v p="$predicted" -v e="$exposed" -v pe="$pexposed" \
        'BEGIN { printf "| %s | %s | %s | %.1f | %.1f | %.2f | %.1f | %.1f |\n", l, n, o, m, p, p / m, e, pe }'
    done
  done
done
