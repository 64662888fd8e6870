#!/usr/bin/python3
"""How the client's scheduling scales with the number of servers.

32 stoker-server processes on 127.0.0.1, one worker each, each made slow
with the test-only per-sample delay (--test-sample-delay-ms, a sleep, so
the 2-core machine is not what limits them) on a tiny synthetic dataset:
what is measured is how well one client keeps many servers busy. First each
server's standalone rate (stoker-bench on it alone), then stoker-bench over
the first 2, 8 and 32 servers, each server getting about the same number of
samples. Prints, per count: images/s together, the sum of those servers'
standalone rates, the ratio (goal for 32: >= 0.9), and the client's CPU
time per batch (user + system, from the kernel's rusage of the stoker-bench
process). Writes the figures as JSON.

Usage: tests/bench/scale_servers.py [BUILD_DIR] [OUT_JSON]
  env: SCALE_SERVERS (32), SCALE_DELAY_MS (20), SCALE_SAMPLES_PER_SERVER (240)
"""
import json
import os
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from procs import stop_all  # noqa: E402

BUILD = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else "build")
OUT = sys.argv[2] if len(sys.argv) > 2 else f"{BUILD}/scale_servers.json"
SERVERS = int(os.environ.get("SCALE_SERVERS", 32))
DELAY_MS = int(os.environ.get("SCALE_DELAY_MS", 20))
PER_SERVER = int(os.environ.get("SCALE_SAMPLES_PER_SERVER", 240))
BATCH = 8
COUNTS = [n for n in (2, 8, 32) if n <= SERVERS] or [SERVERS]


def start_servers(work, procs):
    """Starts the servers, appending each process to `procs` (the caller
    stops them, also when one fails to start); returns their addresses."""
    addresses = []
    for i in range(SERVERS):
        log = open(f"{work}/server{i}.log", "w+")
        procs.append(subprocess.Popen(
            [f"{BUILD}/server/stoker-server", "--host=127.0.0.1", "--port=0", "--metrics-port=-1", f"--data-root={work}",
             "--workers=1", f"--test-sample-delay-ms={DELAY_MS}"], stdout=log, stderr=subprocess.STDOUT))
    for i in range(SERVERS):
        deadline = time.time() + 30
        while True:
            m = re.search(r"listening on (\S+)", open(f"{work}/server{i}.log").read())
            if m:
                addresses.append(m.group(1))
                break
            if time.time() > deadline or procs[i].poll() is not None:
                raise SystemExit(f"server {i} did not start: " + open(f"{work}/server{i}.log").read()[-1000:])
            time.sleep(0.05)
    return addresses


def bench(work, addresses, samples):
    """images/s (after one warm-up batch per server), batches, client CPU seconds."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    r = subprocess.run([f"{BUILD}/client/stoker-bench", "--servers=" + ",".join(addresses),
                        f"--dataset=synthetic:32x32:{samples}:4", f"--batch-size={BATCH}", "--pipeline=center_crop(24)",
                        "--epochs=1", "--device=none", "--metrics-port=-1", "--slowest=0",
                        # One client driving every server: what is measured
                        # is the scheduling over N servers, not the fan-out.
                        "--bounded-fanout=false",
                        f"--warmup-batches={len(addresses)}", f"--json={work}/run.json"],
                       capture_output=True, text=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if r.returncode != 0:
        raise SystemExit(f"stoker-bench failed: {r.stderr[-2000:]}")
    s = json.load(open(f"{work}/run.json"))
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return s["images_per_second"], s["batches"] + len(addresses), cpu


def main():
    work = tempfile.mkdtemp(prefix="stoker-scale-")
    procs = []
    try:
        addresses = start_servers(work, procs)
        print(f"{SERVERS} servers on 127.0.0.1, 1 worker each, {DELAY_MS} ms test delay per sample; batch {BATCH}; "
              f"{PER_SERVER} samples per server per run", flush=True)
        alone = []
        for a in addresses:
            rate, _, _ = bench(work, [a], PER_SERVER // 2)
            alone.append(rate)
        print(f"standalone images/s: min {min(alone):.1f}, median {sorted(alone)[len(alone) // 2]:.1f}, "
              f"max {max(alone):.1f}, sum {sum(alone):.1f}", flush=True)
        rows = []
        for n in COUNTS:
            rate, batches, cpu = bench(work, addresses[:n], PER_SERVER * n)
            expected = sum(alone[:n])
            rows.append({"servers": n, "images_per_second": rate, "sum_of_standalone": expected,
                         "ratio": rate / expected, "client_cpu_ms_per_batch": 1e3 * cpu / batches,
                         "client_cpu_seconds": cpu, "batches": batches})
            print(f"{n:3d} servers: {rate:8.1f} images/s together vs {expected:8.1f} summed standalone = "
                  f"{rate / expected:.2f}x; client CPU {1e3 * cpu / batches:.3f} ms per batch "
                  f"({cpu:.2f} s for {batches} batches)", flush=True)
        last = rows[-1]
        print(f"goal: {last['servers']} servers together >= 0.9x their summed standalone rates: "
              f"{'met' if last['ratio'] >= 0.9 else 'NOT met'} ({last['ratio']:.2f}x)")
        json.dump({"servers": SERVERS, "delay_ms": DELAY_MS, "batch_size": BATCH, "standalone": alone, "runs": rows},
                  open(OUT, "w"), indent=2)
        return 0 if last["ratio"] >= 0.9 else 1
    finally:
        stop_all(procs)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
