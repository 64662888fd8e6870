#!/usr/bin/env python3
"""Shuffle quality against store reads (issue 50): the global order, the
shard-aware order (shuffle="shards", several windows) and MosaicML
Streaming's py1e on the same shard layout, side by side.

Per order, over one epoch:
- shards/batch: the mean number of distinct shards a batch draws from (more
  is better mixing; the global order's is the ceiling);
- rank corr: Spearman's correlation between a sample's position in the
  epoch and its index in the dataset (0 is no trace of the stored order;
  shards hold related samples when they were written class by class);
- label runs: the mean length of runs of one class in the epoch when
  shards were written class by class (1 + 1/(classes-1) for a uniform
  shuffle);
- shard reads/pool: the shards a pool of N servers reads per epoch when
  each server reads a shard once for all its batches, relative to the
  dataset's shard count. The batches go to servers as the client sends
  them: the global order and py1e round-robin (they have no shard
  affinity), the shard-aware order by lane (client/batch_scheduler.cc,
  every batch to its lane's server: the ideal the scheduler's affinity
  metric reports against). Measured store bytes from a real pool are a
  separate benchmark.

The orders come from the client's own code (stoker._ext.epoch_order); py1e
from mosaicml-streaming (installed without its dependencies into the build's
venv by the project's set-up; only its shuffle module is loaded). Deterministic:
no timing, about 2 s, so it runs in make test as well (ctest
shard_order_quality), where a missing py1e fails it.

Usage: shard_order_bench.py BUILD [--json FILE]
"""

import argparse
import importlib
import importlib.util
import json
import os
import sys
import types
import warnings

import numpy as np


def load_py1e():
    """streaming.base.shuffle.py1e without running the package's __init__
    (which imports its cloud clients); None when it is not installed."""
    try:
        spec = importlib.util.find_spec("streaming")
    except (ImportError, ValueError):
        spec = None
    if spec is None or not spec.submodule_search_locations:
        return None
    root = list(spec.submodule_search_locations)[0]
    for name, path in (("streaming", root), ("streaming.base", os.path.join(root, "base")),
                       ("streaming.base.shuffle", os.path.join(root, "base", "shuffle"))):
        if name not in sys.modules:
            module = types.ModuleType(name)
            module.__path__ = [path]
            sys.modules[name] = module
    return importlib.import_module("streaming.base.shuffle.py1e").get_shuffle_py1e


def figures(order, shard_of, label_of, batch, lanes_of_batch, pool):
    n = len(order)
    full = n // batch * batch
    rows = shard_of[order[:full]].reshape(-1, batch)
    rows.sort(axis=1)
    distinct = 1 + (np.diff(rows, axis=1) != 0).sum(axis=1)
    position = np.arange(n, dtype=np.float64)
    corr = float(np.corrcoef(position, order.astype(np.float64))[0, 1])  # ranks are the values themselves
    labels = label_of[order]
    runs = n / (1 + int((labels[1:] != labels[:-1]).sum()))
    # Shards each server reads once: the set of (server, shard) pairs.
    batches = len(rows)
    server = lanes_of_batch % pool if lanes_of_batch is not None else np.arange(batches) % pool
    pairs = set()
    shard_rows = shard_of[order[:full]].reshape(-1, batch)
    for b in range(batches):
        s = int(server[b])
        for shard in np.unique(shard_rows[b]):
            pairs.add((s, int(shard)))
    shards = int(shard_of.max()) + 1
    return {"shards_per_batch": float(distinct.mean()), "rank_corr": corr, "label_run": runs,
            "pool_shard_reads": len(pairs) / shards}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("build")
    ap.add_argument("--json", default="", help="also write the figures here")
    args = ap.parse_args()
    sys.path.insert(0, os.path.join(os.path.abspath(args.build), "python"))
    from stoker import _stoker_ext as ext

    # ImageNet-like: 1,024 shards of 1,250 samples (1.28 M), written class by
    # class (1,000 classes).
    shards, per_shard, classes, batch, pool = 1024, 1250, 1000, 256, 4
    n = shards * per_shard
    sizes = [per_shard] * shards
    shard_of = np.repeat(np.arange(shards), per_shard)
    label_of = np.arange(n) * classes // n
    seed, epoch = 17, 3
    out = {"layout": {"shards": shards, "per_shard": per_shard, "classes": classes, "batch": batch, "pool": pool}}

    def ours(shuffle, window=0):
        order, lanes = ext.epoch_order(seed, epoch, n, batch, shuffle, sizes if shuffle == "shards" else [], window)
        return np.frombuffer(order, dtype=np.int64), np.frombuffer(lanes, dtype=np.int64)

    out["global"] = figures(ours("global")[0], shard_of, label_of, batch, None, pool)
    for window in (1, 4, 16):
        order, lanes = ours("shards", window)  # each batch's lane: the scheduler deals lanes over the servers
        out[f"shards(window={window})"] = figures(order, shard_of, label_of, batch, lanes, pool)
    py1e = load_py1e()
    if py1e is None:
        print("py1e: mosaicml-streaming is not installed (make pyenv installs it)")
        return 1
    else:
        for window in (1, 4, 16):
            block = window * per_shard
            with warnings.catch_warnings():  # "block smaller than shard size" at block = one shard: meant
                warnings.simplefilter("ignore")
                order = np.asarray(py1e(np.array(sizes, dtype=np.int64), 1, seed, epoch, block), dtype=np.int64)
            out[f"py1e(block={block})"] = figures(order, shard_of, label_of, batch, None, pool)
    print(f"one epoch of {n} samples in {shards} shards of {per_shard}, written class by class ({classes} classes); "
          f"batches of {batch}; a pool of {pool} servers")
    print(f"  {'order':<22} {'shards/batch':>12} {'rank corr':>10} {'label run':>10} {'shard reads/pool':>17}")
    for name, f in out.items():
        if name == "layout":
            continue
        print(f"  {name:<22} {f['shards_per_batch']:12.1f} {f['rank_corr']:10.4f} {f['label_run']:10.2f} "
              f"{f['pool_shard_reads']:16.2f}x")
    base = out["global"]["pool_shard_reads"]
    for window in (1, 4, 16):
        f = out[f"shards(window={window})"]
        print(f"  shards(window={window}) against global: shard reads {f['pool_shard_reads'] / base:.3f}x, "
              f"shards per batch {f['shards_per_batch'] / out['global']['shards_per_batch']:.3f}x")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(out, fh, indent=1)
    # What must hold (the bench is deterministic): the shard-aware order
    # reads each shard about once per pool, the global order about once per
    # server, and mixing grows with the window.
    g = out["global"]
    w1, w4, w16 = (out[f"shards(window={w})"] for w in (1, 4, 16))
    ok = (w4["pool_shard_reads"] <= 1.1 and g["pool_shard_reads"] >= 0.9 * pool and
          w1["shards_per_batch"] <= w4["shards_per_batch"] <= w16["shards_per_batch"] <= g["shards_per_batch"] and
          abs(g["rank_corr"]) < 0.05)
    print("checks: " + ("passed" if ok else "FAILED"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
