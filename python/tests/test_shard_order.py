"""Issue 50: the shard-aware epoch order (shuffle="shards") against real
stoker-server processes on 127.0.0.1 and in local mode.

- Every sample once per epoch, the same order for the same (seed, epoch), a
  batch drawn from one window of shards, and a shard's batches made by one
  server (the global order spreads every shard over every server).
- A server SIGKILLed mid-epoch changes nothing but who made the batches.
- A saved state resumes to the uninterrupted run's batches, and is refused
  by a loader with the other order.
"""

import hashlib
import os
import signal

import pytest

import stoker
from conftest import write_shards

SHARDS, PER_SHARD, WINDOW = 24, 8, 2
PIPELINE = "resize(40), center_crop(32)"  # deterministic: equal batches are equal bytes


@pytest.fixture(scope="module")
def shard_root(tmp_path_factory, data_root):
    """shards/: 192 samples in 24 tar shards of 8 (sample i is s{i:03d}, label i % 5)."""
    root = tmp_path_factory.mktemp("shard-order")
    jpegs = sorted(os.path.join(d, f) for d, _, fs in os.walk(os.path.join(data_root, "ds")) for f in fs)
    samples = []
    for i in range(SHARDS * PER_SHARD):
        with open(jpegs[i % len(jpegs)], "rb") as f:
            samples.append({"jpg": f.read(), "cls": str(i % 5).encode()})
    write_shards(str(root / "shards"), samples, per_shard=PER_SHARD)
    return str(root)


def run_epoch(loader, epoch=0, stop_after=None, on_batch=None):
    """[(sample indices, digest of the images, server)] of one epoch."""
    loader.set_epoch(epoch)
    out = []
    for images, labels in loader:
        info = loader.last_batch
        out.append((tuple(info["sample_indices"]), hashlib.sha256(images.tobytes()).hexdigest(), info["server"]))
        if on_batch:
            on_batch(len(out))
        if stop_after is not None and len(out) == stop_after:
            break
    return out


def make_loader(servers, **kw):
    args = dict(servers=servers, dataset="shards", pipeline=PIPELINE, batch_size=4, seed=11, device="cpu",
                framework="numpy", dtype="uint8", layout="nhwc", shard_window=WINDOW)
    args.update(kw)
    return stoker.Loader(**args)


def servers_per_shard(batches):
    made = {}
    for indices, _, server in batches:
        for i in indices:
            made.setdefault(i // PER_SHARD, set()).add(server)
    return sum(len(s) for s in made.values()) / len(made)


def test_every_sample_once_a_window_at_a_time_and_each_shard_from_one_server(shard_root, start_server):
    servers = ",".join(start_server("--workers=1", root=shard_root).address for _ in range(3))
    n = SHARDS * PER_SHARD
    shards = run_epoch(make_loader(servers, shuffle="shards"))
    again = run_epoch(make_loader(servers, shuffle="shards"))
    flat = [i for indices, _, _ in shards for i in indices]
    assert sorted(flat) == list(range(n))
    assert [b[:2] for b in again] == [b[:2] for b in shards], "the same (seed, epoch) gives the same batches"
    assert [b[0] for b in run_epoch(make_loader(servers, shuffle="shards"), epoch=1)] != [b[0] for b in shards]
    # A batch's samples come from its window's shards (more where a lane's
    # window or the lane ends); shuffled within the window, not in index order.
    per_batch = [len({i // PER_SHARD for i in indices}) for indices, _, _ in shards]
    assert sum(n <= WINDOW for n in per_batch) >= 0.75 * len(per_batch), per_batch
    assert flat != sorted(flat)
    glob = run_epoch(make_loader(servers, shuffle="global"))
    assert sorted(i for indices, _, _ in glob for i in indices) == list(range(n))
    assert [b[0] for b in glob] != [b[0] for b in shards]
    mean_shards = sum(len({i // PER_SHARD for i in b[0]}) for b in shards) / len(shards)
    mean_global = sum(len({i // PER_SHARD for i in b[0]}) for b in glob) / len(glob)
    assert mean_shards < mean_global
    # Affinity: a shard's batches are made by its lane's server (a busy one's
    # go to another: on this machine's two cores the servers' speeds vary,
    # and 1.1 to 1.7 servers per shard were seen). The rank streams from 2 of
    # the 3 servers (initial_servers), so the global order sends every shard
    # to both (2.0; CI saw 1.375 against it): fewer is affinity.
    per_shard, per_shard_global = servers_per_shard(shards), servers_per_shard(glob)
    assert per_shard <= 1.75 and per_shard < per_shard_global, (per_shard, per_shard_global)


def test_a_server_sigkilled_mid_epoch_changes_only_who_made_the_batches(shard_root, start_server):
    started = [start_server("--workers=1", root=shard_root) for _ in range(3)]
    servers = ",".join(s.address for s in started)
    whole = run_epoch(make_loader(servers, shuffle="shards"))

    def kill(count):
        if count == 10:
            started[1].proc.send_signal(signal.SIGKILL)

    through = run_epoch(make_loader(servers, shuffle="shards", batch_timeout=20), on_batch=kill)
    assert started[1].proc.wait(timeout=10) == -signal.SIGKILL
    assert [b[:2] for b in through] == [b[:2] for b in whole]
    assert started[1].address not in {b[2] for b in through[20:]}


def test_a_saved_state_resumes_the_same_batches_and_the_other_order_refuses_it(shard_root, start_server, tmp_path):
    servers = ",".join(start_server("--workers=1", root=shard_root).address for _ in range(2))
    whole = run_epoch(make_loader(servers, shuffle="shards"), epoch=2)
    first = make_loader(servers, shuffle="shards")
    head = run_epoch(first, epoch=2, stop_after=7)
    state = first.state_dict()
    assert state["shuffle"] == f"shards:{WINDOW}"
    resumed = make_loader(servers, shuffle="shards")
    resumed.load_state_dict(state)
    rest = run_epoch(resumed, epoch=2)
    assert [b[:2] for b in head + rest] == [b[:2] for b in whole]
    with pytest.raises(stoker.FailedPrecondition, match="shuffle"):
        make_loader(servers, shuffle="global").load_state_dict(state)
    with pytest.raises(stoker.FailedPrecondition, match="shuffle"):
        make_loader(servers, shuffle="shards", shard_window=3).load_state_dict(state)
    # shard_window means nothing to the global order: a state saved without
    # it resumes in a loader that names one (the client compares the order
    # each describes, not the raw field).
    plain = make_loader(servers, shuffle="global", shard_window=0)
    head = run_epoch(plain, epoch=1, stop_after=3)
    other = make_loader(servers, shuffle="global", shard_window=8)
    other.load_state_dict(plain.state_dict())
    assert [b[:2] for b in head + run_epoch(other, epoch=1)] == [b[:2] for b in
                                                                 run_epoch(make_loader(servers, shuffle="global"), 1)]
    with pytest.raises(ValueError, match="shuffle='bogus'"):
        make_loader(servers, shuffle="bogus")


def test_local_mode_gives_the_servers_batches(shard_root, start_server):
    server = start_server("--workers=2", root=shard_root)
    remote = run_epoch(make_loader(server.address, shuffle="shards"))
    local = run_epoch(make_loader(None, shuffle="shards", local_workers=2, data_root=shard_root))
    assert [b[:2] for b in local] == [b[:2] for b in remote]
