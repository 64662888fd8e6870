#!/usr/bin/python3
"""Draws stoker-bench's per-batch times (--batch-times FILE.csv) as a PNG timeline.

Top: the time between consecutive batches handed to the training loop, batch
by batch, with the epoch boundaries marked and the p50 and p99 lines; a
periodic stall (every epoch's first batch, every Nth batch) stands out as a
spike. Bottom: how long the loop waited for each batch, against the server's
time for it.

Usage: tests/bench/plot_timeline.py TIMES.csv OUT.png [--title TEXT] [--skip N]
  --skip N leaves out the first N batches (warm-up) from the percentiles.
Needs matplotlib (Debian's python3-matplotlib; installed by make deps).
"""

import argparse
import csv
import sys


def read(path):
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    if not rows:
        sys.exit(f"plot_timeline: {path} holds no batches")
    missing = {"epoch", "batch", "inter_batch_ms", "wait_ms", "server_ms"} - set(rows[0])
    if missing:
        sys.exit(f"plot_timeline: {path} lacks the columns {sorted(missing)}: is it stoker-bench --batch-times CSV?")
    return rows


def percentile(values, q):
    """Nearest rank, as stoker-bench computes it."""
    values = sorted(values)
    rank = max(1, min(len(values), int(-(-q * len(values) // 1))))
    return values[rank - 1]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("times")
    parser.add_argument("out")
    parser.add_argument("--title", default="")
    parser.add_argument("--skip", type=int, default=0)
    args = parser.parse_args()

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = read(args.times)
    x = list(range(len(rows)))
    inter = [float(r["inter_batch_ms"]) for r in rows]
    wait = [float(r["wait_ms"]) for r in rows]
    server = [float(r["server_ms"]) for r in rows]
    measured = inter[args.skip:] or inter
    p50, p99 = percentile(measured, 0.50), percentile(measured, 0.99)

    fig, (top, bottom) = plt.subplots(2, 1, figsize=(10, 5.5), sharex=True, height_ratios=[3, 2])
    top.plot(x, inter, lw=0.9, color="tab:blue", label="inter-batch")
    top.axhline(p50, color="tab:green", ls="--", lw=0.8, label=f"p50 {p50:.1f} ms")
    top.axhline(p99, color="tab:red", ls="--", lw=0.8, label=f"p99 {p99:.1f} ms (p99/p50 {p99 / p50:.2f})")
    for i in range(1, len(rows)):
        if rows[i]["epoch"] != rows[i - 1]["epoch"]:
            for ax in (top, bottom):
                ax.axvline(i - 0.5, color="gray", lw=0.6, alpha=0.6)
            top.text(i, max(inter) * 1.02, f"epoch {rows[i]['epoch']}",
                     fontsize=7, color="gray")
    top.set_ylabel("ms between batches")
    top.set_ylim(0, max(inter) * 1.1)
    top.legend(loc="lower right", fontsize=8)
    if args.title:
        top.set_title(args.title, fontsize=10)
    bottom.plot(x, wait, lw=0.8, color="tab:orange", label="loop waited")
    bottom.plot(x, server, lw=0.8, color="tab:purple", alpha=0.7, label="server time")
    bottom.set_ylabel("ms")
    bottom.set_xlabel("batch (in hand-over order; gray lines: epoch boundaries)")
    bottom.legend(loc="upper right", fontsize=8)
    fig.tight_layout()
    fig.savefig(args.out, dpi=110)
    print(f"plot_timeline: {len(rows)} batches, p50 {p50:.2f} ms, p99 {p99:.2f} ms -> {args.out}")


if __name__ == "__main__":
    main()
