#!/usr/bin/python3
"""Stoker across hosts: real stoker-server processes on two or three hosts
and stoker-bench on a trainer host, each host a network namespace on a
bridge (netcluster.py), the client finding the servers by a DNS name from
the hosts file the harness controls (dns:///data:50051).

Scenarios, each asserting exactly-once delivery (every sample of every
epoch once, from --log-batches) and printing its figures:
  epoch       two servers serve whole epochs
  link_cut    a server's cable is pulled mid-epoch (no FIN): its batches go
              to the others within seconds; plugged back, it gets work
              again within 5 s
  join        a host added to the name gets work
  network     the trainer's link (tc) is the limit: verdict `network`
  server_cpu  slow servers are the limit: verdict `server_cpu`

Skips (exit 77, reason printed) where namespaces cannot be made (no root).
Usage: cluster_test.py BUILD_DIR
"""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import netcluster  # noqa: E402
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from logwait import wait_for  # noqa: E402

BUILD = os.path.abspath(sys.argv[1])
SERVER = f"{BUILD}/server/stoker-server"
BENCH = f"{BUILD}/client/stoker-bench"
MAKE_IMAGES = f"{BUILD}/tests/stoker-make-images"
SAMPLES = 512  # 8 classes x 64
PORT = 50051
results = []


def record(name, ok, detail=""):
    results.append(ok)
    print(f"{'ok' if ok else 'FAIL'}: {name}" + (f" {detail}" if detail else ""), flush=True)
    return ok


def batches(log):
    out = []
    try:
        with open(log) as f:
            for line in f:
                if line.strip():
                    out.append(json.loads(line))
    except FileNotFoundError:
        pass
    return out


class Run:
    """A cluster, its servers and one stoker-bench run on host `trainer`."""

    def __init__(self, cluster, work, data):
        self.c, self.work, self.data = cluster, work, data
        self.log = f"{work}/batches.jsonl"
        self.out = f"{work}/bench.out"
        self.bench = None

    def server(self, host, args):
        out = f"{self.work}/{host}.out"
        self.c.popen(host, [SERVER, "--host=0.0.0.0", f"--port={PORT}", "--metrics-port=-1",
                            f"--data-root={self.data}"] + args,
                     stdout=open(out, "w"), stderr=open(f"{self.work}/{host}.err", "w"))
        if not wait_for(out, r"listening on", 20):
            raise RuntimeError(f"stoker-server on {host} did not start: "
                               + open(f"{self.work}/{host}.err").read()[-1500:])

    def start_bench(self, args):
        self.bench = self.c.popen(
            "trainer", [BENCH, f"--servers=dns:///data:{PORT}", "--resolve-interval-seconds=1", "--dataset=ds",
                        f"--log-batches={self.log}", f"--json={self.work}/summary.json", "--device=none",
                        "--metrics-port=-1", "--slowest=0", "--connect-timeout-seconds=5"] + args,
            stdout=open(self.out, "w"), stderr=open(f"{self.work}/bench.err", "w"))

    def wait_bench(self, timeout=240):
        try:
            rc = self.bench.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.bench.kill()
            rc = "timeout"
        if rc != 0:
            raise RuntimeError(f"stoker-bench exit {rc}: " + open(f"{self.work}/bench.err").read()[-2000:])
        return open(self.out).read()

    def wait_batches(self, n, timeout=60):
        deadline = time.time() + timeout
        while time.time() < deadline:
            b = batches(self.log)
            if len(b) >= n:
                return b
            if self.bench.poll() is not None:
                break
            time.sleep(0.05)
        raise RuntimeError(f"fewer than {n} batches within {timeout} s: "
                           + open(f"{self.work}/bench.err").read()[-1500:])

    def server_of(self, host):
        return f"{self.c.addr(host)}:{PORT}"


def exactly_once(name, log, epochs):
    b = batches(log)
    bad = []
    for e in range(epochs):
        got = sorted(i for x in b if x["epoch"] == e for i in x["sample_indices"])
        if got != list(range(SAMPLES)):
            missing = sorted(set(range(SAMPLES)) - set(got))
            dup = len(got) - len(set(got))
            bad.append(f"epoch {e}: {len(got)} samples, {len(missing)} missing, {dup} duplicated")
        keys = [x["batch"] for x in b if x["epoch"] == e]
        if len(keys) != len(set(keys)):
            bad.append(f"epoch {e}: a batch delivered twice")
    record(f"{name}: every sample of {epochs} epoch(s) delivered exactly once ({len(b)} batches)", not bad,
           "; ".join(bad))
    return b


def per_server(b):
    out = {}
    for x in b:
        out[x["server"]] = out.get(x["server"], 0) + 1
    return out


def scenario(name, data, hosts, body):
    print(f"--- {name}", flush=True)
    work = tempfile.mkdtemp(prefix=f"stoker-cluster-{name}-")
    try:
        with netcluster.NetCluster(hosts) as c:
            body(Run(c, work, data))
    except Exception as e:  # a scenario's failure is recorded; the others still run
        record(f"{name}: ran to the end", False, f"({type(e).__name__}: {e})")
    finally:
        shutil.rmtree(work, ignore_errors=True)


def epoch(r):
    r.c.set_names({"data": ["s1", "s2"]})
    r.server("s1", ["--workers=1"])
    r.server("s2", ["--workers=1"])
    r.start_bench(["--batch-size=32", "--epochs=2", "--pipeline=center_crop(224)"])
    out = r.wait_bench()
    b = exactly_once("epoch", r.log, 2)
    counts = per_server(b)
    rate = re.search(r"images/s\s+([\d.]+)", out)
    print(f"  figures: {rate.group(1) if rate else '?'} images/s; batches per server {counts}")
    record("epoch: both servers' hosts served batches", len(counts) == 2, f"({counts})")


def link_cut(r):
    r.c.set_names({"data": ["s1", "s2", "s3"]})
    for h in ("s1", "s2", "s3"):  # about 60 images/s each: a run of some 20 s
        r.server(h, ["--workers=1", "--test-sample-delay-ms=15"])
    epochs = 6
    r.start_bench(["--batch-size=16", f"--epochs={epochs}", "--pipeline=center_crop(128)"])
    before = r.wait_batches(30)
    # The rank streams from a subset of the three (2 at first): the cable
    # pulled is that of a server in use, s2 when it is one.
    served = [h for h in ("s2", "s1", "s3") if any(x["server"] == r.server_of(h) for x in before)]
    record("link_cut: the cut server served batches before the cut", bool(served), f"({served})")
    host = served[0] if served else "s2"
    victim = r.server_of(host)
    cut = time.time()
    r.c.link(host, up=False)
    time.sleep(12)
    restored = time.time()
    r.c.link(host, up=True)
    r.wait_bench()
    b = exactly_once("link_cut", r.log, epochs)
    cut_ms, restored_ms = cut * 1000, restored * 1000
    times = sorted(x["unix_ms"] for x in b)
    # Delivery is in epoch order: s2's outstanding batches hold it up until
    # they are reassigned, so the longest gap after the cut is the time to
    # reassign them.
    after = [cut_ms] + [t for t in times if t >= cut_ms]
    stall = max(t2 - t1 for t1, t2 in zip(after, after[1:])) / 1000 if len(after) > 1 else float("inf")
    summary = json.load(open(f"{r.work}/summary.json"))
    # Delivery times, not receive times: a batch s2 finished just before the
    # cut may be handed over in order up to the stall after it.
    during = [x for x in b if x["server"] == victim and cut_ms + 1000 * stall + 500 < x["unix_ms"] < restored_ms]
    back = [x["unix_ms"] for x in b if x["server"] == victim and x["unix_ms"] > restored_ms]
    rejoin = (min(back) - restored_ms) / 1000 if back else float("inf")
    print(f"  figures: {host}'s cable pulled; longest delivery gap after the cut {stall:.1f} s; "
          f"{summary.get('reassigned_batches')} batches reassigned; {host} back in work {rejoin:.1f} s after its "
          f"link returned; batches per server {per_server(b)}")
    record("link_cut: the cut server's batches reassigned within 10 s of the cut (keepalive 3 s + 3 s)", stall <= 10,
           f"({stall:.1f} s)")
    record("link_cut: no batch from the cut server while its link was down", not during, f"({len(during)})")
    record("link_cut: the cut server gets work again within 5 s of its link returning", rejoin <= 5,
           f"({rejoin:.1f} s)")


def join(r):
    r.c.set_names({"data": ["s1"]})
    r.server("s1", ["--workers=1", "--test-sample-delay-ms=10"])
    r.server("s3", ["--workers=1", "--test-sample-delay-ms=10"])
    epochs = 4
    r.start_bench(["--batch-size=16", f"--epochs={epochs}", "--pipeline=center_crop(128)"])
    r.wait_batches(10)
    added = time.time()
    r.c.set_names({"data": ["s1", "s3"]})
    r.wait_bench()
    b = exactly_once("join", r.log, epochs)
    newcomer = r.server_of("s3")
    first = [x["unix_ms"] for x in b if x["server"] == newcomer]
    delay = (min(first) - added * 1000) / 1000 if first else float("inf")
    print(f"  figures: s3 served its first batch {delay:.1f} s after it joined the name; batches per server "
          f"{per_server(b)}")
    record("join: no batch from s3 before it was in the name",
           all(t >= added * 1000 for t in first), "")
    record("join: the host added to the name gets work within 5 s", delay <= 5, f"({delay:.1f} s)")


def verdict(name, expected, trainer_mbit, server_args, bench_args):
    def body(r):
        r.c.set_names({"data": ["s1", "s2"]})
        print("  link: " + r.c.shape("trainer", trainer_mbit, 1))
        r.server("s1", server_args)
        r.server("s2", server_args)
        r.start_bench(bench_args)
        out = r.wait_bench()
        exactly_once(name, r.log, 1)
        m = re.search(r"bottleneck: (\w+) \((.*)\)", out)
        rate = re.search(r"images/s\s+([\d.]+)", out)
        mb = re.search(r"MB/s\s+([\d.]+)", out)
        print(f"  figures: {rate.group(1) if rate else '?'} images/s, {mb.group(1) if mb else '?'} MB/s over a "
              f"{trainer_mbit} mbit/s trainer link; verdict: {m.group(0) if m else 'none printed'}")
        record(f"{name}: stoker-bench's verdict is {expected}", bool(m) and m.group(1) == expected,
               f"(got {m.group(1) if m else None})")
    return body


def main():
    why = netcluster.unavailable()
    if why:
        print(f"SKIPPED: cannot build hosts from network namespaces here: {why}")
        return 77
    data = tempfile.mkdtemp(prefix="stoker-cluster-data-")
    try:
        subprocess.run([MAKE_IMAGES, f"--out={data}/ds", "--classes=8", "--per-class=64", "--min-side=200",
                        "--max-side=400"], check=True, capture_output=True)
        if not netcluster.netem_available():
            print("note: this kernel has no sch_netem: links get their rate (tbf) but no added delay")
        hosts3 = ["s1", "s2", "s3", "trainer"]
        scenario("epoch", data, ["s1", "s2", "trainer"], epoch)
        scenario("link_cut", data, hosts3, link_cut)
        scenario("join", data, hosts3, join)
        # 100 mbit/s carries about 80 images of 224x224x3 a second; two
        # servers with two workers each make several times that.
        scenario("network", data, ["s1", "s2", "trainer"],
                 verdict("network", "network", 100, ["--workers=2"],
                         ["--batch-size=32", "--epochs=1", "--pipeline=center_crop(224)"]))
        scenario("server_cpu", data, ["s1", "s2", "trainer"],
                 verdict("server_cpu", "server_cpu", 1000, ["--workers=1", "--test-sample-delay-ms=10"],
                         ["--batch-size=32", "--epochs=1",
                          "--pipeline=random_resized_crop(224), color_jitter(0.4, 0.4, 0.4, 0.1)"]))
    finally:
        shutil.rmtree(data, ignore_errors=True)
    failed = results.count(False)
    print(f"{results.count(True)} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
