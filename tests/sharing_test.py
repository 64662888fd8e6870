#!/usr/bin/env python3
"""One server pool for many jobs, with real stoker-server and stoker-bench
processes on 127.0.0.1 (no other address is used):

- fair share: two jobs whose samples cost about 4x apart, both wanting more
  than one worker gives, each get 45-55 % of the worker time over a window
  (from the server's stoker_server_job_worker_seconds_total); with weights
  3:1 the split follows within 10 points;
- admission: a server full of another job (--max-sessions 1, or
  --max-streams 2) turns a new job away with RESOURCE_EXHAUSTED; the client
  counts it as full and finishes its epoch exactly once on the other server;
- batch cache: four identical jobs on one server get batches byte-identical
  to a single job's on a server without the cache, and the server decodes
  each sample once (--batch-cache-bytes); without the cache, four times.

Usage: sharing_test.py SOURCE_DIR BUILD_DIR. Exits 1 on any failure.
"""
import json
import os
import re
import subprocess
import sys
import tempfile
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from procs import Procs  # noqa: E402

ROOT, BUILD = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
MAKE_IMAGES = f"{BUILD}/tests/stoker-make-images"
failures = []


def check(name, ok, detail=""):
    print(f"{'ok' if ok else 'FAIL'}: {name} {detail}", flush=True)
    if not ok:
        failures.append(name)


def scrape(port):
    """{(name, frozenset(labels)): value} from a /metrics page."""
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
    out = {}
    for line in text.splitlines():
        m = re.match(r"^([a-z_:]+)(\{(.*)\})? ([-+0-9.eE]+|NaN)$", line)
        if m:
            labels = frozenset(re.findall(r'(\w+)="([^"]*)"', m.group(3) or ""))
            out[(m.group(1), labels)] = float(m.group(4))
    return out


def metric(page, name, **labels):
    return page.get((name, frozenset(labels.items())), 0.0)


def fair_share(tmp):
    # Synthetic JPEGs: a 640x640 one costs about four times a 160x160 one to
    # decode; both are cropped to the same size.
    cheap = ["--dataset=synthetic:160x160:1000000", "--pipeline=center_crop(128)"]
    dear = ["--dataset=synthetic:640x640:1000000", "--pipeline=center_crop(128)"]
    for weights, low, high in (((1, 1), 0.45, 0.55), ((3, 1), 0.65, 0.85)):
        procs = Procs(tmp, BUILD)
        try:
            address, metrics_port, _ = procs.server(tmp)
            common = [f"--servers={address}", "--batch-size=16", "--epochs=1", "--device=cpu", "--out-dtype=uint8"]
            procs.bench(*common, *cheap, "--job=cheap", f"--weight={weights[0]}", name="cheap")
            procs.bench(*common, *dear, "--job=dear", f"--weight={weights[1]}", name="dear")
            time.sleep(3)  # both streaming, the share settled
            before = scrape(metrics_port)
            time.sleep(6)
            after = scrape(metrics_port)
        finally:
            procs.stop()

        def delta(name, job):
            return metric(after, name, job=job) - metric(before, name, job=job)

        seconds = {j: delta("stoker_server_job_worker_seconds_total", j) for j in ("cheap", "dear")}
        samples = {j: delta("stoker_server_job_samples_total", j) for j in ("cheap", "dear")}
        total = seconds["cheap"] + seconds["dear"]
        share = seconds["cheap"] / total if total else 0
        cost = {j: seconds[j] / samples[j] if samples[j] else 0 for j in seconds}
        ratio = cost["dear"] / cost["cheap"] if cost["cheap"] else 0
        detail = (f"(weights {weights[0]}:{weights[1]}: cheap job {100 * share:.1f} % of {total:.2f} worker-s; "
                  f"per sample {1e3 * cost['cheap']:.2f} vs {1e3 * cost['dear']:.2f} ms = {ratio:.1f}x; "
                  f"samples {samples['cheap']:.0f} vs {samples['dear']:.0f})")
        check(f"fair share {weights[0]}:{weights[1]} within {100 * low:.0f}-{100 * high:.0f} %",
              low <= share <= high, detail)
        check(f"fair share {weights[0]}:{weights[1]}: the jobs' samples differ >= 3x in cost", ratio >= 3, detail)
        check(f"fair share {weights[0]}:{weights[1]}: the worker was busy", total > 4.5, detail)


def read_log(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def admission(tmp):
    for limit in ("--max-sessions=1", "--max-streams=2"):
        procs = Procs(tmp, BUILD)
        try:
            full, full_metrics, _ = procs.server(tmp, limit)
            other, _, _ = procs.server(tmp)
            dataset = "--dataset=synthetic:64x64:512"
            # The holder: a long job with both its streams on the full server.
            holder, _ = procs.bench(f"--servers={full}", dataset, "--job=holder", "--batch-size=16",
                                    "--epochs=1000", "--step-ms=20", name="holder")
            time.sleep(2)  # its streams open and take the server's room
            log = os.path.join(tmp, "newcomer.jsonl")
            p, out = procs.bench(f"--servers={full},{other}", dataset, "--job=newcomer", "--batch-size=16",
                                 "--epochs=1", f"--log-batches={log}", "--unavailable-timeout-seconds=20",
                                 name="newcomer")
            code = p.wait(timeout=120)
            text = open(out).read()
            lines = read_log(log) if os.path.exists(log) else []
            producers = {l["server"] for l in lines}
            indices = sorted(i for l in lines for i in l["sample_indices"])
            refusals = metric(scrape(full_metrics), "stoker_server_full_refusals_total")
            check(f"{limit}: the newcomer finishes its epoch", code == 0, f"(exit {code})" + ("" if code == 0 else text[-2000:]))
            check(f"{limit}: exactly once, all on the other server", indices == list(range(512)) and producers == {other},
                  f"({len(lines)} batches from {sorted(producers)})")
            check(f"{limit}: the full server refused streams and the client said it was full",
                  refusals > 0 and "is full" in text, f"({refusals:.0f} refusals)")
            check(f"{limit}: the holder kept streaming", holder.poll() is None)
        finally:
            procs.stop()


def batch_cache(tmp):
    images = os.path.join(tmp, "images")
    subprocess.run([MAKE_IMAGES, f"--out={images}/ds", "--classes=2", "--per_class=32", "--min_side=100",
                    "--max_side=200"], check=True, stdout=subprocess.DEVNULL)
    args = ["--dataset=ds", "--batch-size=8", "--epochs=2", "--seed=3",
            "--pipeline=random_resized_crop(64), random_horizontal_flip(0.5)", "--device=cpu", "--out-dtype=uint8"]
    samples_per_run = 64 * 2

    def hashes(log):
        return {(l["epoch"], l["batch"]): l["hash"] for l in read_log(log)}

    procs = Procs(tmp, BUILD)
    try:
        reference, _, _ = procs.server(images)
        log = os.path.join(tmp, "single.jsonl")
        p, _ = procs.bench(f"--servers={reference}", *args, f"--log-batches={log}", name="single")
        p.wait(timeout=120)
        single = hashes(log)
        for cache_bytes, expected in ((1 << 30, samples_per_run), (0, 4 * samples_per_run)):
            address, metrics_port, _ = procs.server(images, f"--batch-cache-bytes={cache_bytes}")
            runs = []
            for i in range(4):
                log = os.path.join(tmp, f"cache{cache_bytes}-{i}.jsonl")
                p, out = procs.bench(f"--servers={address}", *args, f"--job=sweep-{i}", f"--log-batches={log}",
                                     name=f"sweep{i}")
                runs.append((p, log, out))
            codes = [p.wait(timeout=120) for p, _, _ in runs]
            page = scrape(metrics_port)
            made = metric(page, "stoker_server_samples_total")
            lookups = {r: metric(page, "stoker_server_batch_cache_lookups_total", result=r)
                       for r in ("hit", "joined", "miss")}
            label = "cache on" if cache_bytes else "cache off"
            check(f"{label}: four identical jobs finish", codes == [0] * 4, f"(exits {codes})")
            identical = all(hashes(log) == single for _, log, _ in runs)
            check(f"{label}: every job's batches byte-identical to a single job's", identical and len(single) == 16,
                  f"({len(single)} batches)")
            check(f"{label}: samples decoded {made:.0f}, expected {expected}", made == expected,
                  f"(lookups {lookups})")
            if cache_bytes:
                check("cache on: one miss per batch, the other jobs' asks hit or joined",
                      lookups["miss"] == 16 and lookups["hit"] + lookups["joined"] == 48, f"({lookups})")
    finally:
        procs.stop()


def main():
    with tempfile.TemporaryDirectory(prefix="stoker-sharing-") as tmp:
        for scenario in [globals()[n] for n in (sys.argv[3:] or ['fair_share', 'admission', 'batch_cache'])]:
            print(f"--- {scenario.__name__}", flush=True)
            try:
                scenario(tmp)
            except Exception as e:  # a scenario that could not run is a failure, named
                check(f"{scenario.__name__} ran", False, f"({type(e).__name__}: {e})")
    print(f"{len(failures)} failure(s)" if failures else "all sharing scenarios passed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
