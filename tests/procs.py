"""The processes a test scenario starts (real stoker-server and stoker-bench
binaries on 127.0.0.1), each logging to its own file, all stopped at the
scenario's end: SIGTERM, then SIGKILL for any still running after 15 s."""
import os
import signal
import subprocess

from logwait import wait_for


def stop_all(procs):
    for p in procs:
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
    for p in procs:
        try:
            p.wait(timeout=15)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


class Procs:
    def __init__(self, tmp, build):
        self.tmp, self.build, self.procs, self.n = tmp, build, [], 0

    def start(self, argv, name, env=None):
        """Starts argv with its output in TMP/NN-name.log; (process, log path)."""
        self.n += 1
        log = os.path.join(self.tmp, f"{self.n:02d}-{name}.log")
        p = subprocess.Popen(argv, stdout=open(log, "w"), stderr=subprocess.STDOUT, env=env)
        self.procs.append(p)
        return p, log

    def server(self, data_root, *extra):
        """A one-worker stoker-server on free ports; (host:port, metrics port, log path)."""
        p, log = self.start([f"{self.build}/server/stoker-server", "--host=127.0.0.1", "--port=0", "--metrics-port=0",
                             f"--data-root={data_root}", "--workers=1", *extra], "server")
        g = wait_for(log, r"listening on [\d.]+:(\d+)", 20)
        m = wait_for(log, r"metrics on [\d.]+:(\d+)", 5)
        if not g or not m:
            raise RuntimeError(f"server did not start: {open(log).read()}")
        return f"127.0.0.1:{g.group(1)}", int(m.group(1)), log

    def bench(self, *args, name="bench"):
        """stoker-bench with no metrics endpoint; (process, log path)."""
        return self.start([f"{self.build}/client/stoker-bench", "--metrics-port=-1", *args], name)

    def stop(self):
        stop_all(self.procs)
