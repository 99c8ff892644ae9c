#!/usr/bin/env bash
# The allreduce on one host with and without a busy process beside it, as a distribution over fresh processes
# (issue 39): RUNS separate `mpirun -np NP allreduce_bench` jobs per condition, each timing the hybrid, Open MPI's
# default and its six forced algorithms at SIZES, interleaved rep by rep in one process. Conditions alternate run
# by run (idle, busy, idle, ...), so a slow period of the machine hits both alike. "busy" is one more process
# spinning on the cores for the whole job (`BUSY`, default a shell loop of `yes`). The table gives, per condition
# and size, the distribution over processes of the hybrid's median, of the best Open MPI median of the same
# process, and of their ratio; the target is a ratio of at most 1.1 at the median and in the slowest process.
# Raw outputs go to OUT_DIR; the load average before and after is printed (the machine's other work shows there).
#
#   bash scripts/bench_allreduce_load.sh [BUILD_DIR=build] [OUT_DIR=bench-out/allreduce_load]
#   (RUNS=20 NP=2 SIZES=1M,16M BUSY="yes" MPIRUN_EXTRA="...")
set -euo pipefail
build=${1:-build}
out=${2:-bench-out/allreduce_load}
runs=${RUNS:-20}
np=${NP:-2}
sizes=${SIZES:-1M,16M}
busy_cmd=${BUSY:-yes}
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
bench=$build/bin/allreduce_bench
[ -x "$bench" ] || { echo "bench_allreduce_load: no $bench (build first)" >&2; exit 1; }
mkdir -p "$out"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1

busy=""
stop_busy() {
  if [ -n "$busy" ]; then kill "$busy" 2>/dev/null; wait "$busy" 2>/dev/null || true; fi
  busy=""
}
trap stop_busy EXIT

echo "# load before: $(cat /proc/loadavg)"
for run in $(seq 1 "$runs"); do
  for cond in idle busy; do
    if [ "$cond" = busy ]; then
      $busy_cmd > /dev/null &
      busy=$!
    fi
    mpirun -np "$np" --oversubscribe ${MPIRUN_EXTRA:-} "$bench" --algorithms=hybrid,mpi,mpi_all --sizes="$sizes" \
      --seconds=2 --memcpy=false > "$out/${cond}_run${run}.txt" || echo "# $cond run $run failed" >&2
    stop_busy
  done
done
echo "# load after: $(cat /proc/loadavg)"

python3 - "$out" "$here" "$np" <<'PY'
import collections, glob, os, statistics, sys
out, np = sys.argv[1], sys.argv[3]
sys.path.insert(0, sys.argv[2])
from allreduce_results import best_open_mpi, read
runs = collections.defaultdict(list)  # condition -> [{bytes: (hybrid us, best Open MPI us, its name)}]
for path in sorted(glob.glob(os.path.join(out, "*_run*.txt"))):
    cond = os.path.basename(path).split("_")[0]
    rows, _ = read(path)
    if not rows or any("hybrid" not in r for r in rows.values()):
        print("# %s has no table (the job failed): left out" % path)
        continue
    runs[cond].append({b: (r["hybrid"],) + best_open_mpi(r) for b, r in rows.items()})
print("| condition | size | processes | hybrid us: median (min-max) | best Open MPI us: median (min-max) | "
      "hybrid / best Open MPI: median, slowest process (min-max) | Open MPI's best, most often | hybrid faster in |")
print("|---|---|---|---|---|---|---|---|")
for cond in ("idle", "busy"):
    for b in sorted(runs[cond][0]):
        h = [r[b][0] for r in runs[cond]]
        o = [r[b][1] for r in runs[cond]]
        q = [r[b][0] / r[b][1] for r in runs[cond]]
        slowest = max(range(len(h)), key=h.__getitem__)
        name = collections.Counter(r[b][2] for r in runs[cond]).most_common(1)[0][0]
        print("| %s, %s ranks | %s | %d | %.1f (%.1f-%.1f) | %.1f (%.1f-%.1f) | %.2f, %.2f (%.2f-%.2f) | %s | %d of %d |"
              % (cond, np, "%d KiB" % (b >> 10) if b < 1 << 20 else "%d MiB" % (b >> 20), len(h),
                 statistics.median(h), min(h), max(h), statistics.median(o), min(o), max(o),
                 statistics.median(q), q[slowest], min(q), max(q), name, sum(x < 1 for x in q), len(q)))
PY
