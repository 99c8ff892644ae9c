#!/usr/bin/env bash
# The spread of one shm allreduce across fresh processes (issue: "bimodal across processes"): RUNS separate
# `mpirun -np 2 allreduce_bench --algorithms=shm` jobs, each timing SIZES with REPS repetitions, and the
# distribution of their medians: min, median, max and max / median per size, plus each run's line. A process
# that lands in a slow mode for its whole life shows as an outlier here, where one long run would hide it.
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
    --min_reps="$reps" --memcpy=false --csv | awk -F, -v run="$run" '$1 ~ /^[0-9]+$/ { print run, $3, $6 }' >> "$out"
done
python3 - "$out" <<'PY'
import collections, statistics, sys
by_size = collections.defaultdict(list)
for line in open(sys.argv[1]):
    run, size, us = line.split()
    by_size[int(size)].append((float(us), int(run)))
print("| size | runs | min us | median us | max us | max / median | slowest runs |")
print("|---|---|---|---|---|---|---|")
for size in sorted(by_size):
    v = sorted(by_size[size])
    med = statistics.median(u for u, _ in v)
    print("| %d | %d | %.1f | %.1f | %.1f | %.2f | %s |" % (size, len(v), v[0][0], med, v[-1][0], v[-1][0] / med,
          ", ".join("#%d %.0f" % (r, u) for u, r in v[-3:])))
PY
