#!/usr/bin/env bash
# The spread of one shm allreduce across fresh processes (issue: "bimodal across processes"): RUNS separate
# `mpirun -np 2 allreduce_bench --algorithms=shm` jobs, each timing SIZES with REPS repetitions, and the
# distribution of their medians: min, median, max and max / median per size, and the same for shm's time over a
# memcpy of the same size timed in the same process (every rank copying at once): a process that lands in a slow
# mode for its whole life shows as an outlier in both, while a machine that is busy for a while slows the memcpy
# too and leaves the ratio alone.
#
#   bash scripts/bench_shm_processes.sh [BUILD_DIR=build]      (RUNS=20 SIZES=1M,16M REPS=20 NP=2)
set -euo pipefail
build=${1:-build}
runs=${RUNS:-20}
sizes=${SIZES:-1M,16M}
reps=${REPS:-20}
np=${NP:-2}
bench=$build/bin/allreduce_bench
[ -x "$bench" ] || { echo "bench_shm_processes: no $bench (build first)" >&2; exit 1; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
out=$(mktemp)
trap 'rm -f "$out"' EXIT
for run in $(seq 1 "$runs"); do
  mpirun -np "$np" --oversubscribe ${MPIRUN_EXTRA:-} "$bench" --algorithms=shm --sizes="$sizes" --reps="$reps" \
    --min_reps="$reps" --memcpy=true --csv | awk -F, -v run="$run" '$1 ~ /^[0-9]+$/ { print run, $3, $4, $6 }' >> "$out"
done
python3 - "$out" <<'PY'
import collections, statistics, sys
shm, mem = collections.defaultdict(dict), collections.defaultdict(dict)
for line in open(sys.argv[1]):
    run, size, alg, us = line.split()
    (shm if alg == "shm" else mem)[int(size)][int(run)] = float(us)
print("| size | runs | shm min us | median | max | max / median | shm / memcpy: min | median | max | slowest runs (shm us, ratio) |")
print("|---|---|---|---|---|---|---|---|---|---|")
for size in sorted(shm):
    t = shm[size]
    r = {run: t[run] / mem[size][run] for run in t if mem[size].get(run)}
    med, rmed = statistics.median(t.values()), statistics.median(r.values())
    slow = sorted(t, key=t.get)[-3:]
    print("| %d | %d | %.1f | %.1f | %.1f | %.2f | %.2f | %.2f | %.2f | %s |" % (
        size, len(t), min(t.values()), med, max(t.values()), max(t.values()) / med, min(r.values()), rmed,
        max(r.values()), ", ".join("#%d %.0f, %.2f" % (k, t[k], r[k]) for k in slow)))
PY
