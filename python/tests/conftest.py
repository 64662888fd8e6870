"""Fixtures for the Python package's tests: real stoker-server processes on
127.0.0.1 (free ports) over small image sets made by stoker-make-images.

The build tree comes from STOKER_BUILD_DIR (ctest sets it), else ./build.
"""

import io
import os
import re
import tarfile
import signal
import subprocess
import sys
import time

import pytest

SOURCE = os.environ.get("STOKER_SOURCE_DIR", os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..")))
BUILD = os.environ.get("STOKER_BUILD_DIR", os.path.join(SOURCE, "build"))
SERVER = os.path.join(BUILD, "server", "stoker-server")
BENCH = os.path.join(BUILD, "client", "stoker-bench")
MAKE_IMAGES = os.path.join(BUILD, "tests", "stoker-make-images")
if os.path.join(BUILD, "python") not in sys.path:
    sys.path.insert(0, os.path.join(BUILD, "python"))

os.environ.setdefault("STOKER_LOG_LEVEL", "1")  # warnings and errors only


def wait_for(path, pattern, seconds):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        with open(path) as f:
            m = re.search(pattern, f.read())
        if m:
            return m
        time.sleep(0.05)
    return None


class Server:
    """A stoker-server on 127.0.0.1 with a free port; stopped with SIGTERM."""

    def __init__(self, data_root, workdir, *args):
        self.log = os.path.join(workdir, f"server-{time.monotonic_ns()}.log")
        self.proc = subprocess.Popen([SERVER, "--host=127.0.0.1", "--port=0", "--metrics-port=-1",
                                      f"--data-root={data_root}", *args],
                                     stdout=open(self.log, "w"), stderr=subprocess.STDOUT)
        m = wait_for(self.log, r"listening on [\d.]+:(\d+)", 30)
        if not m:
            self.stop()
            raise RuntimeError(f"stoker-server did not start: {open(self.log).read()[-2000:]}")
        self.address = f"127.0.0.1:{m.group(1)}"

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def make_images(out, classes=4, per_class=16, min_side=48, max_side=96, seed=1):
    subprocess.run([MAKE_IMAGES, f"--out={out}", f"--classes={classes}", f"--per-class={per_class}",
                    f"--min-side={min_side}", f"--max-side={max_side}", f"--seed={seed}"],
                   check=True, capture_output=True)


def write_caption_shard(out_dir, data_root, n=16):
    """A WebDataset shard of n samples: sNNNN.jpg (from data_root/ds),
    .txt "caption number i", .cls i % 3."""
    os.makedirs(out_dir, exist_ok=True)
    jpegs = sorted(os.path.join(d, f) for d, _, fs in os.walk(os.path.join(data_root, "ds")) for f in fs)[:n]
    with tarfile.open(os.path.join(out_dir, "train-000000.tar"), "w") as tar:
        for i, path in enumerate(jpegs):
            with open(path, "rb") as f:
                jpeg = f.read()
            for ext, data in (("jpg", jpeg), ("txt", f"caption number {i}".encode()), ("cls", str(i % 3).encode())):
                info = tarfile.TarInfo(f"s{i:04d}.{ext}")
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))


def make_media_tree(root, clips):
    """root/clips/<class>/<name> for each (class, name, ffmpeg arguments) of
    `clips`: audio or video files made by Debian's ffmpeg."""
    for cls, name, args in clips:
        os.makedirs(root / "clips" / cls, exist_ok=True)
        subprocess.run(f"ffmpeg -v error -y {args} {root / 'clips' / cls / name}", shell=True, check=True,
                       stdin=subprocess.DEVNULL)


def files_by_index(tree):
    """A class-per-folder tree's files by sample index, as the server orders
    them: sorted classes, then sorted names."""
    out = []
    for cls in sorted(os.listdir(tree)):
        out += [tree / cls / f for f in sorted(os.listdir(tree / cls)) if ".stoker-index" not in f]  # not the sidecars
    return out


def write_shards(out_dir, samples, per_shard=2):
    """WebDataset shards of `samples` ([{extension: bytes}], keyed s000...),
    `per_shard` samples each, members in the given order."""
    os.makedirs(out_dir, exist_ok=True)
    for start in range(0, len(samples), per_shard):
        with tarfile.open(os.path.join(out_dir, f"train-{start // per_shard:06d}.tar"), "w") as tar:
            for i in range(start, min(start + per_shard, len(samples))):
                for ext, data in samples[i].items():
                    info = tarfile.TarInfo(f"s{i:03d}.{ext}")
                    info.size = len(data)
                    tar.addfile(info, io.BytesIO(data))


@pytest.fixture(scope="session")
def data_root(tmp_path_factory):
    """ds: 64 images in 4 classes; other: 48 images in 3 classes."""
    root = tmp_path_factory.mktemp("data")
    make_images(str(root / "ds"))
    make_images(str(root / "other"), classes=3, seed=2)
    return str(root)


@pytest.fixture
def start_server(data_root, tmp_path):
    """start_server(*flags) -> Server; every server is stopped at the end."""
    servers = []

    def start(*args, root=None):
        s = Server(root or data_root, str(tmp_path), *args)
        servers.append(s)
        return s

    yield start
    for s in servers:
        s.stop()


@pytest.fixture
def two_servers(start_server):
    a, b = start_server("--workers=1"), start_server("--workers=2")
    return f"{a.address},{b.address}"


SMALL = "random_resized_crop(32), random_horizontal_flip(0.5)"
