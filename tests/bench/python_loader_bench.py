#!/usr/bin/python3
"""The Python loader against its baselines, measured in one run.

1. Overhead: stoker.Loader against stoker-bench (C++) on the same servers,
   uint8 and bfloat16 outputs, servers in cache mode `batch` (the transport
   and the client alone, no decoding), no training step. Three interleaved
   runs of each; the medians' ratio is printed (goal >= 0.95x), with the
   loader's own time per batch in microseconds.
2. A training loop with the same simulated step fed by
   torch.utils.data.DataLoader (torchvision ImageFolder, RandomResizedCrop(224)
   + flip + ToTensor + Normalize, one worker per core) and by stoker.Loader
   (a local stoker-server with one worker thread per core, float32 on the
   CPU path), on the standard photo set: images/s and starved %.

Usage: tests/bench/python_loader_bench.py [--build build] [--images 500] [--json FILE]
Run with Debian's /usr/bin/python3 after `make build`.
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


def start_server(build, data_root, workers, log):
    proc = subprocess.Popen([f"{build}/server/stoker-server", "--host=127.0.0.1", "--port=0", "--metrics-port=-1",
                             f"--workers={workers}", f"--data-root={data_root}"],
                            stdout=open(log, "w"), stderr=subprocess.STDOUT)
    for _ in range(300):
        m = re.search(r"listening on ([\d.]+:\d+)", open(log).read())
        if m:
            return proc, m.group(1)
        time.sleep(0.05)
    proc.kill()
    raise RuntimeError(open(log).read())


def bench_rate(build, server, dtype, batches, warmup):
    out = subprocess.run([f"{build}/client/stoker-bench", f"--servers={server}", "--dataset=synthetic:500x375:4096:10",
                          "--batch-size=256", "--cache-mode=batch", "--device=cpu", f"--out-dtype={dtype}",
                          "--normalize=true", "--layout=nhwc", "--metrics-port=-1", f"--max-batches={batches}",
                          f"--warmup-batches={warmup}", "--epochs=1"],
                         capture_output=True, text=True, check=True).stdout
    return float(re.search(r"images/s\s+([\d.]+)", out.split("summary")[1]).group(1))


def loader_rate(stoker, server, dtype, batches, warmup):
    loader = stoker.Loader(servers=server, dataset="synthetic:500x375:4096:10", batch_size=256, cache_mode="batch",
                           device="cpu", dtype=dtype, layout="nchw")
    done, start, images = 0, None, 0
    for _, labels in loader:
        done += 1
        if done == warmup:
            start = time.perf_counter()
        elif done > warmup:
            images += len(labels)
        if done == warmup + batches:
            break
    seconds = time.perf_counter() - start
    overhead = loader.stats()["python_overhead_us_per_batch"]
    loader.close()
    return images / seconds, overhead


def overhead_part(build, stoker, work, rounds=3, batches=30, warmup=3):
    proc, server = start_server(build, work, 2, f"{work}/server-overhead.log")
    results = {}
    try:
        for dtype in ("uint8", "bfloat16"):
            b, p, us = [], [], []
            for _ in range(rounds):
                b.append(bench_rate(build, server, dtype, batches, warmup))
                rate, overhead = loader_rate(stoker, server, dtype, batches, warmup)
                p.append(rate)
                us.append(overhead)
            results[dtype] = {"stoker_bench_images_per_second": statistics.median(b),
                              "python_loader_images_per_second": statistics.median(p),
                              "ratio": statistics.median(p) / statistics.median(b),
                              "python_overhead_us_per_batch": statistics.median(us),
                              "runs_bench": b, "runs_python": p}
            r = results[dtype]
            print(f"{dtype:>9}: stoker-bench {r['stoker_bench_images_per_second']:9.1f} images/s, "
                  f"stoker.Loader {r['python_loader_images_per_second']:9.1f} images/s, "
                  f"ratio {r['ratio']:.3f}, loader overhead {r['python_overhead_us_per_batch']:.1f} us/batch",
                  flush=True)
    finally:
        proc.terminate()
        proc.wait()
    return results


def training_loop(batches, step_s, warmup=3):
    """Runs `step_s` of simulated training per batch; returns (images/s, starved %)."""
    waited, images, start = 0.0, 0, None
    it = iter(batches)
    n = 0
    while True:
        t0 = time.perf_counter()
        try:
            x, y = next(it)
        except StopIteration:
            break
        t1 = time.perf_counter()
        n += 1
        if n == warmup:
            start = t1
        elif n > warmup:
            waited += t1 - t0
            images += len(y)
        time.sleep(step_s)
    wall = time.perf_counter() - start
    return images / wall, 100 * waited / wall


def side_by_side_part(build, stoker, photos, step_ms, batch_size):
    import torch
    import torchvision
    from torchvision import transforms as T

    cores = os.cpu_count()
    ops = T.Compose([T.RandomResizedCrop(224), T.RandomHorizontalFlip(), T.ToTensor(),
                     T.Normalize(mean=[0.485, 0.456, 0.406], std=[0.229, 0.224, 0.225])])
    dataset = torchvision.datasets.ImageFolder(photos, transform=ops)
    dl = torch.utils.data.DataLoader(dataset, batch_size=batch_size, shuffle=True, num_workers=cores, drop_last=True)
    tv_rate, tv_starved = training_loop(dl, step_ms / 1000)
    print(f"DataLoader ({cores} workers): {tv_rate:8.1f} images/s, starved {tv_starved:5.1f}%", flush=True)
    proc, server = start_server(build, os.path.dirname(photos), cores, f"{photos}-server.log")
    try:
        loader = stoker.Loader(servers=server, dataset=os.path.basename(photos), batch_size=batch_size, seed=1,
                               drop_last=True, device="cpu", dtype=torch.float32)
        st_rate, st_starved = training_loop(loader, step_ms / 1000)
        loader.close()
    finally:
        proc.terminate()
        proc.wait()
    print(f"stoker.Loader ({cores} server workers): {st_rate:8.1f} images/s, starved {st_starved:5.1f}%", flush=True)
    return {"step_ms": step_ms, "batch_size": batch_size,
            "dataloader": {"workers": cores, "images_per_second": tv_rate, "starved_percent": tv_starved},
            "stoker": {"server_workers": cores, "images_per_second": st_rate, "starved_percent": st_starved},
            "ratio_images_per_second": st_rate / tv_rate}


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--build", default=os.path.join(ROOT, "build"))
    p.add_argument("--images", type=int, default=500, help="size of the standard photo set")
    p.add_argument("--step-ms", type=float, default=50, help="simulated training step, milliseconds")
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--json", help="write the figures here")
    args = p.parse_args()
    sys.path.insert(0, os.path.join(args.build, "python"))
    os.environ.setdefault("STOKER_LOG_LEVEL", "1")
    import stoker

    with tempfile.TemporaryDirectory() as work:
        print("== 1. stoker.Loader vs stoker-bench (same servers, cache mode batch, 256 x 224x224 on the CPU path)",
              flush=True)
        overhead = overhead_part(args.build, stoker, work)
    photos = os.path.join(ROOT, ".bench", f"photos-{args.images}")
    print(f"== 2. training loop, {args.step_ms:.0f} ms step: DataLoader vs stoker.Loader on {photos}", flush=True)
    subprocess.run([os.path.join(ROOT, "..", "shared", "bench", "photoset.sh"), photos, str(args.images)], check=True)
    side = side_by_side_part(args.build, stoker, photos, args.step_ms, args.batch_size)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"overhead": overhead, "training_loop": side}, f, indent=2)


if __name__ == "__main__":
    main()
