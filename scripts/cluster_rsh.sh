#!/usr/bin/env bash
# The test bed's stand-in for ssh (scripts/cluster.sh, docs/cluster.md): Open MPI's plm_rsh_agent calls it as
#
#   cluster_rsh.sh [ssh options] HOST [COMMAND...]
#
# and it runs COMMAND on HOST, one of the bed's hosts, the way sshd would: inside that host's network and UTS
# namespaces, through the login shell with `-c`, in a fresh environment started in $HOME. The fresh environment
# matters: on a real cluster a rank sees only what ssh gives it plus what mpirun forwards (-x VAR, OMPI_MCA_*),
# and the bed must not hide a variable someone forgot to forward. Without COMMAND it opens a login shell.
set -euo pipefail
dir=${STRATA_CLUSTER_DIR:-/run/${STRATA_CLUSTER_NAME:-strata}-cluster}  # as cluster.sh sets it

# ssh options are accepted and ignored; the ones that take a value take it along.
while [ $# -gt 0 ]; do
  case $1 in
    -[bcDEeFIiJLlmOopQRSWw]) shift 2 ;;
    --) shift; break ;;
    -*) shift ;;
    *) break ;;
  esac
done
[ $# -ge 1 ] || { echo "cluster_rsh.sh: usage: cluster_rsh.sh [ssh options] HOST [COMMAND...]" >&2; exit 255; }
host=${1#*@}  # user@host: the bed has only one user
shift

# Open MPI may pass an address instead of the name it was given: the bed's hosts file maps both.
if [ -r "$dir/hosts" ]; then
  name=$(awk -v h="$host" '$1 == h || $2 == h { print $1; exit }' "$dir/hosts")
else
  name=""
fi
if [ -z "$name" ] || [ ! -e "/run/netns/$name" ] || [ ! -e "$dir/uts/$name" ]; then
  echo "cluster_rsh.sh: $host is not a host of the test bed (is it up? bash scripts/cluster.sh status)" >&2
  exit 255  # what ssh returns when it cannot reach the host
fi

home=$(getent passwd "$(id -u)" | cut -d: -f6)
shell=$(getent passwd "$(id -u)" | cut -d: -f7)
[ -d "$home" ] || home=/
[ -x "$shell" ] || shell=/bin/sh
user=$(id -un)
# What sshd puts in a session's environment (Debian's default PATH, and LANG/LC_* that ssh_config sends).
env_vars=(HOME="$home" USER="$user" LOGNAME="$user" SHELL="$shell"
          PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin)
while IFS= read -r v; do env_vars+=("$v"); done < <(env | grep -E '^(LANG|LC_[A-Z]+)=' || true)

cd "$home"
if [ $# -eq 0 ]; then
  exec nsenter --net="/run/netns/$name" --uts="$dir/uts/$name" -- env -i "${env_vars[@]}" "$shell" -l
fi
# ssh joins the words of the command with spaces and hands the string to the shell: so does this.
exec nsenter --net="/run/netns/$name" --uts="$dir/uts/$name" -- env -i "${env_vars[@]}" "$shell" -c "$*"
