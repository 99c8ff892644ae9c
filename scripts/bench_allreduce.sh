#!/usr/bin/env bash
# Reproduces the Allreduce section of docs/benchmarks.md: Strata's hybrid and each of its algorithms
# against Open MPI's MPI_Allreduce (its default choice and each of its six forced algorithms, forced in
# the same process through MPI_T so all are timed interleaved), at 2, 4 and 8 ranks, 4 B .. 256 MiB.
#
#   scripts/bench_allreduce.sh [build_dir] [out_dir]          (defaults: build, bench-out/allreduce)
#   RANKS="2 4" MAX_BYTES=16M scripts/bench_allreduce.sh      (a quicker subset)
#   TUNE=1 scripts/bench_allreduce.sh                         (first re-measure the crossovers into
#                                                              out_dir/allreduce.table and use it)
#
# Run it on an otherwise idle machine: with 2 cores, anything else running shows up in every number.
set -euo pipefail
build=${1:-build}
out=${2:-bench-out/allreduce}
ranks=${RANKS:-"2 4 8"}
max_bytes=${MAX_BYTES:-256M}
bench="$build/bin/allreduce_bench"
[ -x "$bench" ] || { echo "bench_allreduce.sh: $bench not found; build first (cmake --build $build)" >&2; exit 1; }
mkdir -p "$out"

export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# --bind-to none: at -np 2 Open MPI would pin each rank to one core; the tools' own defaults add
# mpi_yield_when_idle=1 and coll_tuned_use_dynamic_rules=1 (needed for the forced mpi_* variants).
mpirun=(mpirun --oversubscribe --bind-to none --mca btl self,vader ${MPIRUN_EXTRA:-})

table_args=()
if [ "${TUNE:-0}" = 1 ]; then
  rm -f "$out/allreduce.table"
  for np in $ranks; do
    "${mpirun[@]}" -np "$np" "$bench" --tune --tune_out="$out/allreduce.table" --min_bytes=4 \
      --max_bytes="$max_bytes" | tee "$out/tune_np$np.txt"
  done
  table_args=(--allreduce_table="$out/allreduce.table")
fi

for np in $ranks; do
  echo "== $np ranks" | tee "$out/np$np.txt"
  "${mpirun[@]}" -np "$np" "$bench" "${table_args[@]}" --min_bytes=4 --max_bytes="$max_bytes" --factor=4 \
    --algorithms=hybrid,linear,brb,brd,vhd,vhd_seg,ring,ring_seg,mpi,mpi_all --csv >"$out/np$np.csv"
  # The summary: per size, the hybrid, Open MPI's default and the best of Open MPI's forced algorithms.
  python3 - "$out/np$np.csv" <<'PY' | tee -a "$out/np$np.txt"
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
by_size = {}
for r in rows:
    by_size.setdefault(int(r["bytes"]), {})[r["algorithm"]] = r
def size_text(b):
    for unit, s in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if b >= s and b % s == 0: return f"{b // s} {unit}"
    return f"{b} B"
print(f"{'size':>9} {'hybrid_us':>11} {'best_ours':>12} {'mpi_us':>11} {'best_forced_us':>15} {'(which)':>24} "
      f"{'vs_best':>8} {'busbw%memcpy':>13}")
for b in sorted(by_size):
    d = by_size[b]
    h = float(d["hybrid"]["median_us"])
    ours = min((float(v["median_us"]), k) for k, v in d.items()
               if k in ("linear", "brb", "brd", "vhd", "vhd_seg", "ring", "ring_seg"))
    forced = min((float(v["median_us"]), k) for k, v in d.items() if k.startswith("mpi"))
    mpi = float(d["mpi"]["median_us"])
    frac = float(d["hybrid"]["busbw_over_memcpy"]) * 100
    print(f"{size_text(b):>9} {h:11.1f} {ours[1]:>12} {mpi:11.1f} {forced[0]:15.1f} {forced[1]:>24} "
          f"{forced[0] / h:7.2f}x {frac:12.1f}%")
PY
done
