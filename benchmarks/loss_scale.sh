#!/usr/bin/env bash
# What a dynamic loss scale costs (docs/caffe.md, "Loss scaling"): `strata train` of LeNet on Fashion-MNIST (batch 64
# per rank, one compute thread per rank) without a scale and with `loss_scale { scale: 65536 dynamic: true }`, on 1
# rank and on 2 (where the scale makes the data-parallel engine reduce every layer before updating, as clipping
# does). The runs alternate, rep by rep, so that the machine's drift hits both alike; the table gives each run's
# time per iteration after the first display window (warm-up) and the ratio of the medians.
#
#   bash benchmarks/loss_scale.sh [build_dir] [out_dir]     (defaults: build, bench-out/loss_scale)
#   REPS=5 ITERS=600 RANKS="1 2" ...
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
out=${2:-bench-out/loss_scale}
reps=${REPS:-3}
iters=${ITERS:-400}
strata="$build/bin/strata"
[ -x "$strata" ] || { echo "loss_scale.sh: $strata not found; build first (cmake --build $build)" >&2; exit 1; }
mkdir -p "$out/logs"
if [ ! -d data/fashion_mnist_train_lmdb ]; then
  src=/usr/share/datasets/fashion-mnist
  [ -f "$src/train-images-idx3-ubyte.gz" ] || { echo "need $src (apt-get install dataset-fashion-mnist)" >&2; exit 1; }
  mkdir -p data
  "$build/bin/convert_mnist_data" "$src/train-images-idx3-ubyte.gz" "$src/train-labels-idx1-ubyte.gz" \
    data/fashion_mnist_train_lmdb
fi
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
for scale in none dynamic; do
  {
    echo 'net: "models/lenet_fashion/lenet_train_test.prototxt"'
    echo "base_lr: 0.01 momentum: 0.9 weight_decay: 0.0005 lr_policy: \"fixed\" display: 100 max_iter: $iters"
    echo 'snapshot: 0 snapshot_after_train: false solver_mode: CPU random_seed: 1701'
    [ $scale = dynamic ] && echo 'loss_scale { scale: 65536 dynamic: true }'
  } > "$out/$scale.solver.prototxt"
done
echo "date: $(date -u '+%Y-%m-%d %H:%M UTC'); load average before: $(cut -d' ' -f1-3 /proc/loadavg); $iters iterations"
for rep in $(seq 1 "$reps"); do
  for ranks in ${RANKS:-1 2}; do
    order="none dynamic"
    [ $((rep % 2)) = 0 ] && order="dynamic none"
    for scale in $order; do
      mpirun --oversubscribe --bind-to none --mca btl self,vader -np "$ranks" "$strata" train \
        --solver="$out/$scale.solver.prototxt" > "$out/logs/np${ranks}_${scale}_rep$rep.log" 2>&1 ||
        { tail -n 20 "$out/logs/np${ranks}_${scale}_rep$rep.log" >&2; exit 1; }
    done
  done
done
/usr/bin/python3 - "$out" "$reps" "${RANKS:-1 2}" <<'PY'
import re, statistics, sys
out, reps, ranks = sys.argv[1], int(sys.argv[2]), sys.argv[3].split()
window = re.compile(r"Iteration \d+ \([\d.e+-]+ iter/s, ([\d.e+-]+)s/(\d+) iters\)")
def ms_per_iter(path):
    w = [(float(m.group(1)), int(m.group(2))) for m in map(window.search, open(path, errors="replace")) if m][1:]
    return 1000 * sum(s for s, _ in w) / sum(i for _, i in w)
print("| ranks | no loss scale (ms/iter) | dynamic loss scale (ms/iter) | ratio of medians |")
print("|---|---|---|---|")
for n in ranks:
    t = {s: [ms_per_iter(f"{out}/logs/np{n}_{s}_rep{r}.log") for r in range(1, reps + 1)] for s in ("none", "dynamic")}
    fmt = lambda xs: ", ".join(f"{x:.2f}" for x in xs)
    ratio = statistics.median(t["dynamic"]) / statistics.median(t["none"])
    print(f"| {n} | {fmt(t['none'])} | {fmt(t['dynamic'])} | {ratio:.3f} |")
PY
