"""Hands the extension's DLPack arrays to a framework without copying.

The extension yields framework-neutral arrays (``__dlpack__`` /
``__dlpack_device__``); this module turns them into torch tensors, JAX arrays
or NumPy arrays, and says which stream a consumer reads on. Torch is imported
only when the torch framework is used.
"""

FRAMEWORKS = ("torch", "jax", "numpy", "dlpack")


class Framework:
    """How one framework receives batches. `stream(device)` returns the CUDA
    stream (an int handle; 0 is the legacy default stream) that the consumer's
    work will run on, or None when the loader must wait on the CPU instead."""

    name = "dlpack"

    def stream(self, gpu):
        return None

    def images(self, array):
        return array

    def labels(self, array, like):
        return array


class Torch(Framework):
    name = "torch"

    def __init__(self):
        import torch
        import torch.utils.dlpack

        self._torch = torch
        self._from_dlpack = torch.utils.dlpack.from_dlpack

    def stream(self, gpu):
        return self._torch.cuda.current_stream(gpu).cuda_stream

    def images(self, array):
        return self._from_dlpack(array)

    def labels(self, array, like):
        labels = self._from_dlpack(array)
        return labels.to(like.device, non_blocking=True) if like.is_cuda else labels


class Jax(Framework):
    name = "jax"

    def __init__(self):
        import jax.dlpack

        self._from_dlpack = jax.dlpack.from_dlpack

    def images(self, array):
        return self._from_dlpack(array)

    def labels(self, array, like):
        import jax

        labels = self._from_dlpack(array)
        devices = like.devices() if hasattr(like, "devices") else None
        return jax.device_put(labels, next(iter(devices))) if devices else labels


class Numpy(Framework):
    name = "numpy"

    def __init__(self):
        import numpy

        self._np = numpy

    def images(self, array):
        return self._np.from_dlpack(array)

    def labels(self, array, like):
        return self._np.from_dlpack(array)


def make(name):
    if name == "torch":
        return Torch()
    if name == "jax":
        return Jax()
    if name == "numpy":
        return Numpy()
    if name == "dlpack":
        return Framework()
    raise ValueError(f"framework {name!r}; expected one of {', '.join(FRAMEWORKS)}")


def dtype_name(dtype):
    """'float32', 'float16', 'bfloat16' or 'uint8' from a string or a torch /
    NumPy dtype (torch.bfloat16, numpy.float16, ...)."""
    text = str(dtype).replace("torch.", "").replace("<class 'numpy.", "").replace("'>", "")
    aliases = {"float": "float32", "half": "float16", "float32": "float32", "float16": "float16",
               "bfloat16": "bfloat16", "uint8": "uint8"}
    if text not in aliases:
        raise ValueError(f"dtype {dtype!r}; expected float32, float16, bfloat16 or uint8")
    return aliases[text]


def parse_device(device):
    """('auto'|'cuda'|'cpu', gpu ordinal) from 'auto', 'cpu', 'cuda', 'cuda:1'
    or a torch.device."""
    text = str(device)
    if text in ("auto", "cpu", "cuda"):
        return text, 0
    if text.startswith("cuda:") and text[5:].isdigit():
        return "cuda", int(text[5:])
    raise ValueError(f"device {device!r}; expected 'auto', 'cpu', 'cuda' or 'cuda:N'")
