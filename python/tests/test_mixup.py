"""MixUp and CutMix on the device against timm's Mixup (PyPI, installed
without its dependencies by `make pyenv`; only its mixup module is loaded):
given Stoker's draws, timm mixes the same batch into the same images and soft
targets. Also through the loader: deterministic per (seed, epoch, batch), and
the targets are a mix of two one-hot rows."""

import importlib.util
import os
import site
import types

import numpy as np
import pytest
import torch
from PIL import Image

import stoker
from stoker.mixup import Mixup


def _timm_mixup():
    for d in site.getsitepackages():
        path = os.path.join(d, "timm", "data", "mixup.py")
        if os.path.exists(path):
            spec = importlib.util.spec_from_file_location("timm_mixup", path)
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
            return module
    if os.environ.get("STOKER_REQUIRE_REFERENCES"):
        raise AssertionError("timm is not installed in this environment; `make pyenv` installs it")
    pytest.skip("timm (PyPI) is not installed here; ctest's python_reference_parity runs this with it")


class _Scripted:
    """np.random for timm's module, answering with the given draws in order."""

    def __init__(self, values):
        self.values = list(values)

    def rand(self, *a):
        return self.values.pop(0)

    def beta(self, *a):
        return self.values.pop(0)

    def randint(self, *a, **k):
        return self.values.pop(0)


@pytest.mark.parametrize("mixup_alpha,cutmix_alpha,layout", [(0.8, 1.0, "nchw"), (0.8, 0.0, "nchw"), (0.0, 1.0, "nchw"),
                                                             (0.8, 1.0, "nhwc")])
def test_batches_equal_timms_for_the_same_draws(mixup_alpha, cutmix_alpha, layout):
    timm = _timm_mixup()
    ours = Mixup(mixup_alpha, cutmix_alpha, mix_prob=0.9, switch_prob=0.5, label_smoothing=0.1, num_classes=10, seed=3)
    reference = timm.Mixup(mixup_alpha=mixup_alpha, cutmix_alpha=cutmix_alpha, prob=0.9, switch_prob=0.5,
                           mode="batch", label_smoothing=0.1, num_classes=10)
    kinds = set()
    for batch in range(40):
        x = torch.rand(8, 3, 24, 32)
        y = torch.randint(0, 10, (8,))
        draw = ours.draw(epoch=1, batch=batch, height=24, width=32)
        kinds.add("none" if draw.lam == 1.0 else "cutmix" if draw.cutmix else "mixup")
        mine = x.permute(0, 2, 3, 1).contiguous() if layout == "nhwc" else x.clone()
        mixed, targets = ours.apply(mine, y, draw, channels_last=layout == "nhwc")
        if layout == "nhwc":
            mixed = mixed.permute(0, 3, 1, 2)
        timm.np = types.SimpleNamespace(random=_Scripted(draw.raw), clip=np.clip, sqrt=np.sqrt)
        expected_x = x.clone()
        expected_x, expected_t = reference(expected_x, y)  # timm returns (x, target)
        assert not timm.np.random.values, "timm drew as many values as Stoker"
        assert torch.allclose(mixed, expected_x, atol=1e-6), (batch, draw)
        assert torch.allclose(targets, expected_t, atol=1e-6), (batch, draw)
    expected = {"none", "mixup", "cutmix"} if mixup_alpha and cutmix_alpha else {"none", "mixup" if mixup_alpha else "cutmix"}
    assert kinds == expected


def test_bad_settings_are_named():
    for kwargs, text in [(dict(mixup_alpha=-1), "mixup_alpha"), (dict(mixup_alpha=0, cutmix_alpha=0), "both 0"),
                         (dict(mix_prob=2), "mix_prob"), (dict(num_classes=0), "num_classes")]:
        with pytest.raises(ValueError, match=text):
            Mixup(**kwargs)
    with pytest.raises(TypeError, match="float"):
        Mixup().apply(torch.zeros(2, 3, 4, 4, dtype=torch.uint8), torch.zeros(2), Mixup().draw(0, 0, 4, 4))


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    root = tmp_path_factory.mktemp("mix")
    rng = np.random.default_rng(0)
    for c in range(3):
        os.makedirs(root / "d" / f"c{c}")
        for i in range(6):
            Image.fromarray(rng.integers(0, 255, (40, 40, 3), dtype=np.uint8)).save(root / "d" / f"c{c}" / f"{i}.png")
    return str(root)


def _loader(root, dtype="float32", **kwargs):
    return stoker.Loader(servers=None, local_workers=1, data_root=root, dataset="d", pipeline="center_crop(32)",
                         batch_size=6, seed=5, device="cpu", dtype=dtype, cutmix_alpha=1.0, mixup_alpha=0.8, **kwargs)


@pytest.mark.parametrize("layout", ["nchw", "nhwc"])
def test_the_clients_mixing_equals_the_torch_ops_that_equal_timms(root, layout):
    """The loader mixes in the C++ client's stager (the code the C++ client
    and the CUDA kernel run); given the same draws it equals Mixup.apply's
    torch ops bit for bit, which the test above holds to timm's."""
    kw = dict(servers=None, local_workers=1, data_root=root, dataset="d", pipeline="center_crop(32)", batch_size=6,
              seed=5, device="cpu", dtype="float32", layout=layout)
    plain = [(x.clone(), y.clone(), info) for x, y, info in _with_info(stoker.Loader(**kw))]
    mixed = [(x.clone(), t.clone()) for x, t in stoker.Loader(mixup_alpha=0.8, cutmix_alpha=1.0, mix_prob=0.7,
                                                              **kw)]
    reference = Mixup(0.8, 1.0, mix_prob=0.7, num_classes=3, seed=5)
    assert len(plain) == len(mixed) == 3
    kinds = set()
    for (x, y, info), (mx, mt) in zip(plain, mixed):
        h, w = (x.shape[1], x.shape[2]) if layout == "nhwc" else (x.shape[2], x.shape[3])
        draw = reference.draw(info["epoch"], info["batch"], h, w)
        kinds.add("none" if draw.lam == 1.0 else "cutmix" if draw.cutmix else "mixup")
        want_x, want_t = reference.apply(x.clone(), y, draw, channels_last=layout == "nhwc")
        assert torch.equal(mx, want_x), draw
        assert torch.equal(mt, want_t), draw
    assert kinds - {"none"}, "no batch was mixed: the comparison would prove nothing"


def _with_info(loader):
    for x, y in loader:
        yield x, y, loader._last[1]


def test_mixing_works_for_any_framework(root):
    batches = list(_loader(root, framework="numpy"))
    assert len(batches) == 3
    for x, t in batches:
        assert isinstance(x, np.ndarray) and x.dtype == np.float32
        assert t.shape == (6, 3) and t.dtype == np.float32
        assert np.allclose(t.sum(1), 1.0)


def test_the_loader_yields_mixed_images_with_soft_targets_the_same_each_time(root):
    a = [(x.clone(), t.clone()) for x, t in _loader(root)]
    b = [(x.clone(), t.clone()) for x, t in _loader(root)]
    plain = [x.clone() for x, _ in stoker.Loader(servers=None, local_workers=1, data_root=root, dataset="d",
                                                 pipeline="center_crop(32)", batch_size=6, seed=5, device="cpu",
                                                 dtype="float32")]
    assert len(a) == 3
    mixed = 0
    for (x, t), (x2, t2), p in zip(a, b, plain):
        assert torch.equal(x, x2) and torch.equal(t, t2)
        assert t.shape == (6, 3) and t.dtype == torch.float32  # the dataset's 3 classes
        assert torch.allclose(t.sum(1), torch.ones(6))
        mixed += int(not torch.equal(x, p))
    assert mixed == 3  # mix_prob 1: every batch
    with pytest.raises(ValueError, match="float"):
        _loader(root, dtype="uint8")
