#!/usr/bin/env bash
# GPU data-parallel timing for docs/gpu.md: `strata train` of AlexNet (batch BATCH per rank, 61M parameters) with
# solver_mode GPU on 1 rank, and on 2 ranks with comm_param.gpu_path HOST, overlap on and off; with gpu_path NCCL
# too when the machine has a GPU per rank (NCCL refuses ranks that share one). The images are the deploy net's
# Input layer (zeros, no data loading): what is compared is the gradient path, and the convolutions cost the same
# on any values. Writes OUT_DIR/table.md (medians over REPS runs, the first display window of each run not timed).
#
#   bash scripts/bench_gpu_overlap.sh [OUT_DIR=/tmp/gpu-bench]     (BATCH=128 ITERS=40 DISPLAY=10 REPS=2 THREADS=)
# Needs strata and mpirun on PATH (scripts/gpu_unpack.sh sets that up on a GPU machine).
set -uo pipefail
out=${1:-/tmp/gpu-bench}
batch=${BATCH:-128}
iters=${ITERS:-40}
display=${DISPLAY:-10}
reps=${REPS:-2}
threads=${THREADS:-}  # comm_param.threads: communication threads per rank (empty: Strata's default)
mkdir -p "$out/logs"
sed "0,/dim: 32 dim: 3/s//dim: $batch dim: 3/; 0,/shape { dim: 32 }/s//shape { dim: $batch }/" \
  models/alexnet/deploy.prototxt >"$out/alexnet.prototxt"
gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
configs="1:on:HOST 2:on:HOST 2:off:HOST"
[ "$gpus" -ge 2 ] && configs+=" 2:on:NCCL 2:off:NCCL"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

for rep in $(seq 1 "$reps"); do
  for config in $configs; do
    IFS=: read -r ranks overlap path <<<"$config"
    name="np${ranks}_overlap-${overlap}_${path}"
    cat >"$out/$name.solver.prototxt" <<EOF
net: "$out/alexnet.prototxt"
base_lr: 0.001
momentum: 0.9
weight_decay: 0.0005
lr_policy: "fixed"
display: $display
max_iter: $iters
snapshot: 0
snapshot_after_train: false
solver_mode: GPU
random_seed: 1701
comm_param { overlap: $([ "$overlap" = on ] && echo true || echo false) gpu_path: $path${threads:+ threads: $threads} }
EOF
    log="$out/logs/${name}_rep$rep.log"
    timeout 180 mpirun --oversubscribe --bind-to none --mca btl self,vader -np "$ranks" \
      strata train --solver="$out/$name.solver.prototxt" >"$log" 2>&1 || echo "$name rep $rep: exit $? (see $log)"
  done
done

python3 - "$out" "$batch" "$gpus" "$threads" $configs <<'PY' | tee "$out/table.md"
import glob, re, statistics, sys
out, batch, gpus, threads, configs = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5:]
window = re.compile(r"Iteration \d+ \([\d.e+-]+ iter/s, ([\d.e+-]+)s/(\d+) iters\)")
sync = re.compile(r"exposed communication ([\d.]+) ms .*allreduce busy ([\d.]+) ms, comm tail after backward "
                  r"([\d.]+) ms, overlap ratio ([\d.]+)")

def run(path):
    """ms per iteration over the display windows after the first, and the data-parallel engine's averages over the same."""
    text = open(path, errors="replace").read()
    timed = [(float(s), int(n)) for s, n in window.findall(text)][1:]
    stats = [tuple(map(float, m)) for m in sync.findall(text)][1:]
    ms = 1000 * sum(s for s, _ in timed) / sum(n for _, n in timed) if timed else None
    return ms, [statistics.mean(c) for c in zip(*stats)] if stats else None

print("AlexNet, batch %d per rank, %s GPU(s), %s communication thread(s) per rank; medians over runs" % (batch, gpus, threads or "default"))
print()
print("| configuration | t/iter (ms) | images/s | exposed comm (ms) | allreduce busy (ms) | tail after backward (ms) | overlap ratio |")
print("|---|---|---|---|---|---|---|")
for config in configs:
    ranks, overlap, path = config.split(":")
    runs = [run(p) for p in sorted(glob.glob("%s/logs/np%s_overlap-%s_%s_rep*.log" % (out, ranks, overlap, path)))]
    times = [ms for ms, _ in runs if ms]
    label = "1 rank" if ranks == "1" else "%s ranks, %s, overlap %s" % (ranks, path, overlap)
    if not times:
        print("| %s | failed | | | | | |" % label)
        continue
    t = statistics.median(times)
    stats = [s for _, s in runs if s]
    cells = ["%.2f" % statistics.median(col) for col in zip(*stats)] if stats else ["-"] * 4
    print("| %s | %.1f | %.0f | %s |" % (label, t, int(ranks) * batch * 1000 / t, " | ".join(cells)))
PY
