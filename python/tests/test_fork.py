# SPDX-License-Identifier: MIT
"""threads= after os.fork(): the child's calls return, with the parent's bits.

fork() copies the forking thread only. The binding's pool cache gets a fresh
lock in the child (os.register_at_fork), so a lock another thread held at
fork time does not block it; the parent's C pools are used on in the child
where the library restarts their workers there (attn.h: pools survive fork()
since 1.11), else the child drops them and makes its own.

Each child reports through its exit status; the parent waits at most
CHILD_LIMIT seconds for it (a guard against a hang, not a timing) and kills
it then, which fails the test.
"""

import importlib.util
import os
import signal
import threading
import time

import numpy as np
import pytest

import libattn
from libattn import _capi

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
if importlib.util.find_spec("pytest_timeout") is not None:
    pytestmark = [pytestmark, pytest.mark.timeout(120)]

CHILD_LIMIT = 60.0


def _run_in_child(body):
    """body() in a forked child: True when it returned True, False when it
    returned anything else, raised, or did not finish in CHILD_LIMIT s."""
    pid = os.fork()
    if pid == 0:  # the child: never back into pytest
        status = 2
        try:
            status = 0 if body() else 1
        finally:
            os._exit(status)
    deadline = time.monotonic() + CHILD_LIMIT
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            return False
        time.sleep(0.02)


def _problem():
    rng = np.random.default_rng(7)
    return rng.standard_normal((2, 4, 48, 32)).astype(np.float32)


def test_threads_after_fork():
    q = _problem()
    want = libattn.forward(q, q, q, threads=2, causal=True)  # the parent's pool exists
    assert _run_in_child(lambda: np.array_equal(
        libattn.forward(q, q, q, threads=2, causal=True), want))
    # and the parent's own pool still works
    assert np.array_equal(libattn.forward(q, q, q, threads=2, causal=True), want)


def test_fork_while_another_thread_holds_the_pool_lock():
    q = _problem()
    want = libattn.forward(q, q, q, threads=2)
    held, release = threading.Event(), threading.Event()

    def hold():
        with _capi._pools_lock:
            held.set()
            release.wait()

    holder = threading.Thread(target=hold)
    holder.start()
    try:
        held.wait()
        ok = _run_in_child(lambda: np.array_equal(libattn.forward(q, q, q, threads=2), want)
                           and libattn.thread_pool_size(3) == 3)
    finally:
        release.set()
        holder.join()
    assert ok
