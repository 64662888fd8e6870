#!/usr/bin/env python3
"""What TLS costs: Stoker's batch goodput over loopback in plain text, with
TLS, and with mutual TLS plus a token, measured in one run on this machine
(a benchmark, not a timed test). Three stoker-server processes with the same
data differ only in their protection; stoker-bench reads each with
--cache-mode batch (the server decodes one batch, then re-sends its bytes), so
the figure is the transport: serialization, gRPC/HTTP2, TLS, TCP, client
reassembly. Runs are interleaved; medians of TLS_REPEATS are compared, and
the ratios against plain text printed and written as JSON.

Usage: tests/bench/tls_goodput.py [BUILD_DIR] [OUT_JSON]
Rates are bytes of image data per second (1 GB = 1e9 bytes).
"""
import base64
import glob
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from logwait import wait_for  # noqa: E402
from procs import stop_all  # noqa: E402
from testpki import Pki  # noqa: E402

BUILD = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else "build")
OUT = sys.argv[2] if len(sys.argv) > 2 else os.path.join(BUILD, "tls_goodput.json")
REPEATS = int(os.environ.get("TLS_REPEATS", "3"))


def make_dataset(work):
    """64 generated JPEGs hard-linked 600 times: 150 batches of 256."""
    subprocess.run([f"{BUILD}/tests/stoker-make-images", f"--out={work}/src", "--classes=1", "--per-class=64",
                    "--min-side=256", "--max-side=400"], check=True, stdout=subprocess.DEVNULL)
    os.makedirs(f"{work}/data/ds/c")
    for i in range(600):
        for f in sorted(glob.glob(f"{work}/src/class_000/*.jpg")):
            os.link(f, f"{work}/data/ds/c/{i}_{os.path.basename(f)}")


def main():
    work = tempfile.mkdtemp(prefix="stoker-tls-bench-")
    servers = []
    try:
        make_dataset(work)
        pki = Pki(f"{work}/pki")
        token = f"{work}/token"
        with open(token, "w") as f:
            f.write(base64.urlsafe_b64encode(os.urandom(24)).decode() + "\n")
        tls_server = [f"--tls-cert={pki.path('server.pem')}", f"--tls-key={pki.path('server.key')}"]
        contenders = {
            "plain": ([], []),
            "tls": (tls_server, [f"--tls-ca={pki.path('ca.pem')}"]),
            "mtls_token": ([*tls_server, f"--tls-client-ca={pki.path('ca.pem')}", f"--auth-token-file={token}"],
                           [*pki.client("client-a"), f"--auth-token-file={token}"]),
        }
        address = {}
        for name, (server_args, _) in contenders.items():
            log = f"{work}/{name}-server.log"
            p = subprocess.Popen([f"{BUILD}/server/stoker-server", "--host=127.0.0.1", "--port=0", "--metrics-port=-1",
                                  "--workers=1", f"--data-root={work}/data", *server_args],
                                 stdout=open(log, "w"), stderr=subprocess.STDOUT)
            servers.append(p)
            m = wait_for(log, r"listening on [\d.]+:(\d+)", 20)
            if not m:
                sys.exit(f"{name} server did not start: {open(log).read()}")
            address[name] = f"127.0.0.1:{m.group(1)}"
        runs = {name: [] for name in contenders}
        for _ in range(REPEATS):
            for name, (_, client_args) in contenders.items():
                summary = f"{work}/{name}.json"
                subprocess.run([f"{BUILD}/client/stoker-bench", f"--servers={address[name]}", "--dataset=ds",
                                "--batch-size=256", "--pipeline=center_crop(224)", "--cache-mode=batch", "--epochs=1",
                                "--warmup-batches=10", "--device=none", "--metrics-port=-1", f"--json={summary}",
                                *client_args], check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                with open(summary) as f:
                    runs[name].append(json.load(f)["megabytes_per_second"] * 1e6)
        median = {name: statistics.median(r) for name, r in runs.items()}
        result = {"bytes_per_second": median, "runs": runs,
                  "tls_vs_plain": median["tls"] / median["plain"],
                  "mtls_token_vs_plain": median["mtls_token"] / median["plain"]}
        with open(OUT, "w") as f:
            json.dump(result, f, indent=2)
        print(f"TLS goodput over loopback (batches of 256 x 224x224x3 uint8, cache-mode batch, medians of {REPEATS}):")
        for name in contenders:
            print(f"  {name:<11} {median[name] / 1e9:6.2f} GB/s")
        print(f"  TLS / plain text:              {result['tls_vs_plain']:.2f}x")
        print(f"  mutual TLS + token / plain:    {result['mtls_token_vs_plain']:.2f}x")
        print(f"  (written to {OUT})")
    finally:
        stop_all(servers)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
