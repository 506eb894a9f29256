"""Sphinx extension: a notebook whose kernel stops answering is run again, once, on a fresh kernel.

Why: on a loaded 2-core machine a notebook's kernel and the build's client sometimes stalled, the
kernel idle in its event loop (``epoll``) and the client waiting for a reply that never came;
nothing would have moved until the cell timeout (1200 s) failed the build. We caught one with
py-spy: every kernel thread idle, the client's loop idle. The known cause is ipykernel 7's shell
channel, which can leave an ``execute_request`` unread when it arrives while a reply is being
sent (ipython/ipykernel#1554; ipykernel 6 replied through the stream and had no such window), so
requirements.txt pins ipykernel 6. This watchdog stays as the backstop for any other stall. No
cell of the course waits on anything but its own computation, so a kernel that, with its child
processes, uses almost no CPU for ``KVATTN_STALL_S`` seconds (default 180) while the client
waits is stalled, not slow: even on a machine busy with two other processes a working kernel
gets a good share of a core.

When that happens, the watchdog kills the kernel, the client stops with ``DeadKernelError``, and
the notebook runs again from its unexecuted source on a new kernel; the build log says so. A
second stall fails the build with a message that names the notebook. Errors raised by cells,
cell timeouts and kernels that die on their own are untouched: they fail the build as before.

The wrapper goes around ``NotebookClientDirect.start_client``, where myst-nb's ``force`` mode
executes a notebook (myst-nb 1.4).
"""

from __future__ import annotations

import copy
import functools
import os
import threading
import time
from collections import deque
from typing import Any

import psutil
from sphinx.application import Sphinx
from sphinx.util import logging

logger = logging.getLogger(__name__)

#: Seconds between two readings of the kernel's CPU time.
POLL_S = 2.0
#: A kernel that got less than this share of one core over the whole window is stalled.
IDLE_SHARE = 0.02


def stall_seconds() -> float:
    """The watchdog's window in seconds: ``KVATTN_STALL_S`` if set (tests use a few seconds), else
    180. Raises ``ValueError`` naming the variable when it is not a positive number."""
    raw = os.environ.get("KVATTN_STALL_S", "180")
    try:
        value = float(raw)
    except ValueError:
        value = float("nan")
    if not value > 0:
        raise ValueError(f"KVATTN_STALL_S must be a positive number of seconds, got {raw!r}")
    return value


def _cpu_seconds(processes: list[psutil.Process]) -> float:
    total = 0.0
    for process in processes:
        try:
            times = process.cpu_times()
        except psutil.Error:  # exited between listing and reading
            continue
        total += times.user + times.system
    return total


class _Watchdog(threading.Thread):
    """Watches the processes this build started (the kernel and whatever it started) and kills
    them when together they used less than ``IDLE_SHARE`` of a core over ``window_s`` seconds."""

    def __init__(self, window_s: float) -> None:
        super().__init__(name="kernel-watchdog", daemon=True)
        self.window_s = window_s
        self.stalled = False
        self._done = threading.Event()

    def stop(self) -> None:
        self._done.set()
        self.join()

    def run(self) -> None:
        me = psutil.Process()
        readings: deque[tuple[float, float]] = deque()
        while not self._done.wait(POLL_S):
            children = me.children(recursive=True)
            if not children:  # the kernel has not started yet, or has just been shut down
                readings.clear()
                continue
            now = time.monotonic()
            readings.append((now, _cpu_seconds(children)))
            while len(readings) > 1 and now - readings[1][0] >= self.window_s:
                readings.popleft()
            (t0, cpu0), (t1, cpu1) = readings[0], readings[-1]
            if t1 - t0 >= self.window_s and cpu1 - cpu0 < IDLE_SHARE * (t1 - t0):
                self.stalled = True
                for child in children:
                    try:
                        child.kill()
                    except psutil.Error:
                        pass
                return


def _watched(start_client: Any) -> Any:
    @functools.wraps(start_client)
    def run(client: Any) -> None:
        source = copy.deepcopy(client.notebook)  # execution writes outputs into it in place
        window_s = stall_seconds()
        for attempt in (1, 2):
            watchdog = _Watchdog(window_s)
            watchdog.start()
            try:
                return start_client(client)
            except Exception:
                if not watchdog.stalled:
                    raise
            finally:
                watchdog.stop()
            if attempt == 2:
                raise RuntimeError(
                    f"{client.path}: the kernel stopped answering twice (no CPU used for "
                    f"{window_s:.0f} s while the client waited); see book/_ext/kernel_watchdog.py"
                )
            logger.info(
                f"kernel watchdog: {client.path}: the kernel stopped answering for "
                f"{window_s:.0f} s; running the notebook again on a new kernel"
            )
            client.notebook.clear()
            client.notebook.update(copy.deepcopy(source))

    return run


def setup(app: Sphinx) -> dict[str, Any]:
    from myst_nb.core.execute.direct import NotebookClientDirect

    if not getattr(NotebookClientDirect.start_client, "_kvattn_watched", False):
        NotebookClientDirect.start_client = _watched(NotebookClientDirect.start_client)
        NotebookClientDirect.start_client._kvattn_watched = True
    return {"parallel_read_safe": True, "parallel_write_safe": True}
