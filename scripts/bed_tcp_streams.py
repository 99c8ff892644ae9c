#!/usr/bin/env python3
"""Plain TCP between two hosts of the test bed, without MPI: the baseline for an allreduce's time there.

Host 1 listens, host 0 connects; each rep moves MIB MiB over one connection, one way (host 0 sends, host 1
answers with a byte) or both ways at once (each sends MIB MiB while receiving the other's), written PIECE
bytes at a time with TCP_NODELAY, as an MPI transport writes its fragments. Prints the reps' times in ms and
the line-rate time of MIB MiB at the bed's rate, if one is set. Bring the bed up first (cluster.sh up 2).

    python3 scripts/bed_tcp_streams.py [--mib 16] [--reps 8] [--piece 131072] [--both]
"""
import argparse
import os
import socket
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
PORT = 5599


def recv_all(sock, n):
    view, got = memoryview(bytearray(n)), 0
    while got < n:
        k = sock.recv_into(view[got:], n - got)
        if k == 0:
            raise ConnectionError("the other host closed the connection")
        got += k


def send_all(sock, data, piece):
    view = memoryview(data)
    for offset in range(0, len(data), piece):
        sock.sendall(view[offset:offset + piece])


def exchange(sock, data, args, sender):
    if args.both:
        reader = threading.Thread(target=recv_all, args=(sock, len(data)))
        reader.start()
        send_all(sock, data, args.piece)
        reader.join()
    elif sender:
        send_all(sock, data, args.piece)
        recv_all(sock, 1)
    else:
        recv_all(sock, len(data))
        sock.sendall(b"x")


def run(args, role):
    data = bytearray(args.mib << 20)
    if role == "serve":
        listener = socket.create_server((args.address, PORT))
        sock, _ = listener.accept()
    else:
        for _ in range(100):  # the server is starting on the other host
            try:
                sock = socket.create_connection((args.address, PORT))
                break
            except ConnectionRefusedError:
                time.sleep(0.05)
        else:
            sys.exit("bed_tcp_streams: cannot connect to %s:%d" % (args.address, PORT))
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    times = []
    for _ in range(args.reps):
        t0 = time.perf_counter()
        exchange(sock, data, args, role == "send")
        times.append((time.perf_counter() - t0) * 1e3)
    return times


def bed_name():
    return os.environ.get("STRATA_CLUSTER_NAME", "strata")  # as cluster.sh names the bed


def bed_dir():
    return os.environ.get("STRATA_CLUSTER_DIR", "/run/%s-cluster" % bed_name())


def line_time_ms(mib):
    try:
        with open(os.path.join(bed_dir(), "rate")) as f:
            rate = f.read().strip()
    except OSError:
        return None
    units = {"kbit": 1e3, "mbit": 1e6, "gbit": 1e9}
    for unit, scale in units.items():
        if rate.endswith(unit):
            return (mib << 20) * 8 / (float(rate[:-len(unit)]) * scale) * 1e3
    return None


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mib", type=int, default=16)
    parser.add_argument("--reps", type=int, default=8)
    parser.add_argument("--piece", type=int, default=131072)
    parser.add_argument("--both", action="store_true", help="both ways at once")
    parser.add_argument("--role", choices=["serve", "send"], help=argparse.SUPPRESS)
    parser.add_argument("--address", default="10.77.0.2", help=argparse.SUPPRESS)  # host 1 (cluster.sh)
    args = parser.parse_args()
    if args.role:
        times = run(args, args.role)
        if args.role == "send":
            print(" ".join("%.0f" % t for t in times))
        return
    flags = ["--mib", str(args.mib), "--reps", str(args.reps), "--piece", str(args.piece)]
    flags += ["--both"] if args.both else []
    cluster = ["bash", os.path.join(HERE, "cluster.sh"), "exec"]
    server = subprocess.Popen(cluster + [bed_name() + "-h1", sys.executable, __file__, "--role", "serve"] + flags)
    sender = subprocess.run(cluster + [bed_name() + "-h0", sys.executable, __file__, "--role", "send"] + flags,
                            capture_output=True, text=True)
    server.wait()
    if sender.returncode != 0 or server.returncode != 0:
        sys.exit("bed_tcp_streams: failed\n" + sender.stderr)
    bound = line_time_ms(args.mib)
    print("%d MiB %s, %d-byte pieces: %s ms%s" % (
        args.mib, "both ways at once" if args.both else "one way", args.piece, sender.stdout.strip(),
        " (line rate: %.0f ms)" % bound if bound else ""))


if __name__ == "__main__":
    main()
