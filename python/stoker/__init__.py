"""Stoker: batches decoded and augmented on remote data servers, delivered to
the training process as tensors on its device.

    import stoker
    loader = stoker.Loader(servers="host:port", dataset="imagenet/train", batch_size=256)

See Loader, diagnose, and the errors (subclasses of StokerError named after
gRPC status codes: Unavailable, InvalidArgument, DataLoss, ...).
"""

from . import _stoker_ext as _ext
from ._stoker_ext import (  # noqa: F401  (the exception classes, by gRPC status code)
    Aborted, AlreadyExists, Cancelled, DataLoss, DeadlineExceeded, FailedPrecondition, Internal, InvalidArgument,
    NotFound, OutOfRange, PermissionDenied, ResourceExhausted, StokerError, Unauthenticated, Unavailable,
    Unimplemented, Unknown)
from .diagnose import diagnose  # noqa: F401
from .loader import DEFAULT_PIPELINE, Loader  # noqa: F401

__version__ = "0.1.0"

# INFO and above to stderr (STOKER_LOG_LEVEL: 0 INFO, 1 WARNING, 2 ERROR).
_ext.init_logging(int(__import__("os").environ.get("STOKER_LOG_LEVEL", "0")))
