"""The loader's log: the C++ client's messages (glog inside the extension)
handed to Python's `logging`, logger "stoker", by a thread of this module.

Quiet by default: WARNING and above. One switch sets the level for the loader
and for the servers and tools alike: the environment variable
STOKER_LOG_LEVEL (debug, info, warning, error; or glog's 0-3), or for the
loader alone `stoker.set_log_level(...)` / `Loader(log_level=...)`. Without a
handler of the application's own, records at the chosen level go to stderr.
"""

import atexit
import logging
import os
import sys
import threading

from . import _stoker_ext as _ext

logger = logging.getLogger("stoker")

# glog's severities -> logging's levels.
_LEVELS = {0: logging.INFO, 1: logging.WARNING, 2: logging.ERROR, 3: logging.CRITICAL}
_thread = None
_handler = None  # the _Fallback handler, added by set_log_level


def _glog_level(level):
    """(glog's severity, logging's level) for a level: a name, glog's number as text, or a logging level (int)."""
    if isinstance(level, bool) or not isinstance(level, (int, str)):
        raise ValueError(f"log level {level!r}: expected a name (debug, info, warning, error) or logging.INFO, ...")
    if isinstance(level, int):  # logging's levels, by threshold (custom levels included)
        severity = 0 if level < logging.WARNING else 1 if level < logging.ERROR else 2 if level < logging.CRITICAL else 3
        return severity, level
    severity = _ext.parse_log_level(level)
    return severity, (logging.DEBUG if level.strip().lower() == "debug" else _LEVELS[severity])


class _Fallback(logging.StreamHandler):
    """To stderr, only while nothing else in the application handles the record (so never twice)."""

    def handle(self, record):
        parent = logger.parent
        while parent is not None:
            if parent.handlers:
                return False
            parent = parent.parent
        if any(h is not self for h in logger.handlers):
            return False
        return super().handle(record)


def set_log_level(level):
    """Sets how much the loader logs: "debug", "info", "warning" (the default), "error", or logging.INFO, ...

    The C++ client's messages below it are not even formatted. Records go to
    the handlers of the "stoker" logger and its parents; while the
    application has none, to stderr.
    """
    global _handler
    severity, py_level = _glog_level(level)
    _ext.set_log_level(severity)
    logger.setLevel(py_level)
    if _handler is None:
        _handler = _Fallback(sys.stderr)
        _handler.setFormatter(logging.Formatter("%(levelname).1s %(asctime)s %(name)s %(filename)s:%(lineno)d] "
                                                "%(message)s"))
        logger.addHandler(_handler)


def _pump():
    while True:
        try:
            records = _ext.take_log_records(0.5)
        except Exception:  # noqa: BLE001 (the interpreter is going away)
            return
        if records is None:
            return
        for severity, filename, line, message in records:
            try:
                level = _LEVELS.get(severity, logging.ERROR)
                if logger.isEnabledFor(level):
                    logger.handle(logger.makeRecord(logger.name, level, filename.decode(errors="replace"), line,
                                                    message.decode(errors="replace"), None, None))
            except Exception:  # noqa: BLE001 (a handler's failure must not end the pump)
                pass


def _start_pump():
    global _thread
    _thread = threading.Thread(target=_pump, name="stoker-log", daemon=True)
    _thread.start()


def _stop():
    _ext.close_log_queue()
    if _thread is not None:
        _thread.join(timeout=2)


def start():
    """Called once on import: the level from STOKER_LOG_LEVEL (WARNING without it), the pump thread."""
    env = os.environ.get("STOKER_LOG_LEVEL", "").strip()
    try:
        severity, py_level = _glog_level(env) if env else (1, logging.WARNING)
    except ValueError as e:
        severity, py_level = 1, logging.WARNING
        logger.warning("STOKER_LOG_LEVEL ignored: %s", e)
    _ext.init_logging(severity)
    if env:
        set_log_level(py_level)
    elif logger.level == logging.NOTSET:
        logger.setLevel(logging.WARNING)
    _start_pump()
    atexit.register(_stop)
    # A forked child (a DataLoader worker, ...) gets a pump of its own.
    os.register_at_fork(after_in_child=_start_pump)
