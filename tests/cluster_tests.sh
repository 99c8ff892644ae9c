#!/usr/bin/env bash
# Strata's MPI tests across hosts, on the one-machine test bed of scripts/cluster.sh (docs/cluster.md):
#
#   tests/cluster_tests.sh BUILD_DIR        (as root; 20-30 s on 2 cores, under 8 min whatever hangs)
#
# Ranks on different hosts talk over TCP and see each other as other nodes (MPI_COMM_TYPE_SHARED splits
# them), which the ordinary ctest runs, all on one host, never exercise: shm must fall back, the hybrid
# must pick its cross-node rows, and the TCP path must give the same bits. Two shapes:
#   2 hosts x 2 ranks  (--map-by node: ranks 0,2 on host 0 and 1,3 on host 1)
#   3 hosts x 1 rank   behind 1 Gbit/s links (the shaped path of the bed)
#   4 hosts x 1 rank   the training equivalences only
# Each runs the allreduce tests and the data-parallel training equivalences (N ranks with batch b end with
# the weights of one rank with batch N*b). Every mpirun is under `timeout`; any failure fails the script.
# It needs namespaces: where they cannot be made it fails (exit 1) with cluster.sh's message, never skips.
set -euo pipefail
build=${1:?usage: tests/cluster_tests.sh BUILD_DIR}
[ -d "$build" ] || { echo "cluster_tests: no build directory $build" >&2; exit 1; }
bin=$(cd "$build" && pwd)/bin
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cluster=$here/scripts/cluster.sh
[ -x "$bin/strata_mpi_tests" ] || { echo "cluster_tests: $bin/strata_mpi_tests is not built" >&2; exit 1; }
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
export STRATA_MPI_TEST_TIMEOUT=100  # the tests' own watchdog ends a hang first, with its own message
limit_s=${CLUSTER_TESTS_LIMIT_S:-120}  # per mpirun (each takes under 10 s here)
total_s=${CLUSTER_TESTS_TOTAL_S:-400}    # all of them together: with the bed's up and down, under 8 min
deadline=$(( $(date +%s) + total_s ))

# A bed of this run's own name: one that someone else has up, another test run's on this kernel say, is never
# met nor taken down from here.
export STRATA_CLUSTER_NAME=strata-c$$
unset STRATA_CLUSTER_DIR
h=$STRATA_CLUSTER_NAME-h
up=0
log=$(mktemp /tmp/strata_cluster_tests_XXXXXX.log)
cleanup() {
  if [ "$up" -eq 1 ]; then bash "$cluster" down >/dev/null 2>&1 || true; fi
  rm -f "$log"
}
trap cleanup EXIT
# The bed's `down` also ends whatever still runs on it (mpirun included: it runs on host 0).
trap 'echo "cluster_tests: interrupted" >&2; exit 130' INT TERM

failures=()

# Every mpirun is bounded: a rank left waiting in a collective fails the step instead of hanging CI.
mpirun_bed() {
  local left=$(( deadline - $(date +%s) ))
  [ "$left" -gt 0 ] || { echo "cluster_tests: out of time before this step" >&2; return 124; }
  timeout -k 10 "$(( left < limit_s ? left : limit_s ))" bash "$cluster" mpirun "$@"
}

# step NAME -- COMMAND...: prints PASS, or FAIL with the tail of the command's output.
step() {
  local name=$1 start rc=0
  shift 2
  start=$(date +%s)
  # In the background, so that a signal to this script is acted on at once, not when the step ends.
  "$@" > "$log" 2>&1 &
  wait $! || rc=$?
  if [ "$rc" -eq 0 ]; then
    echo "cluster_tests: PASS $name ($(( $(date +%s) - start )) s)"
  else
    [ "$rc" -ne 124 ] || echo "cluster_tests: $name did not end in time ($limit_s s a step, $total_s s in all)" >&2
    echo "cluster_tests: FAIL $name (exit $rc); last lines:" >&2
    tail -n 30 "$log" | sed 's/^/    /' >&2
    failures+=("$name")
    # Ranks that outlived a killed mpirun would take the cores from the next step.
    bash "$cluster" kill || true
  fi
}

bed_up() {
  bash "$cluster" up "$@" || { echo "cluster_tests: FAIL cannot bring the test bed up (see above)" >&2; exit 1; }
  up=1
}

bed_down() {
  bash "$cluster" down >/dev/null
  up=0
}

# The bed itself: ranks land on the hosts asked for, each host a node of its own, no node shared.
# Prints one line per rank: RANK HOSTNAME LOCAL_RANK LOCAL_SIZE.
placement() {
  # shellcheck disable=SC2016  # expanded by each rank's shell, not here
  mpirun_bed "$@" bash -c \
    'echo "$OMPI_COMM_WORLD_RANK $(hostname) $OMPI_COMM_WORLD_LOCAL_RANK $OMPI_COMM_WORLD_LOCAL_SIZE"' | sort -n
}
check_placement() {  # EXPECTED -- MPIRUN ARGS: EXPECTED is the sorted output, lines joined by ';'
  local want=$1 got
  shift 2
  got=$(placement "$@" | paste -sd ';') || return 1
  [ "$got" = "$want" ] || { echo "placement: expected '$want', got '$got'" >&2; return 1; }
}

# What picks kernels (OPENBLAS_*, ONEDNN_*) and Strata's own switches (STRATA_*) must reach the ranks of every
# host, not only host 0's: with OPENBLAS_CORETYPE on host 0 alone, K-FAC's undistributed inverses differed
# between the hosts. Each rank prints what it sees; all must see what was set here.
check_environment() {  # MPIRUN ARGS
  local got
  # shellcheck disable=SC2016  # expanded by each rank's shell, not here
  got=$(export OPENBLAS_CORETYPE=Haswell ONEDNN_VERBOSE=0 STRATA_BED_CHECK=1
        mpirun_bed "$@" bash -c 'echo "$OPENBLAS_CORETYPE $ONEDNN_VERBOSE $STRATA_BED_CHECK"' | sort -u |
          paste -sd ';') || return 1
  [ "$got" = "Haswell 0 1" ] || {
    echo "environment: expected 'Haswell 0 1' on every rank, got '$got'" >&2
    return 1
  }
}

tests() {  # FILTER MPIRUN_ARGS...
  local filter=$1
  shift
  mpirun_bed "$@" "$bin/strata_mpi_tests" --gtest_color=no "$filter"
}
allreduce_filter='--gtest_filter=*Allreduce*:CommunicatorTest.*:CrossoverTableTest.*:TopologyTest.*'
training_filter='--gtest_filter=DataParallelEngineTest.*:GradientStagingTest.*'

start_all=$(date +%s)
bed_up 2 --slots 2
step "2x2 placement" -- check_placement \
  "0 ${h}0 0 2;1 ${h}1 0 2;2 ${h}0 1 2;3 ${h}1 1 2" -- -np 4 --map-by node
step "2x2 environment" -- check_environment -np 4 --map-by node
step "2x2 allreduce" -- tests "$allreduce_filter" -np 4 --map-by node
step "2x2 training" -- tests "$training_filter" -np 4 --map-by node
bed_down

bed_up 3 --slots 1 --rate 1gbit
step "3x1 placement" -- check_placement "0 ${h}0 0 1;1 ${h}1 0 1;2 ${h}2 0 1" -- -np 3
step "3x1 allreduce" -- tests "$allreduce_filter" -np 3
step "3x1 training" -- tests "$training_filter" -np 3
bed_down

bed_up 4 --slots 1
step "4x1 training" -- tests "$training_filter" -np 4
bed_down

if [ ${#failures[@]} -gt 0 ]; then
  echo "cluster_tests: FAILED: ${failures[*]}" >&2
  exit 1
fi
echo "cluster_tests: all passed ($(( $(date +%s) - start_all )) s)"
