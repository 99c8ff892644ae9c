#!/usr/bin/env bash
# A multi-host test bed on one Linux machine (docs/cluster.md): N "hosts" that Open MPI sees as N nodes.
#
#   bash scripts/cluster.sh up HOSTS [--slots K] [--rate RATE]   make NAME-h0..NAME-h{HOSTS-1}
#   bash scripts/cluster.sh rate RATE|off                        shape (or unshape) every host's link
#   bash scripts/cluster.sh mpirun [mpirun args...]              mpirun across the bed, all flags set
#   bash scripts/cluster.sh exec HOST [COMMAND...]               a command (or a shell) on one host
#   bash scripts/cluster.sh status                               what is up
#   bash scripts/cluster.sh kill                                 end every process on the bed, keep the bed
#   bash scripts/cluster.sh down                                 remove all of it (safe to repeat)
#
# NAME is $STRATA_CLUSTER_NAME, "strata" unless set. Host i is a network namespace NAME-hI with a UTS namespace of
# its own (hostname NAME-hI, so Open MPI counts it as a node of its own and never uses shared memory between hosts),
# and an interface eth0 with 10.77.0.(i+1)/24. The hosts' cables end on a bridge inside one more namespace, NAME-sw.
# Every object is created inside those namespaces: the machine's own network is never touched, and no name goes in
# /etc/hosts (Open MPI needs none: the rsh agent maps names to namespaces, and the daemons and ranks exchange
# addresses). So beds of other names never meet, though each has the same subnet: two test runs on one kernel
# each bring up their own. mpirun runs on host 0 (its network and hostname), which is also a compute host, as a
# login node often is.
# Needs root, iproute2 (ip, tc) and util-linux (unshare, nsenter).
set -Eeuo pipefail

die() { echo "cluster.sh: $*" >&2; exit 1; }

name=${STRATA_CLUSTER_NAME:-strata}
[[ $name =~ ^[a-z][a-z0-9-]{0,39}$ ]] ||
  die "STRATA_CLUSTER_NAME '$name': give 1-40 of a-z, 0-9 and '-', a letter first"
# The bed's state (hostfile, hosts, uts/, rate), exported for the rsh agent that mpirun calls.
export STRATA_CLUSTER_DIR=${STRATA_CLUSTER_DIR:-/run/$name-cluster}
dir=$STRATA_CLUSTER_DIR
prefix=$name-h
switch=$name-sw
subnet=10.77.0
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
agent=$here/cluster_rsh.sh

usage() { sed -n '4,10s/^# \{0,1\}//p' "${BASH_SOURCE[0]}" >&2; exit 2; }

# Only one up/down/rate at a time: two would interleave and leave half a bed. The lock is this script
# itself, so that no lock file is left behind.
lock() {
  exec 9<"${BASH_SOURCE[0]}"
  flock -w 30 9 || die "another cluster.sh up/down/rate is still running"
}

bed_namespaces() { ip netns list 2>/dev/null | awk '{print $1}' | grep -E "^(${prefix}[0-9]+|${switch})$" || true; }

hosts_up() { [ -r "$dir/hosts" ] && awk '{print $1}' "$dir/hosts"; }

# RATE as tc writes it (bit, kbit, mbit, gbit; powers of 1000) -> bits per second. Only bit units:
# tc's "bps" means bytes per second, a classic factor-8 mistake.
rate_bits() {
  awk -v r="$1" 'BEGIN {
    if (match(tolower(r), /^[0-9]+(\.[0-9]+)?(bit|kbit|mbit|gbit|tbit)$/) == 0) exit 1
    s = tolower(r); n = s + 0; sub(/^[0-9.]+/, "", s)
    m = (s == "bit") ? 1 : (s == "kbit") ? 1e3 : (s == "mbit") ? 1e6 : (s == "gbit") ? 1e9 : 1e12
    if (n * m < 8000 || n * m > 4e11) exit 1  # tc misbehaves past a few hundred gbit
    printf "%.0f\n", n * m }'
}

# Shaping on both ends of host i's cable: eth0 limits what the host sends, the switch's port what it receives,
# so each host has a full-duplex link of RATE, like a NIC on a switch port. htb rather than tbf: measured here,
# a 1 MiB allreduce over tbf took 10.9 ms where htb gave 8.5-9.0 (8.4 is the line rate). The queue behind the
# shaper is a byte FIFO of about 10 ms at RATE, a switch's buffer rather than an unbounded one. No netem on this
# kernel: a rate is all that can be modelled, not latency or loss.
shape_one() {  # NAMESPACE DEVICE RATE BITS_PER_SECOND
  local burst limit
  # The bucket holds 1 ms at RATE, and at least one 64 KiB GSO packet (what veth carries); tc takes no more
  # than a few MiB. The queue: 10 ms at RATE, within 256 KiB..32 MiB.
  burst=$(awk -v b="$4" 'BEGIN { x = b / 8 / 1000; x = x < 65536 ? 65536 : x > 4194304 ? 4194304 : x
                                 printf "%.0f\n", x }')
  limit=$(awk -v b="$4" 'BEGIN { x = b / 8 / 100; x = x < 262144 ? 262144 : x > 33554432 ? 33554432 : x
                                 printf "%.0f\n", x }')
  ip netns exec "$1" tc qdisc del dev "$2" root 2>/dev/null || true
  ip netns exec "$1" tc qdisc add dev "$2" root handle 1: htb default 1
  ip netns exec "$1" tc class add dev "$2" parent 1: classid 1:1 htb rate "$3" ceil "$3" \
    burst "$burst" cburst "$burst" quantum 60000
  ip netns exec "$1" tc qdisc add dev "$2" parent 1:1 handle 10: bfifo limit "$limit"
}

shape() {  # HOST PORT RATE
  local bits
  bits=$(rate_bits "$3") || die "rate $3: give 8kbit..400gbit as a number and bit, kbit, mbit or gbit (e.g. 10gbit)"
  shape_one "$1" eth0 "$3" "$bits"
  shape_one "$switch" "$2" "$3" "$bits"
}

unshape() {
  ip netns exec "$1" tc qdisc del dev eth0 root 2>/dev/null || true
  ip netns exec "$switch" tc qdisc del dev "$2" root 2>/dev/null || true
}

up_exit() {
  local rc=$?
  [ "$rc" -eq 0 ] && return
  do_down >/dev/null 2>&1
  echo "cluster.sh: up failed${failed:+ at: $failed}; removed what it had made" >&2
}

cmd_up() {
  local n="" slots=2 rate=""
  while [ $# -gt 0 ]; do
    case $1 in
      --slots) slots=${2:?--slots needs a number}; shift 2 ;;
      --slots=*) slots=${1#*=}; shift ;;
      --rate) rate=${2:?--rate needs a rate, e.g. 10gbit}; shift 2 ;;
      --rate=*) rate=${1#*=}; shift ;;
      [0-9]*) n=$1; shift ;;
      *) usage ;;
    esac
  done
  if ! [[ $n =~ ^[0-9]+$ ]] || [ "$n" -lt 1 ] || [ "$n" -gt 200 ]; then die "up HOSTS: HOSTS must be 1..200"; fi
  if ! [[ $slots =~ ^[1-9][0-9]*$ ]]; then die "--slots must be a positive number"; fi
  [ -z "$rate" ] || rate_bits "$rate" >/dev/null ||
    die "--rate $rate: give 8kbit..400gbit as a number and bit, kbit, mbit or gbit (e.g. 10gbit)"

  # Fail loudly, once, when namespaces cannot be made: CI must fail here rather than skip the tests.
  [ "$(id -u)" -eq 0 ] || die "up needs root (network and UTS namespaces); run it as root"
  local t
  for t in ip nsenter unshare flock mount mountpoint; do
    command -v "$t" >/dev/null || die "up needs '$t' (iproute2, util-linux), which is not installed"
  done
  [ -z "$rate" ] || command -v tc >/dev/null || die "--rate needs 'tc' (iproute2), which is not installed"
  # Can this kernel and this process make namespaces at all? Asked without touching anything.
  local why
  why=$(unshare --net --uts true 2>&1) ||
    die "cannot create network and UTS namespaces here (unshare --net --uts: $why)"
  lock
  if [ -e "$dir" ] || [ -n "$(bed_namespaces)" ]; then
    die "a test bed is already up ($(bed_namespaces | tr '\n' ' ')); bring it down first: bash $here/cluster.sh down"
  fi

  # From here on, any failure takes down whatever was made before the script exits.
  failed=""
  trap 'failed=${failed:-$BASH_COMMAND}' ERR
  trap up_exit EXIT
  mkdir -p "$dir/uts"
  # Pinning a namespace to a file needs a mount that does not propagate (on systemd machines / is shared):
  # a private bind mount of uts/ onto itself, as `ip netns` does for /run/netns.
  mount --bind "$dir/uts" "$dir/uts"
  mount --make-private "$dir/uts"

  # `ip netns add` makes /run/netns a mount point the first time; if that is this bed's doing, down undoes it.
  [ -d /run/netns ] || touch "$dir/made-run-netns"
  mountpoint -q /run/netns 2>/dev/null || touch "$dir/mounted-run-netns"
  why=$(ip netns add "$switch" 2>&1) || die "cannot create network namespaces (ip netns add: $why)"
  ip -n "$switch" link set lo up
  ip -n "$switch" link add br0 type bridge
  ip -n "$switch" link set br0 up

  : > "$dir/hosts"
  : > "$dir/hostfile"
  local i host addr
  for ((i = 0; i < n; i++)); do
    host=$prefix$i
    addr=$subnet.$((i + 1))
    ip netns add "$host"
    ip -n "$host" link set lo up
    # The cable is made inside the switch's namespace with its far end moved straight into the host's.
    ip -n "$switch" link add "h$i" type veth peer name eth0 netns "$host"
    ip -n "$switch" link set "h$i" master br0
    ip -n "$switch" link set "h$i" up
    ip -n "$host" addr add "$addr/24" dev eth0
    ip -n "$host" link set eth0 up
    touch "$dir/uts/$host"
    unshare --uts="$dir/uts/$host" hostname "$host"
    echo "$host $addr" >> "$dir/hosts"
    echo "$host slots=$slots" >> "$dir/hostfile"
    [ -z "$rate" ] || shape "$host" "h$i" "$rate"
  done
  echo "${rate:-off}" > "$dir/rate"

  # The bed must carry packets before anyone relies on it: host 0 reaches every other host. There may be no
  # ping: a TCP connect to a closed port answers "refused" once the path works, and times out if it does not.
  local out
  for ((i = 1; i < n; i++)); do
    for t in 1 2 3 4 5; do
      out=$(ip netns exec "${prefix}0" timeout 2 bash -c "exec 3<>/dev/tcp/$subnet.$((i + 1))/9" 2>&1) || true
      [[ $out == *refused* ]] && break
    done
    [[ $out == *refused* ]] || die "host ${prefix}0 cannot reach ${prefix}$i ($subnet.$((i + 1))): $out"
  done
  trap - EXIT ERR
  echo "cluster.sh: $n hosts up (${prefix}0..${prefix}$((n - 1)), $subnet.1..$subnet.$n, slots=$slots each, rate ${rate:-unlimited})"
  echo "  hostfile $dir/hostfile, rsh agent $agent"
  echo "  run:  bash $here/cluster.sh mpirun -np $n --map-by node hostname"
}

# A namespace lives on while a process is inside it, and a rank that outlived its mpirun (mpirun killed;
# Strata's tools take the first SIGTERM as "stop at the next iteration") keeps its core busy: end them.
end_processes() {
  local ns pids
  for ns in $(bed_namespaces); do
    mapfile -t pids < <(ip netns pids "$ns" 2>/dev/null)
    [ ${#pids[@]} -gt 0 ] || continue
    echo "cluster.sh: ending processes still on $ns: ${pids[*]}" >&2
    kill -TERM "${pids[@]}" 2>/dev/null || true
    for _ in 1 2 3 4 5 6 7 8 9 10; do
      mapfile -t pids < <(ip netns pids "$ns" 2>/dev/null)
      [ ${#pids[@]} -gt 0 ] || break
      sleep 0.3
    done
    [ ${#pids[@]} -eq 0 ] || kill -KILL "${pids[@]}" 2>/dev/null || true
  done
}

# Everything the bed made, whatever state it is in: nothing that exists is an error, nothing missing either.
do_down() {
  end_processes
  # Deleting a namespace deletes its interfaces; a veth goes with either of its ends.
  for ns in $(bed_namespaces); do ip netns delete "$ns" 2>/dev/null || true; done
  if [ -d "$dir/uts" ]; then
    local f
    for f in "$dir"/uts/*; do
      [ -e "$f" ] || continue
      mountpoint -q "$f" 2>/dev/null && umount "$f" 2>/dev/null || umount -l "$f" 2>/dev/null || true
    done
    while mountpoint -q "$dir/uts" 2>/dev/null; do umount "$dir/uts" 2>/dev/null || umount -l "$dir/uts"; done
  fi
  if [ -z "$(ls -A /run/netns 2>/dev/null)" ]; then
    [ ! -e "$dir/mounted-run-netns" ] || umount /run/netns 2>/dev/null || true
    [ ! -e "$dir/made-run-netns" ] || rmdir /run/netns 2>/dev/null || true
  fi
  rm -rf "$dir"
}

cmd_down() {
  [ "$(id -u)" -eq 0 ] || die "down needs root"
  lock
  do_down
  local left
  left=$(bed_namespaces)
  [ -z "$left" ] || die "could not delete namespaces: $left"
  echo "cluster.sh: test bed down"
}

cmd_kill() {
  [ "$(id -u)" -eq 0 ] || die "kill needs root"
  end_processes
}

cmd_rate() {
  local rate=${1:?usage: cluster.sh rate RATE|off}
  [ -r "$dir/hosts" ] || die "no test bed is up"
  [ "$rate" = off ] || rate_bits "$rate" >/dev/null ||
    die "rate $rate: give 8kbit..400gbit as a number and bit, kbit, mbit or gbit (e.g. 10gbit), or off"
  lock
  local i=0 host
  for host in $(hosts_up); do
    if [ "$rate" = off ]; then unshape "$host" "h$i"; else shape "$host" "h$i" "$rate"; fi
    i=$((i + 1))
  done
  echo "$rate" > "$dir/rate"
  echo "cluster.sh: rate $rate on every host's link"
}

cmd_status() {
  if [ ! -r "$dir/hosts" ]; then
    echo "no test bed is up"
    [ -z "$(bed_namespaces)" ] || echo "but namespaces are left: $(bed_namespaces | tr '\n' ' ') (bash $here/cluster.sh down)"
    return 0
  fi
  echo "rate: $(cat "$dir/rate" 2>/dev/null || echo ?)"
  local host addr
  while read -r host addr; do
    printf '%-12s %-12s %s\n' "$host" "$addr" "$(grep "^$host " "$dir/hostfile" | cut -d' ' -f2)"
  done < "$dir/hosts"
}

cmd_mpirun() {
  [ -r "$dir/hostfile" ] || die "no test bed is up (bash $here/cluster.sh up HOSTS)"
  [ "$(id -u)" -eq 0 ] || die "mpirun on the bed needs root (it enters the bed's namespaces)"
  local h0 args=" $* "
  h0=$(hosts_up | awk 'NR == 1')   # awk reads to the end: no SIGPIPE for hosts_up under pipefail
  # mpirun refuses an MCA parameter given twice: a default here gives way to the caller's own.
  local flags=(--hostfile "$dir/hostfile") v
  mca() { [[ $args == *" --mca $1 "* || $args == *" -mca $1 "* ]] || flags+=(--mca "$1" "$2"); }
  mca plm_rsh_agent "$agent"
  # Every daemon launched by mpirun itself, never by another daemon: the agent finds the bed through
  # STRATA_CLUSTER_DIR, which mpirun has and a daemon (started in sshd's fresh environment) has not.
  mca plm_rsh_no_tree_spawn 1
  # TCP between hosts, shared memory only within one; only the bed's subnet (the hosts have nothing else
  # but lo, yet on a real cluster this is the flag that keeps MPI off the wrong network).
  mca btl self,vader,tcp
  mca btl_tcp_if_include "$subnet.0/24"
  mca oob_tcp_if_include "$subnet.0/24"
  # A host that drops off the network: mpirun hears of it only through its daemon's TCP connection, idle while
  # the ranks train, so TCP keepalives are what notice. Open MPI's defaults wait 300 s, then 9 probes 20 s
  # apart; these declare a silent daemon lost within about 5 + 3 x 2 = 11 s, and mpirun then ends every rank.
  mca oob_tcp_keepalive_time 5
  mca oob_tcp_keepalive_intvl 2
  mca oob_tcp_keepalive_probes 3
  # Every host's daemon sees all of the machine's cores and pins its first rank to core 0, so one rank per
  # host would put every rank on the same core: no binding, unless asked for.
  [[ $args == *" --bind-to "* || $args == *" -bind-to "* ]] || flags+=(--bind-to none)
  # ssh passes no environment: forward what Strata's tools and tests read, as one would on a real cluster whose
  # hosts share one setup. That includes every OPENBLAS_*, ONEDNN_* / DNNL_* and STRATA_* variable set: they pick
  # the BLAS and oneDNN kernels (OPENBLAS_CORETYPE, ONEDNN_MAX_CPU_ISA), which round differently, and Strata's
  # own switches, all of which every rank must see alike (K-FAC with distribute_inverses: false inverts on every
  # rank, so one host on other BLAS kernels would end with other weights).
  local kernels_and_switches
  kernels_and_switches=$(compgen -e | grep -E '^(OPENBLAS|ONEDNN|DNNL|STRATA)_' || true)
  for v in OMP_NUM_THREADS GLOG_logtostderr GLOG_v $kernels_and_switches; do
    [ -z "${!v+x}" ] || flags+=(-x "$v")
  done
  if [ "$(id -u)" -eq 0 ]; then
    export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
  fi
  # mpirun runs on host 0: its daemons and ranks must reach it over the bed's network.
  exec nsenter --net="/run/netns/$h0" --uts="$dir/uts/$h0" -- mpirun "${flags[@]}" "$@"
}

case ${1:-} in
  up) shift; cmd_up "$@" ;;
  down) shift; cmd_down ;;
  rate) shift; cmd_rate "$@" ;;
  status) cmd_status ;;
  kill) cmd_kill ;;
  mpirun) shift; cmd_mpirun "$@" ;;
  exec) shift; [ $# -ge 1 ] || usage; [ "$(id -u)" -eq 0 ] || die "exec needs root (nsenter)"; exec "$agent" "$@" ;;
  *) usage ;;
esac
