#!/usr/bin/env python3
"""Draws training loss and test accuracy against iterations from a Strata (or Caffe) training log.

    python3 scripts/plot_training_log.py LOG OUT.png

Reads the lines Caffe's log tools read: "Iteration N ..., loss = X" and, after "Iteration N, Testing net",
"Test net output #k: accuracy = Z"."""
import re
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

TRAIN_LOSS = re.compile(r"Iteration (\d+)(?: \([^)]*\))?, loss = ([-+0-9.eE]+|nan|inf)")
TESTING = re.compile(r"Iteration (\d+), Testing net")
TEST_OUTPUT = re.compile(r"Test net output #\d+: (\S+) = ([-+0-9.eE]+)")


def parse(path):
    train, tests, test_iter = [], {}, None
    with open(path, errors="replace") as f:
        for line in f:
            m = TRAIN_LOSS.search(line)
            if m:
                train.append((int(m.group(1)), float(m.group(2))))
                continue
            m = TESTING.search(line)
            if m:
                test_iter = int(m.group(1))
                continue
            m = TEST_OUTPUT.search(line)
            if m and test_iter is not None:
                tests.setdefault(m.group(1), []).append((test_iter, float(m.group(2))))
    return train, tests


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: plot_training_log.py LOG OUT.png")
    train, tests = parse(sys.argv[1])
    if not train and not tests:
        sys.exit(f"error: no training or test lines found in {sys.argv[1]}")
    fig, ax_loss = plt.subplots(figsize=(8, 5))
    if train:
        ax_loss.plot(*zip(*train), color="tab:blue", label="train loss")
    ax_loss.set_xlabel("iteration")
    ax_loss.set_ylabel("training loss", color="tab:blue")
    ax_acc = ax_loss.twinx()
    for name, points in tests.items():
        if "acc" in name:
            ax_acc.plot(*zip(*points), "o-", color="tab:red", label=f"test {name}")
            best = max(points, key=lambda p: p[1])
            ax_acc.annotate(f"best {best[1]:.4f} @ {best[0]}", best, textcoords="offset points", xytext=(-60, -20))
    ax_acc.set_ylabel("test accuracy", color="tab:red")
    fig.legend(loc="center right")
    fig.tight_layout()
    fig.savefig(sys.argv[2], dpi=100)
    print(f"wrote {sys.argv[2]}")


if __name__ == "__main__":
    main()
