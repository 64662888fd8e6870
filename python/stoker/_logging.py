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
_PY_TO_GLOG = {logging.DEBUG: 0, logging.INFO: 0, logging.WARNING: 1, logging.ERROR: 2, logging.CRITICAL: 3}
_thread = None
_handler = None


def _glog_level(level):
    """glog's severity for a level: a name, glog's number (as a string), or one of logging's levels (int)."""
    if isinstance(level, int) and level in _PY_TO_GLOG:
        return _PY_TO_GLOG[level], level
    if isinstance(level, int):
        raise ValueError(f"log level {level}: expected one of logging's levels (logging.INFO, ...) or a name")
    severity = _ext.parse_log_level(str(level))
    return severity, (logging.DEBUG if str(level).strip().lower() == "debug" else _LEVELS[severity])


def set_log_level(level):
    """Sets how much the loader logs: "debug", "info", "warning" (the default), "error", or logging.INFO, ...

    The C++ client's messages below it are not even formatted. When nothing in
    the application handles the "stoker" logger, a handler to stderr is added
    so that what was asked for is seen.
    """
    global _handler
    severity, py_level = _glog_level(level)
    _ext.set_log_level(severity)
    logger.setLevel(py_level)
    if _handler is None and not logger.hasHandlers():
        _handler = logging.StreamHandler(sys.stderr)
        _handler.setFormatter(logging.Formatter("%(levelname).1s %(asctime)s %(name)s %(filename)s:%(lineno)d] "
                                                "%(message)s"))
        logger.addHandler(_handler)


def _pump():
    while True:
        records = _ext.take_log_records(0.5)
        if records is None:
            return
        for severity, filename, line, message in records:
            level = _LEVELS.get(severity, logging.ERROR)
            if logger.isEnabledFor(level):
                logger.handle(logger.makeRecord(logger.name, level, filename, line, message, None, None))


def _stop():
    _ext.close_log_queue()
    if _thread is not None:
        _thread.join(timeout=2)


def start():
    """Called once on import: the level from STOKER_LOG_LEVEL (WARNING without it), the pump thread."""
    global _thread
    env = os.environ.get("STOKER_LOG_LEVEL", "").strip()
    try:
        severity, py_level = _glog_level(env) if env else (1, logging.WARNING)
    except ValueError as e:
        severity, py_level = 1, logging.WARNING
        logger.warning("STOKER_LOG_LEVEL ignored: %s", e)
    _ext.init_logging(severity)
    if env:
        set_log_level(py_level if py_level != logging.DEBUG else "debug")
    elif logger.level == logging.NOTSET:
        logger.setLevel(logging.WARNING)
    _thread = threading.Thread(target=_pump, name="stoker-log", daemon=True)
    _thread.start()
    atexit.register(_stop)
