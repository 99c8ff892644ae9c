#!/usr/bin/env bash
# Allreduce across hosts on the one-machine test bed (scripts/cluster.sh, docs/cluster.md): allreduce_bench of
# Strata's hybrid, hier and network algorithms against every Open MPI algorithm, interleaved in one process per
# layout, at 2 hosts x 1 rank and 2 hosts x 2 ranks, unshaped and with every link shaped to RATE. Prints, per
# layout and size, the hybrid's median against the best of Open MPI's (ratio < 1: the hybrid is faster) and
# against the link-rate bound 2 (H-1)/H x M / rate where a rate is set. Raw outputs go to OUT_DIR.
#
#   bash scripts/bench_cluster.sh [BUILD_DIR=build] [OUT_DIR=bench-out/cluster]   (as root; RATE=1gbit)
#
# BURST=N times N calls back to back per rep (allreduce_bench --burst) instead of one call after a barrier;
# every run also prints the barrier's exit skew, which a single call's time includes. MPIRUN_EXTRA adds words to
# every mpirun, e.g. MPIRUN_EXTRA="--mca btl_tcp_eager_limit 268435456 --mca btl_tcp_max_send_size 268435456"
# (each message one TCP fragment: docs/cluster.md, "Large messages over TCP").
set -euo pipefail
rate=${RATE:-1gbit}
burst=${BURST:-1}
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=scripts/bench_bed.sh
source "$here/bench_bed.sh"
bench_bed_start bench_cluster bench-out/cluster "$@"
algs=hybrid,hier,brd,vhd_seg,ring_seg,mpi_all
mpirun=(bash "$here/cluster.sh" mpirun --map-by node ${MPIRUN_EXTRA:-})

for np in 2 4; do
  "${mpirun[@]}" -np $np "$bench" --algorithms=$algs --min_bytes=4 --max_bytes=256M \
    --factor=4 --seconds=1.5 --memcpy=false --burst="$burst" --skew > "$out/2x$((np / 2))_unshaped.txt"
done
bash "$here/cluster.sh" rate "$rate" >/dev/null
for np in 2 4; do
  "${mpirun[@]}" -np $np "$bench" --algorithms=$algs --sizes=4,1K,64K,1M,16M,64M \
    --seconds=3 --memcpy=false --burst="$burst" --skew > "$out/2x$((np / 2))_$rate.txt"
done

python3 - "$out" "$rate" "$here" <<'PY'
import glob, os, re, sys
out, rate = sys.argv[1], sys.argv[2]
sys.path.insert(0, sys.argv[3])
from allreduce_results import best_open_mpi, read
units = {"kbit": 1e3, "mbit": 1e6, "gbit": 1e9}
m = re.match(r"([\d.]+)(kbit|mbit|gbit)$", rate)
bits = float(m.group(1)) * units[m.group(2)] if m else None
for path in sorted(glob.glob(os.path.join(out, "2x*.txt"))):
    rows, _ = read(path)
    name = os.path.basename(path)[:-4]
    shaped = not name.endswith("unshaped")
    print("\n%s (medians, us)" % name)
    print("| size | hybrid | hier | best Strata (network) | best Open MPI | hybrid / best Open MPI |%s" %
          (" link bound | hybrid / bound |" if shaped and bits else ""))
    print("|---|---|---|---|---|---|%s" % ("---|---|" if shaped and bits else ""))
    for b in sorted(rows):
        r = rows[b]
        ompi = best_open_mpi(r)
        strata = min((v, k) for k, v in r.items() if k in ("brd", "vhd_seg", "ring_seg"))
        cells = [str(b), "%.1f" % r["hybrid"], "%.1f" % r.get("hier", float("nan")),
                 "%.1f %s" % strata, "%.1f %s" % ompi, "%.2f" % (r["hybrid"] / ompi[0])]
        if shaped and bits:
            bound = 2 * 0.5 * b * 8 / bits * 1e6  # 2 hosts: 2 (H-1)/H x M / rate
            cells += ["%.1f" % bound, "%.2f" % (r["hybrid"] / bound)]
        print("| " + " | ".join(cells) + " |")
PY
