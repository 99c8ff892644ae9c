#!/usr/bin/env bash
# The fault matrix: `strata train` under mpirun meets one fault per case, and must end cleanly.
#
#   tests/fault_matrix.sh BUILD_DIR CASE        (ctest runs every case as fault_CASE; docs/reliability.md)
#
# Cases:
#   kill-npN-rankR-POINT   rank R of N kills itself with SIGKILL at POINT (forward, allreduce, snapshot: between
#                          the .caffemodel and the .solverstate) of iteration 150 (200 for snapshot), through
#                          STRATA_FAULT (src/strata/util/fault_injection.cpp)
#   kill-npN-rankR-outside rank R of N is killed with `kill -9` from outside, at whatever it is doing
#   SIG-npN-mpirun         SIGINT or SIGTERM to mpirun
#   SIG-npN-rankR          SIGINT or SIGTERM to rank R alone
#   stop-npN-rankR-warn    rank R of N is stopped with SIGSTOP: within the stall watchdog's warning time
#                          (STRATA_STALL_WARN_SECONDS=1) every other rank logs the stall naming rank R; then
#                          SIGCONT, and the run goes on and stops cleanly at a SIGTERM to rank 0
#   stop-npN-rankR-abort   the same with STRATA_STALL_ABORT_SECONDS=3: the job ends, non-zero, with one message
#                          naming rank R
#   disk-full              the snapshot directory is a 160 KiB tmpfs, full at the third snapshot
#   corrupt-record         a record in the middle of the LMDB is not a Datum
#   nan-loss               the learning rate jumps at iteration 150 until the loss is not finite
#   second-run             a second `strata train` on the snapshot prefix of a live run (refused, naming it)
#   mixed-pair             a rerun into a used prefix killed between its two files (that pair is refused)
#   flipped-bytes          a changed byte in a caffemodel, then in a solverstate (each refused, naming it)
#   hdf5-SIGTERM           snapshot_format: HDF5, SIGTERM to rank 1: the .h5 snapshots resume exactly
#   host-link-down         2 hosts of the test bed (scripts/cluster.sh), one rank each: host 1's link goes down
#   host-killed            the same, host 1's rank is killed with SIGKILL (the whole host's work dies)
# For every case but the stop cases (which check the watchdog's messages and end): every process ends within 30 s
# of the fault, mpirun's status says whether the run failed,
# the failure is said in one clear line, the newest complete snapshot pair loads (`strata test`) and resumes to
# the same weights, bit for bit, as a run that was never interrupted, and no temporary file is left behind once
# the next run has started. Every command runs under `timeout`, so a hang fails the case instead of hanging CI.
set -u
build=${1:?usage: fault_matrix.sh BUILD_DIR CASE}
case_name=${2:?usage: fault_matrix.sh BUILD_DIR CASE}
bin=$(cd "$build" && pwd)/bin
strata=$bin/strata
mpirun=${MPIEXEC:-mpirun}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
limit_s=30

# Process bookkeeping through /proc only (a minimal Debian has neither procps nor bc).
now_ms() { echo $(($(date +%s%N) / 1000000)); }
state_of() {  # R, S, Z, ... or nothing once the process has gone
  local st
  { read -r st < "/proc/$1/stat"; } 2>/dev/null || return 0
  st=${st##*) }
  echo "${st%% *}"
}
alive() { local s; s=$(state_of "$1"); [ -n "$s" ] && [ "$s" != Z ]; }
children_of() {
  local parent=$1 d st
  for d in /proc/[0-9]*; do
    { read -r st < "$d/stat"; } 2>/dev/null || continue  # a builtin: no fork per process
    st=${st##*) }
    set -- $st
    [ "$2" = "$parent" ] && echo "${d#/proc/}"
  done
}
rank_pid() {  # MPIRUN_PID RANK: the pid of that rank among mpirun's children
  local p r
  for p in $(children_of "$1"); do
    r=$(tr '\0' '\n' < "/proc/$p/environ" 2>/dev/null | sed -n 's/^OMPI_COMM_WORLD_RANK=//p')
    [ "$r" = "$2" ] && { echo "$p"; return; }
  done
}
started_rank_pid() {  # RANK: the same among the ranks start_training found (no scan of /proc: quick under load)
  local p r
  for p in $rank_pids; do
    r=$(tr '\0' '\n' < "/proc/$p/environ" 2>/dev/null | sed -n 's/^OMPI_COMM_WORLD_RANK=//p')
    [ "$r" = "$1" ] && { echo "$p"; return; }
  done
}

work=$(mktemp -d /tmp/strata_fault_XXXXXX)
cluster=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/scripts/cluster.sh
# The host cases' bed has this run's own name: another test run's bed on this kernel is never met.
export STRATA_CLUSTER_NAME=strata-f$$
unset STRATA_CLUSTER_DIR
host1=$STRATA_CLUSTER_NAME-h1
launcher="" mpirun_pid="" rank_pids="" mounted="" bed=""
cleanup() {
  # Never leave a rank, a mount or a test bed behind, whatever happened: only what this script started.
  [ -n "$launcher" ] && kill -9 "$launcher" 2>/dev/null
  [ -n "$mpirun_pid" ] && alive "$mpirun_pid" && kill -9 "$mpirun_pid" 2>/dev/null
  for p in $rank_pids; do kill -9 "$p" 2>/dev/null; done
  [ -n "$mounted" ] && umount "$mounted" 2>/dev/null
  [ -n "$bed" ] && bash "$cluster" down > /dev/null 2>&1
  rm -rf "$work"
}
trap cleanup EXIT
fail() {
  echo "FAIL ($case_name): $*" >&2
  [ -f "$work/train.log" ] && { echo "--- training log (tail) ---" >&2; tail -n 30 "$work/train.log" >&2; }
  exit 1
}

# ---- the job ----
np=2
snapdir=$work
net=$work/net.prototxt
# A small net on a DummyData layer (zeros, no data files; the corrupt-record case swaps in a Data layer). Snapshots
# every 100 iterations, a fraction of a second apart; the solver would run for hours.
cat > "$net" <<'EOF'
name: "fault"
layer { name: "in" type: "DummyData" top: "data" top: "label"
        dummy_data_param { shape { dim: 16 dim: 1 dim: 12 dim: 12 } shape { dim: 16 } } }
layer { name: "conv1" type: "Convolution" bottom: "data" top: "conv1"
        convolution_param { num_output: 8 kernel_size: 3 weight_filler { type: "gaussian" std: 0.1 } } }
layer { name: "relu1" type: "ReLU" bottom: "conv1" top: "conv1" }
layer { name: "ip1" type: "InnerProduct" bottom: "conv1" top: "ip1"
        inner_product_param { num_output: 10 weight_filler { type: "gaussian" std: 0.1 } } }
layer { name: "loss" type: "SoftmaxWithLoss" bottom: "ip1" bottom: "label" top: "loss" }
EOF
seed=1 format=BINARYPROTO
solver_text() {  # PREFIX [EXTRA...]
  local prefix=$1
  shift
  cat <<EOF
net: "$net"
base_lr: 0.01
momentum: 0.9
weight_decay: 0.0005
max_iter: 100000000
snapshot: 100
snapshot_prefix: "$prefix"
snapshot_format: $format
display: 0
random_seed: $seed
solver_mode: CPU
comm_param { checksum_interval: 50 }
EOF
  for line in "$@"; do echo "$line"; done
}
extra=()
model_ext() { [ "$format" = HDF5 ] && echo .caffemodel.h5 || echo .caffemodel; }
state_ext() { [ "$format" = HDF5 ] && echo .solverstate.h5 || echo .solverstate; }

mpi_cmd() {  # SECONDS: sets mpi to mpirun with NP ranks under timeout, the fault variable passed through
  if [ -n "$bed" ]; then  # one rank per host of the test bed
    mpi=(timeout -k 5 "$1" bash "$cluster" mpirun -np "$np" --map-by node -x STRATA_FAULT)
  else
    mpi=(timeout -k 5 "$1" "$mpirun" -np "$np" --oversubscribe --bind-to none --mca btl self,vader -x STRATA_FAULT)
  fi
}
# Every process on the test bed's hosts (the daemons and the ranks; mpirun itself is the launcher's child).
bed_pids() { for h in $(seq 0 $((np - 1))); do ip netns pids "$STRATA_CLUSTER_NAME-h$h" 2>/dev/null; done; }

# Starts training in the background: launcher is timeout, mpirun its child, rank_pids mpirun's children (taken
# now, while all are alive, so that a rank that outlives mpirun is still checked and cleaned up).
start_training() {
  solver_text "$snapdir/snap" "${extra[@]}" > "$work/solver.prototxt"
  mpi_cmd 180
  "${mpi[@]}" "$strata" train --solver="$work/solver.prototxt" > "$work/train.log" 2>&1 &
  launcher=$!
  for _ in $(seq 1 200); do
    mpirun_pid=$(children_of "$launcher" | head -n 1)
    if [ -n "$bed" ]; then
      # Ranks on other hosts are not mpirun's children: wait for a strata process on every host.
      rank_pids=$(bed_pids)
      local ranks=0 p
      for p in $rank_pids; do [ "$(cat "/proc/$p/comm" 2>/dev/null)" = strata ] && ranks=$((ranks + 1)); done
      [ "$ranks" -ge "$np" ] && return
    else
      [ -n "$mpirun_pid" ] && rank_pids=$(children_of "$mpirun_pid")
      [ "$(echo $rank_pids | wc -w)" -ge "$np" ] && return
    fi
    sleep 0.05
  done
  fail "cannot find mpirun's $np ranks under pid $launcher"
}

wait_for() {  # SECONDS DESCRIPTION COMMAND...: polls COMMAND until it succeeds, while training runs
  local secs=$1 what=$2
  shift 2
  for _ in $(seq 1 $((secs * 10))); do
    "$@" && return 0
    kill -0 "$launcher" 2>/dev/null || fail "training ended before $what"
    sleep 0.1
  done
  fail "no $what after $secs s"
}
has_snapshot() { [ -n "$(newest_snapshot)" ]; }
newest_snapshot() {  # the iteration of the newest solverstate, or nothing
  local ext
  ext=$(state_ext)
  ls "$snapdir" | sed -n "s/^snap_iter_\([0-9]*\)${ext//./\\.}\$/\1/p" | sort -n | tail -n 1
}
log_has() { grep -q "$1" "$work/train.log" 2>/dev/null; }

# Waits for mpirun and every rank to end within the limit from `fault_ms`; leaves mpirun's status in $status.
expect_end() {
  while kill -0 "$launcher" 2>/dev/null && [ $(($(now_ms) - fault_ms)) -lt $((limit_s * 1000)) ]; do sleep 0.1; done
  kill -0 "$launcher" 2>/dev/null && fail "mpirun still running ${limit_s} s after the fault (a hang)"
  wait "$launcher"
  status=$?
  launcher=""
  for p in $rank_pids; do
    while alive "$p" && [ $(($(now_ms) - fault_ms)) -lt $((limit_s * 1000)) ]; do sleep 0.1; done
    alive "$p" && fail "rank process $p still running ${limit_s} s after the fault"
  done
  echo "mpirun exited with status $status; every process ended $(($(now_ms) - fault_ms)) ms after the fault"
}
expect_failed() { [ "$status" -ne 0 ] || fail "mpirun exited with status 0 although the run failed"; }
expect_line() {  # TEXT [LOG]: the log (train.log) has a line matching TEXT
  local log=${2:-$work/train.log}
  grep -q -- "$1" "$log" || fail "$(basename "$log") does not say '$1'"
  echo "said: $(grep -m 1 -- "$1" "$log")"
}

# The newest snapshot pair must load and resume exactly: from it to 20 iterations later gives the same weights,
# bit for bit, as a run from the start that was never interrupted.
expect_resumes() {
  local last model state
  last=$(newest_snapshot)
  [ -n "$last" ] || fail "no snapshot was written"
  model=$(model_ext) state=$(state_ext)
  [ -f "$snapdir/snap_iter_$last$model" ] || fail "snap_iter_$last$state has no $model beside it"
  echo "newest complete snapshot: iteration $last"
  timeout -k 5 60 "$strata" test --model="$net" --weights="$snapdir/snap_iter_$last$model" --iterations=1 \
    > "$work/test.log" 2>&1 || { cat "$work/test.log" >&2; fail "strata test cannot load snap_iter_$last"; }
  local target=$((last + 20))
  mkdir -p "$work/resumed" "$work/reference"
  solver_text "$snapdir/snap" > "$work/resume.prototxt"
  mpi_cmd 120
  STRATA_FAULT= "${mpi[@]}" "$strata" train --solver="$work/resume.prototxt" \
    --snapshot="$snapdir/snap_iter_$last$state" --iterations=$target > "$work/resume.log" 2>&1 ||
    { tail -n 20 "$work/resume.log" >&2; fail "resuming from snap_iter_$last failed"; }
  solver_text "$work/reference/snap" > "$work/reference.prototxt"
  STRATA_FAULT= "${mpi[@]}" "$strata" train --solver="$work/reference.prototxt" --iterations=$target \
    > "$work/reference.log" 2>&1 || { tail -n 20 "$work/reference.log" >&2; fail "the reference run failed"; }
  cmp -s "$snapdir/snap_iter_$target$model" "$work/reference/snap_iter_$target$model" ||
    fail "resumed from iteration $last, the weights at $target differ from an uninterrupted run's"
  echo "resumed from iteration $last to $target: the same weights, bit for bit, as the uninterrupted run"
  local stray
  stray=$(ls "$snapdir" | grep '\.tmp\.' || true)
  [ -z "$stray" ] || fail "temporary files left after the next run started: $stray"
}

# A run without faults to iteration 200 (pairs at 100 and 200), on the solver that resuming uses.
train_to_200() {
  solver_text "$snapdir/snap" > "$work/solver.prototxt"
  mpi_cmd 120
  STRATA_FAULT= "${mpi[@]}" "$strata" train --solver="$work/solver.prototxt" --iterations=200 > "$work/first.log" 2>&1 ||
    { tail -n 20 "$work/first.log" >&2; fail "the run to iteration 200 failed"; }
}
expect_refused_resume() {  # STATE TEXT: resuming from STATE fails, saying TEXT
  mpi_cmd 120
  STRATA_FAULT= "${mpi[@]}" "$strata" train --solver="$work/solver.prototxt" --snapshot="$1" --iterations=220 \
    > "$work/train.log" 2>&1 && fail "resumed from $1"
  expect_line "$2"
}

# ---- the cases ----
export STRATA_FAULT=
case $case_name in
  kill-np*-rank*-*)
    IFS=- read -r _ npx rankx point <<< "$case_name"
    np=${npx#np}
    victim=${rankx#rank}
    if [ "$point" = outside ]; then
      start_training
      wait_for 60 "a first snapshot" has_snapshot
      sleep 0.3  # well inside training again, perhaps in the middle of the next snapshot
      victim_pid=$(rank_pid "$mpirun_pid" "$victim")
      [ -n "$victim_pid" ] || fail "cannot find rank $victim"
      echo "killing rank $victim (pid $victim_pid) with SIGKILL"
      fault_ms=$(now_ms)
      kill -9 "$victim_pid"
    else
      at=150
      [ "$point" = snapshot ] && at=200
      export STRATA_FAULT="$point:$victim:$at"
      start_training
      wait_for 120 "the injected fault" log_has "STRATA_FAULT: killing"
      fault_ms=$(now_ms)
    fi
    expect_end
    expect_failed
    expect_line "rank $victim .*exited on signal 9"
    # mpirun tells the others with SIGTERM; they say so at once (they may be waiting in a collective).
    expect_line "of $np: SIGINT/SIGTERM received"
    if [ "$point" = snapshot ]; then
      [ -f "$snapdir/snap_iter_200.caffemodel" ] && [ ! -f "$snapdir/snap_iter_200.solverstate" ] ||
        fail "the kill between the snapshot's two files did not leave the incomplete pair it should"
    fi
    expect_resumes
    ;;
  SIGINT-np*-* | SIGTERM-np*-*)
    IFS=- read -r sig npx target <<< "$case_name"
    np=${npx#np}
    start_training
    wait_for 60 "a first snapshot" has_snapshot
    if [ "$target" = mpirun ]; then
      pid=$mpirun_pid
    else
      pid=$(rank_pid "$mpirun_pid" "${target#rank}")
    fi
    [ -n "$pid" ] || fail "cannot find $target"
    echo "sending $sig to $target (pid $pid)"
    fault_ms=$(now_ms)
    kill -s "$sig" "$pid"
    expect_end
    if [ "$target" = mpirun ]; then
      # mpirun hands the signal to every rank and ends the job: the ranks stop (or are stopped) at once.
      expect_line "SIGINT/SIGTERM received"
    else
      # One rank's request reaches every rank: all stop together two iterations later, with a final snapshot.
      [ "$status" -eq 0 ] || fail "a stop asked for by a signal ended with status $status"
      expect_line "All ranks stop at iteration"
      expect_line "Optimization stopped early"
      stop=$(sed -n 's/.*All ranks stop at iteration \([0-9]*\) (requested at iteration \([0-9]*\)).*/\1 \2/p' \
        "$work/train.log" | head -n 1)
      read -r at asked <<< "$stop"
      [ "$at" -eq $((asked + 2)) ] || fail "stopped at iteration $at, not two after the request at $asked"
      [ -f "$snapdir/snap_iter_$at.caffemodel" ] && [ -f "$snapdir/snap_iter_$at.solverstate" ] ||
        fail "no final snapshot pair at the stop, iteration $at"
    fi
    expect_resumes
    ;;
  stop-np*-rank*-*)
    IFS=- read -r _ npx rankx mode <<< "$case_name"
    np=${npx#np}
    victim=${rankx#rank}
    export STRATA_STALL_WARN_SECONDS=1
    [ "$mode" = abort ] && export STRATA_STALL_ABORT_SECONDS=3
    start_training
    wait_for 60 "a first snapshot" has_snapshot
    victim_pid=$(started_rank_pid "$victim")
    [ -n "$victim_pid" ] || fail "cannot find rank $victim"
    echo "stopping rank $victim (pid $victim_pid) with SIGSTOP"
    fault_ms=$(now_ms)
    kill -STOP "$victim_pid"
    # Every other rank names it: after the warning time (1 s) and the answers' deadline (0.5 s); 4 s allowed here
    # for a loaded machine.
    for r in $(seq 0 $((np - 1))); do
      [ "$r" = "$victim" ] && continue
      wait_for 10 "rank $r's stall report" log_has "Stall on rank $r: collective #[0-9]* on .*not arrived: .*rank $victim (not answering"
      took=$(($(now_ms) - fault_ms))
      [ "$took" -le 4000 ] || fail "rank $r reported the stall $took ms after the stop (over 4 s)"
      echo "said after $took ms: $(grep -m 1 "Stall on rank $r:" "$work/train.log")"
    done
    named=$(grep "Stall on rank" "$work/train.log" | sed 's/.*not arrived: //' | grep -oE "rank [0-9]+ \(" |
      grep -v "rank $victim (" || true)
    [ -z "$named" ] || fail "a stall report names more than rank $victim: $named"
    if [ "$mode" = abort ]; then
      expect_end
      expect_failed
      expect_line "stall: collective #[0-9]* on .*not arrived: rank $victim (not answering.*over the limit of 3.0 s"
      n=$(grep -c "stall: collective" "$work/train.log")
      [ "$n" -eq 1 ] || fail "the stall abort was said $n times, not once"
    else
      kill -CONT "$victim_pid"
      before=$(newest_snapshot)
      more_snapshots() { [ "$(newest_snapshot)" -gt "${before:-0}" ]; }
      wait_for 30 "training going on after SIGCONT" more_snapshots
      rank0=$(started_rank_pid 0)
      fault_ms=$(now_ms)
      kill -TERM "$rank0"
      expect_end
      [ "$status" -eq 0 ] || fail "the run went on after SIGCONT but ended with status $status"
      expect_line "Optimization stopped early"
    fi
    ;;
  disk-full)
    snapdir=$work/small
    mkdir -p "$snapdir"
    mount -t tmpfs -o size=160k tmpfs "$snapdir" || fail "cannot mount a tmpfs (run as root)"
    mounted=$snapdir
    start_training  # a snapshot pair is 65 KB: the third does not fit
    wait_for 120 "the full disk" log_has "No space left on device"
    fault_ms=$(now_ms)
    expect_end
    expect_failed
    expect_line "cannot write .*No space left on device"
    stray=$(ls "$snapdir" | grep '\.tmp\.' || true)
    [ -z "$stray" ] || fail "the failed write left $stray"
    # The pairs written before the disk filled are whole: each loads, and the newest resumes from a copy on a disk
    # with room.
    for state in "$snapdir"/snap_iter_*.solverstate; do
      model=${state%.solverstate}.caffemodel
      timeout -k 5 60 "$strata" test --model="$net" --weights="$model" --iterations=1 > "$work/test.log" 2>&1 ||
        { cat "$work/test.log" >&2; fail "$(basename "$model") does not load"; }
    done
    mkdir -p "$work/moved"
    cp "$snapdir"/* "$work/moved/"
    umount "$snapdir" && mounted=""
    snapdir=$work/moved
    expect_resumes
    ;;
  corrupt-record)
    # 8,000 12x12 images in an LMDB; record 6,000 (met at iteration 187 on 2 ranks of batch 16) is cut so that
    # it is no Datum. Its data field (tag 0x22, length 144 = 0x90 0x01, then the pixels, all 0xAB for this record
    # alone) gets a length far past the end of the record.
    /usr/bin/python3 - "$work" <<'PY'
import struct, sys
d, n = sys.argv[1], 8000
with open(d + "/images.idx", "wb") as f:
    f.write(struct.pack(">IIII", 0x803, n, 12, 12))
    for i in range(n):
        f.write(bytes([0xAB] * 144) if i == 6000 else bytes((i * 7 + j * 13) % 251 for j in range(144)))
with open(d + "/labels.idx", "wb") as f:
    f.write(struct.pack(">II", 0x801, n) + bytes(i % 10 for i in range(n)))
PY
    "$bin/convert_mnist_data" "$work/images.idx" "$work/labels.idx" "$work/lmdb" > "$work/convert.log" 2>&1 ||
      { cat "$work/convert.log" >&2; fail "convert_mnist_data failed"; }
    /usr/bin/python3 - "$work/lmdb/data.mdb" <<'PY'
import sys
path = sys.argv[1]
data = bytearray(open(path, "rb").read())
needle = bytes([0x22, 0x90, 0x01]) + bytes([0xAB] * 144)
at = data.find(needle)
assert at >= 0 and data.find(needle, at + 1) < 0, "record 6000 not found exactly once"
data[at + 1:at + 3] = bytes([0xFF, 0x7F])
open(path, "wb").write(data)
PY
    sed -i 's|layer { name: "in" type: "DummyData" top: "data" top: "label"|layer { name: "in" type: "Data" top: "data" top: "label" transform_param { scale: 0.00390625 } data_param { source: "'"$work/lmdb"'" batch_size: 16 } }|; /dummy_data_param { shape { dim: 16 dim: 1 dim: 12 dim: 12 } shape { dim: 16 } } }/d' "$net"
    start_training
    wait_for 120 "the corrupt record" log_has "(record 6000) is not a Datum"
    fault_ms=$(now_ms)
    expect_end
    expect_failed
    expect_line "layer 'in' (Data): LMDB '$work/lmdb', key '00006000' (record 6000) is not a Datum"
    expect_resumes
    ;;
  nan-loss)
    # Sane until iteration 150, then a rate 1e12 times larger: the loss overflows within a few iterations.
    extra=('lr_policy: "step"' 'stepsize: 150' 'gamma: 1e12')
    start_training
    wait_for 120 "the divergence" log_has "the loss is"
    fault_ms=$(now_ms)
    expect_end
    expect_failed
    expect_line "the loss is .* at iteration"
    extra=()
    expect_resumes
    ;;
  host-link-down | host-killed)
    # Ranks on two hosts of the test bed, one each; host 1 fails. Open MPI notices through its daemons' TCP
    # connections (cluster.sh sets their keepalives to about 11 s) or a rank's death, and ends every rank.
    bed=yes
    bash "$cluster" up "$np" --slots 1 > "$work/bed.log" 2>&1 || { cat "$work/bed.log" >&2; fail "no test bed"; }
    start_training
    wait_for 60 "a first snapshot" has_snapshot
    sleep 0.3
    fault_ms=$(now_ms)
    if [ "$case_name" = host-link-down ]; then
      echo "taking host $host1's link down"
      ip netns exec "$host1" ip link set eth0 down || fail "cannot take $host1's link down"
    else
      victims=$(for p in $(ip netns pids "$host1"); do
                  [ "$(cat "/proc/$p/comm" 2>/dev/null)" = strata ] && echo "$p"; done)
      [ -n "$victims" ] || fail "no rank on $host1"
      echo "killing host $host1's rank (pid $victims) with SIGKILL"
      kill -9 $victims
    fi
    expect_end
    expect_failed
    # Open MPI's own report names the host: "Remote daemon: ... on node NAME-h1" for the lost link, "process
    # rank 1 ... on node NAME-h1 exited on signal 9" for the dead rank.
    expect_line "on node $host1"
    # Resumed on a fresh bed: the snapshot rank 0 wrote is all a new job needs.
    bash "$cluster" down > /dev/null 2>&1
    bash "$cluster" up "$np" --slots 1 > "$work/bed.log" 2>&1 || { cat "$work/bed.log" >&2; fail "no second test bed"; }
    expect_resumes
    ;;
  second-run)
    # A second `strata train` on the prefix of a live run is refused before its first iteration, naming the host
    # and process that hold it; the live run goes on snapshotting (its temporary files untouched).
    start_training
    wait_for 60 "a first snapshot" has_snapshot
    holder=$(rank_pid "$mpirun_pid" 0)
    solver_text "$snapdir/snap" > "$work/second.prototxt"
    timeout -k 5 60 "$strata" train --solver="$work/second.prototxt" > "$work/second.log" 2>&1
    second=$?
    [ "$second" -eq 1 ] || { cat "$work/second.log" >&2; fail "the second run on the prefix exited with $second, not 1"; }
    expect_line "error: snapshot_prefix '$snapdir/snap' is in use by another run (host $(hostname), pid $holder, holding $snapdir/snap.lock)" "$work/second.log"
    before=$(newest_snapshot)
    wait_for 60 "a snapshot after the second run's refusal" eval '[ "$(newest_snapshot)" -gt "$before" ]'
    echo "the live run wrote iteration $(newest_snapshot) after the refusal"
    fault_ms=$(now_ms)
    kill -s TERM "$mpirun_pid"
    expect_end
    expect_resumes
    ;;
  mixed-pair)
    # A run writes pairs at 100 and 200; a rerun with another seed into the same prefix is killed between its
    # two files at 200: its caffemodel beside the first run's solverstate. Resuming that pair is refused; the
    # rerun's pair at 100 resumes exactly.
    train_to_200
    seed=2
    solver_text "$snapdir/snap" > "$work/solver.prototxt"
    STRATA_FAULT=snapshot:0:200 "${mpi[@]}" "$strata" train --solver="$work/solver.prototxt" > "$work/train.log" 2>&1 &&
      fail "the rerun was not killed"
    expect_line "STRATA_FAULT: killing"
    # The rerun's caffemodel replaced the first run's; the solverstate beside it is still the first run's.
    [ "$snapdir/snap_iter_200.caffemodel" -nt "$snapdir/snap_iter_200.solverstate" ] ||
      fail "no mixed pair at iteration 200"
    expect_refused_resume "$snapdir/snap_iter_200.solverstate" \
      "$snapdir/snap_iter_200.solverstate and $snapdir/snap_iter_200.caffemodel are not a pair"
    rm "$snapdir"/snap_iter_200.*
    expect_resumes
    ;;
  flipped-bytes)
    # One changed byte in the middle of the newest caffemodel, then of the newest solverstate: `strata test` and
    # resuming refuse it, naming the file; the pair before resumes exactly.
    train_to_200
    for f in snap_iter_200.caffemodel snap_iter_200.solverstate; do
      cp "$snapdir/$f" "$work/good"
      /usr/bin/python3 -c 'import sys; b = bytearray(open(sys.argv[1], "rb").read()); b[len(b) // 2] ^= 0x10; open(sys.argv[1], "wb").write(b)' "$snapdir/$f"
      if [ "$f" = snap_iter_200.caffemodel ]; then
        timeout -k 5 60 "$strata" test --model="$net" --weights="$snapdir/$f" --iterations=1 > "$work/train.log" 2>&1 &&
          fail "strata test loaded the changed $f"
        expect_line "error: $snapdir/$f is corrupt: its content's checksum (CRC-32) is"
      fi
      expect_refused_resume "$snapdir/snap_iter_200.solverstate" "$snapdir/$f is corrupt: its content's checksum (CRC-32) is"
      cp "$work/good" "$snapdir/$f"
    done
    rm "$snapdir"/snap_iter_200.*
    expect_resumes
    ;;
  hdf5-SIGTERM)
    # Caffe's snapshot_format: HDF5: a signal to one rank stops every rank with a final snapshot, and the .h5
    # pair resumes exactly.
    format=HDF5
    start_training
    wait_for 60 "a first snapshot" has_snapshot
    pid=$(rank_pid "$mpirun_pid" 1)
    fault_ms=$(now_ms)
    kill -s TERM "$pid"
    expect_end
    [ "$status" -eq 0 ] || fail "a stop asked for by a signal ended with status $status"
    expect_line "Snapshotting to HDF5 file $snapdir/snap_iter_"
    expect_resumes
    ;;
  *) fail "unknown case" ;;
esac
echo "PASS: $case_name"
