"""An Albumentations pipeline (PyPI) as a Python transform stage of a real
stoker-server gives, for the same seed, the pixels of calling it directly
here (issue 31). Runs with the build's pyenv (python_reference_parity), where
`make pyenv` installs Albumentations; the server's Python stage runs that
same interpreter."""

import os
import sys

import numpy as np
import pytest

import stoker
from conftest import SOURCE

TRANSFORMS = os.path.join(SOURCE, "tests", "python_transforms")


def reference(module):
    if os.environ.get("STOKER_REQUIRE_REFERENCES"):  # required: a missing reference fails the test
        return __import__(module)
    return pytest.importorskip(module, reason=f"{module} (PyPI) is not installed here; `make pyenv` installs it")


def images(l, e):
    out = {}
    l.set_epoch(e)
    for batch, _ in l:
        for k, i in enumerate(l.last_batch["sample_indices"]):
            out[i] = np.array(batch[k])
    return out


def test_an_albumentations_recipe_on_the_server_equals_calling_it_here(start_server, monkeypatch):
    reference("albumentations")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([TRANSFORMS, os.environ.get("PYTHONPATH", "")]))
    monkeypatch.setenv("NO_ALBUMENTATIONS_UPDATE", "1")
    sys.path.insert(0, TRANSFORMS)
    import stoker_albu_recipes

    server = start_server("--python-transforms=stoker_albu_recipes", f"--python-executable={sys.executable}",
                          "--python-workers=2")
    args = dict(servers=server.address, dataset="ds", batch_size=8, seed=11, device="cpu", dtype="uint8",
                layout="nhwc", framework="numpy")
    plain = images(stoker.Loader(pipeline="resize(40), center_crop(32)", **args), 2)
    augmented = images(stoker.Loader(pipeline="resize(40), center_crop(32), python(stoker_albu_recipes:strong_aug)",
                                     **args), 2)
    assert sorted(augmented) == list(range(64))
    changed = 0
    for i, image in augmented.items():
        expected = stoker_albu_recipes.strong_aug({"image": plain[i].copy()}, np.random.default_rng([11, 2, i, 2]))
        np.testing.assert_array_equal(image, expected["image"], err_msg=f"sample {i}")
        changed += not np.array_equal(image, plain[i])
    assert changed > 32  # the recipe did something to most samples
