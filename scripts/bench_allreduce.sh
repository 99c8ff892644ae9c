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
# Run it on an otherwise idle machine: with 2 cores, anything else running shows up in every number. On
# a shared machine, PRIO="chrt -r 10" runs the ranks at real-time priority (as docs/benchmarks.md did),
# so other jobs only run when the benchmark waits.
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
mpirun=(${PRIO:-} mpirun --oversubscribe --bind-to none --mca btl self,vader ${MPIRUN_EXTRA:-})

table_args=()
if [ "${TUNE:-0}" = 1 ]; then
  rm -f "$out/allreduce.table"
  for np in $ranks; do
    # --tune=true, not a bare --tune followed by another flag: mpirun takes "--tune X" for its own option.
    "${mpirun[@]}" -np "$np" "$bench" --tune=true --tune_out="$out/allreduce.table" --min_bytes=4 \
      --max_bytes="$max_bytes" --seconds=1 | tee "$out/tune_np$np.txt"
  done
  table_args=(--allreduce_table="$out/allreduce.table")
fi

for np in $ranks; do
  echo "== $np ranks" | tee "$out/np$np.txt"
  "${mpirun[@]}" -np "$np" "$bench" "${table_args[@]}" --min_bytes=4 --max_bytes="$max_bytes" --factor=4 \
    --reps=20 --min_reps=5 --seconds=2 --algorithms=hybrid,linear,brb,brd,vhd,vhd_seg,ring,ring_seg,shm,mpi,mpi_all --csv >"$out/np$np.csv"
  # The summary: per size, the hybrid, Open MPI's default and the best of Open MPI's forced algorithms.
  python3 - "$out/np$np.csv" <<'PY' | tee -a "$out/np$np.txt"
import csv, sys
rows = [r for r in csv.DictReader(open(sys.argv[1])) if r.get("bytes","").isdigit()]
by = {}
for r in rows: by.setdefault(int(r["bytes"]), {})[r["algorithm"]] = r
def st(b):
    for u, s in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if b >= s and b % s == 0: return f"{b // s} {u}"
    return f"{b} B"
ours = ("linear", "brb", "brd", "vhd", "vhd_seg", "ring", "ring_seg", "shm")
print("| size | hybrid us | best of ours | MPI default us | best forced MPI us (which) | best MPI / hybrid | hybrid busbw % memcpy |")
print("|---|---|---|---|---|---|---|")
for b in sorted(by):
    d = by[b]
    h = float(d["hybrid"]["median_us"])
    o = min((float(v["median_us"]), k) for k, v in d.items() if k in ours)
    f = min((float(v["median_us"]), k) for k, v in d.items() if k.startswith("mpi"))
    m = float(d["mpi"]["median_us"])
    frac = float(d["hybrid"]["busbw_over_memcpy"]) * 100
    print(f"| {st(b)} | {h:.1f} | {o[1]} {o[0]:.1f} | {m:.1f} | {f[0]:.1f} ({f[1]}) | {f[0]/h:.2f} | {frac:.0f}% |")
PY
done
