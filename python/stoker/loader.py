"""stoker.Loader: batches from Stoker data servers as tensors on the training
process's device, checkpointable mid-epoch and aware of distributed ranks.

A drop-in for a ``torch.utils.data.DataLoader`` over an image dataset:

    loader = stoker.Loader(servers="host:port,host:port", dataset="imagenet/train",
                           batch_size=256, seed=42, device="cuda", dtype=torch.bfloat16)
    for epoch in range(epochs):
        loader.set_epoch(epoch)
        for images, labels in loader:
            ...

Servers decode and augment; the loader receives uint8 pixels into pinned host
memory, copies them to the GPU and converts them there (or on the CPU where no
GPU is usable), and hands each batch over without another copy.
"""

import os
import sys
import textwrap
import time
import warnings

from . import _frameworks, _logging
from . import _stoker_ext as _ext

DEFAULT_PIPELINE = "random_resized_crop(224), random_horizontal_flip(0.5)"
FIELD_PAD = -1  # class ids past a sample's count in a padded "classes" field
_ITEM_TYPES = {"boxes": "<f4", "keypoints": "<f4", "mask": "u1", "masks": "u1", "audio": "<f4"}
IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)
STATE_VERSION = 1


def _distributed_rank():
    """(rank, world size): torch.distributed when the process has imported and
    initialised it, else the RANK and WORLD_SIZE environment variables
    (torchrun sets both), else (0, 1). Never imports torch itself: a JAX or
    NumPy job does not pay for it (nor need it installed)."""
    dist = sys.modules.get("torch.distributed")
    if dist is not None and dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return int(os.environ.get("RANK", 0)), int(os.environ.get("WORLD_SIZE", 1))


def _fields_text(fields):
    """The extension's text form of `fields`: a string as is; a dict
    {name: "ext;ext" or "kind:ext" or None}; or a list of names."""
    if fields is None:
        return ""
    if isinstance(fields, str):
        return fields
    if isinstance(fields, dict):
        return ", ".join(f"{name}={spec}" if spec else str(name) for name, spec in fields.items())
    return ", ".join(str(name) for name in fields)


def _servers_list(servers):
    if isinstance(servers, str):
        return [s.strip() for s in servers.split(",") if s.strip()]
    return [str(s) for s in servers]


# The Loader's keywords that are not options of the C++ loader
# (include/stoker/client_options.inc, where every other keyword is described once).
_PYTHON_ONLY = {
    "normalize": '"imagenet" (the default), None (value / 255), or (mean, std) per channel. Ignored for uint8.',
    "framework": '"torch", "jax", "numpy", or "dlpack" (plain objects with __dlpack__); only "torch" imports torch.',
    "log_level": 'How much the loader logs through Python\'s logging (logger "stoker"): "debug", "info", "warning" '
                 '(the default), "error", or logging.INFO, ...; None: STOKER_LOG_LEVEL\'s, else warning. The level is '
                 'the process\'s (stoker.set_log_level sets it too).',
    "tune_malloc": "Keep large buffers on the heap (docs/how-to/pytorch.md).",
}


def _arguments_doc(width=79):
    """The Loader's "Arguments" section: each keyword's help from the options'
    table (its unit in brackets), then the Python-only keywords'."""
    entries = [(o["python"], o["unit"], o["help"]) for o in _ext.option_table()
               if o["python"] and not o["python"].startswith("_")]
    entries += [(name, "", text) for name, text in _PYTHON_ONLY.items()]
    lines = ["Arguments (a keyword's unit in brackets):"]
    for name, unit, text in entries:
        head = f"{name} [{unit}]: " if unit else f"{name}: "
        lines += textwrap.wrap(head + text, width - 4, initial_indent="  ", subsequent_indent="    ",
                               break_on_hyphens=False)
    return "\n".join(lines)


def _options(a, device, fields_text):
    """The extension's Options from the Loader's keyword arguments `a` (a dict
    of every keyword, rank and world_size resolved), with the device as
    _frameworks.parse_device read it and the fields as _fields_text wrote them
    (the Loader's checks made both first): each table option from its
    keyword, converted; normalisation and defaults of None as the keywords'
    help says. Checks nothing the C++ side checks."""
    o = _ext.Options()
    o.device, o.gpu = device
    o.servers = _servers_list(a["servers"] or [])
    o.local_workers = int(a["local_workers"])
    o.data_root = os.fspath(a["data_root"])
    # Local mode's own Python transform processes (this interpreter) and
    # op plugins, as a server's --python-transforms and --op-plugins.
    transforms = a["python_transforms"]
    if isinstance(transforms, str):
        transforms = [m for m in transforms.split(",") if m]
    o.python_transforms = list(transforms or [])
    o.python_workers = int(a["python_workers"])
    o.python_executable = sys.executable
    o.python_transform_timeout = float(a["python_transform_timeout"])
    for name in ("op_plugins", "tls_ca", "tls_cert", "tls_key", "auth_token_file", "annotations", "tokenizer"):
        setattr(o, name, os.fspath(a[name] or ""))
    o.job, o.tls_server_name, o.dataset = a["job"] or "", a["tls_server_name"] or "", a["dataset"] or ""
    o.weight = float(a["weight"])
    o.pipeline = a["pipeline"]
    o.fields = fields_text
    o.max_field_bytes = int(a["max_field_bytes"])
    o.box_min_visibility = float(a["box_min_visibility"])
    o.max_tokens = int(a["max_tokens"])
    if a["mixup_alpha"] or a["cutmix_alpha"]:
        o.mixup_alpha, o.cutmix_alpha = float(a["mixup_alpha"]), float(a["cutmix_alpha"])
        o.mix_prob, o.switch_prob = float(a["mix_prob"]), float(a["switch_prob"])
        o.label_smoothing, o.num_classes = float(a["label_smoothing"]), int(a["num_classes"] or 0)
    o.batch_size = int(a["batch_size"])
    o.seed = int(a["seed"])
    o.drop_last = bool(a["drop_last"])
    shuffle = "global" if a["shuffle"] is True else a["shuffle"]
    if shuffle not in ("global", "shards"):
        raise ValueError(f"shuffle={shuffle!r}; expected \"global\" (one shuffle of every sample) or \"shards\" "
                         "(shards shuffled, then samples within a window of them)")
    o.shuffle, o.shard_window = shuffle, int(a["shard_window"])
    o.rank, o.world_size = int(a["rank"]), int(a["world_size"])
    o.ordered = bool(a["ordered"])
    o.window, o.prefetch = int(a["window"]), int(a["prefetch"])
    o.prefetch_bytes, o.max_servers = int(a["prefetch_bytes"]), int(a["max_servers"])
    o.streams_per_server = int(a["streams_per_server"])
    o.epochs = int(a["epochs"] or 0)
    o.connect_timeout_s = float(a["connect_timeout"])
    o.open_timeout_s = float(a["open_timeout"])
    o.batch_timeout_s = float(a["batch_timeout"])
    o.unavailable_timeout_s = float(a["unavailable_timeout"])
    o.resolve_interval_s = float(a["resolve_interval"])
    o.bad_sample_policy = a["bad_sample_policy"]
    o.cache_mode = a["cache_mode"] or "none"
    o.dtype = _frameworks.dtype_name(a["dtype"])
    o.layout = a["layout"]
    normalize = a["normalize"]
    if normalize == "imagenet":
        o.mean, o.std = list(IMAGENET_MEAN), list(IMAGENET_STD)
    elif normalize in (None, False):
        o.normalize = False
    else:
        mean, std = normalize
        o.mean, o.std = [float(v) for v in mean], [float(v) for v in std]
    o.slots = int(a["slots"])
    o.max_slots = int(a["max_live_batches"])
    o.slot_wait_s = float(a["slot_wait"])
    o.metrics_port = -1 if a["metrics_port"] is None else int(a["metrics_port"])
    o.metrics_host = a["metrics_host"]
    o.test_h2d_delay_ms = int(a["_test_h2d_delay_ms"])
    return o


class Loader:
    """Iterates over this rank's batches of one epoch as ``(images, labels)``.

    (The arguments' section is made from the options' table below the class.)
    """

    def __init__(self, servers=None, dataset=None, pipeline=DEFAULT_PIPELINE, batch_size=256, seed=0, drop_last=False,
                 shuffle="global", shard_window=0,
                 device="auto", dtype="float32", layout="nchw", normalize="imagenet", framework="torch",
                 rank=None, world_size=None, ordered=True, window=2, streams_per_server=2, prefetch=0,
                 prefetch_bytes=2 << 30, max_servers=32, epochs=None, connect_timeout=10.0,
                 open_timeout=1800.0,
                 batch_timeout=120.0, unavailable_timeout=30.0, resolve_interval=5.0, bad_sample_policy="skip",
                 cache_mode="none", slots=3, max_live_batches=32, slot_wait=60.0, metrics_port=None,
                 metrics_host="0.0.0.0", tune_malloc=True, local_workers=0, data_root=".", job=None, weight=1.0, tls_ca=None, tls_cert=None, tls_key=None,
                 tls_server_name=None, auth_token_file=None, fields=None, max_field_bytes=0, annotations=None,
                 box_min_visibility=0.0, tokenizer=None, max_tokens=0, mixup_alpha=0.0, cutmix_alpha=0.0,
                 mix_prob=1.0, switch_prob=0.5, label_smoothing=0.1, num_classes=None, python_transforms=None,
                 python_workers=0, python_transform_timeout=10.0, op_plugins=None, log_level=None,
                 _test_h2d_delay_ms=0):
        if log_level is not None:
            _logging.set_log_level(log_level)
        if tune_malloc:
            _ext.tune_malloc()
        if rank is None or world_size is None:
            auto_rank, auto_world = _distributed_rank()
            rank = auto_rank if rank is None else rank
            world_size = auto_world if world_size is None else world_size
        self._framework = _frameworks.make(framework)
        parsed_device = _frameworks.parse_device(device)  # the first check, as it always was
        fields_text = _fields_text(fields)
        self._mixup = bool(mixup_alpha or cutmix_alpha)
        if self._mixup:
            if fields_text:
                raise ValueError("mixup_alpha / cutmix_alpha mix (images, labels) batches; the loader names fields")
            if _frameworks.dtype_name(dtype) == "uint8":
                raise ValueError("MixUp and CutMix mix float images: give dtype float32, float16 or bfloat16")
            from .mixup import Mixup

            # Checks the settings here, naming a bad one; the mixing itself
            # runs in the client's stager (client/device/mixup.h), fused into the
            # conversion: a CUDA kernel on a GPU, the CPU otherwise.
            Mixup(mixup_alpha, cutmix_alpha, mix_prob, switch_prob, label_smoothing,
                  num_classes if num_classes is not None else 1, seed)
        o = _options(locals(), parsed_device, fields_text)
        gpu = o.gpu
        self._options = o
        # Every option checked (the pipeline and fields texts parsed, once)
        # before any connection; (name, kind) of each field.
        config = _ext.Config.from_options(o)
        self._fields = config.fields
        self._client = _ext.Client.connect(config)
        unlabeled = self._client.unlabeled_samples
        if unlabeled and not self._fields:  # (images, labels) batches: say what their labels are
            warnings.warn(f"dataset {o.dataset!r}: {unlabeled} of {self._client.num_samples} samples have no class "
                          "label (no .cls member); their label is 0 in (images, labels) batches (ask for fields "
                          "such as {'image': None, 'caption': 'txt'} for image-text data)", stacklevel=2)
        self._gpu = gpu
        self._cuda = self._client.device_path == "cuda"
        self._epoch = 0
        self._started = False
        self._pending_resume = None  # a loaded state, applied by the next iteration
        self._last = None
        self._python_seconds = 0.0  # time inside __next__, C++ included
        self._batches = 0
        self._failed = self._replaced = 0  # samples the servers could not make, and of those replaced

    # -- what DataLoader users expect ------------------------------------
    @property
    def sample_shape(self):
        """One sample's shape as the servers make it: [H, W, 3] for images
        (before the loader's layout and dtype), [C, samples] or
        [C, n_mels, frames] for audio(...) pipelines, whose batches are
        float32 as made."""
        return list(self._client.sample_shape)

    def __len__(self):
        """Batches this rank gets per epoch."""
        return self._client.batches_per_epoch

    def set_epoch(self, epoch):
        """Selects the epoch the next iteration runs (its order and
        augmentation). A loaded state for this epoch is kept; for another epoch
        it is dropped (that epoch was finished)."""
        if self._pending_resume is not None and self._pending_resume["epoch"] != epoch:
            self._pending_resume = None
        self._epoch = int(epoch)

    def __iter__(self):
        if self._pending_resume is not None:
            state, self._pending_resume = self._pending_resume, None
            self._epoch = state["epoch"]
            if state["position"] is None:
                self._client.start_epoch(self._epoch)
            else:
                self._client.resume(state["position"])
        else:
            self._client.start_epoch(self._epoch)
        self._started = True
        return self._batches_of_epoch()

    def _consumer(self):
        """The extension's (stream, wait): the consumer's CUDA stream, or a CPU
        wait on CUDA where the framework names no stream."""
        stream = self._framework.stream(self._gpu) if self._cuda else None
        return stream or 0, self._cuda and stream is None

    def _hand_over(self, array, labels):
        """The framework's (images, labels) for the extension's arrays."""
        images = self._framework.images(array)
        return images, self._framework.labels(labels, images)

    def _batches_of_epoch(self):
        stream, wait = self._consumer()
        client = self._client
        while True:
            t0 = time.perf_counter()
            item = client.next(stream, wait)
            if item is None:
                return
            array, labels, indices, info = item
            images, labels = self._hand_over(array, labels)
            if self._mixup:  # soft targets [N, num_classes], on the images' device
                labels = self._framework.images(info.pop("targets"))
            values = info.pop("fields", None)
            self._last = (indices, info)
            self._batches += 1
            failures = info.get("failures", ())
            self._failed += len(failures)
            self._replaced += sum(1 for _, _, by in failures if by >= 0)
            out = (images, labels) if not self._fields else self._field_dict(images, values or {})
            self._python_seconds += time.perf_counter() - t0
            yield out

    def _field_dict(self, images, values):
        """A batch with fields as {name: value} (see `fields`)."""
        out = {}
        for name, kind in self._fields:
            if kind == "image":
                out[name] = images
                continue
            _, data, offsets, item_shape = values[name]
            offsets = memoryview(offsets).tolist()
            if kind in _ITEM_TYPES:
                out.update(self._items(name, kind, data, offsets, item_shape, images))
            elif kind == "text":
                out[name] = [data[a:b].decode("utf-8") for a, b in zip(offsets, offsets[1:])]
            elif kind in ("json", "bytes"):
                out[name] = [data[a:b] for a, b in zip(offsets, offsets[1:])]
            else:  # class ids: int32 little-endian
                import numpy as np

                ids = np.frombuffer(data, dtype="<i4").astype(np.int64)
                if kind == "number":
                    out[name] = self._framework.labels(np.frombuffer(data, dtype="<f4").copy(), images)
                elif kind == "class":
                    out[name] = self._framework.labels(ids, images)
                elif kind == "tokens":
                    counts = np.diff(np.asarray(offsets, dtype=np.int64)) // 4
                    padded = np.zeros((len(counts), int(counts.max(initial=0))), dtype=np.int64)
                    for i, (s, c) in enumerate(zip(np.asarray(offsets[:-1]) // 4, counts)):
                        padded[i, :c] = ids[s:s + c]
                    out[name] = self._framework.labels(padded, images)
                    out[name + "_count"] = self._framework.labels(counts, images)
                else:
                    counts = np.diff(np.asarray(offsets, dtype=np.int64)) // 4
                    padded = np.full((len(counts), int(counts.max(initial=0))), FIELD_PAD, dtype=np.int64)
                    starts = np.asarray(offsets[:-1], dtype=np.int64) // 4
                    for i, (s, c) in enumerate(zip(starts, counts)):
                        padded[i, :c] = ids[s:s + c]
                    out[name] = self._framework.labels(padded, images)
                    out[name + "_count"] = self._framework.labels(counts, images)
        return out

    def _items(self, name, kind, data, offsets, item_shape, images):
        """A target field as one array: a mask [N, H, W]; boxes [N, K, 4],
        keypoints [N, K, P, 3] and masks [N, K, H, W] padded to the batch's
        most items (zeros) with NAME_count [N]."""
        import numpy as np

        dtype = _ITEM_TYPES[kind]
        shape = tuple(int(d) for d in item_shape)
        item = int(np.prod(shape)) * np.dtype(dtype).itemsize
        values = np.frombuffer(data, dtype=dtype)
        starts = np.asarray(offsets[:-1], dtype=np.int64)
        counts = np.diff(np.asarray(offsets, dtype=np.int64)) // item
        if kind in ("mask", "audio"):  # one item per sample: [N, H, W]; a video's audio track [N, (K,) C, L]
            return {name: self._framework.labels(values.reshape((len(counts),) + shape).copy(), images)}
        padded = np.zeros((len(counts), int(counts.max(initial=0))) + shape, dtype=dtype)
        per_item = item // np.dtype(dtype).itemsize
        for i, (s, c) in enumerate(zip(starts // np.dtype(dtype).itemsize, counts)):
            padded[i, :c] = values[s:s + c * per_item].reshape((c,) + shape)
        return {name: self._framework.labels(padded, images), name + "_count": self._framework.labels(counts, images)}

    # -- the diagnosis's host-cached step ------------------------------------
    def _cache_one_batch(self):
        """Keeps the running epoch's next batch in host memory."""
        self._client.cache_one_batch()

    def _stage_cached(self):
        """The cached batch staged again, as (images, labels)."""
        array, labels, _, _ = self._client.stage_cached(*self._consumer())
        return self._hand_over(array, labels)

    # -- checkpoints -------------------------------------------------------
    def state_dict(self):
        """Where this rank stands, to save with a checkpoint (mid-epoch too)."""
        if self._pending_resume is not None:
            return dict(self._pending_resume)
        o = self._options
        return {"version": STATE_VERSION, "epoch": self._epoch,
                "position": self._client.position() if self._started else None,
                "dataset": o.dataset, "seed": o.seed, "batch_size": o.batch_size, "pipeline": o.pipeline,
                "drop_last": o.drop_last, "rank": o.rank, "world_size": o.world_size, "fields": self._fields_state(),
                "shuffle": self._shuffle_state()}

    def load_state_dict(self, state):
        """Continues from a saved state: the next iteration yields exactly the
        batches of that epoch this rank had not yet received, with the same
        content. A state saved under another dataset, seed, batch size,
        pipeline or rank layout raises stoker.FailedPrecondition."""
        if not isinstance(state, dict) or state.get("version") != STATE_VERSION:
            raise _ext.InvalidArgument(f"not a stoker.Loader state (version {STATE_VERSION}): {state!r:.200}")
        o = self._options
        mine = {"dataset": o.dataset, "seed": o.seed, "batch_size": o.batch_size, "pipeline": o.pipeline,
                "drop_last": o.drop_last, "rank": o.rank, "world_size": o.world_size}
        if state.get("fields", "") != self._fields_state():  # states from before fields have none
            mine["fields"] = self._fields_state()
        if state.get("shuffle", "global") != self._shuffle_state():  # nor from before the shard-aware order
            mine["shuffle"] = self._shuffle_state()
        saved = {"shuffle": "global"}  # what a state from before the key means
        saved.update(state)
        differ = [f"{k}: saved {saved.get(k)!r}, loader has {v!r}" for k, v in mine.items() if saved.get(k) != v]
        if differ:
            raise _ext.FailedPrecondition("the saved loader state is for another run; " + "; ".join(differ))
        self._pending_resume = dict(state)
        self._epoch = state["epoch"]

    def _shuffle_state(self):
        """The epoch order a saved state must have: "global", or "shards:WINDOW"."""
        o = self._options
        return "global" if o.shuffle == "global" else f"shards:{o.shard_window or 4}"

    def _fields_state(self):
        """What the fields of a saved state must equal: the fields and what changes their values."""
        o = self._options
        if not o.fields:
            return ""
        extra = [f"annotations={o.annotations}"] if o.annotations else []
        if o.box_min_visibility:
            extra.append(f"box_min_visibility={o.box_min_visibility}")
        if o.tokenizer:
            extra.append(f"tokenizer={o.tokenizer}:{o.max_tokens}")
        return " | ".join([o.fields] + extra)

    # -- what happened -------------------------------------------------------
    @property
    def last_batch(self):
        """The latest yielded batch's identity, a dict (None before the first):

        - ``epoch``, ``batch``: the batch's epoch and index in it;
        - ``sample_indices``: the dataset index of each row (a replaced
          sample's row holds its replacement's index);
        - ``server``: the address that made it;
        - ``failed_samples``: how many of its samples failed on the server;
        - ``failures`` (only when there are any): one ``(sample index,
          reason, replaced by or -1)`` per failed sample, as the server said
          (``bad_sample_policy="skip"`` replaces a bad sample by the next
          one of the epoch's order); ``stats()`` counts them over the run;
        - ``receive_ms``: how long its bytes took to arrive;
        - ``fields`` is popped into the batch dict when ``fields`` is set."""
        if self._last is None:
            return None
        indices, info = self._last
        return dict(info, sample_indices=memoryview(indices).tolist())

    def stats(self):
        """Throughput, starved %, the bottleneck verdict and its figures since
        the first batch, and this package's own time per batch;
        ``failed_samples`` (samples of the yielded batches that failed on a
        server) and ``replaced_samples`` (of those, replaced by another
        sample under ``bad_sample_policy="skip"``) over the loader's life:
        a replaced sample otherwise shows only in ``last_batch``."""
        s = self._client.stats()
        s["failed_samples"] = self._failed
        s["replaced_samples"] = self._replaced
        s["python_overhead_us_per_batch"] = (
            1e6 * max(0.0, self._python_seconds - s["next_seconds"]) / self._batches if self._batches else 0.0)
        s["framework"] = self._framework.name
        return s

    @property
    def metrics_port(self):
        """The port serving /metrics, or None."""
        port = self._client.metrics_port
        return None if port < 0 else port

    @property
    def device_path(self):
        """'cuda' or 'cpu': where batches are converted and handed over."""
        return self._client.device_path

    @property
    def num_samples(self):
        return self._client.num_samples

    @property
    def class_names(self):
        return self._client.class_names

    @property
    def unlabeled_samples(self):
        """Samples without a class label (WebDataset shards without .cls):
        their label is 0 in (images, labels) batches."""
        return self._client.unlabeled_samples

    def close(self):
        """Stops the streams. Tensors already yielded stay valid."""
        self._client = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


if Loader.__doc__:  # None under python -OO
    Loader.__doc__ = Loader.__doc__.split("\n\n")[0] + "\n\n" + textwrap.indent(_arguments_doc(), "    ") + "\n"
