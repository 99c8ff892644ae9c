#!/usr/bin/env bash
# The main job, from a fresh Debian 12 machine: install, build, convert Fashion-MNIST to LMDB, train LeNet
# data-parallel with mpirun on 2 ranks, and plot the loss and test accuracy.
#   bash scripts/quickstart.sh                 # full run (10,000 iterations, 2 ranks)
#   ITERATIONS=1000 bash scripts/quickstart.sh # a shorter run
#   RANKS=1 bash scripts/quickstart.sh         # one process, no data parallelism
# The solver's batch_size (64) is per rank: 2 ranks take 128 images an iteration, the gradient averaged over
# all of them, so 10,000 iterations see twice the images of one rank in about the same time
# (docs/benchmarks.md, Data-parallel training).
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/install_deps.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j "$(nproc)" --target strata convert_mnist_data

data=/usr/share/datasets/fashion-mnist
mkdir -p data
for split in train:train t10k:test; do
  src=${split%%:*}
  dst=data/fashion_mnist_${split##*:}_lmdb
  if [ ! -d "$dst" ]; then
    build/bin/convert_mnist_data "$data/$src-images-idx3-ubyte.gz" "$data/$src-labels-idx1-ubyte.gz" "$dst"
  fi
done

export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
ranks=${RANKS:-2}
# One compute thread per core between the ranks: by default each rank would take every core.
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-$(( $(nproc) / ranks > 0 ? $(nproc) / ranks : 1 ))}
args=(--solver=models/lenet_fashion/lenet_solver.prototxt)
[ -n "${ITERATIONS:-}" ] && args+=(--iterations="$ITERATIONS")
log=data/lenet_fashion_train.log
mpirun -np "$ranks" --oversubscribe --bind-to none --mca btl self,vader -x OMP_NUM_THREADS build/bin/strata train "${args[@]}" 2>&1 | tee "$log"
/usr/bin/python3 scripts/plot_training_log.py "$log" data/lenet_fashion.png
