#!/usr/bin/env python3
"""The storage layer (storage/) against real stores on 127.0.0.1, through
`stoker-storage`: Debian's nginx over HTTP and HTTPS (Range requests, a
bearer token), moto's S3 server with authentication enforced (SigV4 checked
by it; a wrong secret refused), and a fault-injecting proxy in front of nginx
(connection resets mid-body, 503 SlowDown, 429, truncated bodies, a stall, an
object rewritten mid-read). Every answer is compared with the files' bytes.

Usage: storage_real_test.py SOURCE_DIR BUILD_DIR  (run with the build's pyenv
Python, which has moto and boto3: `make pyenv`).
"""

import json
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time

SOURCE, BUILD = sys.argv[1], sys.argv[2]
sys.path.insert(0, os.path.join(SOURCE, "tests"))
from testpki import Pki  # noqa: E402
from procs import stop_all  # noqa: E402
from storage_fixtures import FaultProxy, Moto, Nginx, Server, free_port, wait_port  # noqa: E402

TOOL = os.path.join(BUILD, "storage", "stoker-storage")
SECRET = "sEcReT-d0-not-leak-0123456789abcdefXYZ"
TOKEN = "bearer-t0ken-d0-not-leak"


def tool(*args, env=None, check=True):
    r = subprocess.run([TOOL, "--counters", *args], capture_output=True, env=env, timeout=120)
    if check and r.returncode != 0:
        raise AssertionError(f"stoker-storage {' '.join(args)} failed: {r.stderr.decode()[-2000:]}")
    return r


def counters(stderr):
    line = [l for l in stderr.decode().splitlines() if l.startswith("requests ")][-1].split()
    out = {"requests": int(line[1]), "bytes": int(line[3]), "retries": int(line[5])}
    for item in line[6:]:
        k, v = item.split("=")
        out[k] = int(v)
    return out


def make_data(root):
    rng = random.Random(5)
    files = {"shards/train-000000.tar": rng.randbytes(5 * 1024 * 1024 + 17),
             "shards/train-000001.tar": rng.randbytes(700_001),
             "shards/empty.tar": b"",
             "names/with space & plus+.bin": rng.randbytes(1000),
             "private/secret.bin": rng.randbytes(3000)}
    for name, data in files.items():
        path = os.path.join(root, name)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            f.write(data)
    return files


def env_without_aws(**extra):
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    # Never the instance metadata service's 169.254.169.254 from a test.
    env.update(AWS_SHARED_CREDENTIALS_FILE="/nonexistent", AWS_CONFIG_FILE="/nonexistent",
               AWS_EC2_METADATA_DISABLED="true")
    env.update(extra)
    return env


def check(ok, what):
    if not ok:
        raise AssertionError(what)
    print(f"ok: {what}", flush=True)


# -- the checks ------------------------------------------------------------------------
def http_checks(nginx, files, pki, work):
    base = f"http://127.0.0.1:{nginx.http}"
    for name, data in files.items():
        if name.startswith("private/"):
            continue
        url = f"{base}/{name.replace(' ', '%20').replace('&', '%26').replace('+', '%2B')}"
        stat = tool("stat", url).stdout.decode().split("\t")
        check(int(stat[1]) == len(data) and stat[2].startswith('"'), f"HTTP stat of {name}: size and ETag")
        got = tool("--block_bytes=1048576", "cat", url)
        check(got.stdout == data, f"HTTP cat of {name} ({len(data)} bytes) equals the file")
        c = counters(got.stderr)
        check(c["requests"] == 1 + -(-len(data) // 1048576) and c["retries"] == 0,
              f"{name}: one HEAD and one GET per MiB ({c['requests']} requests)")
        if len(data) > 100:
            part = tool("--offset=17", "--length=50", "cat", url).stdout
            check(part == data[17:67], f"HTTP ranged read of {name}")
    before = nginx.gets()
    tool("--block_bytes=8388608", "cat", f"{base}/shards/train-000000.tar")
    check(nginx.gets() - before == 1, "a 5 MiB shard is one GET with 8 MiB blocks (never one per member)")

    https = f"https://127.0.0.1:{nginx.https}/shards/train-000001.tar"
    got = tool(f"--storage_ca_file={pki.path('ca.pem')}", "cat", https)
    check(got.stdout == files["shards/train-000001.tar"], "HTTPS with --ca_file equals the file")
    bad = tool("--storage_max_attempts=2", "cat", https, check=False)
    check(bad.returncode != 0 and b"certificate" in bad.stderr.lower(),
          f"HTTPS without the CA fails naming the certificate: {bad.stderr.decode().strip()[:160]}")

    missing = tool("cat", f"{base}/shards/none.tar", check=False)
    check(missing.returncode != 0 and b"NOT_FOUND" in missing.stderr and b"/shards/none.tar" in missing.stderr
          and counters(missing.stderr)["retries"] == 0, "a missing object fails at once (404, NOT_FOUND, the URL)")

    token_file = os.path.join(work, "token")
    with open(token_file, "w") as f:
        f.write(TOKEN + "\n")
    private = f"{base}/private/secret.bin"
    got = tool(f"--storage_token_file={token_file}", "cat", private)
    check(got.stdout == files["private/secret.bin"], "the bearer token from a file opens /private/")
    refused = tool("cat", private, check=False)
    check(refused.returncode != 0 and b"PERMISSION_DENIED" in refused.stderr, "without the token: 401, PERMISSION_DENIED")
    check(TOKEN.encode() not in got.stderr + refused.stderr, "the token appears in no output")
    listing = tool("ls", f"{base}/shards", check=False)
    check(listing.returncode != 0 and b"index.txt" in listing.stderr,
          "an HTTP directory without index.txt cannot be listed, and the error says how")
    with open(os.path.join(nginx.root, "shards", "index.txt"), "w") as f:
        f.write("# the shards\ntrain-{000000..000001}.tar\nempty.tar\n")
    listing = tool("ls", f"{base}/shards").stdout.decode().splitlines()
    check([l.split("\t")[:2] for l in listing] == [["shards/empty.tar", "0"],
                                                    ["shards/train-000000.tar", str(len(files["shards/train-000000.tar"]))],
                                                    ["shards/train-000001.tar", str(len(files["shards/train-000001.tar"]))]],
          "an HTTP directory lists what its index.txt names, brace ranges expanded")
    os.remove(os.path.join(nginx.root, "shards", "index.txt"))


def fault_checks(nginx, files, root):
    data = files["shards/train-000000.tar"]
    kinds = ["reset", "503", "429", "truncate", "stall"]
    plan = {}
    for n in range(2, 400):  # after the HEAD: about 40 % of requests spoilt, each kind about 8 %
        r = random.Random(n).random()
        if r < 0.4:
            plan[n] = kinds[int(r / 0.08)]
    proxy = FaultProxy(nginx.http, plan)
    try:
        got = tool("--block_bytes=262144", "--storage_request_timeout=2", "--storage_max_attempts=12",
                   "cat", f"http://127.0.0.1:{proxy.port}/shards/train-000000.tar")
        c = counters(got.stderr)
        check(got.stdout == data, f"through the fault proxy the 5 MiB shard arrives whole ({c})")
        spoilt = {k: sum(1 for _, _, f in proxy.seen if f == k) for k in kinds}
        check(all(v > 0 for v in spoilt.values()), f"every fault happened: {spoilt} of {len(proxy.seen)} requests")
        check(c.get("503", 0) == spoilt["503"] and c.get("429", 0) == spoilt["429"]
              and c.get("timeout", 0) >= 1 and c["retries"] >= sum(spoilt.values()) - 1,
              "the retry counters show the faults by reason")
    finally:
        proxy.stop()

    # An object rewritten between two ranged reads: If-Match refuses the new one.
    proxy = FaultProxy(nginx.http, {})
    path = os.path.join(root, "shards/train-000001.tar")
    original = files["shards/train-000001.tar"]

    def rewrite(n):
        if n == 3:
            with open(path, "wb") as f:
                f.write(original[::-1])

    proxy.on_request = rewrite
    try:
        r = tool("--block_bytes=262144", "cat", f"http://127.0.0.1:{proxy.port}/shards/train-000001.tar", check=False)
        check(r.returncode != 0 and b"changed" in r.stderr and r.stdout == original[:262144],
              f"a shard rewritten mid-read fails naming the change, old bytes only: {r.stderr.decode().strip()[:200]}")
    finally:
        proxy.stop()
        with open(path, "wb") as f:
            f.write(original)


def s3_checks(moto, files, work):
    # moto refuses boto3's own signature for keys with '+' or '&' (its
    # decoding of the path, not the signer): such names are covered by nginx.
    files = {k: v for k, v in files.items() if "+" not in k and "&" not in k}
    files["names/with space.bin"] = b"spaced" * 100
    s3 = moto.s3
    s3.create_bucket(Bucket="data")
    for name, data in files.items():
        s3.put_object(Bucket="data", Key=f"ds/{name}", Body=data)
    for i in range(2100):
        s3.put_object(Bucket="data", Key=f"many/{i:06d}", Body=b"x" * (i % 7))
    env = env_without_aws(AWS_ACCESS_KEY_ID=moto.key_id, AWS_SECRET_ACCESS_KEY=moto.secret,
                          AWS_ENDPOINT_URL=moto.endpoint, AWS_REGION="us-east-1")
    # Prefixes without '/': moto's signature check refuses an encoded '/' in
    # the query (boto3's own ListObjectsV2 with Prefix="ds/" fails there too).
    listing = tool("ls", "s3://data/ds", env=env).stdout.decode().splitlines()
    check(sorted(l.split("\t")[0] for l in listing) == sorted(f"ds/{k}" for k in files) and len(listing) == len(files),
          "ListObjectsV2 below a prefix names every object")
    many = tool("ls", "s3://data/many", env=env)
    check(len(many.stdout.decode().splitlines()) == 2100 and counters(many.stderr)["requests"] == 3,
          "2,100 objects are listed in three pages (continuation tokens signed)")
    for name, data in files.items():
        key = name.replace(" ", "%20").replace("&", "%26").replace("+", "%2B")
        got = tool("--block_bytes=1048576", "cat", f"s3://data/ds/{key}", env=env)
        check(got.stdout == data, f"S3 cat of {name} equals the object (signed HEAD and ranged GETs)")
    part = tool("--offset=1000", "--length=4096", "cat", "s3://data/ds/shards/train-000000.tar", env=env).stdout
    check(part == files["shards/train-000000.tar"][1000:5096], "S3 ranged read")

    wrong = dict(env, AWS_SECRET_ACCESS_KEY=SECRET)
    r = tool("ls", "s3://data/ds", env=wrong, check=False)
    check(r.returncode != 0 and b"PERMISSION_DENIED" in r.stderr and b"SignatureDoesNotMatch" in r.stderr,
          f"a wrong secret is refused by the store: {r.stderr.decode().strip()[:200]}")
    head = tool("cat", "s3://data/ds/shards/empty.tar", env=wrong, check=False)
    check(head.returncode != 0 and b"HTTP 403" in head.stderr and counters(head.stderr)["retries"] == 0,
          "a refused HEAD fails at once (403, no retry)")
    check(SECRET.encode() not in r.stderr + r.stdout + head.stderr and moto.secret.encode() not in r.stderr,
          "no secret appears in the output")
    anon = tool("--s3_anonymous", "cat", "s3://data/ds/shards/empty.tar", env=env, check=False)
    check(anon.returncode != 0 and b"PERMISSION_DENIED" in anon.stderr, "unsigned requests are refused by this bucket")

    creds = os.path.join(work, "credentials")
    with open(creds, "w") as f:
        f.write(f"[loader]\naws_access_key_id = {moto.key_id}\naws_secret_access_key = {moto.secret}\n")
    config = os.path.join(work, "config")
    with open(config, "w") as f:
        f.write(f"[profile proc]\ncredential_process = printf '{{\"Version\": 1, \"AccessKeyId\": \"{moto.key_id}\", "
                f"\"SecretAccessKey\": \"{moto.secret}\"}}'\n")
    for profile in ("loader", "proc"):
        e = env_without_aws(AWS_SHARED_CREDENTIALS_FILE=creds, AWS_CONFIG_FILE=config, AWS_PROFILE=profile,
                            AWS_ENDPOINT_URL_S3=moto.endpoint)
        got = tool("cat", "s3://data/ds/shards/train-000001.tar", env=e)
        check(got.stdout == files["shards/train-000001.tar"], f"credentials from profile '{profile}'")
    endpoint_credentials_checks(moto, files, work)
    none = tool("cat", "s3://data/ds/shards/empty.tar", env=env_without_aws(AWS_ENDPOINT_URL=moto.endpoint), check=False)
    check(none.returncode != 0 and b"no S3 credentials" in none.stderr, "no credentials: the places looked are named")


class CredentialEndpoint:
    """The instance metadata service (IMDSv2: a PUT token, then the role and
    its credentials) and a container-credentials endpoint (Authorization
    token) on 127.0.0.1, handing out `key`/`secret` that expire after
    `lifetime` seconds; counts the credentials it hands out."""

    def __init__(self, key, secret, lifetime=3600):
        import http.server
        import json

        me = self
        self.served = {"imds": 0, "container": 0}

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def reply(self, status, body):
                self.send_response(status)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def creds(self, kind):
                me.served[kind] += 1
                expires = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() + lifetime))
                return json.dumps({"AccessKeyId": key, "SecretAccessKey": secret, "Token": "",
                                   "Expiration": expires}).encode()

            def do_PUT(self):
                ok = self.path == "/latest/api/token" and self.headers.get("X-aws-ec2-metadata-token-ttl-seconds")
                self.reply(200 if ok else 400, b"imds-session-token" if ok else b"")

            def do_GET(self):
                if self.path.startswith("/latest/"):
                    if self.headers.get("X-aws-ec2-metadata-token") != "imds-session-token":
                        return self.reply(401, b"")  # IMDSv2 only
                    if self.path == "/latest/meta-data/iam/security-credentials/":
                        return self.reply(200, b"loader-role")
                    if self.path == "/latest/meta-data/iam/security-credentials/loader-role":
                        return self.reply(200, self.creds("imds"))
                if self.path == "/container-creds" and self.headers.get("Authorization") == "container-token":
                    return self.reply(200, self.creds("container"))
                self.reply(404, b"")

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def stop(self):
        self.server.shutdown()
        self.server.server_close()


def endpoint_credentials_checks(moto, files, work):
    want = files["shards/train-000001.tar"]
    ep = CredentialEndpoint(moto.key_id, moto.secret)
    try:
        imds = env_without_aws(AWS_ENDPOINT_URL=moto.endpoint, AWS_EC2_METADATA_DISABLED="false",
                               AWS_EC2_METADATA_SERVICE_ENDPOINT=f"http://127.0.0.1:{ep.port}")
        got = tool("cat", "s3://data/ds/shards/train-000001.tar", env=imds)
        check(got.stdout == want and ep.served["imds"] == 1, "credentials from the instance metadata service (IMDSv2)")
        container = env_without_aws(AWS_ENDPOINT_URL=moto.endpoint,
                                    AWS_CONTAINER_CREDENTIALS_FULL_URI=f"http://127.0.0.1:{ep.port}/container-creds",
                                    AWS_CONTAINER_AUTHORIZATION_TOKEN="container-token")
        got = tool("cat", "s3://data/ds/shards/train-000001.tar", env=container)
        check(got.stdout == want and ep.served["container"] == 1, "container credentials with their token")
        wrong = dict(container, AWS_CONTAINER_AUTHORIZATION_TOKEN="other")
        r = tool("cat", "s3://data/ds/shards/train-000001.tar", env=wrong, check=False)
        check(r.returncode != 0 and b"container credentials" in r.stderr and b"container-token" not in r.stderr,
              "a refused container token fails naming the source, not the token")
    finally:
        ep.stop()
    # Web identity against a second moto without authentication: with it
    # enforced, moto answers an unsigned STS call (as AWS takes it) with 500.
    sts = Moto(work, auth=False)
    sts.s3.create_bucket(Bucket="data")
    sts.s3.put_object(Bucket="data", Key="ds/shards/train-000001.tar", Body=want)
    token_file = os.path.join(work, "web-identity-token")
    with open(token_file, "w") as f:
        f.write("eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJzeXN0ZW06c2VydmljZWFjY291bnQ6ZGF0YTpsb2FkZXIifQ.c2ln\n")
    web = env_without_aws(AWS_ENDPOINT_URL=sts.endpoint, AWS_WEB_IDENTITY_TOKEN_FILE=token_file,
                          AWS_ROLE_ARN="arn:aws:iam::123456789012:role/loader", AWS_REGION="us-east-1")
    r = tool("cat", "s3://data/ds/shards/train-000001.tar", env=web, check=False)
    check(b"eyJhbGciOiJSUzI1NiJ9" not in r.stderr, "the web-identity token appears in no output")
    sts.stop()
    log = open(sts.log).read()
    check(r.returncode == 0 and r.stdout == want and '"POST / HTTP' in log,
          f"credentials from a web identity, exchanged with moto's STS: {r.stderr.decode().strip()[-300:]}")


def make_datasets(root):
    """imgs: a class-per-folder tree (stoker-make-images); shards: the same
    images as WebDataset shards (jpg + cls), 16 samples each."""
    import io
    import tarfile

    subprocess.run([os.path.join(BUILD, "tests", "stoker-make-images"), f"--out={root}/imgs", "--classes=3",
                    "--per-class=16", "--min-side=40", "--max-side=80"], check=True, capture_output=True)
    images = sorted(os.path.join(d, f) for d, _, fs in os.walk(f"{root}/imgs") for f in fs)
    os.makedirs(f"{root}/shards")
    for start in range(0, len(images), 16):
        with tarfile.open(f"{root}/shards/train-{start // 16:06d}.tar", "w") as tar:
            for i in range(start, min(start + 16, len(images))):
                caption = f"photo number {i} of class {i % 5} in shard {start // 16}".encode()
                for ext, data in (("jpg", open(images[i], "rb").read()), ("cls", str(i % 5).encode()),
                                  ("txt", caption)):
                    info = tarfile.TarInfo(f"s{i:04d}.{ext}")
                    info.size = len(data)
                    tar.addfile(info, io.BytesIO(data))
    # A SentencePiece model at the root (sessions name it as a path under it).
    import sentencepiece as spm

    text = os.path.join(root, "..", "captions.txt")
    with open(text, "w") as f:
        f.write("".join(f"photo number {i} of class {i % 5} in shard {i // 16}\n" for i in range(200)))
    spm.SentencePieceTrainer.train(input=text, model_prefix=os.path.join(root, "tok"), vocab_size=40,
                                   minloglevel=2)
    os.remove(os.path.join(root, "tok.vocab"))
    # What an HTTP(S) root lists (HTTP has no listing of its own).
    with open(f"{root}/shards/index.txt", "w") as f:
        f.write(f"train-{{000000..{(len(images) - 1) // 16:06d}}}.tar\n")
    with open(f"{root}/imgs/index.txt", "w") as f:
        f.write("".join(os.path.relpath(p, f"{root}/imgs") + "\n" for p in images))


def make_many(root):
    """many: the 48 images in 12 shards of 4 samples, each padded with an
    8 KB member, so that a cache of a few shards is smaller than the dataset."""
    import io
    import tarfile

    images = sorted(os.path.join(d, f) for d, _, fs in os.walk(f"{root}/imgs") for f in fs if f.endswith(".jpg")
                    or f.endswith(".png") or f.endswith(".jpeg"))
    os.makedirs(f"{root}/many")
    rng = random.Random(11)
    for start in range(0, len(images), 4):
        with tarfile.open(f"{root}/many/part-{start // 4:06d}.tar", "w") as tar:
            for i in range(start, start + 4):
                for ext, data in (("jpg", open(images[i], "rb").read()), ("cls", str(i % 3).encode()),
                                  ("bin", rng.randbytes(8000))):
                    info = tarfile.TarInfo(f"m{i:04d}.{ext}")
                    info.size = len(data)
                    tar.addfile(info, io.BytesIO(data))


def streamed_checks(moto, work, root):
    """A dataset larger than the cache: its shards stay in the store and are
    fetched when read. The same epochs as from local disk; with the
    shard-aware order (one shard a window) an epoch reads each shard about
    once, with the global order many times."""
    make_many(root)
    shards = sorted(f for f in os.listdir(f"{root}/many") if f.endswith(".tar"))
    data_bytes = sum(os.path.getsize(f"{root}/many/{f}") for f in shards)
    order = ["--shuffle=shards", "--shard-window=1"]
    local = Server(BUILD, work, "local-many", f"--data-root={root}")
    try:
        want = epoch_hashes(work, local, "many", "local-many", epochs=1, extra=order)
        want_global = epoch_hashes(work, local, "many", "local-many-global", epochs=1)
    finally:
        local.stop()
    # The local open wrote each shard's sidecar index: uploaded with the
    # shards, servers index the dataset without fetching it.
    moto.s3.create_bucket(Bucket="streamed")
    for n in os.listdir(f"{root}/many"):
        moto.s3.put_object(Bucket="streamed", Key=f"many/{n}", Body=open(f"{root}/many/{n}", "rb").read())
    check(len([n for n in os.listdir(f"{root}/many") if n.endswith(".stoker-index")]) == len(shards),
          "a local open wrote a sidecar index per shard (uploaded with them)")
    env = env_without_aws(AWS_ACCESS_KEY_ID=moto.key_id, AWS_SECRET_ACCESS_KEY=moto.secret, AWS_REGION="us-east-1")
    server = Server(BUILD, work, "streamed", "--data-root=s3://streamed", f"--s3-endpoint={moto.endpoint}",
                    f"--cache-dir={os.path.join(work, 'cache-streamed')}", f"--cache-bytes={int(data_bytes * 0.6)}",
                    "--metrics-port=0", env=env)
    try:
        def received():
            return server.scrape()[("stoker_server_storage_received_bytes_total", '{store="s3"}')]

        got = epoch_hashes(work, server, "many", "streamed-many", epochs=1, extra=order)
        shard_order_bytes = received()
        log = open(server.log).read()
        check(got == want and f"{len(shards)} shards" in log and "stay in the store" in log,
              f"a dataset of {data_bytes} bytes in a cache of 60 % of it streams its shards and gives the local "
              f"server's epoch with --shuffle=shards ({len(got)} batches)")
        check(shard_order_bytes <= 1.1 * data_bytes + 64_000,
              f"with the shard-aware order the epoch read {shard_order_bytes / data_bytes:.2f}x the dataset from "
              "the store (sidecars included; at most 1.1x)")
        got = epoch_hashes(work, server, "many", "streamed-many-global", epochs=1)
        global_bytes = received() - shard_order_bytes
        m = server.scrape()
        fetched = m[("stoker_server_storage_streamed_shards_total", '{result="fetched",store="s3"}')]
        check(got == want_global and global_bytes > 1.5 * data_bytes,
              f"the global order gives the local epoch too, reading {global_bytes / data_bytes:.2f}x the dataset "
              f"(every batch draws from every shard; {fetched:.0f} shard fetches in both epochs)")
        check(m[("stoker_server_storage_streamed_bytes", '{store="s3"}')] <= data_bytes * 0.6
              and m[("stoker_server_storage_streamed_shards_total", '{result="hit",store="s3"}')] > 0,
              "the streamed shards held stay within --cache-bytes, and reads hit held shards")
        print(f"streamed: dataset {data_bytes} B in {len(shards)} shards, cache 0.6x: store bytes per epoch "
              f"shards order {shard_order_bytes / data_bytes:.2f}x, global order {global_bytes / data_bytes:.2f}x")
    finally:
        server.stop()


def epoch_hashes(work, server, dataset, tag, local_root=None, env=None, epochs=2, extra=()):
    """(epoch, batch, sample indices, hash) of two epochs from `server`, or
    from two local workers over `local_root` (local mode) when it is given."""
    import json

    log = os.path.join(work, f"batches-{tag}.jsonl")
    producer = [f"--servers={server.address}"] if local_root is None else ["--local-workers=2",
                                                                           f"--data-root={local_root}"]
    r = subprocess.run([os.path.join(BUILD, "client", "stoker-bench"), *producer,
                    f"--dataset={dataset}", "--batch-size=8", f"--epochs={epochs}", "--seed=7", "--device=cpu",
                    "--metrics-port=-1", "--pipeline=random_resized_crop(32), random_horizontal_flip(0.5)",
                    f"--log-batches={log}", *extra], capture_output=True, timeout=120, env=env)
    if r.returncode != 0:
        where = f"local mode on {local_root}" if server is None else f"server: {open(server.log).read()[-2500:]}"
        raise AssertionError(f"stoker-bench on '{dataset}' failed: {r.stderr.decode()[-1500:]}\n{where}")
    lines = [json.loads(l) for l in open(log)]
    return sorted((l["epoch"], l["batch"], tuple(l["sample_indices"]), l["hash"]) for l in lines)


def token_hashes(work, server, tag):
    """Per batch, the hash of its token ids (captions tokenised on `server`
    with the root's tok.model)."""
    import json

    log = os.path.join(work, f"tokens-{tag}.jsonl")
    r = subprocess.run([os.path.join(BUILD, "client", "stoker-bench"), f"--servers={server.address}",
                        "--dataset=shards", "--batch-size=8", "--epochs=1", "--seed=7", "--device=cpu",
                        "--metrics-port=-1", "--fields=image=jpg, ids=tokens:txt", "--tokenizer=tok.model",
                        "--max-tokens=16", f"--log-batches={log}"], capture_output=True, timeout=120)
    if r.returncode != 0:
        raise AssertionError(f"stoker-bench with tokens failed: {r.stderr.decode()[-1500:]}")
    return sorted((l["batch"], l["field_hashes"]["ids"]) for l in map(json.loads, open(log)))


def server_checks(moto, work, root):
    """A data server on s3:// gives the epochs of one on the same files on
    local disk; a restart with a warm cache fetches nothing. The datasets sit
    at a bucket's root: a listing's prefix then has no '/', which moto's
    signature check mishandles (see s3_checks)."""
    moto.s3.create_bucket(Bucket="datasets")
    for d, _, names in os.walk(root):
        for n in names:
            if n == "index.txt" and not d.endswith("shards"):  # HTTP's listing; S3 lists itself
                continue  # (shards/index.txt stays: there it versions the S3 listing)
            path = os.path.join(d, n)
            moto.s3.put_object(Bucket="datasets", Key=os.path.relpath(path, root), Body=open(path, "rb").read())
    env = env_without_aws(AWS_ACCESS_KEY_ID=moto.key_id, AWS_SECRET_ACCESS_KEY=moto.secret, AWS_REGION="us-east-1")
    cache = os.path.join(work, "cache")
    remote_flags = ["--data-root=s3://datasets", f"--s3-endpoint={moto.endpoint}", f"--cache-dir={cache}"]
    local = Server(BUILD, work, "local", f"--data-root={root}")
    remote = Server(BUILD, work, "remote", *remote_flags, "--metrics-port=0", env=env)
    try:
        for dataset in ("shards", "imgs"):
            want = epoch_hashes(work, local, dataset, f"local-{dataset}")
            got = epoch_hashes(work, remote, dataset, f"remote-{dataset}")
            check(len(want) == 12 and got == want,
                  f"'{dataset}' from s3:// gives the local server's two epochs, byte for byte ({len(got)} batches)")
        want_tokens, got_tokens = token_hashes(work, local, "local"), token_hashes(work, remote, "remote")
        check(len(want_tokens) == 6 and got_tokens == want_tokens and "s3://datasets/tok.model: 1 objects, 1 fetched"
              in open(remote.log).read(), "captions tokenised with a model in the store (tok.model, copied once) "
              "give the local server's token ids")
        log = open(remote.log).read()
        check("s3://datasets/shards: 4 objects, 4 fetched" in log and "s3://datasets/imgs: 48 objects, 48 fetched"
              in log, "each dataset was fetched once, whole (3 shards and index.txt; 48 images)")
        m = remote.scrape()
        requests = m[("stoker_server_storage_requests_total", '{store="s3"}')]
        check(m[("stoker_server_storage_cache_objects_total", '{result="fetched",store="s3"}')] == 53
              and m[("stoker_server_storage_cache_bytes", '{store="s3"}')] > 0
              and m[("stoker_server_storage_request_seconds_count", '{store="s3"}')] == requests >= 53 + 2,
              f"the server's storage metrics count the requests, their latency and the objects fetched ({requests})")
    finally:
        remote.stop()
        local.stop()
    # The same datasets behind nginx (index.txt lists each), and through the
    # fault proxy with 20 ms added to every request.
    site = Nginx(os.path.join(work, "site"), root, Pki(os.path.join(work, "site-pki")))
    proxy = FaultProxy(site.http, {})
    proxy.delay = 0.02
    try:
        for tag, url in (("http", f"http://127.0.0.1:{site.http}/"), ("slow", f"http://127.0.0.1:{proxy.port}")):
            web = Server(BUILD, work, tag, f"--data-root={url}", f"--cache-dir={os.path.join(work, 'cache-' + tag)}")
            try:
                for dataset in ("shards", "imgs"):
                    got = epoch_hashes(work, web, dataset, f"{tag}-{dataset}")
                    want = epoch_hashes(work, local_again(work, root), dataset, f"local2-{tag}-{dataset}")
                    check(got == want, f"'{dataset}' over {tag} HTTP gives the local server's epochs ({len(got)} batches)")
            finally:
                web.stop()
        # A restart over HTTP: the cached listing stands while index.txt's
        # ETag is unchanged (one HEAD; no HEAD per object).
        web = Server(BUILD, work, "http-restarted", f"--data-root=http://127.0.0.1:{site.http}/",
                     f"--cache-dir={os.path.join(work, 'cache-http')}", "--metrics-port=0")
        try:
            got = epoch_hashes(work, web, "imgs", "http-restarted")
            m = web.scrape()
            check(got == epoch_hashes(work, local_again(work, root), "imgs", "local3-imgs")
                  and m[("stoker_server_storage_requests_total", '{store="http"}')] == 1
                  and m[("stoker_server_storage_cache_objects_total", '{result="hit",store="http"}')] == 48,
                  "a server restarted over HTTP with a warm cache makes one request (index.txt's HEAD) for 48 "
                  "objects and serves the same epochs")
        finally:
            web.stop()
        # A cold cache behind a slow store (1.5 s a request): the job waits
        # to open the dataset while the server copies it; the client's log
        # says so, and the verdict is storage, not the fast epoch after it.
        proxy.delay = 1.5
        cold = Server(BUILD, work, "cold", f"--data-root=http://127.0.0.1:{proxy.port}",
                      f"--cache-dir={os.path.join(work, 'cache-cold')}")
        try:
            r = subprocess.run([os.path.join(BUILD, "client", "stoker-bench"), f"--servers={cold.address}",
                                "--dataset=shards", "--batch-size=8", "--epochs=1", "--device=cpu",
                                "--metrics-port=-1"], capture_output=True, timeout=120)
            out = r.stdout.decode() + r.stderr.decode()
            verdict = re.search(r"bottleneck: (\w+) \((.*)\)", out)
            check(r.returncode == 0 and verdict is not None and verdict.group(1) == "storage"
                  and "still being copied from its store to this server's cache" in out,
                  f"a job that waited for a cold cache's copy is told so and judged storage-bound "
                  f"({verdict.group(0) if verdict else out[-1500:]})")
            # stoker-diagnose with the same URL: the ladder shows the store
            # (a cold cache's first epoch, the copy timed from here).
            ladder = os.path.join(work, "ladder.json")
            r = subprocess.run([os.path.join(BUILD, "client", "stoker-diagnose"), f"--servers={cold.address}",
                                "--dataset=shards", "--batch-size=8", "--batches=4", "--warmup-batches=1",
                                "--device=cpu", f"--data-root=http://127.0.0.1:{proxy.port}", f"--json={ladder}"],
                               capture_output=True, timeout=180)
            out = r.stdout.decode() + r.stderr.decode()
            steps = json.load(open(ladder))["steps"] if r.returncode == 0 else []
            cold_step = steps[-1] if steps else {}
            check(r.returncode == 0 and len(steps) == 7 and cold_step.get("adds") == "store"
                  and cold_step.get("first_epoch_only") is True
                  and 0 < cold_step["images_per_second"] < steps[5]["images_per_second"]
                  and re.search(rf"store http://127\.0\.0\.1:{proxy.port}/+shards: 3 objects", out),
                  f"stoker-diagnose --data-root shows the store: a cold cache's first epoch below the full "
                  f"pipeline ({out[-2500:]})")
        finally:
            cold.stop()
            proxy.delay = 0.02
    finally:
        proxy.stop()
        site.stop()
        stop_local_again()
    restarted = Server(BUILD, work, "restarted", *remote_flags, "--metrics-port=0", env=env)
    try:
        got = epoch_hashes(work, restarted, "shards", "restarted")
        check(got == want_shards(work), "after a restart the same epochs")
        m = restarted.scrape()
        check("s3://datasets/shards: 4 objects, 0 fetched" in open(restarted.log).read()
              and m[("stoker_server_storage_cache_objects_total", '{result="hit",store="s3"}')] == 4
              and m[("stoker_server_storage_requests_total", '{store="s3"}')] == 1,
              "a restarted server with a warm cache makes one request (a HEAD of shards/index.txt, unchanged: no "
              "listing) and fetches nothing (4 cache hits)")
        got = epoch_hashes(work, restarted, "imgs", "restarted-imgs")
        m = restarted.scrape()
        check(m[("stoker_server_storage_requests_total", '{store="s3"}')] == 1 + 2
              and m[("stoker_server_storage_cache_objects_total", '{result="hit",store="s3"}')] == 4 + 48,
              "without an index.txt the S3 listing is made again (a HEAD finding none, one page) and nothing fetched")
    finally:
        restarted.stop()
    bad = Server(BUILD, work, "bad", "--data-root=s3://datasets", f"--s3-endpoint={moto.endpoint}",
                 f"--cache-dir={os.path.join(work, 'cache2')}", env=env_without_aws(AWS_ACCESS_KEY_ID=moto.key_id,
                                                                                    AWS_SECRET_ACCESS_KEY=SECRET))
    try:
        r = subprocess.run([os.path.join(BUILD, "client", "stoker-bench"), f"--servers={bad.address}",
                            "--dataset=shards", "--batch-size=8", "--device=cpu", "--metrics-port=-1",
                            "--connect-timeout-seconds=20"], capture_output=True, timeout=120)
        out = r.stderr.decode() + r.stdout.decode()
        check(r.returncode != 0 and "SignatureDoesNotMatch" in out and SECRET not in out
              and SECRET not in open(bad.log).read(),
              "a server with a wrong secret fails the session naming the store's answer, never the secret")
    finally:
        bad.stop()


LOADER_DIGESTS = """
import hashlib, sys
sys.path.insert(0, sys.argv[1])
import stoker
digests = []
for root in sys.argv[2:]:
    loader = stoker.Loader(dataset="shards", local_workers=2, data_root=root, batch_size=8, seed=7, device="cpu",
                           dtype="uint8", layout="nhwc", framework="numpy")
    digests.append(hashlib.sha256(b"".join(bytes(x) + bytes(y) for x, y in loader)).hexdigest())
print(" ".join(digests))
"""


def local_mode_checks(moto, work, root):
    """Local mode (stoker-bench --local-workers, the Python loader) and
    stoker-materialize read s3:// and http:// sources as their servers do."""
    env = env_without_aws(AWS_ACCESS_KEY_ID=moto.key_id, AWS_SECRET_ACCESS_KEY=moto.secret, AWS_REGION="us-east-1",
                          AWS_ENDPOINT_URL=moto.endpoint, STOKER_CACHE_DIR=os.path.join(work, "cache-local-mode"))
    site = Nginx(os.path.join(work, "site-local"), root, Pki(os.path.join(work, "site-local-pki")))
    web = f"http://127.0.0.1:{site.http}/"
    try:
        for dataset in ("shards", "imgs"):
            want = epoch_hashes(work, None, dataset, f"lm-local-{dataset}", local_root=root)
            for tag, url in (("s3", "s3://datasets"), ("http", web)):
                got = epoch_hashes(work, None, dataset, f"lm-{tag}-{dataset}", local_root=url, env=env)
                check(len(want) == 12 and got == want,
                      f"local mode on {tag} '{dataset}' gives the local directory's two epochs ({len(got)} batches)")
        # A catalog file naming datasets in two stores: a directory behind
        # nginx (its index.txt) and a brace list of shards in moto.
        catalog = os.path.join(work, "catalog.txt")
        with open(catalog, "w") as f:
            f.write(f"# name  where\nweb-imgs  {web}imgs/\ns3-shards  s3://datasets/shards/train-{{000000..000002}}.tar\n")
        server = Server(BUILD, work, "catalog", f"--data-root=catalog:{catalog}", f"--cache-dir={work}/cache-catalog",
                        env=env)
        try:
            for name, dataset in (("web-imgs", "imgs"), ("s3-shards", "shards")):
                got = epoch_hashes(work, server, name, f"catalog-{name}")
                want = epoch_hashes(work, local_again(work, root), dataset, f"catalog-local-{dataset}")
                check(len(want) == 12 and got == want, f"catalog entry '{name}' gives the epochs of the local "
                      f"'{dataset}' ({len(got)} batches)")
            check("s3-shards (s3://datasets/shards/train-{000000..000002}.tar): 3 objects, 3 fetched"
                  in open(server.log).read(),
                  "the brace list's three shards were fetched, nothing else")
        finally:
            server.stop()
            stop_local_again()
        got = epoch_hashes(work, None, "s3-shards", "catalog-local-mode", local_root=f"catalog:{catalog}", env=env)
        check(got == epoch_hashes(work, None, "shards", "lm-local-shards-again", local_root=root),
              "local mode reads the catalog too")
        r = subprocess.run([sys.executable, "-c", LOADER_DIGESTS, os.path.join(BUILD, "python"), root, web,
                            "s3://datasets"], capture_output=True, env=env, timeout=120)
        digests = r.stdout.decode().split()
        check(r.returncode == 0 and len(digests) == 3 and len(set(digests)) == 1,
              f"the Python loader's data_root= takes http:// and s3:// URLs, same batches: {r.stderr.decode()[-800:]}")
        made = {}
        for tag, source in (("local", root), ("http", web)):
            out = os.path.join(work, f"materialized-{tag}")
            r = subprocess.run([os.path.join(BUILD, "materialize", "stoker-materialize"), f"--data-root={source}",
                                "--dataset=imgs", "--prefix=resize(24)", f"--out={out}", "--local-workers=2",
                                "--shard-samples=20", "--progress=none", f"--cache-dir={work}/cache-materialize"],
                               capture_output=True, timeout=120)
            check(r.returncode == 0, f"stoker-materialize from a {tag} source: {r.stderr.decode()[-800:]}")
            made[tag] = {n: open(os.path.join(out, n), "rb").read() for n in sorted(os.listdir(out))}
            manifest = json.loads(made[tag]["manifest.json"])
            manifest.pop("created")  # when it was made: the two runs may fall in different seconds
            made[tag]["manifest.json"] = json.dumps(manifest, sort_keys=True).encode()
        check(len(made["local"]) >= 3 and made["http"] == made["local"],
              f"stoker-materialize from http:// writes the local source's shards, byte for byte ({sorted(made['local'])}; "
              f"differ: {[n for n in made['local'] if made['local'][n] != made['http'].get(n)]})")
        # Two processes sharing one cache (local-mode ranks on a node) take
        # turns: one copies, the other finds the copy.
        sync = [os.path.join(BUILD, "storage", "stoker-storage"), f"--cache-dir={work}/cache-shared", "sync", web,
                "shards"]
        procs = [subprocess.Popen(sync, stdout=subprocess.PIPE, stderr=subprocess.PIPE) for _ in range(2)]
        outs = [p.communicate(timeout=120)[0].decode() for p in procs]
        check(all(p.returncode == 0 for p in procs) and sorted("3 objects fetched" in o for o in outs) == [False, True]
              and any("0 objects fetched (0 bytes), 3 already cached" in o for o in outs),
              f"two processes syncing one dataset into one cache copy it once: {outs}")
    finally:
        site.stop()


def server_fault_checks(work, root):
    """A server whose store answers about a third of its requests with a
    fault (resets mid-body, 503 SlowDown, 429, truncated bodies, stalls: 1 in
    15 each) serves three epochs of the local server's bytes; its retry
    metrics count the faults by reason."""
    site = Nginx(os.path.join(work, "site-faults"), root, Pki(os.path.join(work, "site-faults-pki")))
    kinds = ["reset", "503", "429", "truncate", "stall"]
    plan = {n: kinds[(n // 3) % 5] for n in range(3, 600, 3)}  # every third request: each kind 1 in 15
    proxy = FaultProxy(site.http, plan)
    server = Server(BUILD, work, "faults", f"--data-root=http://127.0.0.1:{proxy.port}/", "--metrics-port=0",
                    f"--cache-dir={os.path.join(work, 'cache-faults')}", "--storage-request-timeout=1",
                    "--storage-max-attempts=12")
    local = Server(BUILD, work, "faults-local", f"--data-root={root}")
    try:
        got = epoch_hashes(work, server, "imgs", "faults", epochs=3)
        want = epoch_hashes(work, local, "imgs", "faults-local", epochs=3)
        check(len(want) == 18 and got == want, f"through the fault proxy a server gives three epochs of the local "
              f"bytes ({len(got)} batches)")
        spoilt = {k: sum(1 for _, _, f in proxy.seen if f == k) for k in kinds}
        m = server.scrape()
        retries = {k[1]: v for k, v in m.items() if k[0] == "stoker_server_storage_retries_total"}
        check(all(spoilt[k] >= 0.05 * len(proxy.seen) for k in kinds)
              and retries.get('{reason="503",store="http"}') == spoilt["503"]
              and retries.get('{reason="429",store="http"}') == spoilt["429"]
              and retries.get('{reason="timeout",store="http"}', 0) >= 1
              and sum(retries.values()) >= sum(1 for _, method, f in proxy.seen  # a HEAD has no body to cut
                                               if f in ("reset", "503", "429", "stall") and not (f == "reset" and
                                                                                         method == "HEAD")),
              f"each fault hit at least 5 % of {len(proxy.seen)} requests ({spoilt}); the retry metrics show them "
              f"({retries})")
    finally:
        stop_all([server.proc, local.proc])
        proxy.stop()
        site.stop()


def s3_fault_checks(moto, work, root):
    """The fault proxy in front of moto (the store's clock an hour ahead, and
    about a quarter of requests spoilt): a server on s3:// through it serves
    three epochs of the local bytes, its retry metrics naming each fault."""
    kinds = ["reset", "503", "429", "truncate", "stall"]
    plan = {n: kinds[(n // 3) % 5] for n in range(3, 600, 3)}  # every third request: each kind 1 in 15
    proxy = FaultProxy(moto.port, plan)
    proxy.skew = 3600
    env = env_without_aws(AWS_ACCESS_KEY_ID=moto.key_id, AWS_SECRET_ACCESS_KEY=moto.secret, AWS_REGION="us-east-1")
    server = Server(BUILD, work, "s3-faults", "--data-root=s3://datasets", f"--s3-endpoint=http://127.0.0.1:{proxy.port}",
                    f"--cache-dir={os.path.join(work, 'cache-s3-faults')}", "--storage-request-timeout=1",
                    "--storage-max-attempts=12", "--metrics-port=0", env=env)
    try:
        got = epoch_hashes(work, server, "imgs", "s3-faults", epochs=3)
        check(got == want_faults(work), f"through the fault proxy, with the store's clock an hour ahead, a server on "
              f"s3:// gives three epochs of the local bytes ({len(got)} batches)")
        spoilt = {k: sum(1 for _, _, f in proxy.seen if f == k) for k in kinds}
        retries = {k[1]: v for k, v in server.scrape().items() if k[0] == "stoker_server_storage_retries_total"}
        check(all(spoilt[k] >= 0.05 * len(proxy.seen) for k in kinds)
              and retries.get('{reason="503",store="s3"}') == spoilt["503"]
              and retries.get('{reason="429",store="s3"}') == spoilt["429"]
              and retries.get('{reason="clock_skew",store="s3"}') == getattr(proxy, "skewed_answers", 0) == 1
              and retries.get('{reason="timeout",store="s3"}', 0) >= 1,
              f"each fault hit at least 5 % of {len(proxy.seen)} requests ({spoilt}), the clock was skewed once; the "
              f"retry metrics show them ({retries})")
    finally:
        server.stop()
        proxy.stop()


def want_faults(work):
    import json

    lines = [json.loads(l) for l in open(os.path.join(work, "batches-faults-local.jsonl"))]
    return sorted((l["epoch"], l["batch"], tuple(l["sample_indices"]), l["hash"]) for l in lines)


def listing_checks(work, count=100_000):
    """A dataset of `count` objects behind nginx (index.txt with one brace
    range): the listing's time (one GET and a HEAD per object, 16 at a time),
    the first copy's, and a restart's with a warm cache (one request)."""
    root = os.path.join(work, "many-root")
    os.makedirs(os.path.join(root, "many"))
    for i in range(count):
        with open(os.path.join(root, "many", f"obj-{i:06d}.bin"), "wb") as f:
            f.write(b"%016d" % i)
    with open(os.path.join(root, "many", "index.txt"), "w") as f:
        f.write(f"obj-{{000000..{count - 1:06d}}}.bin\n")
    site = Nginx(os.path.join(work, "site-many"), root, Pki(os.path.join(work, "site-many-pki")))
    url = f"http://127.0.0.1:{site.http}"
    try:
        t0 = time.monotonic()
        r = tool("ls", f"{url}/many")
        listed = time.monotonic() - t0
        c = counters(r.stderr)
        check(len(r.stdout.splitlines()) == count and c["requests"] == count + 1,
              f"listing {count:,} objects over HTTP took {listed:.1f} s ({c['requests']:,} requests)")
        sync = [os.path.join(BUILD, "storage", "stoker-storage"), f"--cache-dir={work}/cache-many", "sync", url, "many"]
        t0 = time.monotonic()
        first = subprocess.run(sync, capture_output=True, timeout=600)
        copied = time.monotonic() - t0
        t0 = time.monotonic()
        again = subprocess.run(sync, capture_output=True, timeout=600)
        restarted = time.monotonic() - t0
        check(first.returncode == 0 and f"{count} objects fetched" in first.stdout.decode()
              and again.returncode == 0 and f"{count} already cached, 1 requests" in again.stdout.decode(),
              f"copying them took {copied:.1f} s; a restart with the warm cache {restarted:.2f} s and one request"
              + ("" if again.returncode == 0 else f": {again.stderr.decode()[-500:]}"))
    finally:
        site.stop()
        shutil.rmtree(root, ignore_errors=True)
        shutil.rmtree(f"{work}/cache-many", ignore_errors=True)


def s3_listing_checks(work, count=100_000, few=2_000):
    """A prefix of `count` objects in an S3 store (moto, in this process,
    filled through its backend: 100,000 PUTs over HTTP take minutes): the
    listing's time (ListObjectsV2, 1,000 keys a page); and a prefix of `few`
    objects with an index.txt, copied, then synced again with the warm cache:
    one request (the index's HEAD), as over HTTP with 100,000 above."""
    import logging
    from moto.core import DEFAULT_ACCOUNT_ID
    from moto.s3.models import s3_backends
    from moto.server import ThreadedMotoServer

    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # no line per request
    port = free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    try:
        backends = s3_backends[DEFAULT_ACCOUNT_ID]
        backend = backends["aws"] if "aws" in backends else backends["global"]
        backend.create_bucket("listing", "us-east-1")
        for i in range(count):
            backend.put_object("listing", f"many/obj-{i:06d}.bin", b"%016d" % i)
        for i in range(few):
            backend.put_object("listing", f"few/obj-{i:06d}.bin", b"%016d" % i)
        backend.put_object("listing", "few/index.txt", f"obj-{{000000..{few - 1:06d}}}.bin\n".encode())
        env = env_without_aws(AWS_ACCESS_KEY_ID="moto", AWS_SECRET_ACCESS_KEY="moto", AWS_REGION="us-east-1")
        endpoint = f"--s3-endpoint=http://127.0.0.1:{port}"
        t0 = time.monotonic()
        r = subprocess.run([TOOL, "--counters", endpoint, "ls", "s3://listing/many"],
                           capture_output=True, timeout=600, env=env)
        listed = time.monotonic() - t0
        c = counters(r.stderr) if r.returncode == 0 else {"requests": -1}
        check(r.returncode == 0 and len(r.stdout.splitlines()) == count and c["requests"] == count // 1000,
              f"listing {count:,} objects in S3 (moto) took {listed:.1f} s ({c['requests']} requests of 1,000 keys)"
              + ("" if r.returncode == 0 else f": {r.stderr.decode()[-500:]}"))
        sync = [TOOL, endpoint, f"--cache-dir={work}/cache-s3-few", "sync",
                "s3://listing", "few"]
        first = subprocess.run(sync, capture_output=True, timeout=600, env=env)
        again = subprocess.run(sync, capture_output=True, timeout=600, env=env)
        check(first.returncode == 0 and f"{few + 1} objects fetched" in first.stdout.decode()
              and again.returncode == 0 and f"{few + 1} already cached, 1 requests" in again.stdout.decode(),
              f"an S3 prefix of {few:,} objects with an index.txt, synced again with the warm cache: one request "
              f"({again.stdout.decode().splitlines()[0] if again.stdout else ''}"
              + ("" if again.returncode == 0 and first.returncode == 0
                 else f"; {first.stderr.decode()[-300:]} {again.stderr.decode()[-300:]}") + ")")
    finally:
        server.stop()
        shutil.rmtree(f"{work}/cache-s3-few", ignore_errors=True)


_LOCAL = []


def local_again(work, root):
    """A local server over `root`, started once and kept for the comparisons."""
    if not _LOCAL:
        _LOCAL.append(Server(BUILD, work, "local2", f"--data-root={root}"))
    return _LOCAL[0]


def stop_local_again():
    while _LOCAL:
        _LOCAL.pop().stop()


def want_shards(work):
    import json

    lines = [json.loads(l) for l in open(os.path.join(work, "batches-local-shards.jsonl"))]
    return sorted((l["epoch"], l["batch"], tuple(l["sample_indices"]), l["hash"]) for l in lines)


def main():
    if shutil.which("nginx") is None and not os.path.exists("/usr/sbin/nginx"):
        raise SystemExit("nginx is missing: deploy/install-deps.sh installs nginx-light")
    os.environ["PATH"] += ":/usr/sbin"
    work = tempfile.mkdtemp(prefix="storage-real-")
    os.chmod(work, 0o755)
    root = os.path.join(work, "data")
    files = make_data(root)
    pki = Pki(os.path.join(work, "pki"))
    nginx = Nginx(work, root, pki, TOKEN)
    moto = None
    try:
        t0 = time.monotonic()
        http_checks(nginx, files, pki, work)
        fault_checks(nginx, files, root)
        moto = Moto(work)
        s3_checks(moto, files, work)
        datasets = os.path.join(work, "datasets")
        make_datasets(datasets)
        server_checks(moto, work, datasets)
        streamed_checks(moto, work, datasets)
        local_mode_checks(moto, work, datasets)
        server_fault_checks(work, datasets)
        s3_fault_checks(moto, work, datasets)
        listing_checks(work)
        s3_listing_checks(work)
        print(f"storage_real_test: all checks passed in {time.monotonic() - t0:.1f} s")
    finally:
        nginx.stop()
        if moto:
            moto.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
