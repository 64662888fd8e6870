"""Python transforms for tests/bench/user_transforms_bench.py: one that does
nothing (the stage's own cost), and one heavy NumPy op (a 5x5 box blur in
float32, passes repeated), the kind of custom augmentation users write."""
import numpy as np


def identity(sample, rng):
    return sample


def heavy(sample, rng, passes=3):
    image = sample["image"].astype(np.float32)
    for _ in range(passes):
        padded = np.pad(image, ((2, 2), (2, 2), (0, 0)), mode="edge")
        acc = np.zeros_like(image)
        for dy in range(5):
            for dx in range(5):
                acc += padded[dy:dy + image.shape[0], dx:dx + image.shape[1]]
        image = acc / 25.0
    sample["image"] = np.clip(image + rng.normal(0, 2, image.shape), 0, 255).astype(np.uint8)
    return sample


def timed(sample, rng, fn="identity"):
    """Runs `fn` and appends its own time (microseconds) to $BENCH_TIMES_FILE:
    the function's time inside whatever process calls it, so that the bench
    can subtract it from the wall time per sample."""
    import os
    import time
    start = time.perf_counter()
    out = globals()[fn](sample, rng)
    with open(os.environ["BENCH_TIMES_FILE"], "a") as f:
        f.write(f"{(time.perf_counter() - start) * 1e6:.1f}\n")
    return out
