"""A process that holds PyPI's grpcio (its own gRPC core, linked into its
extension) loads libstoker_client.so (Debian's gRPC beside it) and runs an
epoch through the C ABI (ctypes), with grpcio imported before and used
around it: a grpcio channel to the same stoker-server reaches READY before
and after the epoch.

Usage: grpcio_test.py BUILD_DIR SOURCE_DIR   (run with the build's pyenv, which has grpcio;
skipped, exit 77, without it)"""
import ctypes
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sdk_common import BUILD, in_scratch  # noqa: E402

try:
    import grpc  # PyPI's grpcio, first
except ImportError:
    print("skipped: no grpcio for this interpreter (the build's pyenv has it)")
    sys.exit(77)


class Tensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("dtype", ctypes.c_int), ("layout", ctypes.c_int), ("ndim", ctypes.c_int),
                ("shape", ctypes.c_int64 * 8), ("device", ctypes.c_int), ("cuda_event", ctypes.c_void_p)]


def ready(address):
    channel = grpc.insecure_channel(address)
    grpc.channel_ready_future(channel).result(timeout=20)
    channel.close()


def pypi_grpcio():
    """grpcio's extension carries its own gRPC core (PyPI's wheel), not the
    system's libgrpc (Debian's python3-grpcio would share Stoker's)."""
    import glob
    import subprocess
    cygrpc = glob.glob(os.path.join(os.path.dirname(grpc.__file__), "_cython", "cygrpc*.so"))
    assert cygrpc, f"no cygrpc extension beside {grpc.__file__}"
    needed = subprocess.run(["readelf", "-d", cygrpc[0]], capture_output=True, text=True, check=True).stdout
    assert "libgrpc" not in needed, f"{cygrpc[0]} links the system's gRPC: not PyPI's grpcio\n{needed}"


def body(tmp, procs):
    lib = ctypes.CDLL(os.path.join(BUILD, "client", "libstoker_client.so"))
    lib.stoker_options_new.restype = ctypes.c_void_p
    lib.stoker_options_set.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_char_p]
    lib.stoker_client_open.argtypes = [ctypes.c_void_p, ctypes.POINTER(ctypes.c_void_p)]
    lib.stoker_client_next.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.POINTER(ctypes.c_void_p)]
    lib.stoker_batch_size.argtypes = [ctypes.c_void_p]
    lib.stoker_batch_size.restype = ctypes.c_int64
    lib.stoker_batch_sample_indices.argtypes = [ctypes.c_void_p]
    lib.stoker_batch_sample_indices.restype = ctypes.POINTER(ctypes.c_int64)
    lib.stoker_batch_image.argtypes = [ctypes.c_void_p, ctypes.POINTER(Tensor)]
    lib.stoker_batch_release.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
    lib.stoker_client_close.argtypes = [ctypes.c_void_p]
    lib.stoker_options_free.argtypes = [ctypes.c_void_p]
    lib.stoker_last_error.restype = ctypes.c_char_p

    data = os.path.join(tmp, "data")
    import subprocess
    subprocess.run([os.path.join(BUILD, "tests", "stoker-make-images"), f"--out={data}/ds", "--classes=2",
                    "--per_class=10", "--min_side=48", "--max_side=64"], check=True, capture_output=True)
    server, _, _ = procs.server(data)
    ready(server)  # grpcio's own gRPC works...

    o = lib.stoker_options_new()
    for name, value in (("servers", server), ("dataset", "ds"), ("batch_size", "3"), ("device", "cpu"),
                        ("dtype", "uint8"), ("layout", "nhwc"), ("pipeline", "center_crop(32)"), ("metrics_port", "-1")):
        assert lib.stoker_options_set(o, name.encode(), value.encode()) == 0, lib.stoker_last_error()
    client = ctypes.c_void_p()
    assert lib.stoker_client_open(o, ctypes.byref(client)) == 0, lib.stoker_last_error()
    lib.stoker_options_free(o)
    seen = []
    while True:  # ...and Stoker's (Debian's gRPC) in the same process
        batch = ctypes.c_void_p()
        assert lib.stoker_client_next(client, None, ctypes.byref(batch)) == 0, lib.stoker_last_error()
        if not batch.value:
            break
        t = Tensor()
        assert lib.stoker_batch_image(batch, ctypes.byref(t)) == 0
        n = lib.stoker_batch_size(batch)
        assert t.shape[0] == n and t.shape[1] == 32, list(t.shape)[:4]
        seen += lib.stoker_batch_sample_indices(batch)[:n]
        lib.stoker_batch_release(batch, None)
    lib.stoker_client_close(client)
    assert sorted(seen) == list(range(20)), seen
    ready(server)  # grpcio still works after
    print(f"ok: grpcio {grpc.__version__} and libstoker_client.so in one process: an epoch exactly once")
    return 0


def main():
    pypi_grpcio()
    return in_scratch("grpcio", body)


if __name__ == "__main__":
    sys.exit(main())
