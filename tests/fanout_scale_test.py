#!/usr/bin/env python3
"""Bounded fan-out with real processes on 127.0.0.1 (no other address is
used): 64 stoker-bench ranks of one job against 4 and then 16 one-worker
stoker-servers (a test delay per sample). The ranks consume more slowly than
the pool supplies, so each fills its prefetch.

Checks, for 16 servers against 4: the streams a rank opens and its peak
resident memory do not grow with the pool (within 10 %), streams per server
stay within 2.5x their mean, and each epoch delivers every sample exactly once
over the 64 ranks. Without bounded fan-out a rank would stream from all 16
servers (32 streams) and prefetch 2 x window x 16 batches.

Usage: fanout_scale_test.py BUILD_DIR [RANKS]. Exits 1 on any failure.
"""
import collections
import json
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from procs import Procs  # noqa: E402

BUILD = os.path.abspath(sys.argv[1])
RANKS = int(sys.argv[2]) if len(sys.argv) > 2 else 64
BATCH, PER_RANK = 4, 24  # batches of 4, 24 batches a rank
SAMPLES = RANKS * BATCH * PER_RANK
# More stoker-bench flags, e.g. --bounded-fanout=false to see the checks fail
# without the feature.
EXTRA = os.environ.get("STOKER_FANOUT_BENCH_FLAGS", "").split()
DATASET = f"synthetic:48x48:{SAMPLES}"
failures = []


def check(name, ok, detail=""):
    print(f"{'ok' if ok else 'FAIL'}: {name} {detail}", flush=True)
    if not ok:
        failures.append(name)


def run(procs, servers, tmp, label):
    """The 64 ranks against `servers`; per-rank summaries and the batches."""
    ranks = []
    for r in range(RANKS):
        log, summary = f"{tmp}/{label}-{r}.jsonl", f"{tmp}/{label}-{r}.json"
        # 224x224 crops of 48x48 images (padded): 600 KB a batch, so that a
        # deep prefetch shows in the resident memory.
        p, out = procs.bench(f"--servers={','.join(servers)}", f"--dataset={DATASET}", f"--batch-size={BATCH}",
                             "--pipeline=center_crop(224)", f"--rank={r}", f"--world-size={RANKS}", "--epochs=1",
                             "--step-ms=200", "--device=none", f"--log-batches={log}", f"--json={summary}",
                             "--job=fanout-scale",
                             # 64 ranks connecting at once on a small machine
                             # (CI's has 2 cores) can take longer than 10 s.
                             "--connect-timeout-seconds=60", *EXTRA, name=f"{label}-rank{r}")
        ranks.append((p, out, log, summary))
    deadline = time.time() + 240
    for p, out, _, _ in ranks:
        try:
            p.wait(timeout=max(1, deadline - time.time()))
        except Exception:  # noqa: BLE001 - a hung rank is a failure, reported below
            p.kill()
            p.wait()
    ok = all(p.returncode == 0 for p, _, _, _ in ranks)
    bad = [open(out).read()[-2000:] for p, out, _, _ in ranks if p.returncode != 0]
    check(f"{label}: all {RANKS} ranks finish", ok, bad[0] if bad else "")
    summaries, seen = [], collections.Counter()
    streams_per_server = collections.Counter()
    for _, _, log, summary in ranks:
        if not os.path.exists(summary):
            continue
        summaries.append(json.load(open(summary)))
        used = set()
        for line in open(log):
            b = json.loads(line)
            seen.update(b["sample_indices"])
            used.add(b["server"])
        for s in used:
            streams_per_server[s] += 1
    check(f"{label}: every sample exactly once over the ranks",
          len(seen) == SAMPLES and set(seen.values()) == {1},
          f"({len(seen)} of {SAMPLES} samples, {sum(v > 1 for v in seen.values())} more than once)")
    return summaries, streams_per_server


def mean(xs):
    return sum(xs) / max(1, len(xs))


def main():
    tmp = tempfile.mkdtemp(prefix="stoker-fanout-scale-")
    procs = Procs(tmp, BUILD)
    try:
        # Each pool is fresh: a server reports the capacity it measured under
        # the load it has had, and the 4 that served the first run would
        # report theirs, not the 16-server run's (the ranks weigh servers by
        # it, so those 4 would draw about twice their share).
        servers = [procs.server(tmp, "--test-sample-delay-ms=1")[0] for _ in range(20)]
        results = {}
        for label, pool in (("4 servers", servers[:4]), ("16 servers", servers[4:])):
            summaries, per_server = run(procs, pool, tmp, label.replace(" ", "-"))
            streams = mean([s["streams_opened"] for s in summaries])
            rss = mean([s["max_rss_bytes"] for s in summaries])
            depth = max([s["prefetch_batches"] for s in summaries] or [0])
            spread = max(per_server.values()) / mean(list(per_server.values())) if per_server else 0
            print(f"{label}: streams opened per rank {streams:.1f}, servers used per rank "
                  f"{mean([s['servers_in_use'] for s in summaries]):.1f}, peak RSS per rank {rss / 2**20:.1f} MiB, "
                  f"prefetch depth at most {depth}, ranks per server max/mean {spread:.2f} "
                  f"({len(per_server)} servers used)", flush=True)
            print(f"{label}: ranks per server {sorted(per_server.values(), reverse=True)}", flush=True)
            results[label] = (mean([2 * s["servers_in_use"] for s in summaries]), rss, spread)
        s4, r4, _ = results["4 servers"]
        s16, r16, spread16 = results["16 servers"]
        check("streams per rank at the end do not grow with the pool (16 against 4 servers, within 10 %)",
              s16 <= 1.1 * s4, f"({s16:.1f} against {s4:.1f})")
        check("peak RSS per rank does not grow with the pool (within 10 %)", r16 <= 1.1 * r4,
              f"({r16 / 2**20:.1f} MiB against {r4 / 2**20:.1f} MiB)")
        # 64 ranks choosing 2 of 16 equal servers at random: the busiest gets
        # more than 2x the mean in about 3 % of runs, more than 2.5x in 0.1 %.
        check("ranks per server within 2.5x of their mean (16 servers)", spread16 <= 2.5, f"({spread16:.2f})")
    finally:
        procs.stop()
    if failures:
        print(f"{len(failures)} checks failed: {failures}")
        sys.exit(1)
    print("all checks passed")


if __name__ == "__main__":
    main()
