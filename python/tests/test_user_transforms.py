"""Users' own Python transforms (issue 31): python(module:function) ops run
by real stoker-server processes in their Python worker processes, and by
local mode in the training host's own; their pixels against the function
called directly, determinism and exactly-once through a server SIGKILL, and
each fault a user's function can have, while another session is served."""

import os
import re
import signal
import sys
import threading
import time
import urllib.request

import numpy as np
import pytest

import stoker
from conftest import SOURCE, wait_for, write_caption_shard

TRANSFORMS = os.path.join(SOURCE, "tests", "python_transforms")
MODULE = "stoker_test_transforms"
PLAIN = "center_crop(32)"


@pytest.fixture(autouse=True)
def transforms_on_path(monkeypatch):
    """The servers and local mode import the test module from PYTHONPATH."""
    paths = [TRANSFORMS] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(paths))
    sys.path.insert(0, TRANSFORMS)
    yield
    sys.path.remove(TRANSFORMS)


def python_server(start_server, *flags, **kw):
    return start_server(f"--python-transforms={MODULE}", f"--python-executable={sys.executable}", *flags, **kw)


def loader(servers, pipeline, **kw):
    args = dict(servers=servers, dataset="ds", pipeline=pipeline, batch_size=8, seed=7, device="cpu", dtype="uint8",
                layout="nhwc", framework="numpy")
    args.update(kw)
    return stoker.Loader(**args)


def epoch(l, e=0):
    """{sample index: (image HWC uint8, label)} for one epoch, and the batches' infos."""
    out, infos = {}, []
    l.set_epoch(e)
    for images, labels in l:
        info = l.last_batch
        infos.append(info)
        for k, i in enumerate(info["sample_indices"]):
            assert i not in out, f"sample {i} twice"
            out[i] = (np.array(images[k]), int(labels[k]))
    return out, infos


def metrics(server):
    m = wait_for(server.log, r"metrics on [\d.]+:(\d+)", 10)
    return urllib.request.urlopen(f"http://127.0.0.1:{m.group(1)}/metrics", timeout=10).read().decode()


def metric(text, name, **labels):
    want = ",".join(f'{k}="{v}"' for k, v in labels.items())
    m = re.search(rf"^{name}{{{want}}} (\S+)$" if labels else rf"^{name} (\S+)$", text, re.M)
    return float(m.group(1)) if m else None


def test_the_pixels_are_the_function_called_with_the_documented_generator(start_server):
    import stoker_test_transforms as t

    server = python_server(start_server, "--python-workers=2")
    plain, _ = epoch(loader(server.address, PLAIN), 1)
    noisy, infos = epoch(loader(server.address, f"{PLAIN}, python({MODULE}:noise, amount=9)"), 1)
    assert sorted(noisy) == list(range(64))
    for i, (image, label) in noisy.items():
        expected = t.noise({"image": plain[i][0].copy()}, np.random.default_rng([7, 1, i, 1]), amount=9)["image"]
        np.testing.assert_array_equal(image, expected)
        assert label == plain[i][1]
    # The noise is really there, and depends on the epoch.
    assert any(not np.array_equal(noisy[i][0], plain[i][0]) for i in noisy)
    other_epoch, _ = epoch(loader(server.address, f"{PLAIN}, python({MODULE}:noise, amount=9)"), 2)
    assert any(not np.array_equal(noisy[i][0], other_epoch[i][0]) for i in noisy)
    assert all(info["failed_samples"] == 0 for info in infos)
    # In place or a new array, before or after built-in ops, gated by p.
    inverted, _ = epoch(loader(server.address, f"python({MODULE}:invert_in_place), {PLAIN}"), 1)
    for i in plain:
        np.testing.assert_array_equal(inverted[i][0], 255 - plain[i][0])
    gated, _ = epoch(loader(server.address, f"{PLAIN}, python({MODULE}:invert, p=0.5)"), 1)
    flipped = sum(np.array_equal(gated[i][0], 255 - plain[i][0]) for i in plain)
    assert 10 < flipped < 54, flipped


def test_the_stage_time_is_its_own_in_batches_metrics_and_verdict(start_server):
    server = python_server(start_server, "--python-workers=1", "--workers=1", "--metrics-port=0")
    l = loader(server.address, f"{PLAIN}, python({MODULE}:sleeps, seconds=0.01)", batch_size=4)
    _, infos = epoch(l)
    stats = l.stats()
    assert stats["bottleneck"] == "python_transform", stats
    text = metrics(server)
    assert metric(text, "stoker_server_sample_stage_seconds_count", stage="python") >= 64
    assert metric(text, "stoker_server_sample_stage_seconds_sum", stage="python") >= 0.64
    assert metric(text, "stoker_server_python_workers") == 1


def test_local_mode_runs_the_stage_in_the_hosts_own_processes(start_server, data_root):
    pipeline = f"{PLAIN}, python({MODULE}:noise, amount=5)"
    server = python_server(start_server)
    remote, _ = epoch(loader(server.address, pipeline), 3)
    local_loader = loader(None, pipeline, local_workers=2, data_root=data_root, python_transforms=[MODULE],
                          python_workers=2)
    local, _ = epoch(local_loader, 3)
    assert sorted(local) == sorted(remote) == list(range(64))
    for i in remote:
        np.testing.assert_array_equal(local[i][0], remote[i][0])
    # The processes are this host's: they report their own ids.
    pids, _ = epoch(loader(None, f"{PLAIN}, python({MODULE}:pid)", local_workers=1, data_root=data_root,
                           python_transforms=MODULE, python_workers=1))
    ids = {int(image[0, 0, 0]) | int(image[0, 0, 1]) << 8 | int(image[0, 0, 2]) << 16 for image, _ in pids.values()}
    assert len(ids) == 1 and ids != {os.getpid() & 0xFFFFFF}
    with pytest.raises(stoker.InvalidArgument, match="no_such_module"):
        loader(None, PLAIN, local_workers=1, data_root=data_root, python_transforms="no_such_module")


def test_exactly_once_and_the_same_bytes_through_a_server_sigkill(start_server):
    pipeline = f"random_resized_crop(32), python({MODULE}:noise, amount=5)"
    a, b = python_server(start_server, "--workers=1"), python_server(start_server, "--workers=1")
    reference, _ = epoch(loader(b.address, pipeline, batch_size=4), 0)
    l = loader(f"{a.address},{b.address}", pipeline, batch_size=4, window=1)
    got = {}
    l.set_epoch(0)
    for n, (images, labels) in enumerate(l):
        for k, i in enumerate(l.last_batch["sample_indices"]):
            assert i not in got
            got[i] = np.array(images[k])
        if n == 3:
            a.proc.send_signal(signal.SIGKILL)
    assert a.proc.wait(timeout=10) == -signal.SIGKILL
    assert sorted(got) == list(range(64))
    for i in reference:
        np.testing.assert_array_equal(got[i], reference[i][0])


class Background:
    """A session with no Python stage, served throughout a fault test."""

    def __init__(self, address):
        self.batches, self.error = 0, None
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.run, args=(address,), daemon=True)
        self.thread.start()

    def run(self, address):
        try:
            l = loader(address, PLAIN, batch_size=4, bad_sample_policy="fail")
            e = 0
            while not self.stop.is_set():
                got, _ = epoch(l, e)
                assert sorted(got) == list(range(64))
                self.batches += 16
                e += 1
        except Exception as error:  # reported by finish()
            self.error = error

    def finish(self):
        before = self.batches
        time.sleep(0.5)
        self.stop.set()
        self.thread.join(timeout=60)
        assert self.error is None, self.error
        assert self.batches > before or self.batches >= 16, "the other session stalled"
        return self.batches


@pytest.mark.parametrize("function, reason", [
    ("raises", r"python\(stoker_test_transforms:raises\) raised ValueError: this sample is not to my liking"),
    ("wrong_dtype", r"python\(stoker_test_transforms:wrong_dtype\) returned image has dtype float32; expected uint8"),
    ("not_a_dict", r"python\(stoker_test_transforms:not_a_dict\) returned a ndarray; expected the sample dict"),
    ("shrink, size=16", r"python\(stoker_test_transforms:shrink, size=16\) returned 16x16 pixels; the pipeline's "
                        r"output size is fixed at 32x32"),
])
def test_a_function_that_fails_fails_its_sample_with_a_reason(start_server, function, reason):
    server = python_server(start_server, "--workers=2", "--python-workers=2")
    background = Background(server.address)
    l = loader(server.address, f"{PLAIN}, python({MODULE}:{function})", bad_sample_policy="fail")
    with pytest.raises(stoker.DataLoss, match=reason):
        epoch(l)
    # Before a size-setting op, another size is fine.
    if function.startswith("shrink"):
        ok, _ = epoch(loader(server.address, f"python({MODULE}:shrink, size=40), {PLAIN}"))
        assert len(ok) == 64
    assert background.finish() > 0


def test_under_skip_failed_samples_are_replaced_and_listed(start_server):
    server = python_server(start_server, "--workers=2", "--python-workers=2")
    l = loader(server.address, f"{PLAIN}, python({MODULE}:raises_sometimes, p=0.2)")
    assert l.stats()["failed_samples"] == 0
    got, infos = epoch(l)
    failures = [f for info in infos for f in info.get("failures", [])]
    assert 3 <= len(failures) <= 30, failures
    # Issue 49: stats() counts them, not only last_batch (which shows the latest batch's).
    assert l.stats()["failed_samples"] == len(failures) == l.stats()["replaced_samples"]
    for index, why, replaced_by in failures:
        assert "python(stoker_test_transforms:raises_sometimes) raised RuntimeError: unlucky draw" in why
        assert replaced_by >= 0 and replaced_by != index
    assert sum(len(info["sample_indices"]) for info in infos) == 64


def pids_of(server_address):
    images, _ = epoch(loader(server_address, f"{PLAIN}, python({MODULE}:pid)"))
    return {int(im[0, 0, 0]) | int(im[0, 0, 1]) << 8 | int(im[0, 0, 2]) << 16 for im, _ in images.values()}


@pytest.mark.parametrize("function, reason, label", [
    ("crashes", r"crashed its worker process \(killed by signal 6", "crash"),
    ("sleeps, seconds=30", r"timed out after 400 ms \(--python-transform-timeout-ms\)", "timeout"),
])
def test_a_crash_or_a_timeout_replaces_the_process_and_fails_the_batch_not_the_sample(start_server, function,
                                                                                      reason, label):
    """A timeout or a crash depends on the server's load: under the default `skip` policy the
    sample is not replaced by another (a loaded server would give another batch than an idle
    one); the batch fails as retryable and, once every server gave up on it, the error names
    the sample and the limit (issue 49)."""
    server = python_server(start_server, "--workers=2", "--python-workers=2", "--python-transform-timeout-ms=400",
                           "--metrics-port=0")
    before = pids_of(server.address)
    assert len(before) == 2
    background = Background(server.address)
    started = time.monotonic()
    with pytest.raises(stoker.DeadlineExceeded, match=r"failed on 1 servers .*sample \d+ \(class_\d+/img_\d+\.jpg\): .*"
                       + reason):
        epoch(loader(server.address, f"{PLAIN}, python({MODULE}:{function})"))
    assert time.monotonic() - started < 30  # a hung function does not hang the session
    assert background.finish() > 0
    assert metric(metrics(server), "stoker_server_python_workers_replaced_total", reason=label) >= 1
    after = pids_of(server.address)
    assert len(after) == 2 and after != before, (before, after)  # replaced, and serving again
    assert server.proc.poll() is None


def test_a_function_sees_and_changes_the_samples_value_fields(start_server, tmp_path, data_root):
    root = tmp_path / "root"
    write_caption_shard(str(root / "pairs"), data_root)
    server = python_server(start_server, root=str(root))
    fields = {"image": "jpg", "caption": "txt", "label": "cls"}
    seen = set()
    l = loader(server.address, f"{PLAIN}, python({MODULE}:caption_upper)", fields=fields, batch_size=4, dataset="pairs")
    for batch in l:
        for i, caption, label in zip(l.last_batch["sample_indices"], batch["caption"], batch["label"].tolist()):
            assert caption == f"CAPTION NUMBER {i}"
            assert label == i % 3 + 100
            seen.add(i)
    assert seen == set(range(16))
    with pytest.raises(stoker.DataLoss, match=r"python\(stoker_test_transforms:bad_caption\) field 'caption'.*not UTF-8"):
        for _ in loader(server.address, f"{PLAIN}, python({MODULE}:bad_caption)", fields=fields, dataset="pairs",
                        bad_sample_policy="fail"):
            pass


def test_refusals_name_what_is_wrong(start_server, tmp_path):
    server = python_server(start_server)
    with pytest.raises(stoker.InvalidArgument, match=r"stoker_test_transforms has no public function 'nope'; it has "
                                                     r"bad_caption, caption_upper, crashes, forged, garbles, invert"):
        loader(server.address, f"{PLAIN}, python({MODULE}:nope)")
    # What the module imported is not its own: not callable by a session.
    with pytest.raises(stoker.InvalidArgument, match=r"has no public function 'rmtree'"):
        loader(server.address, f"{PLAIN}, python({MODULE}:rmtree, path=/tmp)")
    with pytest.raises(stoker.InvalidArgument, match=r"module 'os' is not one of this server's --python-transforms"):
        loader(server.address, f"{PLAIN}, python(os:system, command=true)")
    with pytest.raises(stoker.InvalidArgument, match=r"keyword 'rng' is not allowed"):
        loader(server.address, f"{PLAIN}, python({MODULE}:noise, rng=3)")
    plain = start_server()
    with pytest.raises(stoker.InvalidArgument, match=r"this server runs no Python transforms"):
        loader(plain.address, f"{PLAIN}, python({MODULE}:invert)")
    # A module that does not import stops the server at start, naming it.
    import subprocess
    from conftest import SERVER
    r = subprocess.run([SERVER, "--host=127.0.0.1", "--port=0", "--metrics-port=-1", f"--data-root={tmp_path}",
                        "--python-transforms=no_such_module_here", f"--python-executable={sys.executable}"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2
    assert "cannot import no_such_module_here: ModuleNotFoundError" in r.stderr


def _alive(pid):
    """Running (a zombie re-parented to a PID 1 that does not reap counts as ended)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def _zombie_children(pid):
    out = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
            except (FileNotFoundError, ProcessLookupError):
                continue
            if fields[0] == "Z" and int(fields[1]) == pid:
                out.append(int(entry))
    return out


def test_no_process_a_transform_started_outlives_its_worker_or_the_server(start_server, tmp_path):
    """Issue 49: a transform's children (in its group, or gone with setsid) once outlived a
    SIGTERM of the server, holding the shared memory and the worker's socket; children that
    exited stayed <defunct>. A replaced worker and a stopped server take them all along."""
    record = tmp_path / "children.txt"
    server = python_server(start_server, "--workers=2", "--python-workers=2", "--python-transform-timeout-ms=1500")
    workers = pids_of(server.address)
    l = loader(server.address, f"{PLAIN}, python({MODULE}:spawns, record='{record}', detach=1)", batch_size=4)
    epoch(l)  # the loader stays open: its stream's end would replace a worker still in a call
    calls = [[int(p) for p in line.split()] for line in record.read_text().splitlines()]
    assert len(calls) >= 64 and all(len(c) == 3 for c in calls)  # sleeper, setsid sleeper, exited: per call
    children = [p for c in calls for p in c[:2]]  # the sleepers (an exited child's id may be reused)
    # A worker reaps its ended children once a second: a child that has just
    # exited is <defunct> for up to that long, never longer. (Two scans in a
    # row could each see a different one that has just exited.)
    seen = {z for w in workers for z in _zombie_children(w)}
    time.sleep(2.5)
    left = seen & {z for w in workers for z in _zombie_children(w)}
    assert not left, f"children that exited are left <defunct>: {sorted(left)}"
    assert sum(_alive(p) for p in children) >= 64  # the sleepers run while their worker lives
    del l
    # A worker replaced after a timeout takes its children along.
    with pytest.raises(stoker.DeadlineExceeded):
        epoch(loader(server.address, f"{PLAIN}, python({MODULE}:sleeps, seconds=30)", batch_size=2))
    server.stop()
    assert server.proc.returncode == 0
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and any(_alive(p) for p in children):
        time.sleep(0.05)
    assert [p for p in children if _alive(p)] == []
