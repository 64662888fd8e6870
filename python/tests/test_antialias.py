"""Resizing as torchvision does it: resize and random_resized_crop antialias by
default, and their output is within 2 levels of PIL's BILINEAR resample (what
torchvision's antialias reproduces) and of torchvision's own antialiased
tensor resize on at least 99 % of pixels; antialias=false keeps OpenCV's
bilinear resize (Stoker's bytes before antialiasing). The data is made here:
noisy, detailed images (the case antialiasing exists for) as PNG and JPEG."""

import os

import numpy as np
import pytest
import torch
import torchvision.transforms.functional as F
from PIL import Image

import stoker

SIZES = [(300, 200), (517, 389), (181, 263), (640, 480)]  # width, height


def _image(seed, w, h):
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:h, 0:w]
    base = np.stack([(x * 255 // max(1, w - 1)), (y * 255 // max(1, h - 1)), ((x + y) * 3) % 256], axis=-1)
    stripes = ((x // (1 + seed % 3)) % 2 * 90)[..., None]  # 1-3 px stripes: they alias without a filter
    noise = rng.integers(-40, 40, size=(h, w, 3))
    return np.clip(base + stripes + noise, 0, 255).astype(np.uint8)


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    root = tmp_path_factory.mktemp("aa")
    for fmt in ("png", "jpg"):
        os.makedirs(root / fmt / "c0")
        for i, (w, h) in enumerate(SIZES):
            Image.fromarray(_image(i, w, h)).save(root / fmt / "c0" / f"{i:03d}.{fmt}", quality=90)
    os.makedirs(root / "wide" / "c0")
    for i in range(3):
        Image.fromarray(_image(10 + i, 300, 200)).save(root / "wide" / "c0" / f"{i:03d}.png")
    return str(root)


def _batch(root, dataset, pipeline, n):
    loader = stoker.Loader(servers=None, local_workers=1, data_root=root, dataset=dataset, pipeline=pipeline,
                           batch_size=n, device="cpu", dtype="uint8", layout="nhwc")
    images, _ = next(iter(loader))
    return images.numpy(), loader.last_batch["sample_indices"]


def _decoded(root, dataset, index):
    files = sorted(os.listdir(os.path.join(root, dataset, "c0")))
    return Image.open(os.path.join(root, dataset, "c0", files[index])).convert("RGB")


def _shorter_side(w, h, s):
    return (s, int(s * h / w)) if w < h else (int(s * w / h), s)


def _center(a, s):
    h, w = a.shape[:2]
    top, left = int(round((h - s) / 2)), int(round((w - s) / 2))
    return a[top:top + s, left:left + s]


def _within(a, b, levels=2):
    return float((np.abs(a.astype(int) - b.astype(int)) <= levels).mean())


@pytest.mark.parametrize("fmt", ["png", "jpg"])
@pytest.mark.parametrize("size", [24, 64, 150])
def test_resize_equals_pils_bilinear_and_torchvisions_antialiased_resize(root, fmt, size):
    out, indices = _batch(root, fmt, f"resize({size}), center_crop({size})", len(SIZES))
    for k, i in enumerate(indices):
        im = _decoded(root, fmt, i)
        w, h = _shorter_side(im.width, im.height, size)
        pil = _center(np.asarray(im.resize((w, h), Image.BILINEAR)), size)
        assert _within(out[k], pil) >= 0.99, (fmt, size, i)
        tensor = torch.from_numpy(np.asarray(im).copy()).permute(2, 0, 1)
        tv = F.resize(tensor, [h, w], interpolation=F.InterpolationMode.BILINEAR, antialias=True)
        tv = _center(tv.permute(1, 2, 0).numpy(), size)
        assert _within(out[k], tv) >= 0.99, (fmt, size, i)


def test_random_resized_crop_of_the_whole_image_equals_pils_resize(root):
    # scale 1 and the images' own ratio: the box is the whole 300x200 image.
    out, indices = _batch(root, "wide", "random_resized_crop(56, scale=1:1, ratio=1.5:1.5)", 3)
    for k, i in enumerate(indices):
        pil = np.asarray(_decoded(root, "wide", i).resize((56, 56), Image.BILINEAR))
        assert _within(out[k], pil) >= 0.99
    bicubic, indices = _batch(root, "wide", "random_resized_crop(56, scale=1:1, ratio=1.5:1.5, interpolation=bicubic)", 3)
    for k, i in enumerate(indices):
        pil = np.asarray(_decoded(root, "wide", i).resize((56, 56), Image.BICUBIC))
        assert _within(bicubic[k], pil) >= 0.99


def test_antialias_false_is_opencvs_bilinear_resize_and_sharper(root):
    if os.environ.get("STOKER_REQUIRE_REFERENCES"):
        import cv2  # a missing reference is a failure where it is required
    else:
        cv2 = pytest.importorskip("cv2", reason="OpenCV's Python module is not installed here; ctest's "
                                                "python_reference_parity runs this with the pyenv, which has it")
    sharp, indices = _batch(root, "png", "resize(150, antialias=false), center_crop(150)", len(SIZES))
    smooth, _ = _batch(root, "png", "resize(150), center_crop(150)", len(SIZES))
    for k, i in enumerate(indices):
        im = np.asarray(_decoded(root, "png", i))
        w, h = _shorter_side(im.shape[1], im.shape[0], 150)
        if min(im.shape[:2]) >= 300:
            continue  # shrunk in the DCT domain first, as before
        ref = _center(cv2.resize(im, (w, h), interpolation=cv2.INTER_LINEAR), 150)
        assert np.array_equal(sharp[k], ref), i
    # Without the filter, the stripes alias: neighbouring pixels differ more.
    def roughness(a):
        return np.abs(np.diff(a.astype(int), axis=2)).mean()
    assert roughness(sharp) > roughness(smooth) * 1.05
