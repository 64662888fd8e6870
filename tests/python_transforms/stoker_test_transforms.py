"""Python transforms for the tests (python/tests/test_user_transforms.py):
well-behaved ones and one per fault a user's code can have."""
import os
import struct
import time
from shutil import rmtree  # noqa: F401  (imported: a session must not be able to call it)

import numpy as np


def invert(sample, rng):
    sample["image"] = 255 - sample["image"]
    return sample


def invert_in_place(sample, rng):
    np.subtract(255, sample["image"], out=sample["image"])
    return sample


def noise(sample, rng, amount=20):
    """Adds rng's integer noise in [-amount, amount]: the pixels depend on the generator."""
    image = sample["image"].astype(np.int16) + rng.integers(-amount, amount + 1, sample["image"].shape)
    sample["image"] = np.clip(image, 0, 255).astype(np.uint8)
    return sample


def shrink(sample, rng, size=16):
    """Nearest-neighbour resize to size x size: another output size."""
    h, w, _ = sample["image"].shape
    rows = (np.arange(size) * h) // size
    cols = (np.arange(size) * w) // size
    sample["image"] = np.ascontiguousarray(sample["image"][rows][:, cols])
    return sample


def raises(sample, rng):
    raise ValueError("this sample is not to my liking")


def raises_sometimes(sample, rng, p=0.2):
    if rng.random() < p:
        raise RuntimeError("unlucky draw")
    return sample


def wrong_dtype(sample, rng):
    sample["image"] = sample["image"].astype(np.float32)
    return sample


def not_a_dict(sample, rng):
    return sample["image"]


def sleeps(sample, rng, seconds=60.0):
    time.sleep(seconds)
    return sample


def crashes(sample, rng):
    os.abort()


def garbles(sample, rng, length=0x7FFFFFFF):
    """Writes a bogus message header to the worker's socket (fd 4): a reply the server cannot read."""
    os.write(4, struct.pack("<I", length))
    time.sleep(0.5)
    return sample


def forged(sample, rng):
    """Writes a well-formed reply of its own before the worker's: one that answers no request."""
    body = b'{"ok": false, "error": "forged"}'
    os.write(4, struct.pack("<I", len(body)) + body)
    return sample


def pid(sample, rng):
    """Writes this process's id into the first pixels (the tests read it back)."""
    value = os.getpid()
    sample["image"][0, 0, :] = [value & 255, (value >> 8) & 255, (value >> 16) & 255]
    return sample


def spawns(sample, rng, record="", detach=0):
    """Starts children that outlive the call (issue 49): one that sleeps, one
    (detach=1) that leaves the process group with setsid and sleeps, and one
    that exits at once (it must not stay <defunct>); their ids are appended
    to `record`."""
    pids = []
    for kind in ("sleep", "setsid", "exit"):
        if kind == "setsid" and not detach:
            continue
        child = os.fork()
        if child == 0:
            try:
                if kind == "setsid":
                    os.setsid()
                if kind != "exit":
                    time.sleep(600)
            finally:
                os._exit(0)
        pids.append(child)
    if record:
        with open(record, "a") as f:
            f.write(" ".join(str(p) for p in pids) + "\n")
    return sample


def caption_upper(sample, rng):
    """Changes the value fields: the caption (uint8 UTF-8) upper-cased, the class (int32) plus 100."""
    sample["caption"] = bytes(sample["caption"]).decode().upper()
    sample["label"] = np.array([int(sample["label"][0]) + 100], dtype=np.int32)
    return sample


def bad_caption(sample, rng):
    sample["caption"] = b"\xff\xfe not UTF-8"
    return sample


def label_as_float(sample, rng):
    sample["label"] = np.array([1.5])
    return sample
