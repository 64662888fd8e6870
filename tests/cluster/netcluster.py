"""Several hosts on one machine: network namespaces joined by veth pairs to a
bridge, each host's link shaped with tc, names resolved from hosts files the
harness writes.

    with NetCluster(["s1", "s2", "trainer"]) as c:
        c.shape("trainer", rate_mbit=50, delay_ms=2)
        c.set_names({"data": ["s1", "s2"]})
        p = c.popen("s1", [server, "--port=50051", ...])
        c.link("s1", up=False)   # the cable pulled: no FIN, packets dropped

Layout: a "switch" namespace holds the bridge; each host is a namespace with
one interface, eth0 (10.213.0.H/24), whose peer is a port of the bridge. tc
on both ends of a host's veth pair shapes the link both ways: tbf for the
rate, netem for the delay where the kernel has sch_netem (where it has not,
shape() says the delay was not applied). The root namespace is never touched: no interface, route or
address is added there, and only addresses inside these namespaces are used.
`ip netns exec` bind-mounts /etc/netns/NS/hosts over /etc/hosts for what it
starts, so a host resolves names from the file this harness writes (in
place, so that running processes see changes: getaddrinfo reads it on every
lookup).

Teardown (on exit, also when a test fails or raises) kills the processes
started through the harness, deletes the namespaces (their veths go with
them) and the /etc/netns entries. Namespaces left by a run that was killed
(its pid gone) are removed at the next start. Needs root (CAP_SYS_ADMIN and
CAP_NET_ADMIN); `unavailable()` says why not, for a loud skip.
"""
import os
import re
import signal
import subprocess
import time

PREFIX = "stkc"


def _ip(*args, check=True):
    return subprocess.run(["ip", *args], check=check, capture_output=True, text=True)


def unavailable():
    """None if namespaces, veths, bridges and netem can be made here; else why not."""
    name = f"{PREFIX}probe{os.getpid()}"
    try:
        r = _ip("netns", "add", name, check=False)
        if r.returncode != 0:
            return f"ip netns add: {r.stderr.strip() or 'failed'}"
        steps = [["-n", name, "link", "add", "br0", "type", "bridge"],
                 ["-n", name, "link", "add", "v0", "type", "veth", "peer", "name", "v1"],
                 ["-n", name, "link", "set", "v0", "up"]]
        for s in steps:
            r = _ip(*s, check=False)
            if r.returncode != 0:
                return f"ip {' '.join(s)}: {r.stderr.strip()}"
        r = subprocess.run(["ip", "netns", "exec", name, "tc", "qdisc", "add", "dev", "v0", "root", *_tbf(100)],
                           capture_output=True, text=True)
        if r.returncode != 0:
            return f"tc tbf: {r.stderr.strip()} (the sch_tbf module may be missing)"
        return None
    except FileNotFoundError as e:
        return f"{e.filename} is not installed (iproute2)"
    finally:
        _ip("netns", "del", name, check=False)


def _tbf(rate_mbit):
    # burst: at least one timer tick's worth of bytes at the rate (HZ >= 250).
    burst = max(64 * 1024, int(rate_mbit * 1e6 / 8 / 250))
    return ["tbf", "rate", f"{rate_mbit}mbit", "burst", str(burst), "latency", "100ms"]


_netem = None


def netem_available():
    """Whether this kernel has sch_netem (link delay). Firecracker-style VM
    kernels often lack it; links then get their rate but no added delay."""
    global _netem
    if _netem is None:
        name = f"{PREFIX}probe{os.getpid()}n"
        _ip("netns", "add", name, check=False)
        r = subprocess.run(["ip", "netns", "exec", name, "tc", "qdisc", "add", "dev", "lo", "root", "netem", "delay",
                            "1ms"], capture_output=True, text=True)
        _ip("netns", "del", name, check=False)
        _netem = r.returncode == 0
    return _netem


def remove_stale():
    """Namespaces of earlier runs whose process is gone."""
    out = _ip("netns", "list", check=False).stdout
    for m in re.finditer(rf"^({PREFIX}(?:probe)?(\d+)\S*)", out, re.M):
        ns, pid = m.group(1), int(m.group(2))
        if not os.path.exists(f"/proc/{pid}"):
            _ip("netns", "del", ns, check=False)
            _rm_netns_etc(ns)


def _rm_netns_etc(ns):
    for f in ("hosts",):
        try:
            os.unlink(f"/etc/netns/{ns}/{f}")
        except FileNotFoundError:
            pass
    try:
        os.rmdir(f"/etc/netns/{ns}")
    except OSError:
        pass


class NetCluster:
    def __init__(self, hosts, subnet=213, rate_mbit=1000, delay_ms=0):
        self.tag = f"{PREFIX}{os.getpid()}"
        self.switch = f"{self.tag}sw"
        self.hosts = list(hosts)
        self.subnet = subnet
        self.default_link = (rate_mbit, delay_ms)
        self.procs = []
        self.names = {}

    # --- set-up and teardown -------------------------------------------
    def __enter__(self):
        remove_stale()
        try:
            self._create()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def ns(self, host):
        return f"{self.tag}{host}"

    def addr(self, host):
        return f"10.{self.subnet}.0.{self.hosts.index(host) + 2}"

    def _port(self, host):
        return f"p{self.hosts.index(host)}"

    def _create(self):
        _ip("netns", "add", self.switch)
        _ip("-n", self.switch, "link", "add", "br0", "type", "bridge")
        _ip("-n", self.switch, "link", "set", "br0", "up")
        _ip("-n", self.switch, "link", "set", "lo", "up")
        for h in self.hosts:
            ns = self.ns(h)
            _ip("netns", "add", ns)
            os.makedirs(f"/etc/netns/{ns}", exist_ok=True)
            _ip("-n", self.switch, "link", "add", self._port(h), "type", "veth", "peer", "name", "eth0", "netns", ns)
            _ip("-n", self.switch, "link", "set", self._port(h), "master", "br0", "up")
            _ip("-n", ns, "link", "set", "lo", "up")
            _ip("-n", ns, "addr", "add", f"{self.addr(h)}/24", "dev", "eth0")
            _ip("-n", ns, "link", "set", "eth0", "up")
            self.shape(h, *self.default_link)
        self.set_names({})

    def close(self):
        for p in self.procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        deadline = time.time() + 10
        for p in self.procs:
            try:
                p.wait(timeout=max(0.1, deadline - time.time()))
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        for h in self.hosts:
            _ip("netns", "del", self.ns(h), check=False)
            _rm_netns_etc(self.ns(h))
        _ip("netns", "del", self.switch, check=False)

    # --- the network -----------------------------------------------------
    def shape(self, host, rate_mbit, delay_ms=0):
        """The host's link: rate (tc tbf) and one-way delay (tc netem, where
        the kernel has it; see netem_available) in each direction. Returns
        what was applied, for the test's log."""
        delay = delay_ms > 0 and netem_available()
        for ns, dev in ((self.ns(host), "eth0"), (self.switch, self._port(host))):
            tc = ["ip", "netns", "exec", ns, "tc", "qdisc"]
            subprocess.run(tc + ["del", "dev", dev, "root"], capture_output=True)
            if delay:
                subprocess.run(tc + ["add", "dev", dev, "root", "handle", "1:", "netem", "delay", f"{delay_ms}ms",
                                     "limit", "100000"], check=True, capture_output=True)
                subprocess.run(tc + ["add", "dev", dev, "parent", "1:1", "handle", "10:", *_tbf(rate_mbit)],
                               check=True, capture_output=True)
            else:
                subprocess.run(tc + ["add", "dev", dev, "root", *_tbf(rate_mbit)], check=True, capture_output=True)
        applied = f"{host}: {rate_mbit} mbit/s each way"
        if delay_ms > 0:
            applied += f", {delay_ms} ms delay" if delay else f", no delay (this kernel has no sch_netem)"
        return applied

    def link(self, host, up):
        """Plugs or pulls the host's cable at the switch: pulled, packets are
        dropped with no FIN or RST; the host's eth0 loses carrier."""
        _ip("-n", self.switch, "link", "set", self._port(host), "up" if up else "down")

    def set_names(self, names):
        """names: {name: [host, ...]}; every host's own name resolves too.
        Rewritten in place in every host's hosts file."""
        self.names = dict(names)
        lines = ["127.0.0.1 localhost"]
        lines += [f"{self.addr(h)} {h}" for h in self.hosts]
        for name, members in self.names.items():
            lines += [f"{self.addr(h)} {name}" for h in members]
        text = "\n".join(lines) + "\n"
        for h in self.hosts:
            path = f"/etc/netns/{self.ns(h)}/hosts"
            with open(path, "a+") as f:  # same inode: the bind mounts see the change
                f.seek(0)
                f.truncate()
                f.write(text)

    # --- processes -------------------------------------------------------
    def popen(self, host, argv, **kwargs):
        p = subprocess.Popen(["ip", "netns", "exec", self.ns(host), *argv], **kwargs)
        self.procs.append(p)
        return p

    def run(self, host, argv, **kwargs):
        return subprocess.run(["ip", "netns", "exec", self.ns(host), *argv], **kwargs)
