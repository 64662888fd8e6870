#!/usr/bin/env python3
"""Datasets read from a web server against the same shards on local disk:
one stoker-server over a local --data-root (the baseline, measured in the
same run), one over Debian's nginx on 127.0.0.1, and one over nginx behind a
proxy that adds 20 ms to every request. Each runs a cold epoch (the server
copies the shards into its cache as the session opens; streamed: each shard
is fetched when a read first needs it, --stream-shards) and a cached epoch;
images/s is counted over the whole stoker-bench run, open included. Also
printed: the median bytes per request nginx served (goal: >= 4 MiB for
shards). Goals: cached >= 0.9x local; with 20 ms cold >= 0.8x.

Usage: storage_bench.py BUILD_DIR [IMAGES=1000]   (make bench runs it)
"""

import io
import os
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "tests"))
from storage_fixtures import FaultProxy, Nginx, Server  # noqa: E402
from testpki import Pki  # noqa: E402

BUILD = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else "build")
IMAGES = int(sys.argv[2]) if len(sys.argv) > 2 else 1000
PER_SHARD = 128
PIPELINE = "random_resized_crop(224), random_horizontal_flip(0.5)"


def make_shards(photos, out):
    files = sorted(os.path.join(d, f) for d, _, fs in os.walk(photos) for f in fs if f.endswith(".jpg"))[:IMAGES]
    os.makedirs(out)
    for start in range(0, len(files), PER_SHARD):
        with tarfile.open(os.path.join(out, f"train-{start // PER_SHARD:06d}.tar"), "w") as tar:
            for i in range(start, min(start + PER_SHARD, len(files))):
                for ext, data in (("jpg", open(files[i], "rb").read()), ("cls", str(i % 10).encode())):
                    info = tarfile.TarInfo(f"s{i:06d}.{ext}")
                    info.size = len(data)
                    tar.addfile(info, io.BytesIO(data))
    shards = (len(files) + PER_SHARD - 1) // PER_SHARD
    with open(os.path.join(out, "index.txt"), "w") as f:
        f.write(f"train-{{000000..{shards - 1:06d}}}.tar\n")
    return len(files), shards


def run_epoch(server, seed):
    t0 = time.monotonic()
    r = subprocess.run([os.path.join(BUILD, "client", "stoker-bench"), f"--servers={server.address}",
                        "--dataset=shards", "--batch-size=64", "--epochs=1", f"--seed={seed}", "--device=cpu",
                        "--metrics-port=-1", f"--pipeline={PIPELINE}"], capture_output=True, timeout=1200)
    if r.returncode != 0:
        raise SystemExit(f"stoker-bench failed: {r.stderr.decode()[-1500:]}")
    return time.monotonic() - t0


def median_request_bytes(access_log):
    sizes = []
    for line in open(access_log):
        if '"GET ' in line and "index.txt" not in line:
            parts = line.split('"')
            sizes.append(int(parts[2].split()[1]))  # status, then body bytes sent
    return statistics.median(sizes) if sizes else 0, len(sizes)


def main():
    photos = os.path.join(ROOT, ".bench", "photos-1000")
    subprocess.run([os.path.join(ROOT, "..", "shared", "bench", "photoset.sh"), photos, "1000"], check=True)
    work = tempfile.mkdtemp(prefix="storage-bench-")
    os.chmod(work, 0o755)
    data = os.path.join(work, "data")
    images, shards = make_shards(photos, os.path.join(data, "shards"))
    for d, _, fs in os.walk(data):  # the local baseline reads from the page cache, as a warm cache does
        for f in fs:
            open(os.path.join(d, f), "rb").read()
    nginx = Nginx(os.path.join(work, "nginx"), data, Pki(os.path.join(work, "pki")))
    proxy = FaultProxy(nginx.http, {})
    proxy.delay = 0.02
    rows = []
    try:
        for name, flags in (("local disk", [f"--data-root={data}"]),
                            ("nginx", [f"--data-root=http://127.0.0.1:{nginx.http}/",
                                       f"--cache-dir={work}/cache-nginx"]),
                            ("nginx + 20 ms", [f"--data-root=http://127.0.0.1:{proxy.port}/",
                                               f"--cache-dir={work}/cache-slow"]),
                            ("+ 20 ms, streamed", [f"--data-root=http://127.0.0.1:{proxy.port}/",
                                                   f"--cache-dir={work}/cache-streamed", "--stream-shards"])):
            server = Server(BUILD, work, name.replace(" ", "-").replace("+", ""), *flags)
            try:
                cold = run_epoch(server, 1)
                cached = run_epoch(server, 2)
            finally:
                server.stop()
            rows.append((name, images / cold, images / cached))
        median, gets = median_request_bytes(nginx.access_log)
    finally:
        proxy.stop()
        nginx.stop()
        shutil.rmtree(work, ignore_errors=True)
    base_cold, base_cached = rows[0][1], rows[0][2]
    print(f"\nstorage bench: {images} photos in {shards} shards of {PER_SHARD}, pipeline {PIPELINE}, "
          "one stoker-server (one worker per core), batches of 64, images/s over each whole stoker-bench run")
    print(f"{'data root':16} {'cold epoch':>12} {'vs local':>9} {'cached epoch':>13} {'vs local':>9}")
    for name, cold, cached in rows:
        print(f"{name:16} {cold:12.1f} {cold / base_cold:8.2f}x {cached:13.1f} {cached / base_cached:8.2f}x")
    print(f"nginx served {gets} ranged GETs of shards, median {median / 2**20:.2f} MiB per request "
          f"(goal >= 4 MiB)")
    print(f"goals: cached over nginx >= 0.9x local: {rows[1][2] / base_cached:.2f}x; "
          f"cold with 20 ms per request >= 0.8x local: {rows[2][1] / base_cold:.2f}x copied whole, "
          f"{rows[3][1] / base_cold:.2f}x streamed")


if __name__ == "__main__":
    main()
