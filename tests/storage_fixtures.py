"""Real stores and servers on 127.0.0.1 for the storage tests and the
storage benchmark: Debian's nginx (HTTP and HTTPS, Range requests, an
optional bearer-token location), a fault-injecting HTTP proxy, moto's S3
server, and stoker-server processes. Every process stops with its owner."""

import http.client
import os
import re
import signal
import socket
import socketserver
import subprocess
import sys
import threading
import time

from logwait import wait_for
from procs import stop_all


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port, seconds=20):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"nothing listens on 127.0.0.1:{port}")


class Nginx:
    """Debian's nginx serving `root` on 127.0.0.1 over HTTP and HTTPS;
    /private/ needs the bearer token."""

    def __init__(self, work, root, pki, token=""):
        os.makedirs(work, exist_ok=True)
        self.http, self.https = free_port(), free_port()
        conf = os.path.join(work, "nginx.conf")
        with open(conf, "w") as f:
            f.write(f"""daemon off; worker_processes 1; user root; pid {work}/nginx.pid;
error_log {work}/nginx-error.log;
events {{ worker_connections 256; }}
http {{
  access_log {work}/nginx-access.log;
  client_body_temp_path {work}/tmp; proxy_temp_path {work}/tmp; fastcgi_temp_path {work}/tmp;
  uwsgi_temp_path {work}/tmp; scgi_temp_path {work}/tmp;
  keepalive_requests 10000;
  server {{
    listen 127.0.0.1:{self.http}; listen 127.0.0.1:{self.https} ssl;
    ssl_certificate {pki.path('server.pem')}; ssl_certificate_key {pki.path('server.key')};
    root {root};
    location /private/ {{ if ($http_authorization != "Bearer {token}") {{ return 401; }} }}
  }}
}}
""")
        os.makedirs(os.path.join(work, "tmp"), exist_ok=True)
        self.access_log = os.path.join(work, "nginx-access.log")
        self.root = root
        self.proc = subprocess.Popen(["nginx", "-c", conf, "-p", work], stdout=subprocess.DEVNULL,
                                     stderr=open(os.path.join(work, "nginx-stderr.log"), "w"))
        wait_port(self.http)
        wait_port(self.https)

    def gets(self):
        with open(self.access_log) as f:
            return sum(1 for l in f if '"GET ' in l)

    def stop(self):
        self.proc.send_signal(signal.SIGQUIT)
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()


class FaultProxy:
    """HTTP/1.1 in front of nginx (or moto) that spoils answers on a
    schedule: `plan` maps a request's number (1, 2, ...) to a fault. With
    `skew` (seconds), the proxy's clock is that far from this machine's, and
    a signed S3 request whose X-Amz-Date is more than 15 minutes from it is
    refused as S3 does (403 RequestTimeTooSkewed, with the proxy's Date)."""

    def __init__(self, upstream_port, plan):
        self.upstream, self.plan, self.count = upstream_port, plan, 0
        self.seen = []
        self.lock = threading.Lock()
        self.on_request = None  # called with the request number before it is answered
        self.delay = 0.0  # seconds added before each answer
        self.skew = None
        proxy = self

        class Handler(socketserver.StreamRequestHandler):
            def handle(self):
                while True:
                    line = self.rfile.readline()
                    if not line:
                        return
                    headers = {}
                    while True:
                        h = self.rfile.readline()
                        if h in (b"\r\n", b"\n", b""):
                            break
                        k, v = h.decode().split(":", 1)
                        headers[k.strip()] = v.strip()
                    method, path, _ = line.decode().split(" ", 2)
                    with proxy.lock:
                        proxy.count += 1
                        n = proxy.count
                        fault = proxy.plan.get(n)
                        proxy.seen.append((n, method, fault))
                    if proxy.on_request:
                        proxy.on_request(n)
                    if proxy.delay:
                        time.sleep(proxy.delay)
                    if not proxy.answer(self.wfile, method, path, headers, fault):
                        return

        class Server(socketserver.ThreadingMixIn, socketserver.TCPServer):
            daemon_threads = True
            allow_reuse_address = True
            request_queue_size = 128  # many connections at once (the default 5 drops SYNs: 1 s retransmits)

        self.server = Server(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def skewed(self, headers):
        """Whether a signed request's time is off the proxy's clock."""
        import calendar

        amz = next((v for k, v in headers.items() if k.lower() == "x-amz-date"), None)
        if self.skew is None or amz is None:
            return False
        sent = calendar.timegm(time.strptime(amz, "%Y%m%dT%H%M%SZ"))
        return abs(sent - (time.time() + self.skew)) > 900

    def answer(self, out, method, path, headers, fault):
        """Forwards upstream and writes the (spoilt) answer; False closes."""
        if fault is None and self.skewed(headers):
            body = b"<Error><Code>RequestTimeTooSkewed</Code></Error>"
            date = time.strftime("%a, %d %b %Y %H:%M:%S GMT", time.gmtime(time.time() + self.skew))
            with self.lock:
                self.skewed_answers = getattr(self, "skewed_answers", 0) + 1
            out.write(f"HTTP/1.1 403 Forbidden\r\nDate: {date}\r\nContent-Length: {len(body)}\r\n\r\n".encode()
                      + (b"" if method == "HEAD" else body))
            return True
        if fault in ("503", "429"):
            body = (b"<Error><Code>SlowDown</Code></Error>" if fault == "503" else b"<Error><Code>TooMany</Code></Error>")
            out.write(f"HTTP/1.1 {fault} X\r\nContent-Length: {len(body)}\r\n\r\n".encode() + body)
            return True
        if fault == "stall":
            time.sleep(3)
            return False
        up = http.client.HTTPConnection("127.0.0.1", self.upstream, timeout=30)
        up.request(method, path, headers={k: v for k, v in headers.items() if k.lower() != "connection"})
        r = up.getresponse()
        head = f"HTTP/1.1 {r.status} {r.reason}\r\n" + "".join(
            f"{k}: {v}\r\n" for k, v in r.getheaders() if k.lower() not in ("connection", "transfer-encoding")) + "\r\n"
        if fault is None and r.getheader("content-length") is not None:  # streamed as it arrives
            out.write(head.encode())
            while method != "HEAD":
                chunk = r.read1(1 << 20)
                if not chunk:
                    break
                out.write(chunk)
            up.close()
            return True
        body = r.read()
        up.close()
        if fault == "reset" and len(body) > 10:
            out.write(head.encode() + body[:len(body) // 2])
            out.flush()
            self.server.shutdown_request  # noqa: B018 (the socket closes when the handler returns)
            return False
        if fault == "truncate" and len(body) > 10:
            out.write(head.encode() + body[:len(body) - 7])
            return False
        out.write(head.encode() + (b"" if method == "HEAD" else body))
        return True

    def stop(self):
        self.server.shutdown()
        self.server.server_close()


class Server:
    """A stoker-server on 127.0.0.1 with a free port, logging to WORK/server-TAG.log."""

    def __init__(self, build, work, tag, *flags, env=None):
        self.log = os.path.join(work, f"server-{tag}.log")
        self.proc = subprocess.Popen([os.path.join(build, "server", "stoker-server"), "--host=127.0.0.1", "--port=0",
                                      "--metrics-port=-1", "--workers=2", *flags],
                                     stdout=open(self.log, "w"), stderr=subprocess.STDOUT, env=env)
        m = wait_for(self.log, r"listening on [\d.]+:(\d+)", 30)
        if not m:
            stop_all([self.proc])
            raise AssertionError(f"stoker-server did not start: {open(self.log).read()[-2000:]}")
        self.address = f"127.0.0.1:{m.group(1)}"
        m = "--metrics-port=0" in flags and wait_for(self.log, r"metrics on [\d.]+:(\d+)", 10)
        self.metrics = f"http://127.0.0.1:{m.group(1)}/metrics" if m else None

    def scrape(self):
        """{(name, labels text): value} of the server's metrics (with --metrics-port=0)."""
        import urllib.request

        out = {}
        for line in urllib.request.urlopen(self.metrics, timeout=10).read().decode().splitlines():
            m = re.fullmatch(r"([a-z_]+)(\{[^}]*\})? (\S+)", line)
            if m:
                out[(m.group(1), m.group(2) or "")] = float(m.group(3))
        return out

    def stop(self):
        stop_all([self.proc])


class Moto:
    """moto's S3 server (with IAM and STS) on 127.0.0.1; with `auth`,
    authentication is enforced after the set-up's first three calls (an IAM
    user, its policy and its access key)."""

    def __init__(self, work, auth=True):
        self.port = free_port()
        env = dict(os.environ, MOTO_ALLOW_NONEXISTENT_REGION="1")
        if auth:
            env["INITIAL_NO_AUTH_ACTION_COUNT"] = "3"
        self.log = os.path.join(work, f"moto-{self.port}.log")
        self.proc = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(self.port)],
                                     stdout=open(self.log, "w"), stderr=subprocess.STDOUT, env=env)
        wait_port(self.port, 60)
        self.endpoint = f"http://127.0.0.1:{self.port}"
        import boto3
        from botocore.config import Config

        self.key_id, self.secret = "unused-key", "unused-secret"
        if auth:
            anon = dict(endpoint_url=self.endpoint, region_name="us-east-1", aws_access_key_id="x",
                        aws_secret_access_key="x")
            iam = boto3.client("iam", **anon)
            iam.create_user(UserName="loader")
            iam.put_user_policy(UserName="loader", PolicyName="all",
                                PolicyDocument='{"Version": "2012-10-17", "Statement": [{"Effect": "Allow", '
                                               '"Action": "*", "Resource": "*"}]}')
            key = iam.create_access_key(UserName="loader")["AccessKey"]
            self.key_id, self.secret = key["AccessKeyId"], key["SecretAccessKey"]
        self.s3 = boto3.client("s3", endpoint_url=self.endpoint, region_name="us-east-1",
                               aws_access_key_id=self.key_id, aws_secret_access_key=self.secret,
                               config=Config(request_checksum_calculation="when_required",
                                             response_checksum_validation="when_required"))

    def stop(self):
        stop_all([self.proc])
