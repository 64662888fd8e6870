#!/usr/bin/python3
"""The C++ API (stoker/client.h over libstoker_client.so) against stoker-bench
(the C++ client inside the project) on the same server, measured in one run:
servers in cache mode `batch` (the transport and the client alone, no
decoding), uint8 NHWC on the CPU path, no training step. Each run is one
epoch of warmup + batches batches of 256 (a synthetic dataset of that size),
the warmup left out; one untimed run of each fills the servers' cache, then
three interleaved runs of each; the medians' ratio is printed (goal >= 0.97x).

Usage: tests/bench/cpp_api_bench.py [--build build] [--rounds 3] [--batches 30] [--json FILE]
"""
import argparse
import json
import re
import statistics
import subprocess
import sys
import tempfile

from python_loader_bench import start_server  # the same server, as the Python loader's benchmark starts it


def dataset(batches, warmup):
    return f"synthetic:500x375:{256 * (batches + warmup)}:10"


def bench_rate(build, server, batches, warmup):
    out = subprocess.run([f"{build}/client/stoker-bench", f"--servers={server}", f"--dataset={dataset(batches, warmup)}",
                          "--batch-size=256", "--cache-mode=batch", "--device=cpu", "--out-dtype=uint8",
                          "--layout=nhwc", "--metrics-port=-1", f"--warmup-batches={warmup}", "--epochs=1"],
                         capture_output=True, text=True, check=True).stdout
    return float(re.search(r"images/s\s+([\d.]+)", out.split("summary")[1]).group(1))


def api_rate(build, server, batches, warmup):
    out = subprocess.run([f"{build}/tests/stoker-cpp-api-bench", "--warmup", str(warmup), "--batches", str(batches),
                          f"servers={server}", f"dataset={dataset(batches, warmup)}", "batch_size=256", "cache_mode=batch",
                          "device=cpu", "dtype=uint8", "layout=nhwc", "metrics_port=-1"],
                         capture_output=True, text=True, check=True).stdout
    return float(re.search(r"images/s ([\d.e+]+)", out).group(1))


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--build", default="build")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--batches", type=int, default=30, help="timed batches of 256 per run")
    parser.add_argument("--warmup", type=int, default=3, help="untimed batches first")
    parser.add_argument("--json", default="")
    a = parser.parse_args()
    with tempfile.TemporaryDirectory() as work:
        proc, server = start_server(a.build, work, 2, f"{work}/server.log")
        try:
            bench, api = [], []
            bench_rate(a.build, server, a.batches, a.warmup)  # fills the cache
            api_rate(a.build, server, a.batches, a.warmup)
            for _ in range(a.rounds):
                bench.append(bench_rate(a.build, server, a.batches, a.warmup))
                api.append(api_rate(a.build, server, a.batches, a.warmup))
        finally:
            proc.terminate()
            proc.wait()
    result = {"stoker_bench_images_per_second": statistics.median(bench),
              "cpp_api_images_per_second": statistics.median(api),
              "ratio": statistics.median(api) / statistics.median(bench), "runs_bench": bench, "runs_api": api}
    print(f"stoker-bench {result['stoker_bench_images_per_second']:9.1f} images/s, C++ API "
          f"{result['cpp_api_images_per_second']:9.1f} images/s, ratio {result['ratio']:.3f} (goal >= 0.97)")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(result, f, indent=1)
    return 0 if result["ratio"] >= 0.97 else 1


if __name__ == "__main__":
    sys.exit(main())
