"""stoker.diagnose: the caching ladder with the job's own training step.

Runs the caller's ``train_step(images, labels)`` while serving cached data at
successive points of the input path, from the GPU back to storage (as
``stoker-diagnose`` does with a simulated step): a batch kept on the device, a
batch kept in host memory and copied each step, servers re-sending one
finished batch, servers keeping decoded images, servers keeping encoded
files, and the full pipeline. The first step's rate is the model's ceiling;
the step after which the rate drops most names the stage to fix.
"""

import json as _json
import time

from . import _stoker_ext as _ext
from .loader import DEFAULT_PIPELINE, Loader, _servers_list


def _synchronize(images):
    """Waits for queued GPU work, so that a step's time is real."""
    if getattr(images, "is_cuda", False):
        import torch

        torch.cuda.synchronize(images.device)


def _rate(batches, run_one, images_per_batch):
    start = time.perf_counter()
    last = None
    for _ in range(batches):
        last = run_one()
    _synchronize(last)
    return images_per_batch * batches / max(1e-9, time.perf_counter() - start)


def _through_servers(kwargs, cache_mode, train_step, warmup, steps):
    loader = Loader(**dict(kwargs, cache_mode=cache_mode))
    try:
        epoch, done, images_seen, start = 0, 0, 0, None
        last = None
        while done < warmup + steps:
            loader.set_epoch(epoch)
            for images, labels in loader:
                train_step(images, labels)
                last = images
                done += 1
                if done == warmup:
                    _synchronize(last)
                    start = time.perf_counter()
                elif done > warmup:
                    images_seen += len(labels)
                if done == warmup + steps:
                    break
            epoch += 1
        _synchronize(last)
        return images_seen / max(1e-9, time.perf_counter() - start)
    finally:
        loader.close()


def diagnose(loader_kwargs, train_step, steps=20, warmup=3, html=None, json=None, verbose=True):
    """Measures the ladder and returns it as a dict: ``steps`` (name, adds,
    images_per_second, change), ``bottleneck`` (the stage that costs most per
    image, or "none"), ``current`` and ``without`` (images/s now and without
    that cost), ``caveats``; ``table`` is the printed text. `loader_kwargs`
    are stoker.Loader's arguments; `steps` batches are timed per ladder step
    after `warmup`. `html` / `json` name files to write the report to."""
    kwargs = dict(loader_kwargs)
    kwargs.pop("cache_mode", None)
    if warmup < 1:
        raise ValueError("warmup must be >= 1 (the first batch of each step starts the servers' caches)")
    rates = []
    loader = Loader(**kwargs)
    try:
        loader.set_epoch(0)
        images, labels = next(iter(loader))
        n = len(labels)
        for _ in range(warmup):
            train_step(images, labels)
        rates.append(_rate(steps, lambda: (train_step(images, labels), images)[1], n))  # device-cached
        if verbose:
            print(f"  measured {'device-cached':<24} {rates[-1]:10.1f} images/s", flush=True)
        loader._cache_one_batch()

        def host_cached():
            batch, batch_labels = loader._stage_cached()
            train_step(batch, batch_labels)
            return batch

        rates.append(_rate(steps, host_cached, n))
        if verbose:
            print(f"  measured {'host-cached':<24} {rates[-1]:10.1f} images/s", flush=True)
    finally:
        loader.close()
    names = [name for name, _ in _ext.ladder_steps()]
    for mode, name in zip(("batch", "decoded", "raw", "none"), names[2:]):
        rates.append(_through_servers(kwargs, mode, train_step, warmup, steps))
        if verbose:
            print(f"  measured {name:<24} {rates[-1]:10.1f} images/s", flush=True)
    report = _ext.ladder_report(rates, _servers_list(kwargs["servers"]), kwargs.get("pipeline", DEFAULT_PIPELINE),
                                f"Stoker caching ladder: {kwargs['dataset']}")
    result = _json.loads(report["json"])
    result["table"] = report["table"]
    if verbose:
        print("\n" + report["table"], end="", flush=True)
    if html:
        with open(html, "w") as f:
            f.write(report["html"])
    if json:
        with open(json, "w") as f:
            f.write(report["json"] + "\n")
    return result
