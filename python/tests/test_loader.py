"""stoker.Loader against real data servers: bytes equal stoker-bench's,
conversion, checkpoints, errors, tensor lifetime, the GIL, memory, metrics."""

import gc
import io
import json
import os
import subprocess
import threading
import time
import urllib.request

import numpy as np
import pytest
import torch
import xxhash

import stoker
from conftest import BENCH, SMALL


def loader(servers, **kw):
    args = dict(servers=servers, dataset="ds", pipeline=SMALL, batch_size=8, seed=7, device="cpu")
    args.update(kw)
    return stoker.Loader(**args)


def epoch_hashes(l, epoch):
    """{batch index: (hash of the uint8 NHWC bytes, labels, sample indices)} for one epoch."""
    out = {}
    l.set_epoch(epoch)
    for images, labels in l:
        info = l.last_batch
        out[info["batch"]] = (xxhash.xxh3_128_hexdigest(images.numpy().tobytes()), labels.tolist(),
                              info["sample_indices"])
    return out


def test_batches_are_byte_identical_to_stoker_bench(two_servers, tmp_path):
    log = tmp_path / "bench.jsonl"
    r = subprocess.run([BENCH, f"--servers={two_servers}", "--dataset=ds", f"--pipeline={SMALL}", "--batch-size=8",
                        "--seed=7", "--epochs=2", "--device=none", "--metrics-port=-1", f"--log-batches={log}"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    bench = {}
    for line in log.read_text().splitlines():
        b = json.loads(line)
        bench[(b["epoch"], b["batch"])] = (b["hash"], b["labels"], b["sample_indices"])
    l = loader(two_servers, dtype="uint8", layout="nhwc")
    mine = {}
    for epoch in range(2):
        mine.update({(epoch, k): v for k, v in epoch_hashes(l, epoch).items()})
    assert len(bench) == 16
    assert mine == bench


def test_float_outputs_are_the_normalized_uint8_pixels(two_servers):
    raw = loader(two_servers, dtype=torch.uint8, layout="nchw")
    for dtype, tolerance in ((torch.float32, 1e-5), (torch.bfloat16, 1e-2), (torch.float16, 2e-3)):
        conv = loader(two_servers, dtype=dtype)
        (x8, y8), (xf, yf) = next(iter(raw)), next(iter(conv))
        assert xf.dtype == dtype and xf.shape == (8, 3, 32, 32) and x8.shape == (8, 3, 32, 32)
        mean = torch.tensor(stoker.loader.IMAGENET_MEAN).view(1, 3, 1, 1)
        std = torch.tensor(stoker.loader.IMAGENET_STD).view(1, 3, 1, 1)
        expected = (x8.float() / 255 - mean) / std
        assert torch.allclose(xf.float(), expected, atol=tolerance * expected.abs().max().item() + 1e-6)
        assert torch.equal(y8, yf) and yf.dtype == torch.int64


def test_numpy_and_plain_dlpack_frameworks_without_torch_conversion(two_servers):
    l = loader(two_servers, framework="numpy", dtype="float32", layout="nhwc", normalize=None)
    images, labels = next(iter(l))
    assert isinstance(images, np.ndarray) and images.shape == (8, 32, 32, 3) and images.dtype == np.float32
    assert 0.0 <= images.min() and images.max() <= 1.0 and images.max() > 0.1
    assert labels.dtype == np.int64
    raw = loader(two_servers, framework="dlpack", dtype="uint8")
    images, labels = next(iter(raw))
    assert hasattr(images, "__dlpack__") and images.__dlpack_device__() == (1, 0)
    assert torch.utils.dlpack.from_dlpack(images).shape == (8, 3, 32, 32)


def test_state_dict_mid_epoch_resumes_with_exactly_the_remaining_batches(two_servers):
    uninterrupted = epoch_hashes(loader(two_servers, dtype="uint8"), 1)
    first = loader(two_servers, dtype="uint8")
    first.set_epoch(1)
    seen = {}
    for images, labels in first:
        seen[first.last_batch["batch"]] = xxhash.xxh3_128_hexdigest(images.numpy().tobytes())
        if len(seen) == 3:
            state = first.state_dict()
            break
    buffer = io.BytesIO()
    torch.save({"loader": state}, buffer)  # as a checkpoint would
    buffer.seek(0)
    second = loader(two_servers, dtype="uint8")
    second.load_state_dict(torch.load(buffer)["loader"])
    second.set_epoch(1)  # the training loop's usual call keeps the resume
    rest = epoch_hashes(second, 1)
    assert sorted(seen) == [0, 1, 2]
    assert sorted(rest) == list(range(3, len(uninterrupted)))
    assert {k: v[0] for k, v in rest.items()} == {k: v[0] for k, v in uninterrupted.items() if k >= 3}
    assert {k: uninterrupted[k][0] for k in seen} == seen
    # The epoch after the resumed one is a full one.
    assert len(epoch_hashes(second, 2)) == len(second)


def test_a_state_from_another_seed_or_dataset_is_refused(two_servers):
    l = loader(two_servers)
    l.set_epoch(0)
    it = iter(l)
    next(it)
    state = l.state_dict()
    with pytest.raises(stoker.FailedPrecondition, match="seed: saved 7, loader has 8"):
        loader(two_servers, seed=8).load_state_dict(state)
    with pytest.raises(stoker.FailedPrecondition, match="dataset: saved 'ds', loader has 'other'"):
        loader(two_servers, dataset="other").load_state_dict(state)
    with pytest.raises(stoker.InvalidArgument, match="not a stoker.Loader state"):
        l.load_state_dict({"epoch": 3})


def test_errors_are_exceptions_named_after_the_grpc_status(start_server):
    server = start_server("--workers=1")
    with pytest.raises(stoker.NotFound, match="no-such-dataset"):
        loader(server.address, dataset="no-such-dataset")
    with pytest.raises(stoker.InvalidArgument, match="random_horizontal_flip"):
        loader(server.address, pipeline="center_crop(32), random_horizontal_flip(1.5)")
    with pytest.raises(stoker.Unavailable, match="127.0.0.1:1"):
        loader("127.0.0.1:1", connect_timeout=1)
    with pytest.raises(ValueError, match="dtype"):
        loader(server.address, dtype="int16")
    assert issubclass(stoker.DataLoss, stoker.StokerError) and stoker.DataLoss.code == "DATA_LOSS"


def test_rank_and_world_size_come_from_the_environment(two_servers, monkeypatch):
    monkeypatch.setenv("RANK", "1")
    monkeypatch.setenv("WORLD_SIZE", "2")
    half = loader(two_servers, drop_last=True)
    whole = loader(two_servers, rank=0, world_size=1, drop_last=True)
    assert len(half) * 2 == len(whole) == 8
    assert half.state_dict()["rank"] == 1 and half.state_dict()["world_size"] == 2


@pytest.mark.parametrize("dtype,layout", [("float32", "nchw"), ("uint8", "nhwc")])
def test_yielded_batches_kept_alive_keep_their_bytes(two_servers, dtype, layout):
    l = loader(two_servers, dtype=dtype, layout=layout, slots=2)
    kept, copies = [], []
    for epoch in range(3):
        l.set_epoch(epoch)
        for images, labels in l:
            if len(kept) < 10:
                kept.append(images)
                copies.append(images.clone())
    assert len(kept) == 10
    for i, (k, c) in enumerate(zip(kept, copies)):
        assert torch.equal(k, c), f"kept batch {i} was overwritten by a later one"
    del l
    gc.collect()
    assert all(torch.equal(k, c) for k, c in zip(kept, copies)), "tensors must outlive the loader"


def test_the_gil_is_released_while_waiting_for_a_slow_server(start_server):
    slow = start_server("--workers=1", "--test-sample-delay-ms=150")  # >= 1.2 s per batch of 8
    l = loader(slow.address)
    ticks = [0]
    stop = threading.Event()

    def spin():
        while not stop.is_set():
            ticks[0] += 1
            time.sleep(0.001)

    t = threading.Thread(target=spin)
    t.start()
    try:
        start_ticks, start = ticks[0], time.monotonic()
        next(iter(l))
        waited = time.monotonic() - start
        advanced = ticks[0] - start_ticks
    finally:
        stop.set()
        t.join()
    assert waited > 1.0
    # Sleeping 1 ms per tick, the thread makes hundreds of ticks a second when
    # it can run; with the GIL held it would make none.
    assert advanced > 100 * waited, f"{advanced} ticks in {waited:.2f} s"


def rss_kib():
    with open("/proc/self/status") as f:
        return int(next(line for line in f if line.startswith("VmRSS")).split()[1])


def test_rss_stays_flat_over_2000_batches(start_server):
    server = start_server("--workers=2")
    # 400 KB of float32 per batch: a batch leaked per step would add 700 MB.
    l = loader(server.address, dataset="synthetic:96x96:1024:10", pipeline="center_crop(64)", batch_size=8)
    delivered, baseline = 0, None
    epoch = 0
    while delivered < 2000:
        l.set_epoch(epoch)
        for images, labels in l:
            delivered += 1
            if delivered == 200:
                gc.collect()
                baseline = rss_kib()
            if delivered == 2000:
                break
        epoch += 1
    gc.collect()
    final = rss_kib()
    assert final <= baseline * 1.10, f"RSS grew from {baseline} KiB to {final} KiB"


def test_stats_and_metrics_endpoint(two_servers):
    # epochs=1: nothing of a next epoch is fetched (see the next test).
    l = loader(two_servers, metrics_port=0, epochs=1)
    assert l.metrics_port and l.metrics_port > 0
    n = sum(1 for _ in l)
    s = l.stats()
    assert s["batches"] == n == len(l) and s["images"] == 64
    assert s["images_per_second"] > 0 and 0 <= s["starved_percent"] <= 100
    # No device here: staging is the host's conversion, never a PCIe copy.
    assert s["bottleneck"] in ("none", "server_cpu", "storage", "network", "host_convert")
    assert s["device_path"] == "cpu" and s["python_overhead_us_per_batch"] > 0
    text = urllib.request.urlopen(f"http://127.0.0.1:{l.metrics_port}/metrics", timeout=10).read().decode()
    batches = [line for line in text.splitlines() if line.startswith("stoker_client_batches_total")]
    assert batches and float(batches[0].split()[-1]) == n
    assert 'stoker_client_device_path{path="cpu"} 1' in text


def metric(text, name):
    values = [float(line.split()[-1]) for line in text.splitlines() if line.startswith(name + " ")]
    assert values, f"{name} missing from the metrics"
    return values[0]


@pytest.mark.parametrize("streams_per_server", [1, 2])
def test_epochs_continue_on_the_same_streams(two_servers, streams_per_server):
    """Issue 12: the loader's epochs flow into each other on the same streams
    (streams_per_server to each server), and with epochs= nothing past the
    last epoch is fetched."""
    l = loader(two_servers, metrics_port=0, epochs=3, streams_per_server=streams_per_server)
    for epoch in range(3):
        l.set_epoch(epoch)
        indices = []
        for _ in l:
            assert l.last_batch["epoch"] == epoch
            indices += l.last_batch["sample_indices"]
        assert sorted(indices) == list(range(64))
    text = urllib.request.urlopen(f"http://127.0.0.1:{l.metrics_port}/metrics", timeout=10).read().decode()
    assert metric(text, "stoker_client_streams_opened_total") == 2 * streams_per_server
    assert metric(text, "stoker_client_batches_total") == 3 * len(l)


def test_streams_per_server_below_one_is_a_clear_error(two_servers):
    with pytest.raises(stoker.InvalidArgument, match="streams_per_server 0"):
        loader(two_servers, streams_per_server=0)


def test_fan_out_and_prefetch_bytes_reach_the_client(two_servers):
    """Issue 33: max_servers and prefetch_bytes are the client's; the gauges
    show the servers in use and a prefetch depth within the byte cap."""
    with pytest.raises(stoker.InvalidArgument, match="max_servers -1"):
        loader(two_servers, max_servers=-1)
    batch_bytes = 8 * 3 * 32 * 32  # the loader() helper's batches: 8 samples of 32x32 (uint8 on the wire)
    l = loader(two_servers, metrics_port=0, prefetch_bytes=3 * batch_bytes, max_servers=1)
    indices = []
    for _ in l:
        indices += l.last_batch["sample_indices"]
    assert sorted(indices) == list(range(64))
    time.sleep(0.3)  # the gauges are set by the client's 100 ms supervisor tick
    text = urllib.request.urlopen(f"http://127.0.0.1:{l.metrics_port}/metrics", timeout=10).read().decode()
    # max_servers 1 is below the failover floor of 2: both servers are used.
    assert metric(text, "stoker_client_servers_in_use") == 2
    assert 2 <= metric(text, "stoker_client_prefetch_batches") <= 3
    assert metric(text, "stoker_client_prefetch_bytes") <= 3 * batch_bytes


def test_a_cuda_device_without_a_gpu_is_a_clear_error():
    if not stoker._ext.cuda_usable(0) == "":
        with pytest.raises(stoker.FailedPrecondition, match="--device cuda"):
            stoker.Loader(servers="127.0.0.1:1", dataset="ds", device="cuda", connect_timeout=1)
    else:
        pytest.skip("a CUDA device is usable here")


def test_local_workers_alone_are_a_complete_loader_with_the_servers_bytes(two_servers, data_root):
    remote = epoch_hashes(loader(two_servers, dtype="uint8", layout="nhwc"), 1)
    l = loader(None, local_workers=2, data_root=data_root, dtype="uint8", layout="nhwc")
    local = epoch_hashes(l, 1)
    assert len(local) == 8
    assert local == remote
    assert l.stats()["batches_per_server"] == {"local": 8}


def test_local_workers_join_the_servers_exactly_once(start_server, data_root):
    # A slowed server, so that the local worker takes a share.
    server = start_server("--workers=1", "--test-sample-delay-ms=10")
    alone = epoch_hashes(loader(server.address, dtype="uint8", layout="nhwc"), 0)
    l = loader(server.address, local_workers=1, data_root=data_root, dtype="uint8", layout="nhwc")
    both = epoch_hashes(l, 0)
    assert both == alone
    samples = sorted(i for _, _, indices in both.values() for i in indices)
    assert samples == list(range(64))
    per_server = l.stats()["batches_per_server"]
    assert per_server.get("local", 0) > 0 and per_server.get(server.address, 0) > 0, per_server


def test_no_producer_or_a_bad_data_root_is_a_clear_error(tmp_path):
    with pytest.raises(stoker.InvalidArgument, match="no producers"):
        stoker.Loader(dataset="ds", device="cpu")
    with pytest.raises(stoker.InvalidArgument, match="is not a directory"):
        stoker.Loader(dataset="ds", local_workers=1, data_root=str(tmp_path / "missing"), device="cpu")


def test_tls_with_a_client_certificate_and_a_token_from_the_environment(start_server, tmp_path, monkeypatch):
    import sys
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "tests"))
    from testpki import Pki
    pki = Pki(str(tmp_path / "pki"))
    (tmp_path / "tokens").write_text("python-loader-token-0123456789\n")
    server = start_server("--workers=1", f"--tls-cert={pki.path('server.pem')}", f"--tls-key={pki.path('server.key')}",
                          f"--tls-client-ca={pki.path('ca.pem')}", f"--auth-token-file={tmp_path / 'tokens'}")
    tls = dict(tls_ca=pki.path("ca.pem"), tls_cert=pki.path("client-a.pem"), tls_key=pki.path("client-a.key"))
    monkeypatch.setenv("STOKER_AUTH_TOKEN", "python-loader-token-0123456789")
    batches = list(loader(server.address, **tls))
    assert sum(len(b[1]) for b in batches) == 64
    monkeypatch.setenv("STOKER_AUTH_TOKEN", "not-the-token-0123456789")
    with pytest.raises(stoker.StokerError, match="UNAUTHENTICATED|bearer token"):
        loader(server.address, **tls)
    with pytest.raises(stoker.InvalidArgument, match="--tls-ca"):
        loader(server.address, tls_ca=str(tmp_path / "missing.pem"))
