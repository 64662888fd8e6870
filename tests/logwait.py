"""Waiting for a process to say something in its log file (the test scripts
start real processes and read the address or verdict they print)."""
import re
import time


def wait_for(path, pattern, timeout, poll=0.05):
    """The first match of `pattern` in the file at `path` within `timeout`
    seconds, or None. A file not yet created counts as empty."""
    deadline = time.time() + timeout
    while True:
        try:
            with open(path) as f:
                m = re.search(pattern, f.read())
            if m:
                return m
        except FileNotFoundError:
            pass
        if time.time() >= deadline:
            return None
        time.sleep(poll)
