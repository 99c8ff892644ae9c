#!/usr/bin/env bash
# Fault test for data-parallel training: `strata train` on 2 ranks with snapshots; once a snapshot exists,
# one rank is killed with SIGKILL. mpirun and the surviving rank must end within 30 s (non-zero, with a
# message), and the last snapshot must still load: `strata test` scores its weights and a 2-rank run
# resumes from its .solverstate.
#
#   tests/fault_kill_rank.sh BUILD_DIR [RANK_TO_KILL]     (ctest runs it for rank 0, the snapshot writer, and 1)
#
# Every command runs under `timeout`, so a hang fails the test instead of hanging CI.
set -u
build=${1:?usage: fault_kill_rank.sh BUILD_DIR [RANK_TO_KILL]}
victim_rank=${2:-0}
strata=$(cd "$build" && pwd)/bin/strata
mpirun=${MPIEXEC:-mpirun}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
mpi_args=(-np 2 --oversubscribe --bind-to none --mca btl self,vader)
limit_s=30

# Process bookkeeping through /proc only (a minimal Debian has neither procps nor bc).
now_ms() { echo $(($(date +%s%N) / 1000000)); }
state_of() {  # R, S, Z, ... or nothing once the process has gone
  local st
  st=$(cat "/proc/$1/stat" 2>/dev/null) || return 0
  st=${st##*) }
  echo "${st%% *}"
}
alive() { local s; s=$(state_of "$1"); [ -n "$s" ] && [ "$s" != Z ]; }
children_of() {
  local parent=$1 d st
  for d in /proc/[0-9]*; do
    st=$(cat "$d/stat" 2>/dev/null) || continue
    st=${st##*) }
    set -- $st
    [ "$2" = "$parent" ] && echo "${d#/proc/}"
  done
}

work=$(mktemp -d /tmp/strata_fault_XXXXXX)
launcher=""
cleanup() {
  # Never leave a rank behind, whatever happened: only the processes this script started.
  [ -n "$launcher" ] && kill -9 "$launcher" 2>/dev/null
  [ -n "${mpirun_pid:-}" ] && alive "$mpirun_pid" && kill -9 "$mpirun_pid" 2>/dev/null
  for p in ${rank_pids:-}; do kill -9 "$p" 2>/dev/null; done
  rm -rf "$work"
}
trap cleanup EXIT
fail() {
  echo "FAIL: $*" >&2
  [ -f "$work/train.log" ] && { echo "--- training log (tail) ---" >&2; tail -n 30 "$work/train.log" >&2; }
  exit 1
}

# A small net on an Input layer (no data files needed) and a solver that would run for hours, snapshotting
# every 100 iterations (a fraction of a second apart).
cat > "$work/net.prototxt" <<'EOF'
name: "fault"
layer { name: "in" type: "Input" top: "data" top: "label"
        input_param { shape { dim: 16 dim: 1 dim: 12 dim: 12 } shape { dim: 16 } } }
layer { name: "conv1" type: "Convolution" bottom: "data" top: "conv1"
        convolution_param { num_output: 8 kernel_size: 3 weight_filler { type: "gaussian" std: 0.1 } } }
layer { name: "relu1" type: "ReLU" bottom: "conv1" top: "conv1" }
layer { name: "ip1" type: "InnerProduct" bottom: "conv1" top: "ip1"
        inner_product_param { num_output: 10 weight_filler { type: "gaussian" std: 0.1 } } }
layer { name: "loss" type: "SoftmaxWithLoss" bottom: "ip1" bottom: "label" top: "loss" }
EOF
cat > "$work/solver.prototxt" <<EOF
net: "$work/net.prototxt"
base_lr: 0.01
momentum: 0.9
weight_decay: 0.0005
max_iter: 100000000
snapshot: 100
snapshot_prefix: "$work/snap"
display: 0
random_seed: 1
solver_mode: CPU
comm_param { checksum_interval: 50 }
EOF

# 1. Train in the background until a snapshot exists.
timeout -k 5 120 "$mpirun" "${mpi_args[@]}" "$strata" train --solver="$work/solver.prototxt" \
  > "$work/train.log" 2>&1 &
launcher=$!
for _ in $(seq 1 300); do
  ls "$work"/snap_iter_*.solverstate > /dev/null 2>&1 && break
  kill -0 "$launcher" 2>/dev/null || fail "training ended before its first snapshot"
  sleep 0.1
done
ls "$work"/snap_iter_*.solverstate > /dev/null 2>&1 || fail "no snapshot after 30 s"
sleep 0.3  # well inside training again, perhaps in the middle of the next snapshot

# 2. The ranks are mpirun's children (mpirun is timeout's child); find the one to kill by its MPI rank.
mpirun_pid=$(children_of "$launcher" | head -n 1)
[ -n "$mpirun_pid" ] || fail "cannot find mpirun under pid $launcher"
rank_pids=$(children_of "$mpirun_pid")
victim=""
for p in $rank_pids; do
  r=$(tr '\0' '\n' < "/proc/$p/environ" 2>/dev/null | sed -n 's/^OMPI_COMM_WORLD_RANK=//p')
  [ "$r" = "$victim_rank" ] && victim=$p
done
[ -n "$victim" ] || fail "cannot find rank $victim_rank among mpirun's children ($rank_pids)"
echo "killing rank $victim_rank (pid $victim) with SIGKILL"
start=$(now_ms)
kill -9 "$victim"

# 3. Everything must end within the limit, mpirun with a non-zero status.
status=0
for _ in $(seq 1 $((limit_s * 10))); do
  kill -0 "$launcher" 2>/dev/null || break
  sleep 0.1
done
if kill -0 "$launcher" 2>/dev/null; then
  fail "mpirun still running ${limit_s} s after rank $victim_rank was killed (a hang)"
fi
wait "$launcher"
status=$?
launcher=""
echo "mpirun exited with status $status after $(($(now_ms) - start)) ms"
[ "$status" -ne 0 ] || fail "mpirun exited with status 0 although a rank died"
# The surviving rank may take a moment longer than mpirun to go; a zombie has gone.
for p in $rank_pids; do
  while alive "$p" && [ $(($(now_ms) - start)) -lt $((limit_s * 1000)) ]; do sleep 0.1; done
  alive "$p" && fail "rank process $p is still running ${limit_s} s after rank $victim_rank was killed"
done
elapsed=$(($(now_ms) - start))
echo "every rank has ended ${elapsed} ms after the kill"
grep -q "rank $victim_rank .*exited on signal 9" "$work/train.log" ||
  fail "mpirun's output does not name the dead rank"
survivor=$((1 - victim_rank))
grep -q "rank $survivor of 2: SIGINT/SIGTERM received" "$work/train.log" ||
  fail "the surviving rank $survivor said nothing"
echo "mpirun says: $(grep -m 1 "exited on signal" "$work/train.log")"
echo "rank $survivor says: $(grep -m 1 "rank $survivor of 2: SIGINT/SIGTERM" "$work/train.log")"

# 4. The newest snapshot whose weights and state both exist must load.
last=$(ls "$work"/snap_iter_*.solverstate | sed 's/.*_iter_\([0-9]*\)\.solverstate/\1/' | sort -n | tail -n 1)
[ -f "$work/snap_iter_$last.caffemodel" ] || fail "snap_iter_$last.solverstate has no .caffemodel beside it"
echo "last snapshot: iteration $last"
timeout -k 5 60 "$strata" test --model="$work/net.prototxt" --weights="$work/snap_iter_$last.caffemodel" \
  --iterations=1 > "$work/test.log" 2>&1 || { cat "$work/test.log" >&2; fail "strata test cannot load the last snapshot"; }
# Resume on 2 ranks (the state records the rank count) for a few iterations.
timeout -k 5 60 "$mpirun" "${mpi_args[@]}" "$strata" train --solver="$work/solver.prototxt" \
  --snapshot="$work/snap_iter_$last.solverstate" --iterations=$((last + 20)) > "$work/resume.log" 2>&1 ||
  { cat "$work/resume.log" >&2; fail "resuming from snap_iter_$last.solverstate failed"; }
[ -f "$work/snap_iter_$((last + 20)).caffemodel" ] || fail "the resumed run wrote no final snapshot"
echo "PASS: rank $victim_rank killed, every process ended within ${elapsed} ms, snapshot $last loads and resumes"
