"""Sample fields end to end: WebDataset shards written by the webdataset
library's own ShardWriter (PyPI, installed by `make pyenv`) served by real
stoker-server processes; captions and json come back byte-identical per
sample index, class labels equal the .cls members, the images equal those of
an (images, labels) loader, captions tokenised on the server equal PyPI's
sentencepiece for the same model, and bad fields are clear errors."""

import io
import json
import os
import shutil
import subprocess
import tarfile

import numpy as np
import pytest
import xxhash

import stoker
from conftest import BENCH, SMALL, Server

# Captions a tokenizer-free pass-through must keep byte for byte.
CAPTIONS = ["a photo of a cat", "", "Zürich — überall ☃ 雪", "line one\nline two\r\n", "emoji 🚀🔥", "  spaces  ",
            "tab\tseparated", "quote \" and backslash \\"]


def _require_webdataset():
    if os.environ.get("STOKER_REQUIRE_REFERENCES"):
        import webdataset  # noqa: F401  (a missing reference is a failure where it is required)
    return pytest.importorskip("webdataset", reason="webdataset (PyPI) is not installed here; `make pyenv` installs it "
                                                     "and ctest's python_reference_parity runs this with it")


def _jpeg(seed):
    from PIL import Image

    rng = np.random.default_rng(seed)
    img = Image.fromarray(rng.integers(0, 255, size=(40 + seed % 7, 48, 3), dtype=np.uint8))
    out = io.BytesIO()
    img.save(out, format="JPEG", quality=90)
    return out.getvalue()


def _write_shards(wds, out_dir, samples, with_cls=True, per_shard=16):
    os.makedirs(out_dir, exist_ok=True)
    with wds.ShardWriter(os.path.join(out_dir, "train-%06d.tar"), maxcount=per_shard, verbose=0) as sink:
        for i in range(samples):
            sample = {"__key__": f"sample{i:05d}", "jpg": _jpeg(i), "txt": CAPTIONS[i % len(CAPTIONS)] + f" #{i}",
                      "json": {"i": i, "caption_len": len(CAPTIONS[i % len(CAPTIONS)]), "tags": ["x", "ÿ"]}}
            if with_cls:
                sample["cls"] = i % 5
                sample["tags"] = ",".join(str(t) for t in range(i % 4)).encode()  # 0..3 class ids
            sink.write(sample)


def _members_by_index(out_dir):
    """{sample index: {ext: bytes}} in Stoker's order: shards by name, then tar order."""
    samples = []
    for shard in sorted(f for f in os.listdir(out_dir) if f.endswith(".tar")):
        keys = {}
        with tarfile.open(os.path.join(out_dir, shard)) as tar:
            for m in tar.getmembers():
                if not m.isfile():
                    continue
                key, ext = m.name.split(".", 1)
                if key not in keys:
                    keys[key] = {}
                    samples.append(keys[key])
                keys[key][ext] = tar.extractfile(m).read()
    return dict(enumerate(samples))


@pytest.fixture(scope="module")
def wds_root(tmp_path_factory):
    wds = _require_webdataset()
    root = tmp_path_factory.mktemp("wds")
    _write_shards(wds, str(root / "pairs"), 40)
    _write_shards(wds, str(root / "clip"), 24, with_cls=False)
    return str(root)


@pytest.fixture
def wds_server(wds_root, tmp_path):
    servers = [Server(wds_root, str(tmp_path), "--workers=2")]
    yield servers[0].address
    for s in servers:
        s.stop()


def fields_loader(address, **kw):
    args = dict(servers=address, dataset="pairs", pipeline=SMALL, batch_size=8, seed=3, device="cpu",
                dtype="uint8", layout="nhwc",
                fields={"image": "jpg;png;webp", "caption": "txt", "meta": "json", "label": "cls"})
    args.update(kw)
    return stoker.Loader(**args)


def test_captions_and_json_come_back_byte_identical_per_sample_index(wds_root, wds_server):
    expected = _members_by_index(os.path.join(wds_root, "pairs"))
    assert len(expected) == 40
    l = fields_loader(wds_server)
    seen = set()
    for epoch in range(2):
        l.set_epoch(epoch)
        for batch in l:
            assert set(batch) == {"image", "caption", "meta", "label"}
            indices = l.last_batch["sample_indices"]
            assert tuple(batch["image"].shape[1:]) == (32, 32, 3)
            assert len(batch["caption"]) == len(indices) == len(batch["meta"]) == batch["label"].shape[0]
            for i, caption, meta, label in zip(indices, batch["caption"], batch["meta"], batch["label"].tolist()):
                assert caption.encode("utf-8") == expected[i]["txt"]
                assert isinstance(meta, bytes) and meta == expected[i]["json"]
                assert json.loads(meta)["i"] == i
                assert label == int(expected[i]["cls"])
                seen.add(i)
    assert seen == set(range(40))


def test_multi_label_classes_are_padded_with_a_count_and_bytes_pass_through(wds_root, wds_server):
    expected = _members_by_index(os.path.join(wds_root, "pairs"))
    l = fields_loader(wds_server, fields={"image": None, "tags": "classes:tags", "raw": "bytes:json"})
    batch = next(iter(l))
    indices = l.last_batch["sample_indices"]
    counts = batch["tags_count"].tolist()
    tags = batch["tags"]
    assert tags.shape == (8, max(counts))
    for row, (i, count) in enumerate(zip(indices, counts)):
        ids = [int(t) for t in expected[i]["tags"].decode().split(",") if t]
        assert count == len(ids)
        assert tags[row, :count].tolist() == ids
        assert all(v == stoker.loader.FIELD_PAD for v in tags[row, count:].tolist())
        assert batch["raw"][row] == expected[i]["json"]


def test_local_workers_give_the_servers_fields(wds_root, wds_server):
    served = fields_loader(wds_server)
    local = fields_loader(None, local_workers=1, data_root=wds_root)
    for a, b in zip(served, local):
        assert a["caption"] == b["caption"] and a["meta"] == b["meta"]
        assert a["image"].numpy().tobytes() == b["image"].numpy().tobytes()
        assert a["label"].tolist() == b["label"].tolist()


def test_json_key_paths_become_typed_fields(wds_root, wds_server):
    expected = _members_by_index(os.path.join(wds_root, "pairs"))
    l = fields_loader(wds_server, fields="image, i=class:json@i, n=number:json@caption_len, tag=json@tags.1")
    batch = next(iter(l))
    for row, i in enumerate(l.last_batch["sample_indices"]):
        meta = json.loads(expected[i]["json"])
        assert int(batch["i"][row]) == meta["i"] == i
        assert float(batch["n"][row]) == float(meta["caption_len"])
        assert batch["tag"][row] == meta["tags"][1] == "ÿ"
    assert str(batch["n"].dtype) == "torch.float32"


def test_images_and_labels_equal_a_loader_without_fields(wds_server):
    plain = fields_loader(wds_server, fields=None)
    with_fields = fields_loader(wds_server)
    for epoch in (0, 1):
        plain.set_epoch(epoch)
        with_fields.set_epoch(epoch)
        for (images, labels), batch in zip(plain, with_fields):
            assert images.numpy().tobytes() == batch["image"].numpy().tobytes()
            assert labels.tolist() == batch["label"].tolist()


def test_fields_are_deterministic_across_servers_and_in_stoker_bench(wds_root, wds_server, tmp_path):
    other = Server(wds_root, str(tmp_path), "--workers=1")
    try:
        logs = []
        for address in (wds_server, f"{wds_server},{other.address}"):
            log = tmp_path / f"bench-{len(logs)}.jsonl"
            r = subprocess.run([BENCH, f"--servers={address}", "--dataset=pairs", f"--pipeline={SMALL}",
                                "--batch-size=8", "--seed=3", "--epochs=1", "--device=none", "--metrics-port=-1",
                                "--fields=image=jpg, caption=txt, meta=json", f"--log-batches={log}"],
                               capture_output=True, text=True, timeout=120)
            assert r.returncode == 0, r.stderr
            assert "per-field bytes" in r.stdout and "caption" in r.stdout and "% of the image bytes" in r.stdout
            logs.append({(b["epoch"], b["batch"]): (b["hash"], b["field_hashes"])
                         for b in map(json.loads, log.read_text().splitlines())})
        assert len(logs[0]) == 5 and logs[0] == logs[1]
    finally:
        other.stop()


def test_shards_without_cls_are_said_unlabeled_and_a_label_field_fails_clearly(wds_server):
    with pytest.warns(UserWarning, match="24 of 24 samples have no class label"):
        plain = fields_loader(wds_server, dataset="clip", fields=None)
    assert plain.unlabeled_samples == 24
    clip = fields_loader(wds_server, dataset="clip", fields={"image": None, "caption": "txt"})
    batch = next(iter(clip))
    assert all(isinstance(c, str) for c in batch["caption"])
    wants_label = fields_loader(wds_server, dataset="clip", fields=["image", "label"], bad_sample_policy="fail")
    with pytest.raises(stoker.DataLoss, match="has no member cls"):
        next(iter(wants_label))


def test_bad_fields_are_refused_by_name(wds_server, start_server):
    with pytest.raises(stoker.InvalidArgument, match="exactly one field must be of kind image"):
        fields_loader(wds_server, fields={"caption": "txt"})
    with pytest.raises(stoker.InvalidArgument, match="unknown kind 'wat'"):
        fields_loader(wds_server, fields="image, c=wat:txt")
    # An ImageFolder tree has no captions: refused at connect, naming the field.
    folder = start_server("--workers=1")
    with pytest.raises(stoker.InvalidArgument, match="field 'caption' \\(text\\) cannot be read"):
        stoker.Loader(servers=folder.address, dataset="ds", pipeline=SMALL, batch_size=8, device="cpu",
                      fields=["image", "caption"])
    # ...but its image and class are fields too.
    l = stoker.Loader(servers=folder.address, dataset="ds", pipeline=SMALL, batch_size=8, device="cpu",
                      fields=["image", "label"], dtype="uint8")
    batch = next(iter(l))
    assert batch["label"].dtype.is_floating_point is False and batch["label"].shape == (8,)


def test_a_saved_state_names_its_fields(wds_server):
    l = fields_loader(wds_server)
    it = iter(l)
    next(it)
    state = l.state_dict()
    assert state["fields"] == "image=jpg;png;webp, caption=txt, meta=json, label=cls"
    other = fields_loader(wds_server, fields={"image": None, "caption": "txt"})
    with pytest.raises(stoker.FailedPrecondition, match="fields"):
        other.load_state_dict(state)
    same = fields_loader(wds_server)
    same.load_state_dict(state)
    rest = [same.last_batch["sample_indices"] for _ in same]
    assert len(rest) == 4


def _train_tokenizer(root):
    """A small unigram SentencePiece model trained by PyPI's sentencepiece, under the data root."""
    if os.environ.get("STOKER_REQUIRE_REFERENCES"):
        import sentencepiece as spm
    else:
        spm = pytest.importorskip("sentencepiece", reason="sentencepiece (PyPI) is not installed here")
    text = os.path.join(root, "corpus.txt")
    with open(text, "w", encoding="utf-8") as f:
        for i in range(400):
            f.write(CAPTIONS[i % len(CAPTIONS)].replace("\n", " ") + f" number {i} of the set\n")
    spm.SentencePieceTrainer.train(input=text, model_prefix=os.path.join(root, "tok"), vocab_size=120,
                                   model_type="unigram", character_coverage=1.0, minloglevel=2)
    return spm.SentencePieceProcessor(model_file=os.path.join(root, "tok.model"))


def test_captions_tokenised_on_the_server_equal_sentencepiece(wds_root, wds_server):
    reference = _train_tokenizer(wds_root)
    expected = _members_by_index(os.path.join(wds_root, "pairs"))
    l = fields_loader(wds_server, fields={"image": None, "ids": "tokens:txt", "caption": "txt"},
                      tokenizer="tok.model", max_tokens=12)
    compared = 0
    for batch in l:
        ids, counts = batch["ids"].numpy(), batch["ids_count"].tolist()
        assert ids.shape[1] <= 12
        for row, i in enumerate(l.last_batch["sample_indices"]):
            want = reference.encode(expected[i]["txt"].decode("utf-8"))[:12]
            assert counts[row] == len(want)
            assert ids[row, :counts[row]].tolist() == want, (i, expected[i]["txt"])
            assert (ids[row, counts[row]:] == 0).all()
            compared += 1
    assert compared == 40
    with pytest.raises(stoker.InvalidArgument, match="needs the session's tokenizer"):
        fields_loader(wds_server, fields={"image": None, "ids": "tokens:txt"})
    with pytest.raises(stoker.InvalidArgument, match="is not a SentencePiece model"):
        fields_loader(wds_server, fields={"image": None, "ids": "tokens:txt"}, tokenizer="clip/train-000000.tar")
    with pytest.raises(stoker.NotFound, match="tokenizer 'nope.model' not found"):
        fields_loader(wds_server, fields={"image": None, "ids": "tokens:txt"}, tokenizer="nope.model")
    # A session without a tokens field never reads the tokenizer it names.
    untouched = fields_loader(wds_server, fields={"image": None, "caption": "txt"}, tokenizer="clip/train-000000.tar")
    assert len(next(iter(untouched))["caption"]) == 8


def test_a_materialised_copy_serves_the_sources_fields_and_webdataset_reads_them(wds_root, tmp_path):
    wds = _require_webdataset()
    from conftest import BUILD

    out = os.path.join(str(tmp_path), "pairs-r40")
    tool = os.path.join(BUILD, "materialize", "stoker-materialize")
    subprocess.run([tool, f"--data-root={wds_root}", "--dataset=pairs", "--prefix=resize(40)", "--format=raw",
                    "--compression=none", f"--out={out}", "--local-workers=1", "--progress=log"],
                   check=True, capture_output=True, timeout=120)
    with open(os.path.join(out, "manifest.json")) as f:
        assert json.load(f)["fields"] == ["json", "tags", "txt"]
    shutil.copytree(os.path.join(wds_root, "pairs"), os.path.join(str(tmp_path), "pairs"))
    pipeline = "resize(40), " + SMALL
    source = fields_loader(None, local_workers=1, data_root=str(tmp_path), pipeline=pipeline)
    stored = fields_loader(None, local_workers=1, data_root=str(tmp_path), pipeline=pipeline, dataset="pairs-r40")
    n = 0
    for a, b in zip(source, stored):
        assert a["caption"] == b["caption"] and a["meta"] == b["meta"]
        assert a["label"].tolist() == b["label"].tolist()
        assert a["image"].numpy().tobytes() == b["image"].numpy().tobytes()  # raw pixels: exact
        n += len(a["caption"])
    assert n == 40
    # The webdataset library reads the stored captions beside the stored pixels, per source index.
    expected = _members_by_index(os.path.join(wds_root, "pairs"))
    shards = sorted(os.path.join(out, f) for f in os.listdir(out) if f.endswith(".tar"))
    seen = 0
    for sample in wds.WebDataset(shards, shardshuffle=False):
        i = int(sample["__key__"])
        assert sample["txt"] == expected[i]["txt"] and sample["json"] == expected[i]["json"]
        assert sample["npy"][:6] == b"\x93NUMPY"
        seen += 1
    assert seen == 40
