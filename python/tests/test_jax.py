"""framework="jax" with PyPI's CPU jax (installed in build/pyenv by `make
pyenv`): an epoch from a real server and from local mode, dtypes and layouts,
device placement, arrays that outlive the loader; and neither "jax" nor
"numpy" imports torch. Each case runs in a fresh interpreter so that what it
imports is its own."""

import json
import os
import subprocess
import sys
import textwrap

import pytest

from conftest import SMALL


def _require_jax():
    if os.environ.get("STOKER_REQUIRE_REFERENCES"):  # required: a missing reference fails the test
        import jax  # noqa: F401
    return pytest.importorskip("jax", reason="jax (PyPI) is not installed here; `make pyenv` installs it "
                               "(run this file with build/pyenv/bin/python)")


def run_fresh(code, **env):
    """Runs `code` in a new interpreter (this one, with its path); returns its
    last stdout line parsed as JSON."""
    full_env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path), JAX_PLATFORMS="cpu", **env)
    out = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                         env=full_env, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


EPOCH = """
    import gc, json, sys
    import numpy as np
    import stoker
    import jax, jax.numpy as jnp
    kw = dict(dataset="ds", pipeline={pipeline!r}, batch_size=8, seed=7, device="cpu", framework="jax",
              dtype={dtype!r}, layout={layout!r}, normalize=None)
    if {servers!r}:
        kw["servers"] = {servers!r}
    else:
        kw.update(servers=None, local_workers=2, data_root={data_root!r})
    l = stoker.Loader(**kw)
    kept, seen, dtypes, shapes, devices, labels = [], [], set(), set(), set(), []
    for images, y in l:
        assert isinstance(images, jax.Array) and isinstance(y, jax.Array), (type(images), type(y))
        kept.append((images, np.asarray(images).copy()))
        seen += l.last_batch["sample_indices"]
        dtypes.add(str(images.dtype)); shapes.add(tuple(images.shape[1:]))
        devices |= {{str(d) for d in images.devices()}} | {{"labels:" + str(d) for d in y.devices()}}
        labels += np.asarray(y).tolist()
        float(jnp.mean(images.astype(jnp.float32)))  # a computation on the array
    l.close(); del l; gc.collect()
    # The arrays outlive the loader and its buffers: still the bytes they arrived with.
    intact = all(np.array_equal(np.asarray(a), copy) for a, copy in kept)
    print(json.dumps(dict(samples=sorted(seen), dtypes=sorted(dtypes), shapes=sorted(shapes),
                          devices=sorted(devices), labels=sorted(set(labels)), intact=intact,
                          torch="torch" in sys.modules)))
"""


def epoch(servers=None, data_root=None, dtype="uint8", layout="nhwc"):
    return run_fresh(EPOCH.format(pipeline=SMALL, servers=servers, data_root=data_root, dtype=dtype, layout=layout))


def test_a_jax_epoch_from_a_server_has_every_sample_once_and_no_torch(two_servers):
    _require_jax()
    got = epoch(servers=two_servers)
    assert got["samples"] == list(range(64)), "every sample of the dataset exactly once"
    assert got["dtypes"] == ["uint8"] and got["shapes"] == [[32, 32, 3]]
    assert got["devices"] == ["TFRT_CPU_0", "labels:TFRT_CPU_0"], got["devices"]
    assert got["labels"] == [0, 1, 2, 3]
    assert got["intact"], "an array changed after the loader was closed"
    assert got["torch"] is False, "framework='jax' imported torch"


def test_jax_dtypes_and_layouts_and_local_mode(data_root, two_servers):
    _require_jax()
    for dtype, layout, shape in (("float32", "nchw", [3, 32, 32]), ("bfloat16", "nhwc", [32, 32, 3]),
                                 ("float16", "nchw", [3, 32, 32])):
        got = epoch(servers=two_servers, dtype=dtype, layout=layout)
        assert got["dtypes"] == [dtype] and got["shapes"] == [shape], (dtype, layout, got)
        assert got["intact"] and got["torch"] is False
    local = epoch(data_root=data_root)
    assert local["samples"] == list(range(64)) and local["torch"] is False and local["intact"]


def test_numpy_never_imports_torch_even_with_rank_variables(two_servers):
    got = run_fresh(f"""
        import json, sys
        import stoker
        l = stoker.Loader(servers={two_servers!r}, dataset="ds", pipeline={SMALL!r}, batch_size=8, seed=7,
                          device="cpu", framework="numpy", dtype="uint8")
        n = sum(len(y) for _, y in l)
        print(json.dumps(dict(n=n, rank=l.state_dict().get("rank"), world=l.state_dict().get("world_size"),
                              torch="torch" in sys.modules)))
    """, RANK="1", WORLD_SIZE="2")
    assert got["torch"] is False, "framework='numpy' imported torch"
    assert got["n"] == 32, "RANK=1 of WORLD_SIZE=2 reads half of the 64 samples"
