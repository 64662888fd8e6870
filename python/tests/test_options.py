"""The Loader's keywords against the one description of the loader's options
(include/stoker/client_options.inc, read through _stoker_ext.option_table()): every
keyword is an option or named Python-only, the defaults make the C++
defaults, every keyword reaches its option, and the docstring is the table's.
No server is needed: the options are made without connecting."""

import inspect
import sys

import pytest

import stoker
from stoker import _stoker_ext as ext
from stoker import loader as loader_module

TABLE = ext.option_table()
KEYWORDS = {o["python"]: o for o in TABLE if o["python"]}

# A value other than the default, per option, that the Loader accepts.
OTHER = {
    "servers": "127.0.0.1:1", "python_transforms": "m", "data_root": "/d", "op_plugins": "/p", "job": "j",
    "tls_ca": "ca.pem", "tls_cert": "c.pem", "tls_key": "k.pem", "tls_server_name": "n", "auth_token_file": "t",
    "dataset": "ds", "pipeline": "center_crop(8)", "fields": "image=jpg", "annotations": "a.json", "tokenizer": "t.model",
    "bad_sample_policy": "fail", "cache_mode": "batch", "shuffle": "shards", "device": "cpu", "dtype": "float16",
    "layout": "nhwc", "metrics_host": "127.0.0.1", "drop_last": True, "ordered": False, "metrics_port": 9,
    "epochs": 3, "num_classes": 5, "world_size": 4,
}


def signature_defaults():
    params = inspect.signature(loader_module.Loader.__init__).parameters
    return {name: p.default for name, p in params.items() if name != "self"}


def made(**changes):
    args = signature_defaults()
    args.update(rank=0, world_size=1)  # as the Loader resolves them outside torch.distributed
    args.update(changes)
    # The device and fields as the Loader reads them before its options.
    device = loader_module._frameworks.parse_device(args["device"])
    return loader_module._options(args, device, loader_module._fields_text(args["fields"]))


def test_the_table_describes_every_option_once():
    names = [o["name"] for o in TABLE]
    assert len(names) == len(set(names)), "an option described twice"
    assert len(KEYWORDS) == len([o for o in TABLE if o["python"]]), "two options share a Python keyword"
    fields = {n for n in dir(ext.Options()) if not n.startswith("__")}
    assert set(names) == fields
    for o in TABLE:
        assert o["help"].endswith((".", ")")), o["name"]
        if o["name"].endswith("_s"):
            assert o["unit"] == "s", o["name"]


def test_every_keyword_is_an_option_or_python_only():
    keywords = set(signature_defaults())
    assert keywords == set(KEYWORDS) | set(loader_module._PYTHON_ONLY)
    assert not set(KEYWORDS) & set(loader_module._PYTHON_ONLY)


def test_the_defaults_make_the_cpp_defaults():
    o, defaults = made(), ext.Options()
    for option in TABLE:
        name = option["name"]
        if name == "python_executable":  # the Loader's own interpreter, as its help says
            assert o.python_executable == sys.executable
            continue
        assert getattr(o, name) == getattr(defaults, name), name


@pytest.mark.parametrize("keyword", sorted(k for k in KEYWORDS))
def test_every_keyword_reaches_its_option(keyword):
    option = KEYWORDS[keyword]
    name, kind = option["name"], option["type"]
    if keyword in OTHER:
        value = OTHER[keyword]
    elif kind == "bool":
        value = not signature_defaults()[keyword]
    else:
        value = (signature_defaults()[keyword] or 0) + (0.25 if kind == "double" else 1)
    base = {"mixup_alpha": 0.2} if keyword in ("mix_prob", "switch_prob", "label_smoothing", "num_classes",
                                               "cutmix_alpha") else {}
    before = getattr(made(**base), name)
    after = getattr(made(**base, **{keyword: value}), name)
    assert after != before, f"{keyword}={value!r} did not reach Options.{name}"


def test_the_docstring_is_the_tables():
    doc = " ".join(inspect.cleandoc(loader_module.Loader.__doc__).split())
    for keyword, option in KEYWORDS.items():
        if keyword.startswith("_"):
            continue
        unit = f" [{option['unit']}]" if option["unit"] else ""
        assert f"{keyword}{unit}: {' '.join(option['help'].split())}" in doc, keyword
    for keyword, text in loader_module._PYTHON_ONLY.items():
        assert f"{keyword}: {text}" in doc, keyword


def test_the_config_reads_the_fields_once_for_its_pipeline():
    """Config.from_options parses the pipeline and fields texts (the only
    place the client does): the fields' kinds follow the pipeline's first op,
    and a bad text is refused there, before any connection."""
    base = dict(dataset="ds", servers="127.0.0.1:1")  # never dialled: nothing connects
    config = ext.Config.from_options(made(fields="image, caption=txt, cls", **base))
    assert config.fields == [("image", "image"), ("caption", "text"), ("cls", "class")]
    # After audio(...), an audio member is the sample itself (kind image); an
    # image pipeline has no field of kind image in the same text.
    audio = ext.Config.from_options(made(pipeline="audio(16000, 1)", fields="audio=flac, cls", **base))
    assert audio.fields == [("audio", "image"), ("cls", "class")]
    with pytest.raises(stoker.InvalidArgument, match="exactly one field must be of kind image"):
        ext.Config.from_options(made(fields="audio=flac, cls", **base))
    with pytest.raises(stoker.InvalidArgument, match="unknown op 'no_such_op'"):
        ext.Config.from_options(made(pipeline="no_such_op()", **base))
