"""The console commands of the package: `stoker-server`, `stoker-bench`, ...

Each is a program that the wheel carries beside the extension (stoker/<name>,
linked against the same bundled libraries in stoker.libs); its entry point
replaces the Python process with it (exec), so signals, the exit status and
stdin/stdout are the program's own. `python -m stoker NAME ...` does the same.
"""

import os
import signal
import sys

PROGRAMS = ("stoker-server", "stoker-bench", "stoker-diagnose", "stoker-materialize", "stoker-profile",
            "stoker-health", "stoker-storage")


def path_of(name):
    """The program's file inside the installed package."""
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), name)


def run(name, args):
    path = path_of(name)
    if not os.access(path, os.X_OK):
        raise SystemExit(f"{name}: not in this installation of stoker ({path} is missing); the wheels of "
                         "`make wheel` carry the programs, `pip install ./python` from a clone does not")
    sys.stdout.flush()
    sys.stderr.flush()
    # Python ignores SIGPIPE and SIGXFSZ, and exec keeps ignored signals: the
    # program gets the defaults back (`stoker-storage cat ... | head` ends).
    for sig in ("SIGPIPE", "SIGXFSZ"):
        if hasattr(signal, sig):
            signal.signal(getattr(signal, sig), signal.SIG_DFL)
    os.execv(path, [name, *args])


def _entry(name):
    def main():
        run(name, sys.argv[1:])
    main.__name__ = name.replace("-", "_")
    return main


for _name in PROGRAMS:
    globals()[_name.replace("-", "_")] = _entry(_name)
