#!/usr/bin/env python3
"""Security (docs/how-to/security.md), with real stoker-server, stoker-bench and
stoker-health processes on 127.0.0.1 and certificates made here with the
openssl tool (no other address is used; the exposure warning is checked in a
network namespace of its own):

- mutual TLS + tokens: a client with no credentials, a certificate from
  another CA, an expired certificate, no client certificate, or a wrong or
  missing token is refused (UNAUTHENTICATED, or the handshake fails) and
  learns nothing about datasets (the refusal for an existing dataset and for
  a missing one read the same); the right credentials work; a job streaming
  all along finishes every epoch exactly once;
- per-client limit: a second job with the same certificate subject is held
  back by --max-streams-per-client while another subject is served;
- certificate rotation: the files are replaced while that job streams; new
  connections get the new certificate, the running epochs complete;
- tokens without TLS: health checks need no token, $STOKER_AUTH_TOKEN works,
  a token added to the file works at once and a removed one is refused;
- metrics: basic auth on --metrics-host 127.0.0.1; no dataset name exposed;
- bad configuration is refused at start naming the file; one warning when a
  server listens beyond loopback with neither TLS nor tokens.

Usage: security_test.py SOURCE_DIR BUILD_DIR. Exits 1 on any failure.
"""
import base64
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from logwait import wait_for  # noqa: E402
from procs import Procs  # noqa: E402
from testpki import Pki  # noqa: E402

ROOT, BUILD = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
SERVER = f"{BUILD}/server/stoker-server"
BENCH = f"{BUILD}/client/stoker-bench"
HEALTH = f"{BUILD}/tools/stoker-health"
MAKE_IMAGES = f"{BUILD}/tests/stoker-make-images"
failures = []
LONG_EPOCHS = 40


def check(name, ok, detail=""):
    print(f"{'ok' if ok else 'FAIL'}: {name} {detail}", flush=True)
    if not ok:
        failures.append(name)


def bench(address, *args, env=None, timeout=60):
    """A short stoker-bench run; (exit code, output)."""
    r = subprocess.run([BENCH, "--metrics-port=-1", f"--servers={address}", "--batch-size=8", "--epochs=1",
                        "--device=cpu", "--connect-timeout-seconds=3", "--unavailable-timeout-seconds=5", *args],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=timeout, env=env)
    return r.returncode, r.stdout


def read_batches(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def exactly_once(lines, samples, epochs):
    per_epoch = {}
    for line in lines:
        per_epoch.setdefault(line["epoch"], []).extend(line["sample_indices"])
    return len(per_epoch) == epochs and all(sorted(v) == list(range(samples)) for v in per_epoch.values())


def served_subject(address, pki):
    """The subject of the certificate the server presents now (openssl s_client)."""
    host, port = address.rsplit(":", 1)
    r = subprocess.run(["openssl", "s_client", "-connect", f"127.0.0.1:{port}", "-servername", "localhost",
                        "-alpn", "h2", "-cert", pki.path("client-a.pem"), "-key", pki.path("client-a.key")],
                       input=b"", stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, timeout=10)
    m = re.search(r"subject=.*?CN\s*=\s*([\w.-]+)", r.stdout.decode(errors="replace"))
    return m.group(1) if m else ""


def mutual_tls(tmp, pki, data):
    tokens = os.path.join(tmp, "tokens")
    token = base64.urlsafe_b64encode(os.urandom(24)).decode()
    with open(tokens, "w") as f:
        f.write(f"# accepted tokens\n{token}\n")
    token_file = os.path.join(tmp, "token")
    with open(token_file, "w") as f:
        f.write(token + "\n")
    wrong_file = os.path.join(tmp, "wrong-token")
    with open(wrong_file, "w") as f:
        f.write("x" * 32 + "\n")
    # The server reads its identity through a symlinked directory, so that a
    # rotation swaps key and certificate together.
    tls = os.path.join(tmp, "tls")
    for gen, name in (("gen1", "server"), ("gen2", "server2")):
        os.makedirs(os.path.join(tls, gen))
        shutil.copy(pki.path(name + ".pem"), os.path.join(tls, gen, "tls.crt"))
        shutil.copy(pki.path(name + ".key"), os.path.join(tls, gen, "tls.key"))
    os.symlink("gen1", os.path.join(tls, "current"))
    procs = Procs(tmp, BUILD)
    try:
        address, metrics_port, server_log = procs.server(
            data, f"--tls-cert={tls}/current/tls.crt", f"--tls-key={tls}/current/tls.key",
            f"--tls-client-ca={pki.path('ca.pem')}", "--tls-reload-seconds=1", f"--auth-token-file={tokens}",
            "--max-streams-per-client=2")
        good = [*pki.client("client-a"), f"--auth-token-file={token_file}"]
        # A job that streams through everything below: 40 epochs of 64 samples (about 40 s).
        batches = os.path.join(tmp, "long.jsonl")
        long_job, long_out = procs.bench(f"--servers={address}", "--dataset=secret-ds", "--batch-size=8",
                                         f"--epochs={LONG_EPOCHS}", "--step-ms=120", "--device=cpu",
                                         f"--log-batches={batches}", *good, name="long")
        check("the authorized job starts streaming", wait_for(long_out, r"batches/epoch", 30) is not None,
              open(long_out).read()[-1500:])

        cases = {
            "no credentials (plain text)": [],
            "TLS without a client certificate": [f"--tls-ca={pki.path('ca.pem')}", f"--auth-token-file={token_file}"],
            "a certificate from another CA": [*pki.client("client-other"), f"--auth-token-file={token_file}"],
            "an expired certificate": [*pki.client("client-expired"), f"--auth-token-file={token_file}"],
            "a wrong token": [*pki.client("client-b"), f"--auth-token-file={wrong_file}"],
            "no token": pki.client("client-b"),
        }
        for name, creds in cases.items():
            answers = {}
            token_case = "token" in name
            # A failed handshake answers nothing at all; a refused token, the same for any dataset.
            for dataset in ("secret-ds", "no-such-ds") if token_case else ("secret-ds",):
                code, out = bench(address, f"--dataset={dataset}", *creds)
                error = [l for l in out.splitlines() if l.startswith("stoker-bench:")]  # the error, not the log
                answers[dataset] = (code, [l.replace(dataset, "DATASET") for l in error])
            code, out = answers["secret-ds"][0], "\n".join(answers["secret-ds"][1])
            refused = code != 0 and ("UNAUTHENTICATED" in out if token_case else
                                     ("UNAVAILABLE" in out or "UNAUTHENTICATED" in out))
            check(f"{name}: refused", refused, f"(exit {code}) {out}")
            if not creds:  # what a newcomer meets first: the error names TLS as the likely cause
                check(f"{name}: the error says to give the CA", "--tls-ca" in out and "plain text" in out, out)
            leaked = [w for w in ("samples", "NOT_FOUND", "not found", "classes", "fingerprint") if w in out]
            check(f"{name}: learns nothing about datasets", not leaked and answers["secret-ds"] == answers.get("no-such-ds", answers["secret-ds"]),
                  f"(leaked {leaked})" if leaked else "")
        check("the server logged the failed handshakes", "Handshake failed" in open(server_log).read())

        # Same subject as the long job (2 streams held): held back; another subject is served.
        same, same_out = procs.bench(f"--servers={address}", "--dataset=secret-ds", "--batch-size=8", "--device=cpu",
                                     "--streams-per-server=1", *good, name="same")
        held = wait_for(same_out, r"is full", 15)
        check("same subject past --max-streams-per-client: held back", held is not None and same.poll() is None and
              "epoch 0 batch" not in open(same_out).read(), open(same_out).read()[-600:])
        same.send_signal(signal.SIGTERM)
        code, out = bench(address, "--dataset=secret-ds", *pki.client("client-b"), f"--auth-token-file={token_file}")
        check("another subject with the right credentials is served", code == 0, out[-800:])
        check("health answers a TLS client without a token",
              subprocess.run([HEALTH, f"--addr={address}", *pki.client("client-b")]).returncode == 0)

        # Rotation while the long job streams.
        before = served_subject(address, pki)
        os.symlink("gen2", os.path.join(tls, "next"))
        os.rename(os.path.join(tls, "next"), os.path.join(tls, "current"))
        after, deadline = before, time.time() + 15
        while after != "stoker-server-rotated" and time.time() < deadline:
            time.sleep(0.5)
            after = served_subject(address, pki)
        check("rotation: new connections get the new certificate", before == "stoker-server" and
              after == "stoker-server-rotated", f"({before} -> {after})")
        check("rotation: the long job is still streaming", long_job.poll() is None)
        code, out = bench(address, "--dataset=secret-ds", *pki.client("client-b"), f"--auth-token-file={token_file}")
        check("rotation: a new client connects", code == 0, out[-800:])

        code = long_job.wait(timeout=120)
        lines = read_batches(batches) if os.path.exists(batches) else []
        check("the streaming job finished every epoch exactly once", code == 0 and exactly_once(lines, 64, LONG_EPOCHS),
              f"(exit {code}, {len(lines)} batches)")
        page = urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=5).read().decode()
        check("metrics name no dataset", "secret-ds" not in page and "stoker_server_streams" in page)
    finally:
        procs.stop()


def tokens_without_tls(tmp, pki, data):
    tokens = os.path.join(tmp, "plain-tokens")
    old, new = "old-token-" + "a" * 20, "new-token-" + "b" * 20
    with open(tokens, "w") as f:
        f.write(old + "\n")
    basic = os.path.join(tmp, "metrics-users")
    with open(basic, "w") as f:
        f.write("prometheus:scrape-secret-0123\n")
    procs = Procs(tmp, BUILD)
    try:
        address, metrics_port, _ = procs.server(data, f"--auth-token-file={tokens}", "--metrics-host=127.0.0.1",
                                                f"--metrics-basic-auth-file={basic}")
        check("tokens: health needs no token", subprocess.run([HEALTH, f"--addr={address}"]).returncode == 0)
        env = dict(os.environ, STOKER_AUTH_TOKEN=old)
        code, out = bench(address, "--dataset=secret-ds", env=env)
        check("tokens: $STOKER_AUTH_TOKEN is sent and accepted", code == 0, out[-800:])
        with open(tokens + ".tmp", "w") as f:
            f.write(f"{old}\n{new}\n")
        os.rename(tokens + ".tmp", tokens)
        time.sleep(1.2)  # the file is checked at most once a second
        code, out = bench(address, "--dataset=secret-ds", env=dict(os.environ, STOKER_AUTH_TOKEN=new))
        check("tokens: a token added to the file works without a restart", code == 0, out[-800:])
        with open(tokens + ".tmp", "w") as f:
            f.write(f"{new}\n")
        os.rename(tokens + ".tmp", tokens)
        time.sleep(1.2)
        code, out = bench(address, "--dataset=secret-ds", env=env)
        check("tokens: a token removed from the file is refused", code != 0 and "UNAUTHENTICATED" in out,
              f"(exit {code})")

        url = f"http://127.0.0.1:{metrics_port}/metrics"

        def scrape(user=None, password=None):
            req = urllib.request.Request(url)
            if user is not None:
                req.add_header("Authorization", "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode())
            try:
                with urllib.request.urlopen(req, timeout=5) as r:
                    return r.status, r.read().decode()
            except urllib.error.HTTPError as e:
                return e.code, ""
        check("metrics: no credentials -> 401", scrape()[0] == 401)
        check("metrics: a wrong password -> 401", scrape("prometheus", "wrong-password-0000")[0] == 401)
        status, page = scrape("prometheus", "scrape-secret-0123")
        check("metrics: the right pair -> 200", status == 200 and "stoker_server_streams" in page, f"({status})")
        check("metrics: no dataset name", "secret-ds" not in page)
    finally:
        procs.stop()


def bad_configuration(tmp, pki, data):
    short = os.path.join(tmp, "short-tokens")
    with open(short, "w") as f:
        f.write("tooshort\n")
    cases = {
        "a key that is not the certificate's": ([f"--tls-cert={pki.path('server.pem')}",
                                                 f"--tls-key={pki.path('client-a.key')}"], "does not belong"),
        "a missing certificate file": ([f"--tls-cert={tmp}/missing.pem", f"--tls-key={pki.path('server.key')}"],
                                       f"{tmp}/missing.pem"),
        "--tls-cert without --tls-key": ([f"--tls-cert={pki.path('server.pem')}"], "go together"),
        "a client CA without TLS": ([f"--tls-client-ca={pki.path('ca.pem')}"], "needs --tls-cert"),
        "a token file with a short token": ([f"--auth-token-file={short}"], "line 1: secret is 8 characters"),
    }
    for name, (args, expected) in cases.items():
        r = subprocess.run([SERVER, "--host=127.0.0.1", "--port=0", "--metrics-port=-1", f"--data-root={data}", *args],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=20)
        check(f"bad configuration: {name} is refused at start", r.returncode == 2 and expected in r.stdout,
              f"(exit {r.returncode}) {r.stdout.strip()[-300:]}")
    code, out = bench("127.0.0.1:1", "--dataset=x", f"--tls-cert={pki.path('client-a.pem')}")
    check("client: a certificate without its key or CA is refused", code != 0 and "--tls-key" in out, out[-300:])


def exposure_warning(tmp, data):
    if os.geteuid() != 0 or not shutil.which("unshare"):
        print("skip: the exposure warning needs root and unshare (a network namespace of its own)")
        return
    # In a namespace with only its own loopback, 0.0.0.0 reaches nothing else.
    for host, expected in (("0.0.0.0", 1), ("127.0.0.1", 0)):
        script = (f"ip link set lo up; timeout -s TERM 3 {SERVER} --host={host} --port=0 --metrics-port=-1 "
                  f"--data-root={data}; true")
        r = subprocess.run(["unshare", "-n", "sh", "-c", script], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           text=True, timeout=30)
        warnings = r.stdout.count("with neither TLS")
        check(f"exposure warning on {host}: {expected}", warnings == expected and "listening on" in r.stdout,
              f"({warnings}) {r.stdout[-400:] if warnings != expected else ''}")


def main():
    tmp = tempfile.mkdtemp(prefix="stoker-security-")
    try:
        pki = Pki(os.path.join(tmp, "pki"))
        data = os.path.join(tmp, "data")
        subprocess.run([MAKE_IMAGES, f"--out={data}/secret-ds", "--classes=2", "--per_class=32", "--min_side=64",
                        "--max_side=96"], check=True, stdout=subprocess.DEVNULL)
        bad_configuration(tmp, pki, data)
        exposure_warning(tmp, data)
        tokens_without_tls(tmp, pki, data)
        mutual_tls(tmp, pki, data)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    if failures:
        print(f"{len(failures)} failed: {failures}")
        sys.exit(1)
    print("all security checks passed")


if __name__ == "__main__":
    main()
