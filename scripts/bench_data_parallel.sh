#!/usr/bin/env bash
# Reproduces the "Data-parallel training" section of docs/benchmarks.md: `strata train` on 1 rank and on
# 2 ranks (overlap on, overlap off, ...) for LeNet on Fashion-MNIST (batch 64 per rank) and an AlexNet-style
# net (batch 32 per rank, 61M parameters, random 227x227 images), every rank computing with one BLAS and
# one OpenMP thread so that the ideal speed-up on 2 ranks is 2. The configurations of a net are run
# interleaved, rep by rep in a rotating order, so that drift in the machine's speed hits all of them alike;
# the table gives medians over the reps.
#
#   scripts/bench_data_parallel.sh [build_dir] [out_dir]        (defaults: build, bench-out/data_parallel)
#   NETS="alexnet" REPS=5 scripts/bench_data_parallel.sh        (one net, more reps)
#   CONFIGS="1 2:on:1 2:off:1" ...      (ranks[:overlap:threads[:fusion_bytes[:poll_sleep_us[:algorithm[:build]]]]];
#                                        threads: a count, or e.g. 2L for 2 with comm_param.low_layer_lane;
#                                        algorithm: comm_param.algorithm, HYBRID by default, or e.g. vhd;
#                                        a path ending in .table: HYBRID with that crossover table;
#                                        build: another build folder (e.g. of an older commit) to run instead,
#                                        so two versions are timed interleaved; s is against the 1-rank
#                                        configuration of the same build)
#   LENET_ITERS=300 ALEXNET_ITERS=12 ...                        (iterations per run; the first display
#                                                                window of each run is warm-up, not timed)
#   PRIO="chrt -r 10" ...                                       (a prefix for mpirun, e.g. a priority)
#   CLUSTER=1 ...                                               (across the hosts of the test bed, one rank
#                                                                per host: bring it up first, e.g.
#                                                                bash scripts/cluster.sh up 2 --rate 1gbit)
#   SMOKE=1 ...                                                 (a few iterations, to check the script)
#
# On a machine shared with other sessions: the kernel groups processes by session (sched_autogroup), so `nice`
# alone does not raise the benchmark against them; `echo -15 > /proc/self/autogroup` in the shell that runs it
# does (and `echo 0` after). That is how docs/benchmarks.md ran it.
#
# Speed-up s = t(1, b) / t(N, b) x N (time per iteration on 1 rank and on N ranks, batch b per rank).
# Exposed communication is the data-parallel engine's own measure, logged by rank 0 every display interval: the
# time the compute thread waited for reductions and updates (after backward, and in the next forward).
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
out=${2:-bench-out/data_parallel}
nets=${NETS:-"lenet alexnet"}
reps=${REPS:-3}
configs=${CONFIGS:-"1 2:on:1 2:off:1 2:on:2"}
lenet_iters=${LENET_ITERS:-400}
lenet_display=${LENET_DISPLAY:-100}
alexnet_iters=${ALEXNET_ITERS:-12}
alexnet_display=${ALEXNET_DISPLAY:-4}
if [ "${SMOKE:-0}" = 1 ]; then
  reps=1 lenet_iters=20 lenet_display=10 alexnet_iters=4 alexnet_display=2
fi
strata="$build/bin/strata"
[ -x "$strata" ] || { echo "bench_data_parallel.sh: $strata not found; build first (cmake --build $build)" >&2; exit 1; }
mkdir -p "$out/logs"

export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# One compute thread per rank: the ideal speed-up on N ranks is then N.
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
# --bind-to none: at -np 2 Open MPI would pin each rank, and with it its communication threads, to one core.
# strata train itself makes waiting MPI threads yield (mpi_yield_when_idle=1) unless told otherwise.
mpirun=(${PRIO:-} mpirun --oversubscribe --bind-to none --mca btl self,vader ${MPIRUN_EXTRA:-})
if [ "${CLUSTER:-0}" = 1 ]; then
  mpirun=(${PRIO:-} bash scripts/cluster.sh mpirun --map-by node ${MPIRUN_EXTRA:-})
fi

# ---- data ----
# LeNet: Fashion-MNIST as scripts/quickstart.sh converts it (Debian's dataset-fashion-mnist).
if [[ " $nets " == *" lenet "* ]] && [ ! -d data/fashion_mnist_train_lmdb ]; then
  src=/usr/share/datasets/fashion-mnist
  [ -f "$src/train-images-idx3-ubyte.gz" ] || { echo "need $src (apt-get install dataset-fashion-mnist)" >&2; exit 1; }
  mkdir -p data
  "$build/bin/convert_mnist_data" "$src/train-images-idx3-ubyte.gz" "$src/train-labels-idx1-ubyte.gz" \
    data/fashion_mnist_train_lmdb
fi
# AlexNet: 128 random 227x227 colour images (random, not zeros: zeros make ReLU and pooling look cheap).
if [[ " $nets " == *" alexnet "* ]] && [ ! -d "$out/alexnet_random_lmdb" ]; then
  rm -rf "$out/alexnet_images"
  mkdir -p "$out/alexnet_images"
  /usr/bin/python3 - "$out/alexnet_images" <<'PY'
import os, random, sys
d = sys.argv[1]
rng = random.Random(1701)
with open(os.path.join(d, "list.txt"), "w") as listing:
    for i in range(128):
        name = "img%03d.ppm" % i
        with open(os.path.join(d, name), "wb") as f:
            f.write(b"P6\n227 227\n255\n" + rng.randbytes(227 * 227 * 3))
        listing.write("%s %d\n" % (name, rng.randrange(1000)))
PY
  "$build/bin/convert_imageset" "$out/alexnet_images/" "$out/alexnet_images/list.txt" "$out/alexnet_random_lmdb" \
    > "$out/logs/convert_imageset.log" 2>&1
  rm -rf "$out/alexnet_images"
fi

# ---- nets and solvers ----
# The AlexNet deploy net with its Input layer replaced by a Data layer on the random images.
/usr/bin/python3 - models/alexnet/deploy.prototxt "$out/alexnet_train.prototxt" "$out/alexnet_random_lmdb" <<'PY'
import re, sys
text = open(sys.argv[1]).read()
m = re.search(r'layer \{\s*name: "data"\s*type: "Input".*?\n\}\n', text, re.S)
assert m, "no Input layer named data in " + sys.argv[1]
data = ('layer {\n  name: "data"\n  type: "Data"\n  top: "data"\n  top: "label"\n'
        '  transform_param { scale: 0.00390625 }\n'
        '  data_param { source: "%s" batch_size: 32 backend: LMDB }\n}\n' % sys.argv[3])
open(sys.argv[2], "w").write(text[:m.start()] + data + text[m.end():])
PY

# solver NET ITERS DISPLAY OVERLAP THREADS FUSION POLL_SLEEP_US ALGORITHM > file
solver() {
  cat <<EOF
net: "$1"
base_lr: 0.01
momentum: 0.9
weight_decay: 0.0005
lr_policy: "fixed"
display: $3
max_iter: $2
snapshot: 0
snapshot_after_train: false
solver_mode: CPU
random_seed: 1701
comm_param { overlap: $4 threads: ${5%L} $([[ $5 == *L ]] && echo "low_layer_lane: true") fusion_bytes: $6 poll_sleep_us: $7 $(
  if [[ $8 == *.table ]]; then echo "tuning_table: \"$8\""; else echo "algorithm: \"$8\""; fi) }
EOF
}

run_config() {  # NET CONFIG REP
  local net=$1 config=$2 rep=$3 ranks overlap threads fusion sleep algorithm other model iters display
  IFS=: read -r ranks overlap threads fusion sleep algorithm other <<< "$config"
  overlap=${overlap:-on} threads=${threads:-1} fusion=${fusion:-0} sleep=${sleep:-0} algorithm=${algorithm:-HYBRID}
  local binary=$strata
  if [ -n "$other" ]; then
    binary="$other/bin/strata"
    [ -x "$binary" ] || { echo "bench_data_parallel.sh: $binary not found" >&2; exit 1; }
  fi
  case $net in
    lenet) model=models/lenet_fashion/lenet_train_test.prototxt iters=$lenet_iters display=$lenet_display ;;
    alexnet) model=$out/alexnet_train.prototxt iters=$alexnet_iters display=$alexnet_display ;;
  esac
  local name="${net}_np${ranks}_overlap-${overlap}_threads${threads}_fusion${fusion}_sleep${sleep}"
  [ "$algorithm" != HYBRID ] && name+="_$(basename "$algorithm" .table)"
  [ -n "$other" ] && name+="_build-$(echo "$other" | tr -c 'A-Za-z0-9\n' '-')"
  local ov=true
  [ "$overlap" = off ] && ov=false
  solver "$model" "$iters" "$display" "$ov" "$threads" "$fusion" "$sleep" "$algorithm" > "$out/$name.solver.prototxt"
  local log="$out/logs/${name}_rep$rep.log"
  echo "+ ${mpirun[*]} -np $ranks $binary train --solver=$out/$name.solver.prototxt   (> $log)" >&2
  "${mpirun[@]}" -np "$ranks" "$binary" train --solver="$out/$name.solver.prototxt" > "$log" 2>&1 ||
    { tail -n 20 "$log" >&2; echo "bench_data_parallel.sh: $name failed" >&2; exit 1; }
}

{
  echo "date: $(date -u '+%Y-%m-%d %H:%M UTC'); load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
  echo "nets: $nets; configs: $configs; reps: $reps; iterations: lenet $lenet_iters (display $lenet_display), alexnet $alexnet_iters (display $alexnet_display)"
  echo "mpirun: ${mpirun[*]}"
} | tee "$out/conditions.txt"
read -r -a config_list <<< "$configs"
n=${#config_list[@]}
for net in $nets; do
  for rep in $(seq 1 "$reps"); do
    # Rotate the order each rep, so no configuration always runs first (or right after the slowest).
    for k in $(seq 0 $((n - 1))); do
      run_config "$net" "${config_list[$(((k + rep - 1) % n))]}" "$rep"
    done
  done
done
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$out/conditions.txt"

# ---- the table ----
/usr/bin/python3 - "$out" "$nets" "$configs" <<'PY' | tee "$out/table.md"
import glob, os, re, statistics, sys
out, nets, configs = sys.argv[1], sys.argv[2].split(), sys.argv[3].split()
solver_re = re.compile(r"Iteration \d+ \(([\d.e+-]+) iter/s, ([\d.e+-]+)s/(\d+) iters\)")
sync_re = re.compile(r"per iteration: forward ([\d.]+) ms, backward ([\d.]+) ms, exposed communication ([\d.]+) ms "
                     r"\(([\d.]+)% of ([\d.]+) ms\), allreduce busy ([\d.]+) ms, comm tail after backward ([\d.]+) ms, "
                     r"overlap ratio ([\d.]+)")

def parse(path):
    """Time per iteration (ms) over every display window but the first (warm-up), and the engine's
    forward / backward / exposed / tail averages over the same windows (None on 1 rank)."""
    secs = iters = 0
    windows = []
    for line in open(path, errors="replace"):
        m = solver_re.search(line)
        if m:
            windows.append((float(m.group(2)), int(m.group(3))))
    timed = windows[1:] or windows
    secs = sum(s for s, _ in timed)
    iters = sum(i for _, i in timed)
    sync = [tuple(float(x) for x in m.groups()) for m in map(sync_re.search, open(path, errors="replace")) if m]
    sync = sync[1:] or sync
    avg = [statistics.mean(col) for col in zip(*sync)] if sync else None
    return 1000 * secs / iters if iters else float("nan"), avg

def label(config):
    parts = config.split(":")
    parts += ["", "on", "1", "0", "0", "HYBRID", ""][len(parts):]
    ranks, overlap, threads, fusion, sleep = parts[0], parts[1] or "on", parts[2] or "1", parts[3] or "0", parts[4] or "0"
    algorithm = parts[5] or "HYBRID"
    name = "%s_np%s_overlap-%s_threads%s_fusion%s_sleep%s" % ("%s", ranks, overlap, threads, fusion, sleep)
    other = parts[6]
    if algorithm != "HYBRID":
        algorithm = os.path.basename(algorithm)[:-len(".table")] if algorithm.endswith(".table") else algorithm
        name += "_" + algorithm
    if other:
        name += "_build-" + re.sub(r"[^A-Za-z0-9]", "-", other)
    suffix = ", build %s" % other if other else ""
    if ranks == "1":
        return int(ranks), name, "1 rank" + suffix, other
    lane = threads.endswith("L")
    threads = threads.rstrip("L")
    text = "%s ranks, overlap %s, %s thread%s" % (ranks, overlap, threads, "" if threads == "1" else "s")
    if lane:
        text += " with the low-layer lane"
    if fusion != "0":
        text += ", fusion %s B" % fusion
    if sleep != "0":
        text += ", poll sleep %s us" % sleep
    if algorithm != "HYBRID":
        text += ", %s" % algorithm
    return int(ranks), name, text + suffix, other

print("| net | configuration | t/iter (ms) | speed-up s | forward (ms) | backward (ms) | exposed comm (ms) | exposed share | allreduce busy (ms) | tail after backward (ms) | overlap ratio | runs: t/iter (ms) |")
print("|---|---|---|---|---|---|---|---|---|---|---|---|")
for net in nets:
    base = {}
    rows = []
    for config in configs:
        ranks, name, text, other = label(config)
        logs = sorted(glob.glob(os.path.join(out, "logs", (name % net) + "_rep*.log")))
        if not logs:
            continue
        results = [r for r in map(parse, logs) if r[0] == r[0]]  # a run without a timed window is NaN
        if not results:
            continue
        t = statistics.median(r[0] for r in results)
        syncs = [r[1] for r in results if r[1]]
        if ranks == 1 and other not in base:
            base[other] = t
        rows.append((ranks, text, t, syncs, other, [round(r[0]) for r in results]))
    for ranks, text, t, syncs, other, ts in rows:
        s = "%.2f" % (base[other] / t * ranks) if other in base else "-"
        if syncs:
            med = [statistics.median(col) for col in zip(*syncs)]
            f, b, e, share, it, busy, tail, ratio = med
            cells = "%.1f | %.1f | %.1f | %.1f%% | %.1f | %.1f | %.2f" % (f, b, e, 100 * e / t, busy, tail, ratio)
        else:
            cells = "- | - | - | - | - | - | -"
        print("| %s | %s | %.1f | %s | %s | %s |" % (net, text, t, s, cells, ", ".join(map(str, ts))))
PY
