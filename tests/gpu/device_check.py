#!/usr/bin/env python3
"""The GPU check: the client's CUDA path measured and checked on a real GPU in
a few minutes (tests/gpu/README.md). Run by tests/gpu/device_check.sh, which
unpacks the bundle (wheel, stoker-server, device_gpu_test) and sets
PYTHONPATH; with --dry-run (no GPU, `make test`) the steps that need one
report themselves skipped with the reason and the CPU-only parts run.

Each step's figures are written to OUT/device_check.json (the whole document,
rewritten after every step) and a line to OUT/device_check.log as soon as the
step ends, so a run cut short still returns what it measured.
"""

import argparse
import datetime
import json
import multiprocessing
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time
import traceback
import wave

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from procs import stop_all  # noqa: E402  (tests/procs.py: SIGTERM, then SIGKILL after 15 s)

os.environ.setdefault("STOKER_LOG_LEVEL", "1")  # the loader's warnings and errors only

IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)


class Skip(Exception):
    """A step that cannot run here, with the reason."""


class Failed(AssertionError):
    """A check that ran and did not hold."""


def check(ok, what):
    if not ok:
        raise Failed(what)


# -- the report ---------------------------------------------------------------
class Report:
    def __init__(self, out, deadline, dry_run):
        os.makedirs(out, exist_ok=True)
        self.json_path = os.path.join(out, "device_check.json")
        self.log_path = os.path.join(out, "device_check.log")
        self.deadline = deadline
        self.doc = {"check": "stoker GPU check (tests/gpu/device_check.py)", "dry_run": dry_run,
                    "started": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
                    "machine": {}, "steps": []}
        self.write()

    def write(self):
        tmp = self.json_path + ".tmp"
        with open(tmp, "w") as f:
            json.dump(self.doc, f, indent=1, default=str)
        os.replace(tmp, self.json_path)

    def log(self, text):
        line = f"[{time.strftime('%H:%M:%S')}] {text}"
        print(line, flush=True)
        with open(self.log_path, "a") as f:
            f.write(line + "\n")

    def left(self):
        return self.deadline - time.monotonic()

    def run(self, name, fn, ctx, budget, needs_gpu=True):
        """Runs step `fn(ctx, figures, until)`; it fills `figures` as it goes
        (kept when it fails) and raises Skip or Failed."""
        figures = {}
        rec = {"step": name, "status": "pass", "figures": figures}
        t0 = time.monotonic()
        self.log(f"{name}: start ({min(budget, self.left()):.0f} s of {self.left():.0f} s left)")
        try:
            if needs_gpu and not ctx.gpu:
                raise Skip(ctx.no_gpu_reason)
            if self.left() < 5:
                raise Skip(f"no time left within the check's {ctx.total_seconds:.0f} s")
            fn(ctx, figures, time.monotonic() + min(budget, self.left() - 2))
        except Skip as e:
            rec["status"], rec["reason"] = "skipped", str(e)
        except Failed as e:
            rec["status"], rec["reason"] = "fail", str(e)
        except Exception as e:  # noqa: BLE001 (an error is a result too)
            rec["status"], rec["reason"] = "error", f"{type(e).__name__}: {e}"
            rec["traceback"] = traceback.format_exc()[-4000:]
        rec["seconds"] = round(time.monotonic() - t0, 2)
        self.doc["steps"].append(rec)
        self.write()
        self.log(f"{name}: {rec['status'].upper()} in {rec['seconds']} s"
                 + (f" ({rec['reason']})" if "reason" in rec else "") + f" {json.dumps(figures, default=str)}")
        if "traceback" in rec:
            self.log(rec["traceback"])
        return rec


# -- data made on the machine ---------------------------------------------------
def _photo(args):
    """A photograph-like JPEG (smooth colour fields, edges and grain: decodes
    like a photo, not like noise or a flat colour) at an ImageNet-like size."""
    path, seed, w, h = args
    import numpy as np
    from PIL import Image

    rng = np.random.default_rng(seed)
    small = Image.fromarray(rng.integers(0, 256, (6, 8, 3), dtype=np.uint8)).resize((w, h), Image.BICUBIC)
    pixels = np.asarray(small, dtype=np.int16)
    yy, xx = np.mgrid[0:h, 0:w]
    for _ in range(4):  # a few hard-edged discs
        cx, cy, r = rng.integers(0, w), rng.integers(0, h), rng.integers(10, max(11, min(w, h) // 3))
        pixels[(xx - cx) ** 2 + (yy - cy) ** 2 < r * r] = rng.integers(0, 256, 3)
    pixels += rng.integers(-12, 13, pixels.shape, dtype=np.int16)
    Image.fromarray(np.clip(pixels, 0, 255).astype(np.uint8)).save(path, quality=90)


def make_photos(root, name, classes, per_class, seed, sizes=((500, 375), (375, 500), (500, 333), (640, 480))):
    jobs = []
    for c in range(classes):
        os.makedirs(os.path.join(root, name, f"c{c:03d}"), exist_ok=True)
        for i in range(per_class):
            w, h = sizes[(c + i) % len(sizes)]
            jobs.append((os.path.join(root, name, f"c{c:03d}", f"{i:05d}.jpg"), seed * 1_000_003 + c * 10_007 + i, w, h))
    with multiprocessing.Pool(max(1, min(16, os.cpu_count() or 1))) as pool:
        pool.map(_photo, jobs, chunksize=16)
    return len(jobs)


def make_caption_shards(root, name, photos, n):
    """WebDataset shards of n samples: jpg (from `photos`), txt, cls."""
    import io
    import tarfile

    os.makedirs(os.path.join(root, name), exist_ok=True)
    per_shard = 32
    for start in range(0, n, per_shard):
        with tarfile.open(os.path.join(root, name, f"train-{start // per_shard:06d}.tar"), "w") as tar:
            for i in range(start, min(n, start + per_shard)):
                with open(photos[i % len(photos)], "rb") as f:
                    jpeg = f.read()
                for ext, data in (("jpg", jpeg), ("txt", f"caption {i}: a photograph".encode()),
                                  ("cls", str(i % 7).encode())):
                    info = tarfile.TarInfo(f"s{i:05d}.{ext}")
                    info.size = len(data)
                    tar.addfile(info, io.BytesIO(data))


def make_wavs(root, name, n, rate=16000, seconds=1.5):
    """Class-per-folder WAVs (16-bit PCM, stereo, tones and noise) written with
    the standard library: no FFmpeg needed to make them."""
    import numpy as np

    rng = np.random.default_rng(7)
    for i in range(n):
        d = os.path.join(root, name, f"c{i % 3}")
        os.makedirs(d, exist_ok=True)
        t = np.arange(int(rate * seconds)) / rate
        tone = 0.4 * np.sin(2 * np.pi * (200 + 37 * i) * t)
        pcm = np.stack([tone + 0.05 * rng.standard_normal(t.size), 0.5 * tone], axis=1)
        with wave.open(os.path.join(d, f"{i:04d}.wav"), "wb") as w:
            w.setnchannels(2)
            w.setsampwidth(2)
            w.setframerate(rate)
            w.writeframes((np.clip(pcm, -1, 1) * 32767).astype("<i2").tobytes())


# -- the context ------------------------------------------------------------------
class Context:
    pass


def make_context(args, report):
    ctx = Context()
    ctx.args = args
    ctx.total_seconds = args.seconds
    ctx.workers = args.workers or max(1, (os.cpu_count() or 2) - 2)
    ctx.bin = args.bin
    import numpy as np
    import stoker

    ctx.np, ctx.stoker = np, stoker
    m = report.doc["machine"]
    m.update(python=platform.python_version(), numpy=np.__version__, cores=os.cpu_count(), host=platform.node(),
             stoker_extension=stoker._ext.__file__, local_workers=ctx.workers)
    try:
        import torch

        ctx.torch = torch
        m["torch"] = torch.__version__
        m["torch_cuda"] = torch.version.cuda
    except ImportError as e:
        ctx.torch = None
        m["torch"] = f"missing: {e}"
    reason = stoker._ext.cuda_usable(0)
    ctx.gpu = not args.dry_run and not reason and ctx.torch is not None and ctx.torch.cuda.is_available()
    if args.dry_run:
        ctx.no_gpu_reason = "dry run: no GPU on this machine (" + (reason or "CUDA usable") + ")"
    elif reason:
        ctx.no_gpu_reason = f"the extension sees no usable GPU: {reason}"
    else:
        ctx.no_gpu_reason = "torch sees no CUDA device"
    m["stoker_cuda"] = reason or "usable"
    if ctx.gpu:
        torch = ctx.torch
        p = torch.cuda.get_device_properties(0)
        m.update(gpu=p.name, gpu_memory_gib=round(p.total_memory / 2**30, 1), gpu_sm=f"{p.major}.{p.minor}")
    try:
        m["nvidia_smi"] = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version,pcie.link.gen.current,"
                                          "pcie.link.width.current,clocks.max.sm", "--format=csv,noheader"],
                                         capture_output=True, text=True, timeout=20).stdout.strip()
    except (OSError, subprocess.TimeoutExpired) as e:
        m["nvidia_smi"] = f"not run: {e}"
    report.write()
    return ctx


def loader(ctx, dataset, device, **kw):
    args = dict(servers=None, local_workers=ctx.workers, data_root=ctx.data, dataset=dataset, batch_size=64, seed=2,
                device=device, framework="torch")
    args.update(kw)
    return ctx.stoker.Loader(**args)


def host(t):
    """A batch's values on the CPU (a copy, so the slot can go back)."""
    return t.detach().to("cpu", copy=True) if hasattr(t, "detach") else t


def take(ld, n, until=None):
    out = []
    for i, batch in enumerate(ld):
        if isinstance(batch, dict):
            out.append({k: host(v) for k, v in batch.items()})
        else:
            out.append(tuple(host(v) for v in batch))
        if i + 1 >= n or (until and time.monotonic() > until):
            break
    return out


# -- step 1: host-to-device bandwidth ---------------------------------------------
def step_h2d(ctx, fig, until):
    torch = ctx.torch
    n, side = 256, 224
    nbytes = n * side * side * 3
    # torch's pinned copy_(non_blocking=True), the peak for this size.
    src = torch.empty(nbytes, dtype=torch.uint8).pin_memory()
    dst = torch.empty(nbytes, dtype=torch.uint8, device="cuda")
    for _ in range(3):
        dst.copy_(src, non_blocking=True)
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    reps = 30
    start.record()
    for _ in range(reps):
        dst.copy_(src, non_blocking=True)
    end.record()
    end.synchronize()
    torch_gbs = nbytes * reps / 1e9 / (start.elapsed_time(end) / 1e3)
    fig["batch_bytes"] = nbytes
    fig["torch_pinned_copy_gb_s"] = round(torch_gbs, 2)

    # The loader's pinned ring: uint8 NHWC needs no conversion, so its
    # measured time is the copy alone.
    ld = loader(ctx, f"synthetic:{side}x{side}:20480:10", "cuda", pipeline=f"center_crop({side})", batch_size=n,
                dtype="uint8", layout="nhwc", epochs=1)
    check(ld.device_path == "cuda", f"the loader chose device path {ld.device_path!r}, not cuda")
    got = 0
    for x, _ in ld:
        check(x.is_cuda, "a batch is not on the GPU")
        got += 1
        if got >= 40 or time.monotonic() > until:
            break
    torch.cuda.synchronize()
    s = ld.stats()
    fig["stoker_ring_copy_gb_s"] = round(s["h2d_gb_per_second"], 2)
    fig["stoker_batches"] = got
    fig["ratio_vs_torch"] = round(s["h2d_gb_per_second"] / torch_gbs, 3)
    fig["goal"] = ">= 0.8"
    del ld

    # Conversion included (float32 NCHW, ImageNet normalisation on the GPU).
    ld = loader(ctx, f"synthetic:{side}x{side}:20480:10", "cuda", pipeline=f"center_crop({side})", batch_size=n,
                dtype="float32", layout="nchw", epochs=1)
    for i, _ in enumerate(ld):
        if i >= 19 or time.monotonic() > until:
            break
    torch.cuda.synchronize()
    fig["stoker_copy_plus_convert_float32_gb_s_of_input"] = round(ld.stats()["h2d_gb_per_second"], 2)
    del ld

    # Overlap: batches staged and ready while a long kernel runs on another
    # stream, once the ring is warm (its slots allocated) and once right after
    # the loader starts (slots and pinned buffers still being allocated).
    cycles_per_ms = _sleep_cycles_per_ms(torch)
    for key, warm in (("overlap_warm", 24), ("overlap_cold", 1)):
        ld = loader(ctx, f"synthetic:{side}x{side}:40960:10", "cuda", pipeline=f"center_crop({side})", batch_size=n,
                    dtype="uint8", layout="nhwc", epochs=1)
        it = iter(ld)
        for _ in range(warm):
            next(it)
        torch.cuda.synchronize()
        fig[key] = _overlap(torch, it, cycles_per_ms, 1500, nbytes)
        del it, ld
    w = fig["overlap_warm"]
    check(w["batches_ready_while_kernel_ran"] >= 16 and w["kernel_running_at_end"],
          f"{w['batches_ready_while_kernel_ran']} batches were copied while a {w['kernel_ms']} ms kernel ran: "
          "copies do not overlap a running kernel")
    check(s["h2d_gb_per_second"] >= 0.8 * torch_gbs,
          f"pinned ring {s['h2d_gb_per_second']:.2f} GB/s is below 0.8 x torch's {torch_gbs:.2f} GB/s")


def _sleep_cycles_per_ms(torch):
    """torch.cuda._sleep spins for a number of cycles: its rate, measured
    after a warm-up launch."""
    e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda._sleep(1_000_000)
    e0.record()
    torch.cuda._sleep(20_000_000)
    e1.record()
    e1.synchronize()
    return 20_000_000 / e0.elapsed_time(e1)


def _overlap(torch, it, cycles_per_ms, kernel_ms, nbytes):
    """Takes batches from `it` (consumer: the default stream) while a kernel
    of `kernel_ms` runs on another stream; how many were copied and handed
    over before it ended, and the longest wait for one."""
    busy = torch.cuda.Stream()
    k0, k1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    with torch.cuda.stream(busy):
        k0.record()
        torch.cuda._sleep(int(cycles_per_ms * kernel_ms))
        k1.record()
    t0 = time.monotonic()
    ready, longest_next, longest_sync = 0, 0.0, 0.0
    while time.monotonic() - t0 < kernel_ms / 1e3 * 0.6 and ready < 16:
        a = time.monotonic()
        x, _ = next(it)
        b = time.monotonic()
        done = torch.cuda.Event()
        done.record()  # on the consumer's stream, after the batch's hand-over
        done.synchronize()
        longest_next, longest_sync = max(longest_next, b - a), max(longest_sync, time.monotonic() - b)
        if k1.query():
            break
        ready += 1
        del x
    seconds = time.monotonic() - t0
    running = not k1.query()
    k1.synchronize()
    return {"kernel_ms": round(k0.elapsed_time(k1), 1), "batches_ready_while_kernel_ran": ready,
            "kernel_running_at_end": running, "gb_s_while_kernel_ran": round(ready * nbytes / 1e9 / seconds, 2),
            "longest_next_ms": round(longest_next * 1e3, 1), "longest_ready_wait_ms": round(longest_sync * 1e3, 1)}


# -- step 2: the CUDA path equals the CPU path -------------------------------------
def _max_diff(a, b):
    """Largest absolute difference of two torch tensors, in float32."""
    return float((a.float() - b.float()).abs().max())


def step_equal(ctx, fig, until):
    torch = ctx.torch
    pipeline = "random_resized_crop(160), random_horizontal_flip(0.5)"
    gpu = loader(ctx, "photos", "cuda", pipeline=pipeline, dtype="uint8", layout="nhwc")
    check(gpu.device_path == "cuda", f"device path {gpu.device_path!r}, not cuda")
    a = take(gpu, 10 ** 6, until)
    b = take(loader(ctx, "photos", "cpu", pipeline=pipeline, dtype="uint8", layout="nhwc"), len(a))
    check(len(a) == len(b) > 0, f"{len(a)} CUDA batches, {len(b)} CPU batches")
    fig["images_batches"] = len(a)
    check(all(torch.equal(x, y) and torch.equal(l, m) for (x, l), (y, m) in zip(a, b)),
          "uint8 NHWC batches from the CUDA path differ from the CPU path's")
    fig["uint8_equal"] = True

    g = take(loader(ctx, "photos", "cuda", pipeline=pipeline), 4)
    c = take(loader(ctx, "photos", "cpu", pipeline=pipeline), 4)
    diff = max(_max_diff(x, y) for (x, _), (y, _) in zip(g, c))
    fig["float32_nchw_imagenet_max_abs_diff"] = diff
    check(diff <= 1e-6, f"float32 normalised batches differ by {diff} (at most 1e-6)")
    for dtype in ("float16", "bfloat16"):
        g = take(loader(ctx, "photos", "cuda", pipeline=pipeline, dtype=dtype), 2)
        c = take(loader(ctx, "photos", "cpu", pipeline=pipeline, dtype=dtype), 2)
        fig[f"{dtype}_max_abs_diff"] = max(_max_diff(x, y) for (x, _), (y, _) in zip(g, c))

    fields = {"image": "jpg", "caption": "txt", "label": "cls"}
    g = take(loader(ctx, "captions", "cuda", pipeline=pipeline, fields=fields), 4)
    c = take(loader(ctx, "captions", "cpu", pipeline=pipeline, fields=fields), 4)
    check(len(g) == len(c) > 0, "no field batches")
    for x, y in zip(g, c):
        check(set(x) == set(y) == {"image", "caption", "label"}, f"field batch keys {sorted(x)}")
        check(_max_diff(x["image"], y["image"]) <= 1e-6, "field batch images differ")
        check(x["caption"] == y["caption"] and torch.equal(x["label"], y["label"]), "captions or labels differ")
    fig["field_batches_equal"] = len(g)

    if not ctx.media:
        fig["audio"] = f"skipped: {ctx.media_reason}"
        return
    audio = "audio(rate=16000, seconds=1.0, crop=random)"
    g = take(loader(ctx, "wavs", "cuda", pipeline=audio, batch_size=8), 3)
    c = take(loader(ctx, "wavs", "cpu", pipeline=audio, batch_size=8), 3)
    check(len(g) == len(c) > 0, "no audio batches")
    check(all(torch.equal(x, y) for (x, _), (y, _) in zip(g, c)), "audio batches differ between CUDA and CPU")
    fig["audio_batches_equal"] = len(g)
    fig["audio_shape"] = list(g[0][0].shape)


# -- step 3: stream safety -----------------------------------------------------------
def step_streams(ctx, fig, until):
    torch = ctx.torch
    pipeline = "random_resized_crop(64), random_horizontal_flip(0.5)"
    want = 1000
    per_epoch = len(loader(ctx, "photos", "cpu", pipeline=pipeline, batch_size=16))
    epochs = -(-want // per_epoch)
    # The reference: the CPU path, copied to the GPU synchronously.
    ref = []
    cpu = loader(ctx, "photos", "cpu", pipeline=pipeline, batch_size=16, dtype="uint8", layout="nhwc", epochs=epochs)
    for e in range(epochs):
        cpu.set_epoch(e)
        ref += [x.clone() for x, _ in cpu]
    ref = ref[:want]
    # The CUDA path handing batches to a non-default stream, each read queued
    # behind a kernel of about a millisecond; the tensor dropped right after
    # its read is queued (its slot goes back, ordered after that read).
    cycles_ms = _sleep_cycles_per_ms(torch)
    consumer = torch.cuda.Stream()
    gpu = loader(ctx, "photos", "cuda", pipeline=pipeline, batch_size=16, dtype="uint8", layout="nhwc",
                 epochs=epochs, slots=2)
    copies = []
    with torch.cuda.stream(consumer):
        for e in range(epochs):
            gpu.set_epoch(e)
            for x, _ in gpu:
                torch.cuda._sleep(int(cycles_ms))
                copies.append(x.clone())
                del x
                if len(copies) >= want:
                    break
            if len(copies) >= want:
                break
    consumer.synchronize()
    fig["batches"] = len(copies)
    bad = [i for i, (x, y) in enumerate(zip(copies, ref)) if not torch.equal(x.cpu(), y)]
    fig["torn_or_early"] = len(bad)
    check(len(copies) == want, f"{len(copies)} batches of {want}")
    check(not bad, f"{len(bad)} of {want} batches differ from the synchronous copy (first: {bad[:5]})")


# -- step 4: MixUp / CutMix on the GPU; DLPack without a copy ------------------------
def step_mix_dlpack(ctx, fig, until):
    torch = ctx.torch
    mix = dict(pipeline="center_crop(96)", mixup_alpha=0.8, cutmix_alpha=1.0, mix_prob=0.8, num_classes=ctx.args.classes,
               batch_size=32)
    g = take(loader(ctx, "photos", "cuda", **mix), 6)
    c = take(loader(ctx, "photos", "cpu", **mix), 6)
    check(len(g) == len(c) > 0, "no mixed batches")
    img = max(_max_diff(x, y) for (x, _), (y, _) in zip(g, c))
    tgt = max(_max_diff(t, u) for (_, t), (_, u) in zip(g, c))
    mixed = sum(1 for _, t in c if bool(((t > 0.02).sum(1) >= 2).any()))  # two classes above the smoothing floor
    fig.update(mixup_image_max_abs_diff=img, mixup_targets_max_abs_diff=tgt, batches=len(g), mixed_batches=mixed)
    check(img <= 1e-5 and tgt == 0, f"MixUp/CutMix on CUDA differs from the CPU: images {img}, targets {tgt}")
    check(mixed > 0, "no batch was mixed: the comparison proves nothing")

    ld = loader(ctx, "photos", "cuda", pipeline="center_crop(96)", framework="dlpack", batch_size=32)
    it = iter(ld)
    arr, _ = next(it)
    check(arr.__dlpack_device__()[0] == 2, f"DLPack device {arr.__dlpack_device__()} is not CUDA (2)")
    t = torch.from_dlpack(arr)
    fig["torch_ptr_equal"] = t.data_ptr() == torch.from_dlpack(arr).data_ptr()
    check(t.is_cuda and fig["torch_ptr_equal"], "torch.from_dlpack copied the batch")
    try:
        import jax
        import jax.dlpack

        devices = [d for d in jax.devices() if d.platform == "gpu"]
        fig["jax"] = f"{jax.__version__} {[str(d) for d in jax.devices()]}"
    except Exception as e:  # noqa: BLE001
        devices, fig["jax"] = [], f"not importable: {type(e).__name__}: {e}"
    if not devices:
        fig["jax_dlpack"] = f"skipped: JAX sees no GPU ({fig['jax']})"
    else:
        j = jax.dlpack.from_dlpack(arr)
        fig["jax_ptr_equal"] = j.unsafe_buffer_pointer() == t.data_ptr()
        check(fig["jax_ptr_equal"], "jax.dlpack.from_dlpack copied the batch (pointers differ)")
        check(bool((ctx.np.asarray(j) == t.cpu().numpy()).all()), "the JAX array's values differ from torch's")
        jl = loader(ctx, "photos", "cuda", pipeline="center_crop(96)", framework="jax", batch_size=32)
        jx, _ = next(iter(jl))
        check(list(jx.devices())[0].platform == "gpu", "framework='jax' batches are not on the GPU")
        check(bool((ctx.np.asarray(jx) == t.cpu().numpy()).all()), "framework='jax' batch differs from torch's")
        fig["jax_loader_equal"] = True
    del t, arr, it, ld


# -- step 5: a training loop on the GPU ------------------------------------------------
def _train(ctx, fig, key, batches, steps, model, opt, warmup):
    """`steps` training steps of ResNet-50 (bf16 autocast, channels_last) on
    `batches` (an iterator of (images NHWC, labels)); images/s and the
    loader's own figures."""
    torch = ctx.torch
    loss_fn = torch.nn.CrossEntropyLoss()
    t0 = None
    n = 0
    for i, (x, y) in enumerate(batches):
        if i == warmup:
            torch.cuda.synchronize()
            t0, n = time.monotonic(), 0
        x = x.permute(0, 3, 1, 2)  # NHWC storage: channels_last NCHW
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = loss_fn(model(x), y % 1000)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        n += x.shape[0]
        if i + 1 >= steps + warmup:
            break
    torch.cuda.synchronize()
    seconds = time.monotonic() - t0
    fig[key] = {"images_per_s": round(n / seconds, 1), "steps": steps, "seconds": round(seconds, 2)}
    return fig[key]


def _loader_batches(ld, epochs):
    for e in range(epochs):
        ld.set_epoch(e)
        yield from ld


def _with_stats(entry, ld):
    s = ld.stats()
    entry.update(starved_percent=round(s["starved_percent"], 1), inter_batch_p50_ms=round(s["inter_batch_p50_ms"], 2),
                 inter_batch_p99_ms=round(s["inter_batch_p99_ms"], 2),
                 p99_over_p50=round(s["inter_batch_p99_ms"] / max(1e-9, s["inter_batch_p50_ms"]), 2),
                 loader_images_per_s=round(s["images_per_second"], 1), bottleneck=s["bottleneck"],
                 bottleneck_explanation=s["bottleneck_explanation"], h2d_gb_s=round(s["h2d_gb_per_second"], 2))


def step_train(ctx, fig, until):
    torch = ctx.torch
    try:
        import torchvision
    except ImportError as e:
        raise Skip(f"torchvision is not importable: {e}")
    torch.backends.cudnn.benchmark = True
    bs, steps, warmup = ctx.args.train_batch, ctx.args.train_steps, 8
    model = torchvision.models.resnet50().cuda().to(memory_format=torch.channels_last)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    fig.update(model="torchvision resnet50, bf16 autocast, channels_last, SGD", batch_size=bs)

    # The ceiling: one batch already on the GPU, no loader at all.
    x = torch.randn(bs, 224, 224, 3, device="cuda").to(torch.bfloat16)
    y = torch.randint(0, 1000, (bs,), device="cuda")
    ceiling = _train(ctx, fig, "gpu_only_ceiling", iter(lambda: (x, y), None), steps, model, opt, warmup)
    common = dict(batch_size=bs, dtype="bfloat16", layout="nhwc", drop_last=True)

    def run(key, dataset, pipeline, **kw):
        if time.monotonic() > until - 10:
            fig[key] = "skipped: out of time"
            return None
        ld = loader(ctx, dataset, "cuda", pipeline=pipeline, **common, **kw)
        epochs = -(-(steps + warmup) // max(1, len(ld))) + 1
        ld = loader(ctx, dataset, "cuda", pipeline=pipeline, epochs=epochs, **common, **kw)
        entry = _train(ctx, fig, key, _loader_batches(ld, epochs), steps, model, opt, warmup)
        _with_stats(entry, ld)
        entry["vs_gpu_only_ceiling"] = round(entry["images_per_s"] / ceiling["images_per_s"], 3)
        del ld
        return entry

    run("synthetic_224_local", f"synthetic:224x224:{bs * 64}:1000", "center_crop(224)")
    run("jpeg_local", "photos", "random_resized_crop(224), random_horizontal_flip(0.5)")
    if "synthetic_224_local" in fig and isinstance(fig["jpeg_local"], dict) and isinstance(
            fig["synthetic_224_local"], dict):
        fig["jpeg_vs_synthetic"] = round(fig["jpeg_local"]["images_per_s"] /
                                         fig["synthetic_224_local"]["images_per_s"], 3)
    servers = start_servers(ctx, 2, max(1, ctx.workers // 2))
    if isinstance(servers, str):
        fig["jpeg_two_servers"] = servers
        return
    try:
        run("jpeg_two_servers", "photos", "random_resized_crop(224), random_horizontal_flip(0.5)",
            servers=",".join(s[1] for s in servers), local_workers=0)
    finally:
        stop_servers(servers)


# -- servers --------------------------------------------------------------------------------
def start_servers(ctx, count, workers):
    """`count` stoker-server processes on 127.0.0.1 (free ports) over the
    data; [(process, address)] or the reason they did not start."""
    server = os.path.join(ctx.bin or "", "stoker-server")
    if not ctx.bin or not os.access(server, os.X_OK):
        return f"skipped: no stoker-server in the bundle ({server})"
    out = []
    for i in range(count):
        log = os.path.join(ctx.out, f"server-{i}.log")
        p = subprocess.Popen([server, "--host=127.0.0.1", "--port=0", "--metrics-port=-1",
                              f"--data-root={ctx.data}", f"--workers={workers}"],
                             stdout=open(log, "w"), stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 30
        address = None
        while time.monotonic() < deadline and p.poll() is None:  # a server that exits fails at once
            m = re.search(r"listening on [\d.]+:(\d+)", open(log).read())
            if m:
                address = f"127.0.0.1:{m.group(1)}"
                break
            time.sleep(0.05)
        if address is None:
            p.kill()
            stop_servers(out)
            return f"stoker-server did not start: {open(log).read()[-1500:]}"
        out.append((p, address))
    return out


def stop_servers(servers):
    stop_all([p for p, _ in servers])


def step_servers_cpu(ctx, fig, until):
    """Dry run: the bundle's stoker-server starts here from its own lib/ and
    serves a batch (what step 5 needs of it)."""
    servers = start_servers(ctx, 1, 2)
    if isinstance(servers, str):
        raise Failed(servers)
    try:
        ld = ctx.stoker.Loader(servers=servers[0][1], dataset="photos", batch_size=8, device="cpu",
                               framework="numpy", pipeline="center_crop(64)")
        x, y = next(iter(ld))
        check(tuple(x.shape) == (8, 3, 64, 64), f"batch shape {x.shape}")
        fig["server_batch_shape"] = list(x.shape)
    finally:
        stop_servers(servers)


# -- step 6: the C++ device tests, and compute-sanitizer -------------------------------------
def _tail(text, n):
    """The end of a program's output without glog's INFO lines."""
    import re

    return "\n".join(l for l in text.splitlines() if not re.match(r"I\d{8} ", l))[-n:]


def step_sanitizer(ctx, fig, until):
    test = os.path.join(ctx.bin or "", "device_gpu_test")
    if not ctx.bin or not os.access(test, os.X_OK):
        raise Skip(f"no device_gpu_test in the bundle ({test})")
    left = max(5, until - time.monotonic())
    r = subprocess.run([test, "--gtest_brief=1"], capture_output=True, text=True, timeout=min(60, left))
    fig["device_gpu_test_rc"] = r.returncode
    fig["device_gpu_test_tail"] = _tail(r.stdout + r.stderr, 1500)
    if not ctx.gpu:
        check(r.returncode == 77, f"device_gpu_test without a GPU exited {r.returncode}, not 77 (skipped)")
        raise Skip(ctx.no_gpu_reason + "; device_gpu_test ran and reported itself skipped (77)")
    check(r.returncode == 0, "device_gpu_test failed on the GPU")
    sanitizer = shutil.which("compute-sanitizer") or next(
        (p for p in ("/usr/local/cuda/bin/compute-sanitizer", "/usr/local/cuda/compute-sanitizer/compute-sanitizer")
         if os.access(p, os.X_OK)), None)
    if sanitizer is None:
        fig["compute_sanitizer"] = "skipped: compute-sanitizer is not on this machine (PATH, /usr/local/cuda)"
        return
    left = max(5, until - time.monotonic())
    try:
        r = subprocess.run([sanitizer, "--tool", "memcheck", "--error-exitcode", "3", test, "--gtest_brief=1"],
                           capture_output=True, text=True, timeout=left)
        fig["compute_sanitizer_rc"] = r.returncode
        fig["compute_sanitizer_tail"] = _tail(r.stdout + r.stderr, 2000)
        check(r.returncode == 0, "compute-sanitizer memcheck reported errors")
    except subprocess.TimeoutExpired:
        fig["compute_sanitizer"] = f"stopped after {left:.0f} s (the check's time)"


# -- the run ------------------------------------------------------------------------------------------
def prepare_data(ctx, report, fig, until):
    ctx.data = os.path.join(ctx.work, "data")
    t0 = time.monotonic()
    fig["photos"] = make_photos(ctx.data, "photos", ctx.args.classes, ctx.args.per_class, seed=2)
    photos = sorted(os.path.join(d, f) for d, _, fs in os.walk(os.path.join(ctx.data, "photos")) for f in fs)
    make_caption_shards(ctx.data, "captions", photos, 256)
    make_wavs(ctx.data, "wavs", 24)
    fig["seconds"] = round(time.monotonic() - t0, 1)
    fig["jpeg_mb"] = round(sum(os.path.getsize(p) for p in photos) / 1e6, 1)
    # The media module (FFmpeg) for the audio batch: from the bundle, if it came.
    ctx.media = False
    ctx.media_reason = "no media module: FFmpeg's libraries did not fit the copy (see tests/gpu/README.md)"
    module = os.environ.get("STOKER_MEDIA_MODULE")
    if module and os.path.exists(module):
        probe = loader(ctx, "wavs", "cpu", pipeline="audio(rate=16000, seconds=1.0)", batch_size=4, local_workers=1)
        try:
            x, _ = next(iter(probe))
            ctx.media = True
            fig["media_module"] = module
        except Exception as e:  # noqa: BLE001
            ctx.media_reason = f"the media module at {module} does not decode: {e}"
    fig["media"] = "usable" if ctx.media else ctx.media_reason


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", default=os.environ.get("OUT") or "gpu-check-out", help="folder for the JSON and log")
    p.add_argument("--bin", default="", help="folder with stoker-server and device_gpu_test (the bundle's bin/)")
    p.add_argument("--seconds", type=float, default=225, help="the whole check's time, seconds (default 225)")
    p.add_argument("--workers", type=int, default=0, help="local workers (default: cores - 2)")
    p.add_argument("--classes", type=int, default=16, help="photo classes made on the machine")
    p.add_argument("--per-class", type=int, default=160, help="photos per class")
    p.add_argument("--train-batch", type=int, default=256, help="ResNet-50 batch size")
    p.add_argument("--train-steps", type=int, default=100, help="timed training steps per feed")
    p.add_argument("--steps", default="", help="only these steps, e.g. 2,4 (default: all; the data always)")
    p.add_argument("--dry-run", action="store_true", help="no GPU: CPU-only parts, GPU steps reported skipped")
    args = p.parse_args()
    start = time.monotonic()
    report = Report(args.out, start + args.seconds, args.dry_run)
    ctx = make_context(args, report)
    ctx.out = os.path.abspath(args.out)
    ctx.work = tempfile.mkdtemp(prefix="stoker-gpu-check-")
    try:
        report.log(f"machine: {json.dumps(report.doc['machine'], default=str)}")
        report.run("0 data", lambda c, f, u: prepare_data(c, report, f, u), ctx, 40, needs_gpu=False)
        steps = [("1 h2d bandwidth", step_h2d, 25), ("2 cuda equals cpu", step_equal, 35),
                 ("3 stream safety", step_streams, 30), ("4 mixup and dlpack", step_mix_dlpack, 25),
                 ("5 resnet-50 training", step_train, 80), ("6 device tests and compute-sanitizer", step_sanitizer, 60)]
        if args.dry_run:
            steps.insert(5, ("5b servers from the bundle (cpu)", step_servers_cpu, 30))
        only = {x.strip() for x in args.steps.split(",") if x.strip()}
        for name, fn, budget in steps:
            if only and name.split()[0] not in only:
                continue
            report.run(name, fn, ctx, budget, needs_gpu=fn not in (step_servers_cpu, step_sanitizer))
    finally:
        shutil.rmtree(ctx.work, ignore_errors=True)
        report.doc["seconds"] = round(time.monotonic() - start, 1)
        report.write()
    summary(report)
    bad = [s for s in report.doc["steps"] if s["status"] in ("fail", "error")]
    return 1 if bad else 0


def summary(report):
    print("\n== stoker GPU check ==")
    m = report.doc["machine"]
    print(f"{m.get('gpu', 'no GPU')} | torch {m.get('torch')} | python {m.get('python')} | {m.get('cores')} cores")
    for s in report.doc["steps"]:
        f = s["figures"]
        keys = [k for k in f if not k.endswith("_tail") and not isinstance(f[k], (dict, list))][:6]
        brief = ", ".join(f"{k}={f[k]}" for k in keys)
        print(f"{s['status'].upper():8} {s['step']:38} {s['seconds']:6.1f} s  {s.get('reason', '')[:80]}")
        if brief:
            print(f"         {brief[:150]}")
        for k, v in f.items():
            if isinstance(v, dict):
                print(f"         {k}: " + ", ".join(f"{a}={b}" for a, b in v.items() if a != "bottleneck_explanation")[:150])
    print(f"total {report.doc.get('seconds')} s; JSON: {report.json_path}")


if __name__ == "__main__":
    sys.exit(main())
