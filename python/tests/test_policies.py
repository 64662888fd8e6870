"""AutoAugment, RandAugment, TrivialAugmentWide and AugMix against
torchvision (Debian's 0.14) as the reference:
- over 10^5 draws the ops and magnitudes Stoker chooses follow the
  distribution that torchvision's own tables define (its policies and
  augmentation spaces, read from the module; a chi-square test);
- each op applied with a given magnitude equals torchvision's _apply_op
  (photometric within 1 level, warps within 2 levels on 99.9 % of pixels);
- one whole application, with Stoker's draws given to torchvision, gives
  torchvision's pixels.
stoker-policy-draws (a test tool) exposes the draws; the data is made here."""

import json
import os
import subprocess
from collections import Counter

import numpy as np
import pytest
import torch
import torchvision.transforms as T
import torchvision.transforms.autoaugment as A
import torchvision.transforms.functional as F
from PIL import Image
from scipy import stats

from conftest import BUILD

TOOL = os.path.join(BUILD, "tests", "stoker-policy-draws")
H, W = 120, 160
N = 100_000


def _key(name, magnitude):
    return f"{name}:{magnitude:.4f}"


def _draws(policy, n=N):
    out = subprocess.run([TOOL, f"--policy={policy}", f"--draws={n}", f"--height={H}", f"--width={W}", "--seed=7"],
                         check=True, capture_output=True, text=True, timeout=120)
    return json.loads(out.stdout)


def _signed(magnitudes, signed, index):
    m = float(magnitudes[index].item()) if magnitudes.ndim > 0 else 0.0
    return [(m, 0.5), (-1.0 * m, 0.5)] if signed else [(m, 1.0)]


def _expected_autoaugment(policy):
    aa = T.AutoAugment(policy)
    space = aa._augmentation_space(10, (H, W))
    expected = Counter()
    for sub in aa.policies:
        for name, p, index in sub:
            magnitudes, signed = space[name]
            if index is None:
                options = [(-0.0, 0.5), (0.0, 0.5)] if signed else [(0.0, 1.0)]
            else:
                options = _signed(magnitudes, signed, index)
            for m, q in options:
                expected[_key(name, m)] += p * q / len(aa.policies)
    return expected  # per application


def _expected_uniform(space, bins):
    """One op uniform over the space; its bin from `bins(magnitudes)` (a list of (index, probability))."""
    expected = Counter()
    for name, (magnitudes, signed) in space.items():
        if magnitudes.ndim == 0:
            expected[_key(name, 0.0)] += 1 / len(space)
            continue
        for index, q in bins(magnitudes):
            for m, s in _signed(magnitudes, signed, index):
                expected[_key(name, m)] += q * s / len(space)
    return expected  # per step


def _chi_square(observed, total, expected):
    missing = set(observed) - set(expected)
    assert not missing, f"drawn but impossible in torchvision's tables: {sorted(missing)[:5]}"
    impossible = [k for k, v in expected.items() if v == 0 and observed.get(k, 0) > 0]
    assert not impossible, f"drawn with probability 0 in torchvision's tables: {impossible[:5]}"
    keys = sorted(k for k, v in expected.items() if v > 0)
    obs = np.array([observed.get(k, 0) for k in keys], dtype=float)
    exp = np.array([expected[k] for k in keys]) * total
    chi2, p = stats.chisquare(obs, exp * obs.sum() / exp.sum())
    return p


@pytest.mark.parametrize("policy", ["imagenet", "cifar10", "svhn"])
def test_auto_augment_draws_follow_torchvisions_policies(policy):
    d = _draws(f"auto_augment(policy={policy})")
    expected = _expected_autoaugment(getattr(T.AutoAugmentPolicy, policy.upper()))
    # Applications that apply nothing are not counted; compare the steps' distribution.
    assert abs(d["steps"] / N - sum(expected.values())) < 0.01  # ops applied per application
    assert _chi_square(d["counts"], d["steps"], expected) > 1e-3


@pytest.mark.parametrize("text,ops,magnitude,bins", [("rand_augment()", 2, 9, 31),
                                                      ("rand_augment(num_ops=1, magnitude=5, num_magnitude_bins=10)",
                                                       1, 5, 10)])
def test_rand_augment_draws_follow_torchvisions_space(text, ops, magnitude, bins):
    d = _draws(text)
    assert d["steps"] == N * ops
    space = T.RandAugment(ops, magnitude, bins)._augmentation_space(bins, (H, W))
    assert _chi_square(d["counts"], d["steps"], _expected_uniform(space, lambda m: [(magnitude, 1.0)])) > 1e-3


def test_trivial_augment_wide_draws_follow_torchvisions_space():
    d = _draws("trivial_augment_wide()")
    space = T.TrivialAugmentWide()._augmentation_space(31)
    expected = _expected_uniform(space, lambda m: [(i, 1 / len(m)) for i in range(len(m))])
    assert _chi_square(d["counts"], d["steps"], expected) > 1e-3


def test_augmix_draws_follow_torchvisions_space():
    d = _draws("augmix()", n=30_000)
    space = T.AugMix()._augmentation_space(10, (H, W))
    expected = _expected_uniform(space, lambda m: [(i, 1 / 3) for i in range(3)])  # severity 3
    assert 30_000 * 3 * 1 <= d["steps"] <= 30_000 * 3 * 3  # chains of depth 1..3
    assert abs(d["steps"] / (30_000 * 3) - 2.0) < 0.05
    assert _chi_square(d["counts"], d["steps"], expected) > 1e-3


def _image(seed):
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:H, 0:W]
    base = np.stack([x * 255 // W, y * 255 // H, (x * y) % 256], axis=-1)
    return np.clip(base + rng.integers(-25, 25, size=(H, W, 3)), 0, 255).astype(np.uint8)


@pytest.fixture(scope="module")
def picture(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("policy") / "in.png")
    Image.fromarray(_image(3)).save(path)
    return path


def _tool_image(args, tmp_path):
    out = str(tmp_path / "out.png")
    r = subprocess.run([TOOL, *args, f"--out={out}"], check=True, capture_output=True, text=True, timeout=60)
    return np.asarray(Image.open(out).convert("RGB")), r.stdout


def _torch(a):
    return torch.from_numpy(np.ascontiguousarray(a)).permute(2, 0, 1)


def _within(a, b, levels):
    return float((np.abs(a.astype(int) - b.astype(int)) <= levels).mean())


OPS = [("ShearX", 0.27), ("ShearY", -0.3), ("TranslateX", 33.7), ("TranslateY", -20.2), ("Rotate", 17.5),
       ("Rotate", -135.0), ("Brightness", 0.4), ("Color", -0.6), ("Contrast", 0.81), ("Sharpness", -0.5),
       ("Posterize", 5.0), ("Solarize", 120.0), ("AutoContrast", 0.0), ("Equalize", 0.0), ("Invert", 0.0),
       ("Identity", 0.0)]
WARPS = {"ShearX", "ShearY", "TranslateX", "TranslateY", "Rotate"}


@pytest.mark.parametrize("bilinear,fill", [(False, None), (True, None), (True, [10.0, 200.0, 30.0])])
@pytest.mark.parametrize("name,magnitude", OPS, ids=[f"{n}:{m}" for n, m in OPS])
def test_each_op_equals_torchvisions_apply_op(picture, tmp_path, name, magnitude, bilinear, fill):
    args = [f"--in={picture}", f"--apply={name}:{magnitude}"] + (["--bilinear"] if bilinear else [])
    if fill:
        args.append("--fill=" + ":".join(str(int(f)) for f in fill))
    ours, _ = _tool_image(args, tmp_path)
    mode = T.InterpolationMode.BILINEAR if bilinear else T.InterpolationMode.NEAREST
    theirs = A._apply_op(_torch(_image(3)), name, magnitude, interpolation=mode, fill=fill).permute(1, 2, 0).numpy()
    if name in WARPS:
        assert _within(ours, theirs, 2) >= 0.999
    else:
        assert _within(ours, theirs, 1) == 1.0


@pytest.mark.parametrize("policy", ["auto_augment(policy=imagenet)", "auto_augment(policy=svhn)", "rand_augment()",
                                    "rand_augment(num_ops=4, magnitude=20)", "trivial_augment_wide()"])
def test_a_whole_application_with_stokers_draws_gives_torchvisions_pixels(picture, tmp_path, policy):
    applied = 0
    for seed in range(6):
        ours, printed = _tool_image([f"--in={picture}", f"--policy={policy}", f"--seed={seed}"], tmp_path)
        img = _torch(_image(3))
        for name, magnitude in json.loads(printed)["steps"]:
            img = A._apply_op(img, name, magnitude, interpolation=T.InterpolationMode.NEAREST, fill=None)
            applied += 1
        assert _within(ours, img.permute(1, 2, 0).numpy(), 2) >= 0.999, (policy, seed, printed)
    assert applied > 0


def test_augmix_with_stokers_draws_gives_torchvisions_mix(picture, tmp_path):
    for seed in range(4):
        ours, printed = _tool_image([f"--in={picture}", "--policy=augmix()", f"--seed={seed}"], tmp_path)
        d = json.loads(printed)
        img = _torch(_image(3))
        mix = d["original"] * img
        for weight, chain in zip(d["weights"], d["chains"]):
            aug = img
            for name, magnitude in chain:
                aug = A._apply_op(aug, name, magnitude, interpolation=T.InterpolationMode.NEAREST, fill=None)
            mix = mix + weight * aug
        theirs = mix.to(torch.uint8).permute(1, 2, 0).numpy()
        assert _within(ours, theirs, 2) >= 0.999, (seed, printed)
