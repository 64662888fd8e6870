"""The programs as a user meets them: one log-level switch for the loader and
the servers, the loader quiet by default and loud on request through Python's
logging, the shared flags under --help, stoker-bench's metrics on loopback,
a prompt exit on SIGTERM, stoker-diagnose in local mode, `python -m stoker`.
(The console commands of an installed wheel: tests/wheel_test.sh.)"""

import http.client
import os
import re
import signal
import subprocess
import sys
import time

from conftest import BENCH, BUILD, MAKE_IMAGES, SERVER, wait_for

DIAGNOSE = os.path.join(BUILD, "client", "stoker-diagnose")
PYTHONPATH = os.path.join(BUILD, "python")


def make_images(root):
    subprocess.run([MAKE_IMAGES, f"--out={root}/ds", "--classes=2", "--per-class=8", "--min-side=40", "--max-side=64",
                    "--seed=3"], check=True, capture_output=True)


def run_loader(tmp_path, code, env_level=None):
    """Runs `code` in a fresh interpreter with a local-mode loader `l` over tmp_path/ds; its stderr."""
    env = {k: v for k, v in os.environ.items() if k != "STOKER_LOG_LEVEL"}
    env["PYTHONPATH"] = PYTHONPATH
    if env_level is not None:
        env["STOKER_LOG_LEVEL"] = env_level
    script = ("import stoker, logging, sys, time\n"
              f"def loader(**kw):\n"
              f"    return stoker.Loader(servers=None, local_workers=1, data_root={str(tmp_path)!r}, dataset='ds',\n"
              "                         batch_size=4, framework='numpy', device='cpu', **kw)\n" + code +
              "\ntime.sleep(0.8)\n")  # the log thread's next round
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, env=env)
    assert r.returncode == 0, r.stderr[-3000:]
    return r.stdout, r.stderr


def test_the_loader_is_quiet_by_default_and_logs_through_python_logging_on_request(tmp_path):
    make_images(tmp_path)
    _, quiet = run_loader(tmp_path, "l = loader(); sum(1 for _ in l); l.close()")
    assert "opening dataset" not in quiet and "batches in flight may hold" not in quiet, quiet
    assert not re.search(r"^I\d{8} ", quiet, re.M), f"glog INFO lines on stderr: {quiet[:500]}"
    # log_level= : the C++ client's INFO messages become records of the "stoker" logger, with their source.
    out, _ = run_loader(tmp_path, (
        "records = []\n"
        "class Keep(logging.Handler):\n"
        "    def emit(self, r): records.append((r.name, r.levelname, r.filename, r.getMessage()))\n"
        "logging.getLogger('stoker').addHandler(Keep())\n"
        "l = loader(log_level='info'); sum(1 for _ in l); l.close(); time.sleep(0.8)\n"
        "print(records)\n"))
    assert "('stoker', 'INFO', 'dataset.cc', \"opening dataset 'ds'" in out, out[-2000:]
    # STOKER_LOG_LEVEL=info does the same without code; without a handler of the application's, to stderr.
    _, loud = run_loader(tmp_path, "l = loader(); sum(1 for _ in l); l.close()", env_level="info")
    assert "opening dataset 'ds'" in loud and "dataset.cc" in loud, loud[-2000:]
    # With the application's own handler (basicConfig) each record is printed once, by it.
    _, once = run_loader(tmp_path, "logging.basicConfig(format='APP %(message)s')\n"
                         "l = loader(); sum(1 for _ in l); l.close()", env_level="info")
    assert once.count("opening dataset 'ds'") == 1 and "APP opening dataset 'ds'" in once, once[-2000:]
    # logging's own levels are taken too (by threshold).
    out, _ = run_loader(tmp_path, "stoker.set_log_level(logging.ERROR); print(logging.getLogger('stoker').level)")
    assert out.strip() == "40"
    # A bad value is named, and the default kept.
    _, bad = run_loader(tmp_path, "l = loader(); sum(1 for _ in l); l.close()", env_level="loud")
    assert "STOKER_LOG_LEVEL ignored: log level 'loud': expected debug, info, warning, error" in bad, bad[-2000:]
    assert "opening dataset" not in bad


def start_server(tmp_path, level=None, *args):
    env = {k: v for k, v in os.environ.items() if k != "STOKER_LOG_LEVEL"}
    if level is not None:
        env["STOKER_LOG_LEVEL"] = level
    log = tmp_path / f"server-{time.monotonic_ns()}.log"
    proc = subprocess.Popen([SERVER, "--host=127.0.0.1", "--port=0", f"--data-root={tmp_path}", *args],
                            stdout=open(log, "w"), stderr=subprocess.STDOUT, env=env)
    m = wait_for(log, r"listening on [\d.]+:(\d+)", 30)
    assert m, log.read_text()[-2000:]
    return proc, log, int(m.group(1))


def test_stoker_log_level_sets_the_servers_level_too(tmp_path):
    make_images(tmp_path)
    for level, expect_info in (("warning", False), ("info", True)):
        proc, log, _ = start_server(tmp_path, level, "--metrics-port=-1")
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=15) == 0
        text = log.read_text()
        assert "stoker-server listening on" in text  # the start-up line is not a log line
        assert ("serving " in text) == expect_info, f"STOKER_LOG_LEVEL={level}: {text[-1500:]}"


def test_the_server_exits_promptly_on_sigterm_with_a_scraper_connected(tmp_path):
    make_images(tmp_path)
    proc, log, _ = start_server(tmp_path, None, "--metrics-port=0")
    port = int(wait_for(log, r"metrics on [\d.]+:(\d+)", 10).group(1))
    scraper = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    scraper.request("GET", "/metrics")  # HTTP/1.1: the connection stays open, as Prometheus's does
    assert scraper.getresponse().read()
    start = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=15) == 0
    took = time.monotonic() - start
    scraper.close()
    # It took 2.6 s (civetweb waiting on the idle keep-alive connection); the
    # gRPC drain is immediate with no stream open.
    assert took < 1.5, f"stoker-server took {took:.2f} s to exit after SIGTERM"
    assert "stopped" in log.read_text()


def listening_address(port):
    """The local address a TCP socket of this machine listens on at `port` (/proc/net/tcp), or None."""
    with open("/proc/net/tcp") as f:
        for line in f.readlines()[1:]:
            local, state = line.split()[1], line.split()[3]
            addr, p = local.split(":")
            if int(p, 16) == port and state == "0A":  # LISTEN
                return ".".join(str(int(addr[i:i + 2], 16)) for i in (6, 4, 2, 0))
    return None


def test_bench_serves_metrics_on_loopback_unless_asked(tmp_path):
    make_images(tmp_path)
    for args, host in (([], "127.0.0.1"), (["--metrics-host=0.0.0.0"], "0.0.0.0")):
        out = tmp_path / f"bench-{host}.out"
        proc = subprocess.Popen([BENCH, "--local-workers=1", f"--data-root={tmp_path}", "--dataset=ds",
                                 "--batch-size=2", "--epochs=2", "--step-ms=100", "--device=none", "--metrics-port=0",
                                 *args], stdout=open(out, "w"), stderr=subprocess.STDOUT)
        try:
            m = wait_for(out, rf"stoker-bench metrics on {re.escape(host)}:(\d+)", 30)
            assert m, out.read_text()[-2000:]
            assert listening_address(int(m.group(1))) == host
        finally:
            proc.kill()
            proc.wait()
    # An address of no interface here is refused, naming it: the flag is used.
    r = subprocess.run([BENCH, "--local-workers=1", f"--data-root={tmp_path}", "--dataset=ds", "--epochs=1",
                        "--device=none", "--metrics-port=0", "--metrics-host=192.0.2.1"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode != 0 and "192.0.2.1" in r.stdout + r.stderr, r.stdout + r.stderr


def test_the_tools_help_shows_the_shared_tls_and_storage_flags():
    for program, flags in ((BENCH, ("--tls_ca", "--auth_token_file")),
                           (DIAGNOSE, ("--tls_ca", "--auth_token_file", "--s3_endpoint"))):
        r = subprocess.run([program, "--help"], capture_output=True, text=True, timeout=30)
        for flag in flags:
            assert flag in r.stdout + r.stderr, f"{os.path.basename(program)} --help lacks {flag}"


def test_diagnose_runs_in_local_mode(tmp_path):
    make_images(tmp_path)
    r = subprocess.run([DIAGNOSE, "--local-workers=2", f"--data-root={tmp_path}", "--dataset=ds", "--batch-size=4",
                        "--batches=3", "--warmup-batches=0", "--device=cpu"], capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    assert f"2 local worker(s) over {tmp_path}" in r.stdout
    assert re.search(r"^bottleneck: \w+", r.stdout, re.M), r.stdout[-1500:]
    none = subprocess.run([DIAGNOSE, "--dataset=ds"], capture_output=True, text=True, timeout=30)
    assert none.returncode == 2 and "--servers or --local-workers N" in none.stderr


def test_python_m_stoker_lists_the_programs_and_says_when_they_are_missing():
    env = dict(os.environ, PYTHONPATH=PYTHONPATH)
    r = subprocess.run([sys.executable, "-m", "stoker"], capture_output=True, text=True, timeout=60, env=env)
    assert r.returncode == 2 and "stoker-server" in r.stderr and "stoker-diagnose" in r.stderr
    # The build tree's package has no programs beside its extension (the wheels do).
    r = subprocess.run([sys.executable, "-m", "stoker", "server", "--help"], capture_output=True, text=True,
                       timeout=60, env=env)
    assert r.returncode != 0 and "stoker-server: not in this installation of stoker" in r.stderr, r.stderr
