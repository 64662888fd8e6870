# One Python transform worker process (dataplane/user_ops/python_stage.h starts it):
# imports the operator's modules, then calls the functions sessions name, one
# sample at a time. The pixels cross by shared memory (fd 3), never by
# pickling; requests arrive and replies leave on the socket at fd 4, each a
# 4-byte little-endian length and a JSON object. Nothing a client sends is
# imported or evaluated: a request names a function of a module the operator
# listed (--python-transforms), and the server checked the name first.
#
# Request:  {"id": n, "fn": "mod:name", "kwargs": {...}, "seed": [seed, epoch, index, position],
#            "image": [h, w, c], "fields": [{"name", "dtype", "count", "offset"}...],
#            "inputs_end": E, "max_pixels": N}  (the image at offset 0, the fields after it)
# Reply:    {"id": n, "ok": true, "image": [h, w, c], "offset": K, "fields": [{"name", "count", "offset"}...]}
#           {"id": n, "ok": false, "error": "..."}
# Outputs are written from E on (aligned), never over the inputs.
# Load-bearing: the server (python_stage.cc) reads exactly these fields.
import importlib
import inspect
import json
import mmap
import os
import select
import signal
import socket
import struct
import sys

# The worker is one of many processes on the server's cores: numerical
# libraries get one thread each unless the operator says otherwise.
for _name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_name, "1")

ALIGN = 64


def _read_exact(stream, n):
    data = b""
    while len(data) < n:
        chunk = stream.read(n - len(data))
        if not chunk:
            return None
        data += chunk
    return data


def _receive(stream):
    head = _read_exact(stream, 4)
    if head is None:
        return None
    body = _read_exact(stream, struct.unpack("<I", head)[0])
    return None if body is None else json.loads(body)


def _send(sock, message):
    body = json.dumps(message).encode()
    sock.sendall(struct.pack("<I", len(body)) + body)  # all of it, through signals


def _describe(error):
    text = str(error)
    return f"{type(error).__name__}: {text}" if text else type(error).__name__


def _check_image(image, max_pixels, capacity):
    import numpy as np

    if not isinstance(image, np.ndarray):
        return f"returned image is a {type(image).__name__}, not a NumPy array"
    if image.dtype != np.uint8:
        return f"returned image has dtype {image.dtype}; expected uint8"
    if image.ndim != 3 or image.shape[2] != 3:
        return f"returned image has shape {tuple(image.shape)}; expected (H, W, 3)"
    if image.shape[0] < 1 or image.shape[1] < 1:
        return f"returned image has shape {tuple(image.shape)}; expected at least 1x1 pixels"
    if max_pixels > 0 and image.shape[0] * image.shape[1] > max_pixels:
        return (f"returned image of {image.shape[1]}x{image.shape[0]} pixels is over --max-pixels "
                f"({max_pixels})")
    if image.nbytes > capacity:
        return (f"returned image of {image.nbytes} bytes does not fit the shared memory "
                f"(--python-transform-max-bytes, {capacity} bytes left)")
    return None


def _align(n):
    return (n + ALIGN - 1) // ALIGN * ALIGN


def _field_array(name, value, dtype):
    """A returned field as a 1-D array of its kind's dtype, or the problem."""
    import numpy as np

    if isinstance(value, str):
        value = value.encode()
    if isinstance(value, (bytes, bytearray, memoryview)):
        value = np.frombuffer(value, dtype=np.uint8)
    if not isinstance(value, np.ndarray):
        return None, f"returned field '{name}' as a {type(value).__name__}; expected a NumPy array of {dtype}"
    if value.ndim == 0:
        value = value.reshape(1)
    if value.dtype != np.dtype(dtype) or value.ndim != 1:
        return None, (f"returned field '{name}' of dtype {value.dtype} and shape {tuple(value.shape)}; "
                      f"expected a 1-D array of {dtype}")
    return value, None


def _call(functions, shm, request):
    import numpy as np

    fn = functions[request["fn"]]
    h, w, c = request["image"]
    size = h * w * c
    image = np.frombuffer(shm, dtype=np.uint8, count=size, offset=0).reshape(h, w, c)
    sample = {"image": image}
    fields = [f for f in request.get("fields", []) if f["name"] != "image"]
    for f in fields:
        sample[f["name"]] = np.frombuffer(shm, dtype=f["dtype"], count=f["count"], offset=f["offset"])
    rng = np.random.default_rng(request["seed"])
    try:
        out = fn(sample, rng, **request["kwargs"])
    except Exception as e:  # the function's own failure: the sample's, not the worker's
        return {"ok": False, "error": f"raised {_describe(e)}"}
    if not isinstance(out, dict):
        return {"ok": False, "error": f"returned a {type(out).__name__}; expected the sample dict"}
    extra = sorted(set(out) - set(sample))
    if extra:
        return {"ok": False, "error": f"returned keys the sample does not have: {', '.join(map(str, extra))}"}
    if "image" not in out:
        return {"ok": False, "error": "returned a dict without 'image'"}
    result = out["image"]
    offset = _align(request.get("inputs_end", size))
    problem = _check_image(result, request["max_pixels"], len(shm) - offset)
    if problem:
        return {"ok": False, "error": problem}
    reply = {"ok": True, "image": [int(x) for x in result.shape], "offset": offset, "fields": []}
    if result is image or (result.__array_interface__["data"][0] == image.__array_interface__["data"][0]
                           and result.shape == image.shape and result.flags.c_contiguous):
        reply["offset"] = 0  # changed in place
        end = offset
    else:
        target = np.frombuffer(shm, dtype=np.uint8, count=result.nbytes, offset=offset).reshape(result.shape)
        np.copyto(target, result)
        end = _align(offset + result.nbytes)
    for f in fields:
        value, problem = _field_array(f["name"], out.get(f["name"], sample[f["name"]]), f["dtype"])
        if problem:
            return {"ok": False, "error": problem}
        if value.nbytes > len(shm) - end:
            return {"ok": False, "error": f"returned field '{f['name']}' of {value.nbytes} bytes does not fit the "
                                          "shared memory (--python-transform-max-bytes)"}
        np.copyto(np.frombuffer(shm, dtype=value.dtype, count=value.size, offset=end), value)
        reply["fields"].append({"name": f["name"], "count": int(value.size), "offset": end})
        end = _align(end + value.nbytes)
    return reply


def _public(module):
    """The functions a session may name: the module's __all__ when it has one,
    else the functions defined in the module itself (not what it imported:
    `from subprocess import run` does not make `run` callable by a session)."""
    names = getattr(module, "__all__", None)
    if names is not None:
        return sorted(n for n in names if isinstance(n, str) and callable(getattr(module, n, None)))
    return sorted(n for n, f in vars(module).items()
                  if not n.startswith("_") and inspect.isfunction(f) and f.__module__ == module.__name__)


def _reap_children():
    """Reaps the children a transform started that have ended (a fork that
    exited), so that none is left <defunct>: after each call and, while the
    worker waits for the next request, once a second (_wait_for_request). A
    SIGCHLD handler is not enough: with NumPy's threads the signal may go to
    a thread other than the one blocked reading, and the handler would run
    only at the next request; ignoring SIGCHLD would be inherited by what a
    transform's threads start. SIGCHLD keeps its default action, so a
    transform's own waits (subprocess.run) see their children's statuses; a
    transform that wants a child's status waits for it before it returns.
    The server kills what is still running when this worker stops (its
    process group and the STOKER_PYTHON_WORKER token)."""
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def _wait_for_request(sock):
    """Returns once `sock` has a request (or was closed), reaping ended
    children meanwhile."""
    while True:
        _reap_children()
        readable, _, _ = select.select([sock], [], [], 1.0)
        if readable:
            return


def main():
    # The server (or the training process, in local mode) decides when its
    # workers stop: they stop when it closes their socket, not on a signal
    # sent to a whole process group or cgroup while samples are in flight.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    shm_bytes = int(sys.argv[1])
    modules = [m for m in sys.argv[2].split(",") if m]
    replies = socket.socket(fileno=4)
    requests = replies.makefile("rb", buffering=0)
    shm = mmap.mmap(3, shm_bytes)
    functions, catalog = {}, {}
    for name in modules:
        try:
            module = importlib.import_module(name)
        except BaseException as e:
            _send(replies, {"ready": False, "error": f"cannot import {name}: {_describe(e)}"})
            return 1
        public = _public(module)
        catalog[name] = public
        for n in public:
            functions[f"{name}:{n}"] = getattr(module, n)
    try:
        import numpy  # noqa: F401  (the samples are NumPy arrays)
    except ImportError as e:
        _send(replies, {"ready": False, "error": f"cannot import numpy: {e}"})
        return 1
    _send(replies, {"ready": True, "functions": catalog, "pid": os.getpid()})
    while True:
        _wait_for_request(replies)
        request = _receive(requests)
        if request is None:  # the server closed the pipe: it stopped
            return 0
        try:
            reply = _call(functions, shm, request)
        except Exception as e:
            reply = {"ok": False, "error": f"failed: {_describe(e)}"}
        reply["id"] = request.get("id")
        _send(replies, reply)


if __name__ == "__main__":
    sys.exit(main())
