#!/usr/bin/env bash
# The GPU checks of issue 6, run on a GPU machine from the repository root after scripts/gpu_bundle.sh made
# .gpu/strata-gpu.tar.xz here (docs/gpu.md). Logs go to /tmp/gpu-logs, packed into $OUT/gpu-logs.tgz (with
# $OUT/summary.txt) when $OUT is set; the summary is printed last.
#   bash scripts/gpu_checks.sh [tests] [mpigpu] [time] [pytorch] [train] [mpi2] [kfac] [bf16] [overlap] [units]
#   [revnet]   (default: all of these)   [table]   (issue 36's table: GPU_TABLE_NETS, about 2 minutes a net)
set -uo pipefail
out=/tmp/gpu-logs
mkdir -p "$out"
steps=${*:-tests mpigpu time pytorch train mpi2 kfac bf16 overlap units revnet}
source scripts/gpu_unpack.sh .gpu/strata-gpu.tar.xz  # an explicit argument: a bare `source` would pass ours
# The unit tests find the sources and the built tools at the paths of the build machine (/work/main and its
# build folder, which gpu_bundle.sh recorded): point those at this checkout and the unpacked bundle.
src_dir=$(cat /tmp/strata/source_dir 2>/dev/null)
src_dir=${src_dir:-/work/main}
bin_dir=$(cat /tmp/strata/build_dir 2>/dev/null)
bin_dir=${bin_dir:-$src_dir/build}
[ -e build ] || ln -s /tmp/strata build
[ -e "$src_dir" ] || { mkdir -p "$(dirname "$src_dir")" && ln -s "$PWD" "$src_dir"; }
[ -e "$bin_dir" ] || ln -s /tmp/strata "$bin_dir"
mkdir -p /tmp/nets
summary=$out/summary.txt
: >"$summary"
say() { echo "$*" | tee -a "$summary"; }
# After every step, so that a run cut off by a time limit still leaves its logs.
pack() { [ -n "${OUT:-}" ] && tar -C /tmp -czf "$OUT/gpu-logs.tgz" gpu-logs && cp "$summary" "$OUT/"; }

nvidia-smi -L | tee -a "$summary"
missing=$(ldd /tmp/strata/bin/* /tmp/strata/lib/libstrata.so | grep "not found" | sort -u)
[ -n "$missing" ] && say "MISSING LIBRARIES: $missing"
# Which CUDA libraries the loader picked (PyTorch's wheels, the toolkit's), for the record: the runtime loads with
# libstrata, cuBLAS, cuDNN and NCCL when first used (src/strata/cuda_libraries.hpp).
ldd /tmp/strata/lib/libstrata.so | grep -E "libcudart" | tee -a "$summary"
strata_tests --gtest_filter='CudaLibraries.*' 2>&1 | grep -E "opened from|FAILED" | tee -a "$summary"
strata device_query 2>&1 | tee "$out/device_query.txt"

# AlexNet at batch 256 and ResNet-50 at 64, from the models' deploy files.
timed_nets() {
  sed '0,/dim: 32 dim: 3/s//dim: 256 dim: 3/; 0,/shape { dim: 32 }/s//shape { dim: 256 }/' \
    models/alexnet/deploy.prototxt >/tmp/nets/alexnet256.prototxt
  sed '0,/dim: 8 dim: 3/s//dim: 64 dim: 3/; 0,/shape { dim: 8 }/s//shape { dim: 64 }/' \
    models/resnet50/deploy.prototxt >/tmp/nets/resnet50_64.prototxt
}
# Fashion-MNIST's databases from .gpudata, and LeNet's solver in GPU mode.
fashion_data() {
  mkdir -p data
  for s in train t10k; do
    [ -d "data/fashion_mnist_${s/t10k/test}_lmdb" ] ||
      convert_mnist_data .gpudata/$s-images-idx3-ubyte.gz .gpudata/$s-labels-idx1-ubyte.gz \
        "data/fashion_mnist_${s/t10k/test}_lmdb" >/dev/null 2>&1
  done
  sed 's/solver_mode: CPU/solver_mode: GPU/' models/lenet_fashion/lenet_solver.prototxt \
    >/tmp/nets/lenet_gpu_solver.prototxt
}

for step in $steps; do
  case $step in
    tests)
      # The GPU tests first (their per-blob errors are printed): the GpuTest suites and each layer's typed tests'
      # Gpu instances (tests/layer_engines.hpp).
      timeout 200 strata_tests --gtest_filter='GpuTest*:*/Gpu.*' >"$out/gpu_tests.txt" 2>&1
      say "GPU tests: exit $? ($(grep -E '^\[  (PASSED|FAILED)' "$out/gpu_tests.txt" | tr '\n' ' '))"
      grep -E "FAILED|Failure|error" "$out/gpu_tests.txt" | awk 'NR <= 20' | tee -a "$summary"
      grep "normalised error" "$out/gpu_tests.txt" | awk '{print $NF}' | sort -g | tail -1 |
        xargs -I{} echo "largest normalised error, GPU vs CPU: {}" | tee -a "$summary"
      ;;
    units)
      # Every other unit test, on this machine (CPU code; catches a broken bundle).
      (cd "$out" && timeout "${UNIT_TIMEOUT:-300}" strata_tests --gtest_filter='-GpuTest*:*/Gpu.*' >"$out/unit_tests.txt" 2>&1)
      say "other unit tests: exit $? ($(grep -E '^\[  (PASSED|FAILED)' "$out/unit_tests.txt" | tr '\n' ' '))"
      grep -E "^\[  FAILED" "$out/unit_tests.txt" | awk 'NR <= 20' | tee -a "$summary"
      ;;
    time)
      timed_nets
      for net in models/lenet/deploy.prototxt /tmp/nets/alexnet256.prototxt /tmp/nets/resnet50_64.prototxt; do
        for tf in false true; do
          log=$out/time_$(basename "$net" .prototxt)_tf32_$tf.txt
          timeout "${TIME_TIMEOUT:-120}" strata time --model="$net" --gpu=0 --tf32=$tf --iterations=20 --warmup=3 >"$log" 2>&1
          say "strata time $(basename "$net") tf32=$tf: exit $? $(grep -E 'Average (Forward-Backward|SGD step)' "$log" |
            tr '\n' ' ')"
          pack
        done
      done
      # ResNet-50 with its layers fused (BatchNorm + Scale + ReLU, sum + ReLU: Layer::Absorb) and without.
      log=$out/time_resnet50_64_tf32_true_unfused.txt
      STRATA_FUSE_LAYERS=0 timeout "${TIME_TIMEOUT:-120}" strata time --model=/tmp/nets/resnet50_64.prototxt --gpu=0 \
        --tf32=true --iterations=20 --warmup=3 >"$log" 2>&1
      say "strata time resnet50_64 tf32=true STRATA_FUSE_LAYERS=0: exit $? $(grep -E 'Average (Forward-Backward|SGD step)' \
        "$log" | tr '\n' ' ')"
      ;;
    table)
      # Issue 36's table (benchmarks/gpu_table.sh): Strata TF32 and bfloat16 beside PyTorch's three modes, per net.
      NETS=${GPU_TABLE_NETS:-resnet50:64 resnet50:256} timeout "${TABLE_TIMEOUT:-540}" \
        bash benchmarks/gpu_table.sh "$out/table" 2>>"$summary" | tee -a "$summary"
      pack
      ;;
    pytorch)
      # Without our LD_LIBRARY_PATH: PyTorch brings its own CUDA libraries. PYTORCH_NETS (net:batch ...) and
      # PYTORCH_MODES (nchw channels_last bf16) widen it, as issue 36's table asks, at about 20 s a run.
      for nb in ${PYTORCH_NETS:-alexnet:256 resnet50:64}; do
        for mode in ${PYTORCH_MODES:-nchw}; do
          env -u LD_LIBRARY_PATH timeout 150 python3 benchmarks/gpu_pytorch.py --net "${nb%%:*}" --batch "${nb##*:}" \
            --mode "$mode" 2>&1 | tee -a "$summary"
        done
      done
      ;;
    mpigpu)
      # The data-parallel engine's GPU path (docs/gpu.md): the staging on its own (HOST's copies wait for the compute stream;
      # NCCL, or its error for ranks sharing a GPU) and training equivalence (N ranks with batch b against one rank
      # with N*b, bit-identical ranks), on 1 rank and on 2 ranks sharing the GPU; at 4 ranks, a pipeline of 2 stages x 2
      # replicas whose sums go through the reducer's host staging, with SGD and with K-FAC per stage.
      for np in 1 2 4; do
        filter='GradientStaging*:DataParallelEngineTest.Gpu*:DataParallelEngineTest.HostStaging*:PipelineEngineTest.Gpu*'
        [ "$np" = 4 ] && filter='PipelineEngineTest.GpuStagesTimesReplicas*'
        timeout "${MPIGPU_TIMEOUT:-280}" mpirun --allow-run-as-root --oversubscribe --bind-to none --mca btl self,vader -np $np \
          strata_mpi_tests --gtest_color=no --gtest_filter="$filter" \
          >"$out/mpi_gpu_np$np.txt" 2>&1
        say "GPU MPI tests on $np rank(s): exit $? ($(grep -E '^\[  (PASSED|FAILED|SKIPPED)' "$out/mpi_gpu_np$np.txt" | tr '\n' ' '))"
        grep -E "FAILED|Failure|differ|error" "$out/mpi_gpu_np$np.txt" | awk 'NR <= 20' | tee -a "$summary"
      done
      ;;
    overlap)
      # AlexNet on 2 ranks sharing the GPU, overlap on and off (NCCL too with a GPU per rank): a table.
      timeout 420 bash scripts/bench_gpu_overlap.sh "$out/overlap" >"$out/overlap.txt" 2>&1
      say "GPU overlap benchmark: exit $?"
      tee -a "$summary" <"$out/overlap/table.md"
      ;;
    revnet)
      # Reversible blocks against the same stack with every activation stored, on the GPU: time and device
      # activation memory by depth (issue 36: at most 1.3x the time, memory flat in depth).
      for batch in 32 128; do
        timeout 150 python3 benchmarks/revnet_depth.py --gpu 0 --depths 8,32 --batch $batch --iterations 5 \
          >"$out/revnet_gpu_$batch.txt" 2>&1
        say "reversible stack against stored, GPU, batch $batch: exit $?"
        tee -a "$summary" <"$out/revnet_gpu_$batch.txt"
      done
      ;;
    bf16)
      # precision: BF16 on the GPU (docs/gpu.md, "bfloat16"): the SGD step of AlexNet (256) and ResNet-50 (64) in
      # bfloat16, channels-last (the default) and channels-first, and float16 channels-last, beside TF32
      # channels-first (the default) and channels-last (--gpu_channels_last=all); then LeNet trained in float and
      # in bfloat16 (issue 36: bfloat16 within 0.5 points of float).
      timed_nets
      for net in /tmp/nets/alexnet256.prototxt /tmp/nets/resnet50_64.prototxt; do
        for run in FP32:none FP32:all BF16:16bit BF16:none FP16:16bit; do
          precision=${run%:*} last=${run#*:}
          log=$out/time_$(basename "$net" .prototxt)_${precision}_last_$last.txt
          timeout "${TIME_TIMEOUT:-120}" strata time --model="$net" --gpu=0 --tf32=true --precision=$precision \
            --gpu_channels_last=$last --iterations=20 --warmup=3 >"$log" 2>&1
          say "strata time $(basename "$net") tf32=true precision=$precision channels_last=$last: exit $? $(grep -E \
            'Average (Forward-Backward|SGD step)|compute in (bfloat16|float16)|convert them|convert each' "$log" |
            cut -c1-200 | tr '\n' ' ')"
          pack
        done
      done
      # The planner's byte counts for bfloat16 blobs (docs/recompute.md): ResNet-50 under half of store-all, the
      # predicted peak beside the measured one (the prediction must not be below it).
      log=$out/time_resnet50_64_BF16_budget.txt
      timeout "${TIME_TIMEOUT:-120}" strata time --model=/tmp/nets/resnet50_64.prototxt --gpu=0 --tf32=true \
        --precision=BF16 --budget=0.5 --iterations=5 --warmup=2 >"$log" 2>&1
      say "strata time resnet50_64 BF16 --budget=0.5: exit $? $(grep -E 'predicted peak|Peak activation' "$log" |
        cut -c1-160 | tr '\n' ' ')"
      pack
      if [ ! -d .gpudata ]; then
        say "no .gpudata (Fashion-MNIST): LeNet in bfloat16 skipped"
        continue
      fi
      fashion_data
      { cat /tmp/nets/lenet_gpu_solver.prototxt; echo "precision: BF16"; } >/tmp/nets/lenet_gpu_bf16_solver.prototxt
      for solver in lenet_gpu lenet_gpu_bf16; do
        SECONDS=0
        timeout 240 strata train --solver=/tmp/nets/${solver}_solver.prototxt >"$out/train_$solver.txt" 2>&1
        say "$solver training: exit $?, ${SECONDS} s wall"
        grep -E "Test net output #0" "$out/train_$solver.txt" | tail -1 | tee -a "$summary"
      done
      ;;
    train | mpi2 | kfac)
      if [ ! -d .gpudata ]; then
        say "no .gpudata (Fashion-MNIST): $step skipped"
        continue
      fi
      fashion_data
      SECONDS=0
      if [ "$step" = kfac ]; then
        # LeNet's K-FAC solver against SGD on the same net, both on the GPU, 1000 iterations (issue 36: K-FAC at most
        # 1.5x SGD's time); K-FAC's own parts from its "K-FAC per iteration" lines.
        sed 's/solver_mode: CPU/solver_mode: GPU/' models/lenet_fashion/lenet_kfac_solver.prototxt \
          >/tmp/nets/lenet_kfac_gpu_solver.prototxt
        for solver in lenet_gpu lenet_kfac_gpu; do
          start=$(date +%s.%N)
          timeout 200 strata train --solver=/tmp/nets/${solver}_solver.prototxt --iterations=1000 >"$out/train_$solver.txt" 2>&1
          rc=$?
          say "$solver, 1000 iterations: exit $rc, $(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }') s wall"
          grep -E "Test net output #0" "$out/train_$solver.txt" | tail -1 | tee -a "$summary"
        done
        grep "K-FAC per iteration" "$out/train_lenet_kfac_gpu.txt" | tail -2 | tee -a "$summary"
      elif [ "$step" = train ]; then
        timeout 240 strata train --solver=/tmp/nets/lenet_gpu_solver.prototxt >"$out/train_lenet_gpu.txt" 2>&1
        say "LeNet GPU training: exit $?, ${SECONDS} s wall"
        grep -E "Test net output #0|Iteration 10000" "$out/train_lenet_gpu.txt" | tail -3 | tee -a "$summary"
      else
        # 2 ranks sharing the one GPU; train ends non-zero if the ranks' weights differ at the end.
        timeout 240 mpirun --allow-run-as-root --oversubscribe --bind-to none --mca btl self,vader -np 2 \
          strata train --solver=/tmp/nets/lenet_gpu_solver.prototxt --iterations=1000 >"$out/train_lenet_gpu_np2.txt" 2>&1
        say "LeNet GPU training, 2 ranks on one GPU, 1000 iterations: exit $?, ${SECONDS} s wall"
        grep -E "Test net output #0|error" "$out/train_lenet_gpu_np2.txt" | tail -3 | tee -a "$summary"
      fi
      ;;
  esac
  pack
done
echo "==== summary"
cat "$summary"
