"""Stoker: batches decoded and augmented on remote data servers, delivered to
the training process as tensors on its device.

    import stoker
    loader = stoker.Loader(servers="host:port", dataset="imagenet/train", batch_size=256)

See Loader, diagnose, and the errors (subclasses of StokerError named after
gRPC status codes: Unavailable, InvalidArgument, DataLoss, ...).
"""

import sys as _sys

# NumPy first: without it the extension is never loaded (no half-initialised
# module for nanobind to report as leaked at exit).
try:
    import numpy as _numpy  # noqa: F401
except ImportError:
    raise ImportError(f"stoker needs NumPy, which this Python ({_sys.executable}) cannot import: "
                      "`pip install numpy` (pip install stoker installs it)") from None

from . import _stoker_ext as _ext
from ._stoker_ext import (  # noqa: F401  (the exception classes, by gRPC status code)
    Aborted, AlreadyExists, Cancelled, DataLoss, DeadlineExceeded, FailedPrecondition, Internal, InvalidArgument,
    NotFound, OutOfRange, PermissionDenied, ResourceExhausted, StokerError, Unauthenticated, Unavailable,
    Unimplemented, Unknown)
from .diagnose import diagnose  # noqa: F401
from .loader import DEFAULT_PIPELINE, Loader  # noqa: F401

__version__ = "0.1.0"

# The client's messages through Python's logging, logger "stoker", WARNING
# and above unless STOKER_LOG_LEVEL or set_log_level() asks for more.
from . import _logging  # noqa: E402
from ._logging import set_log_level  # noqa: E402,F401

_logging.start()
