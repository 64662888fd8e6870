#!/usr/bin/env python3
"""Benchmarks for one pool shared by many jobs and for local mode, each a
ratio against a baseline measured in the same run (real stoker-server and
stoker-bench processes on 127.0.0.1):

1. Batch cache: four identical jobs on one server (1 worker, made the limit
   with --test-sample-delay-ms so that the four clients are not) against one
   job alone: total images/s with --batch-cache-bytes (goal >= 3x) and
   without (expected <= 1.1x: the jobs split one worker).
2. Local mode on the standard photo set (real decoding): the client's own
   worker alone, one server worker alone, and both together (goal: together
   >= 0.9x the sum). The same with the work replaced by the test delay
   (sleep) shows the scheduling alone, without the two producers and the
   client competing for this machine's two cores.

Usage: sharing_bench.py BUILD_DIR [PHOTO_DIR]
  PHOTO_DIR: the standard set (../shared/bench/photoset.sh); default
  .bench/photos-1000, made with photoset.sh if missing.
Prints a table and writes BUILD_DIR/sharing_bench.json.
"""
import json
import os
import signal
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from logwait import wait_for  # noqa: E402

BUILD = os.path.abspath(sys.argv[1])
PHOTOS = os.path.abspath(sys.argv[2] if len(sys.argv) > 2 else ".bench/photos-1000")
SERVER = f"{BUILD}/server/stoker-server"
BENCH = f"{BUILD}/client/stoker-bench"
ROUNDS = 3  # medians of interleaved rounds


def median(xs):
    xs = sorted(xs)
    return xs[len(xs) // 2]


def start_server(work, name, *extra):
    log = f"{work}/{name}.log"
    p = subprocess.Popen([SERVER, "--host=127.0.0.1", "--port=0", "--metrics-port=-1", "--workers=1", *extra],
                         stdout=open(log, "w"), stderr=subprocess.STDOUT)
    m = wait_for(log, r"listening on [\d.]+:(\d+)", 20)
    if not m:
        p.kill()
        raise SystemExit(f"server did not start: {open(log).read()[-1000:]}")
    return p, f"127.0.0.1:{m.group(1)}"


def bench_cmd(work, name, *args):
    return [BENCH, "--metrics-port=-1", "--device=none", "--slowest=0", f"--json={work}/{name}.json", *args]


def rate(work, name):
    return json.load(open(f"{work}/{name}.json"))["images_per_second"]


def run(cmds, work):
    """Runs the commands together; the sum of their images/s."""
    procs = [(name, subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=open(f"{work}/{name}.err", "w")))
             for name, cmd in cmds]
    total = 0.0
    for name, p in procs:
        if p.wait(timeout=600) != 0:
            raise SystemExit(f"{name} failed: {open(f'{work}/{name}.err').read()[-2000:]}")
        total += rate(work, name)
    return total


def cache_bench(work, results):
    common = ["--dataset=synthetic:256x256:1024", "--pipeline=center_crop(224)", "--batch-size=16", "--epochs=2",
              "--seed=7", "--warmup-batches=2"]
    servers = []
    try:
        for label, extra in (("on", ["--batch-cache-bytes=4294967296"]), ("off", [])):
            p, address = start_server(work, f"cache-{label}", "--test-sample-delay-ms=4", "--data-root=/", *extra)
            servers.append(p)
            singles, fours = [], []
            for r in range(ROUNDS):
                # A fresh seed each round: nothing of an earlier round is cached.
                seed = [f"--seed={100 * r + (1 if label == 'on' else 2)}"]
                singles.append(run([("single", bench_cmd(work, "single", f"--servers={address}", *common, *seed,
                                                         "--job=alone"))], work))
                seed = [f"--seed={100 * r + 50 + (1 if label == 'on' else 2)}"]
                fours.append(run([(f"sweep{i}", bench_cmd(work, f"sweep{i}", f"--servers={address}", *common, *seed,
                                                          f"--job=sweep-{i}")) for i in range(4)], work))
            one, four = median(singles), median(fours)
            results[f"cache_{label}"] = {"one_job_images_per_second": one, "four_jobs_images_per_second": four,
                                         "ratio": four / one}
            print(f"batch cache {label:3}: one job {one:8.1f} images/s; four identical jobs together {four:8.1f} "
                  f"({four / one:.2f}x; goal {'>= 3x' if label == 'on' else '<= 1.1x'})", flush=True)
    finally:
        for p in servers:
            p.send_signal(signal.SIGTERM)
            p.wait()


def local_bench(work, results, label, server_extra, local_extra, dataset, data_root, pipeline):
    common = [f"--dataset={dataset}", f"--pipeline={pipeline}", "--batch-size=32", "--epochs=1",
              "--warmup-batches=2"]
    p, address = start_server(work, f"local-{label}", f"--data-root={data_root}", *server_extra)
    try:
        rows = {"local": [], "remote": [], "both": []}
        for _ in range(ROUNDS):
            rows["local"].append(run([("local", bench_cmd(work, "local", "--local-workers=1",
                                                          f"--data-root={data_root}", *local_extra, *common))], work))
            rows["remote"].append(run([("remote", bench_cmd(work, "remote", f"--servers={address}", *common))], work))
            rows["both"].append(run([("both", bench_cmd(work, "both", f"--servers={address}", "--local-workers=1",
                                                        f"--data-root={data_root}", *local_extra, *common))], work))
    finally:
        p.send_signal(signal.SIGTERM)
        p.wait()
    local, remote, both = (median(rows[k]) for k in ("local", "remote", "both"))
    results[f"local_{label}"] = {"local": local, "remote": remote, "both": both, "ratio": both / (local + remote)}
    print(f"local mode, {label:14}: local worker {local:8.1f}, one server worker {remote:8.1f}, both {both:8.1f} "
          f"images/s = {both / (local + remote):.2f}x the sum (goal >= 0.9x)", flush=True)


def main():
    if not os.path.isdir(PHOTOS):
        subprocess.run(["bash", os.path.join(os.path.dirname(__file__), "../../../shared/bench/photoset.sh"),
                        PHOTOS, "1000"], check=True)
    work = tempfile.mkdtemp(prefix="stoker-sharing-bench-")
    results = {}
    print(f"medians of {ROUNDS} rounds; stoker-bench --device=none (the training side costs nothing)", flush=True)
    cache_bench(work, results)
    photo_root, photo_set = os.path.dirname(PHOTOS), os.path.basename(PHOTOS)
    local_bench(work, results, "photos (real)", [], [], photo_set, photo_root,
                "random_resized_crop(224), random_horizontal_flip(0.5)")
    local_bench(work, results, "test delay", ["--test-sample-delay-ms=8"], ["--test-local-delay-ms=8"],
                "synthetic:64x64:2048", "/", "center_crop(56)")
    with open(f"{BUILD}/sharing_bench.json", "w") as f:
        json.dump(results, f, indent=2)
    print(f"wrote {BUILD}/sharing_bench.json")


if __name__ == "__main__":
    main()
