#!/usr/bin/env bash
# Small allreduces across hosts on the one-machine test bed, as a distribution over fresh processes: a
# message of a few bytes costs a few tens of microseconds there, and which mode a process lands in (how its
# ranks share the 2 cores) moves that by 2x between processes, more than the algorithms differ. So each
# layout (2 hosts x 1 rank, 2 hosts x 2 ranks), link (unshaped, RATE) and timing (one call after a barrier,
# BURST calls back to back) runs RUNS separate allreduce_bench processes of the hybrid and every Open MPI
# algorithm, and the table gives, per size, the distribution over processes of the hybrid's median against
# the best Open MPI median of the same process, with the barrier's exit skew. Raw outputs go to OUT_DIR.
#
#   bash scripts/bench_cluster_small.sh [BUILD_DIR=build] [OUT_DIR=bench-out/cluster_small]
#   (as root; RUNS=10 RATE=1gbit BURST=50 SIZES=4,64,1K,4K,16K)
set -euo pipefail
runs=${RUNS:-10}
rate=${RATE:-1gbit}
burst=${BURST:-50}
sizes=${SIZES:-4,64,1K,4K,16K}
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=scripts/bench_bed.sh
source "$here/bench_bed.sh"
bench_bed_start bench_cluster_small bench-out/cluster_small "$@"

for link in unshaped "$rate"; do
  if [ "$link" = unshaped ]; then bash "$here/cluster.sh" rate off >/dev/null
  else bash "$here/cluster.sh" rate "$rate" >/dev/null; fi
  for run in $(seq 1 "$runs"); do
    # Layouts and timings interleaved run by run, so a slow period of the machine hits them alike.
    for np in 2 4; do
      for b in 1 "$burst"; do
        bash "$here/cluster.sh" mpirun -np $np --map-by node "$bench" --algorithms=hybrid,mpi_all \
          --sizes="$sizes" --seconds=1 --memcpy=false --burst="$b" --skew \
          > "$out/2x$((np / 2))_${link}_burst${b}_run${run}.txt"
      done
    done
  done
done

python3 - "$out" "$here" <<'PY'
import collections, glob, os, statistics, sys
out = sys.argv[1]
sys.path.insert(0, sys.argv[2])
from allreduce_results import best_open_mpi, read
groups = collections.defaultdict(list)  # (layout, link, burst) -> [(skew, {bytes: (hybrid, best Open MPI)})]
for path in sorted(glob.glob(os.path.join(out, "2x*_run*.txt"))):
    layout, link, burst, _ = os.path.basename(path)[:-4].split("_")
    rows, skew = read(path)
    groups[(layout, link, burst)].append((skew, {b: (r["hybrid"], best_open_mpi(r)[0]) for b, r in rows.items()}))
for (layout, link, burst), runs in sorted(groups.items()):
    calls = "one call after a barrier" if burst == "burst1" else burst[5:] + " calls back to back"
    skews = [s for s, _ in runs]
    print("\n%s, %s, %s: %d processes; barrier exit skew median %.1f us (%.1f-%.1f)"
          % (layout, link, calls, len(runs), statistics.median(skews), min(skews), max(skews)))
    print("| size | hybrid us: median (min-max) | best Open MPI us: median (min-max) | hybrid / best Open MPI: "
          "median (min-max) | processes where the hybrid is faster |")
    print("|---|---|---|---|---|")
    for b in sorted(runs[0][1]):
        h = [r[b][0] for _, r in runs]
        o = [r[b][1] for _, r in runs]
        q = [r[b][0] / r[b][1] for _, r in runs]
        print("| %d | %.1f (%.1f-%.1f) | %.1f (%.1f-%.1f) | %.2f (%.2f-%.2f) | %d of %d |"
              % (b, statistics.median(h), min(h), max(h), statistics.median(o), min(o), max(o),
                 statistics.median(q), min(q), max(q), sum(x < 1 for x in q), len(q)))
PY
