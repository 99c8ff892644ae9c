"""Reads allreduce_bench's table (the benchmarks on the test bed: bench_cluster.sh, bench_cluster_small.sh)."""
import re

_ROW = re.compile(r"^\s*([\d.]+) (B|KiB|MiB|GiB)\s+(\S+)(?: \*)?\s+\d+\s+([\d.]+)")
_SKEW = re.compile(r"barrier exit skew .*: median ([\d.]+) us")
_SCALE = {"B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30}


def read(path):
    """({bytes: {algorithm: median us}}, median barrier exit skew in us or None) of one allreduce_bench output."""
    rows, skew = {}, None
    for line in open(path):
        g = _ROW.match(line)
        if g:
            rows.setdefault(int(float(g.group(1)) * _SCALE[g.group(2)]), {})[g.group(3)] = float(g.group(4))
        s = _SKEW.search(line)
        if s:
            skew = float(s.group(1))
    return rows, skew


def best_open_mpi(row):
    """(median, name) of the fastest Open MPI algorithm in one size's row (its default, mpi, and the forced ones)."""
    return min((v, k) for k, v in row.items() if k == "mpi" or k.startswith("mpi_"))
