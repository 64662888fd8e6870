"""What the tests of the client as a training job uses it share: the build
and source folders (argv), a command that fails with its output, the client
installed into a fresh prefix, and a scratch folder with the servers a test
starts, all stopped and removed at the end."""
import os
import shutil
import subprocess
import sys
import tempfile

BUILD, SOURCE = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
sys.path.insert(0, os.path.join(SOURCE, "tests"))
from procs import Procs  # noqa: E402


def run(argv, **kw):
    """The command's stdout; AssertionError with its output when it fails."""
    r = subprocess.run(argv, capture_output=True, text=True, **kw)
    if r.returncode != 0:
        raise AssertionError(f"{' '.join(argv)} exited {r.returncode}:\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}")
    return r.stdout


def install_client(tmp):
    """cmake --install BUILD --component client into TMP/prefix; the prefix."""
    prefix = os.path.join(tmp, "prefix")
    run(["cmake", "--install", BUILD, "--prefix", prefix, "--component", "client"])
    return prefix


def in_scratch(name, body):
    """body(tmp, procs)'s exit status, with a scratch folder and Procs (servers
    on 127.0.0.1) that are stopped and removed whatever happens."""
    tmp = tempfile.mkdtemp(prefix=f"stoker-{name}-")
    procs = Procs(tmp, BUILD)
    try:
        return body(tmp, procs)
    finally:
        procs.stop()
        shutil.rmtree(tmp, ignore_errors=True)
