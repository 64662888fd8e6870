"""Issue 49: connection errors as a new user meets them, against real
stoker-server processes on 127.0.0.1 and a port nothing listens on.

- One live and one dead address: the first batch comes from the live server
  at once (it waited the whole 10 s connect timeout before).
- Only a dead address: "connection refused", naming it, at once (it said
  "Deadline Exceeded" after 10 s before).
"""

import socket
import time

import pytest

import stoker


def dead_address():
    """127.0.0.1 and a port that was free a moment ago: connecting is refused."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"127.0.0.1:{s.getsockname()[1]}"


def test_a_dead_address_beside_a_live_one_does_not_hold_up_the_first_batch(start_server):
    server = start_server("--workers=1")
    dead = dead_address()
    for servers in (f"{dead},{server.address}", f"{server.address},{dead}"):
        started = time.monotonic()
        l = stoker.Loader(servers=servers, dataset="ds", pipeline="resize(40), center_crop(32)", batch_size=8,
                          device="cpu", dtype="uint8", framework="numpy")
        images, _ = next(iter(l))
        took = time.monotonic() - started
        assert images.shape[0] == 8
        assert l.last_batch["server"] == server.address
        assert took < 3, f"the first batch took {took:.1f} s with {servers}"


def test_only_a_dead_address_says_connection_refused_at_once():
    dead = dead_address()
    started = time.monotonic()
    with pytest.raises(stoker.Unavailable, match=f"connection refused by {dead}: nothing listens there"):
        stoker.Loader(servers=dead, dataset="ds", batch_size=8, device="cpu")
    assert time.monotonic() - started < 3
