"""C++ op plugins (issue 31): examples/op_plugin built against an installed
Stoker (cmake --install --component dev, find_package(Stoker)), loaded by a
real stoker-server with --op-plugins and by local mode; its ops against the
built-in ones and plain NumPy; plugins of another ABI version or without
the entry point refused at start, naming the file."""

import os
import shutil
import subprocess

import numpy as np
import pytest

import stoker
from conftest import BUILD, SERVER, SOURCE, write_caption_shard


@pytest.fixture(scope="module")
def plugins(tmp_path_factory):
    """A folder holding the example plugin, built as a user would."""
    if shutil.which("cmake") is None or shutil.which("ninja") is None:
        pytest.skip("cmake and ninja are needed to build the example plugin")
    work = tmp_path_factory.mktemp("plugin")
    prefix, build, folder = work / "prefix", work / "build", work / "plugins"
    subprocess.run(["cmake", "--install", BUILD, "--prefix", str(prefix), "--component", "dev"], check=True,
                   capture_output=True)
    assert (prefix / "include" / "stoker" / "op_plugin.h").exists()
    subprocess.run(["cmake", "-S", os.path.join(SOURCE, "examples", "op_plugin"), "-B", str(build), "-G", "Ninja",
                    f"-DCMAKE_PREFIX_PATH={prefix}", "-DCMAKE_BUILD_TYPE=Release"], check=True, capture_output=True)
    r = subprocess.run(["cmake", "--build", str(build)], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    folder.mkdir()
    shutil.copy(build / "libexample_ops.so", folder)
    return str(folder)


def images(servers, pipeline, **kw):
    args = dict(servers=servers, dataset="ds", pipeline=pipeline, batch_size=8, seed=5, device="cpu", dtype="uint8",
                layout="nhwc", framework="numpy")
    args.update(kw)
    l = stoker.Loader(**args)
    out = {}
    for batch, _ in l:
        for k, i in enumerate(l.last_batch["sample_indices"]):
            out[i] = np.array(batch[k])
    return out


def test_plugin_ops_run_on_a_real_server_beside_the_built_in_ones(start_server, plugins):
    server = start_server(f"--op-plugins={plugins}")
    builtin = images(server.address, "center_crop(32), solarize(100)")
    plugin = images(server.address, "center_crop(32), example.solarize(100)")
    assert sorted(plugin) == list(range(64))
    for i in builtin:
        np.testing.assert_array_equal(plugin[i], builtin[i])
    # A random op draws from the sample's generator: the same run twice, and
    # every image a permutation of its channels.
    plain = images(server.address, "center_crop(32)")
    shuffled = images(server.address, "center_crop(32), example.channel_shuffle()")
    again = images(server.address, "center_crop(32), example.channel_shuffle()")
    orders = set()
    for i in plain:
        np.testing.assert_array_equal(shuffled[i], again[i])
        order = [next(c for c in range(3) if np.array_equal(shuffled[i][..., k], plain[i][..., c])) for k in range(3)]
        assert sorted(order) == [0, 1, 2]
        orders.add(tuple(order))
    assert len(orders) >= 3
    # An op that changes the size, then a size-setting built-in op.
    big = images(server.address, "center_crop(64)")
    halved = images(server.address, "center_crop(64), example.half(), center_crop(16)")
    for i in big:
        np.testing.assert_array_equal(halved[i], big[i][::2, ::2][8:24, 8:24])
    # An op with a fixed output size fixes the pipeline's, after a resize or
    # after ops whose size was fixed already (and a Python-free check: its
    # declared size is what it makes).
    thumbs = images(server.address, "center_crop(64), example.thumbnail(24)")
    rows = np.arange(24) * 64 // 24
    for i in big:
        np.testing.assert_array_equal(thumbs[i], big[i][rows][:, rows])
    assert len(images(server.address, "resize(40), example.thumbnail(24)")) == 64


def test_a_plugin_op_changes_the_samples_value_fields(start_server, plugins, tmp_path, data_root):
    write_caption_shard(str(tmp_path / "root" / "pairs"), data_root)
    server = start_server(f"--op-plugins={plugins}", root=str(tmp_path / "root"))
    args = dict(servers=server.address, dataset="pairs", batch_size=4, seed=5, device="cpu", dtype="uint8",
                layout="nhwc", framework="numpy", fields={"image": "jpg", "caption": "txt", "label": "cls"},
                bad_sample_policy="fail")
    l = stoker.Loader(pipeline="center_crop(32), example.append_text(caption, ' (augmented)')", **args)
    seen = set()
    for batch in l:
        for i, caption in zip(l.last_batch["sample_indices"], batch["caption"]):
            assert caption == f"caption number {i} (augmented)"
            seen.add(i)
    assert seen == set(range(16))
    # A value that its kind cannot hold (five bytes for one int32 class) fails the sample, named.
    with pytest.raises(stoker.DataLoss, match=r"example.append_text field 'label' holds 5 bytes, not a whole number"):
        for _ in stoker.Loader(pipeline="center_crop(32), example.append_text(label, x)", **args):
            pass
    with pytest.raises(stoker.DataLoss, match=r"example.append_text failed: the session has no field 'nope'"):
        for _ in stoker.Loader(pipeline="center_crop(32), example.append_text(nope, x)", **args):
            pass


def test_plugin_op_refusals_name_what_is_wrong(start_server, plugins):
    server = start_server(f"--op-plugins={plugins}")
    with pytest.raises(stoker.InvalidArgument, match=r"example.solarize: threshold = 300; allowed range is 0..256"):
        images(server.address, "center_crop(32), example.solarize(300)")
    with pytest.raises(stoker.InvalidArgument, match=r"example.solarize: has no argument 'bogus'"):
        images(server.address, "center_crop(32), example.solarize(100, bogus=1)")
    with pytest.raises(stoker.InvalidArgument, match=r"no op 'example.nope' on this server; its plugin ops: "
                                                     r"example.append_text, example.channel_shuffle, example.half, "
                                                     r"example.identity, example.solarize, example.thumbnail"):
        images(server.address, "center_crop(32), example.nope()")
    with pytest.raises(stoker.InvalidArgument, match=r"output size is not fixed"):
        images(server.address, "center_crop(64), example.half()")
    plain = start_server()
    with pytest.raises(stoker.InvalidArgument, match=r"its plugin ops: none \(the operator loads them with --op-plugins"):
        images(plain.address, "center_crop(32), example.solarize(100)")


def test_local_mode_loads_the_same_plugins(start_server, plugins, data_root):
    server = start_server(f"--op-plugins={plugins}")
    pipeline = "center_crop(32), example.channel_shuffle(p=0.5)"
    remote = images(server.address, pipeline)
    local = images(None, pipeline, local_workers=2, data_root=data_root, op_plugins=plugins)
    for i in remote:
        np.testing.assert_array_equal(local[i], remote[i])


BAD_PLUGIN = r"""
#include "stoker/op_plugin.h"
static const StokerPluginInfo info = {%d, "old", 0, 0};
const StokerPluginInfo* stoker_op_plugin(void) { return &info; }
"""


@pytest.mark.parametrize("source, message", [
    (BAD_PLUGIN % 99, r"was built for op plugin ABI version 99; this server has version 2: rebuild it"),
    ("int unrelated(void) { return 0; }\n", r"has no stoker_op_plugin\(\) entry point"),
])
def test_a_plugin_of_another_abi_or_without_the_entry_point_is_refused_at_start(tmp_path, source, message):
    if shutil.which("cc") is None:
        pytest.skip("a C compiler is needed to build the bad plugin")
    folder = tmp_path / "plugins"
    folder.mkdir()
    (tmp_path / "bad.c").write_text(source)
    subprocess.run(["cc", "-shared", "-fPIC", f"-I{os.path.join(SOURCE, 'include')}", "-o",
                    str(folder / "bad_plugin.so"), str(tmp_path / "bad.c")], check=True)
    r = subprocess.run([SERVER, "--host=127.0.0.1", "--port=0", "--metrics-port=-1", f"--data-root={tmp_path}",
                        f"--op-plugins={folder}"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 2
    assert f"op plugin {folder / 'bad_plugin.so'}" in r.stderr
    assert __import__("re").search(message, r.stderr), r.stderr
