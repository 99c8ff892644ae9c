#!/usr/bin/env bash
# K-FAC in a pipeline (docs/kfac.md, "In a pipeline"; docs/benchmarks.md): LeNet on Fashion-MNIST trained with
# K-FAC's empirical Fisher, 2 micro-batches of 64 an iteration, by one rank (iter_size 2) and by pipelines of 2
# stages (one rank per stage) cut where the planner cuts and at each of CUTS, run one after another, REPS times in
# a rotating order. Every
# process computes with one BLAS and one OpenMP thread. The table: wall seconds (median over the reps), the
# final test accuracy and loss (which SYNC makes the same as one rank's, to rounding) and the speed-up over one
# rank. Needs the LMDBs scripts/quickstart.sh writes (data/fashion_mnist_{train,test}_lmdb).
#
#   scripts/bench_pipeline_kfac.sh [build_dir] [out_dir]   (defaults: build, bench-out/pipeline_kfac)
#   CUTS="conv2 ip1" ITERS=1000 REPS=3 ...                  (the defaults)
#   CLUSTER=1 ...                                           (the pipelines across the hosts of the test bed, one
#                                                            rank per host: bring it up first, e.g.
#                                                            bash scripts/cluster.sh up 2 --slots 1 --rate 1gbit)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
out=${2:-bench-out/pipeline_kfac}
cuts=${CUTS:-conv2 ip1}
iters=${ITERS:-1000}
reps=${REPS:-3}
for split in train test; do
  [ -d "data/fashion_mnist_${split}_lmdb" ] || { echo "data/fashion_mnist_${split}_lmdb is missing: run scripts/quickstart.sh first" >&2; exit 1; }
done
mkdir -p "$out"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
mpirun=(mpirun --oversubscribe --bind-to none --mca btl self,vader)
[ "${CLUSTER:-0}" = 1 ] && mpirun=(bash scripts/cluster.sh mpirun --map-by node)

# The K-FAC LeNet solver with the empirical Fisher, 2 passes an iteration, no snapshots; $1: a pipeline_param line.
solver() {
  sed -e 's/^  fisher: TRUE_FISHER/  fisher: EMPIRICAL/' -e "s/^max_iter: .*/max_iter: $iters/" \
      -e 's/^snapshot: .*/snapshot: 0/' -e "s/^test_interval: .*/test_interval: $iters/" \
      models/lenet_fashion/lenet_kfac_solver.prototxt
  printf 'iter_size: 2\nsnapshot_after_train: false\n%s\n' "$1"
}
configs=(one planned)
for c in $cuts; do configs+=("$c"); done
for c in "${configs[@]}"; do
  case $c in
    one) solver "" ;;
    planned) solver "pipeline_param { stages: 2 }" ;;
    *) solver "pipeline_param { stages: 2 cut: \"$c\" }" ;;
  esac >"$out/$c.prototxt"
done

n=${#configs[@]}
for ((r = 0; r < reps; ++r)); do
  for ((i = 0; i < n; ++i)); do
    c=${configs[$(((i + r) % n))]}
    log="$out/$c.rep$r.log"
    start=$(date +%s.%N)
    if [ "$c" = one ]; then
      "$build/bin/strata" train --solver="$out/$c.prototxt" >"$log" 2>&1
    else
      "${mpirun[@]}" -np 2 "$build/bin/strata" train --solver="$out/$c.prototxt" >"$log" 2>&1
    fi
    awk -v c="$c" -v s="$start" -v e="$(date +%s.%N)" 'BEGIN {print c, e - s}' >>"$out/times.txt.$$"
  done
done

median() { sort -n | awk '{v[NR] = $1} END {print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }
printf '%-16s %6s %10s %12s %10s %9s\n' config ranks "wall s" "test acc." "test loss" speed-up
base=$(awk '$1 == "one" {print $2}' "$out/times.txt.$$" | median)
for c in "${configs[@]}"; do
  t=$(awk -v c="$c" '$1 == c {print $2}' "$out/times.txt.$$" | median)
  last="$out/$c.rep$((reps - 1)).log"
  acc=$(grep 'Test net output #0' "$last" | tail -1 | sed 's/.*= //')
  loss=$(grep 'Test net output #1' "$last" | tail -1 | sed 's/.*= \([0-9.e+-]*\).*/\1/')
  ranks=2 name="cut $c"
  [ "$c" = one ] && ranks=1 name="one rank"
  # The planner's cut: the first layer of stage 1 in the log's stage list.
  [ "$c" = planned ] && name="planned $(awk '/^ *stage 1:/ {print $3; exit}' "$last")"
  printf '%-16s %6s %10.1f %12s %10s %8.2fx\n' "$name" "$ranks" "$t" "$acc" "$loss" "$(awk -v b="$base" -v t="$t" 'BEGIN {print b / t}')"
done
rm -f "$out/times.txt.$$"
