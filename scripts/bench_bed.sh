# Sourced by the allreduce benchmarks on the multi-host test bed (bench_cluster.sh, bench_cluster_small.sh):
#   bench_bed_start NAME DEFAULT_OUT [BUILD_DIR=build] [OUT_DIR=DEFAULT_OUT]
# sets `bench` (allreduce_bench of BUILD_DIR) and `out` (created), one BLAS thread per rank, and brings a bed of 2
# hosts x 2 slots up, taken down again when the script exits. `here` must name the scripts folder.
bench_bed_start() {
  local name=$1 build=${3:-build}
  out=${4:-$2}
  bench=$(cd "$build" && pwd)/bin/allreduce_bench
  [ -x "$bench" ] || { echo "$name: no $bench (build first)" >&2; exit 1; }
  mkdir -p "$out"
  export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
  trap 'bash "$here/cluster.sh" down >/dev/null 2>&1 || true' EXIT
  bash "$here/cluster.sh" up 2 --slots 2 >/dev/null
}
