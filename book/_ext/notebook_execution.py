"""Sphinx extension: notebooks execute reliably in the book build, on a busy machine too.

Some fast builds on a loaded 2-core machine stalled: the kernel idle (blocked in ``epoll``,
every thread idle under py-spy) and the notebook client waiting for a reply that never came,
until the cell timeout (1200 s) passed. The stalled cell was always one that displays a live
explorer, an ipywidgets ``Output`` widget that receives a figure. Two fixes, in this order:

1. **The cause.** nbclient stands in for the browser's ``Output`` widget
   (``nbclient.output_widget.OutputWidget``): each output routed to the widget is stored in the
   widget's state, and the new state is also sent back to the kernel as a comm message on the
   shell socket. That send runs in nbclient's IOPub task while its reply task is awaiting the
   same asyncio ZMQ socket, and the send can swallow the socket's edge-triggered wake-up: the
   ``execute_reply`` then sits unread until the wait times out (nbclient issue #312). Measured
   here on a notebook with two live explorers, on a loaded machine: 1 of 25 runs waited the full
   40 s timeout before going on. A headless build has no use for that message (the kernel keeps
   no copy of what a browser displays), so this extension drops it; the outputs still land in
   the widget state that the page renders. ipykernel 7 has the same kind of lost wake-up on the
   kernel's side (ipython/ipykernel#1554), which is why requirements.txt pins ipykernel 6.
2. **The backstop.** A notebook whose kernel, with its child processes, uses almost no CPU for
   ``KVATTN_STALL_S`` seconds (default 180) while the client waits is stalled, not slow: no cell
   of the course waits on anything but its own computation, and even on a machine busy with two
   other processes a working kernel gets a good share of a core. The watchdog kills that kernel;
   the client stops with ``DeadKernelError`` and the notebook runs again from its unexecuted
   source on a new kernel, which the build log says. A second stall fails the build with a
   message that names the notebook. Errors raised by cells, cell timeouts and kernels that die on
   their own are untouched: they fail the build as before.

Both act on myst-nb's ``force`` execution (myst-nb 1.4, nbclient 0.11): the watchdog wraps
``NotebookClientDirect.start_client``, where a notebook is executed.
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
                    f"{window_s:.0f} s while the client waited); see "
                    "book/_ext/notebook_execution.py"
                )
            logger.info(
                f"kernel watchdog: {client.path}: the kernel stopped answering for "
                f"{window_s:.0f} s; running the notebook again on a new kernel"
            )
            client.notebook.clear()
            client.notebook.update(copy.deepcopy(source))

    return run


def _no_reply_to_the_kernel(self: Any, *args: Any, **kwargs: Any) -> None:
    """Replaces ``OutputWidget._publish_msg``: see point 1 of the module docstring."""


def quiet_output_widgets() -> None:
    """Point 1 of the module docstring, for any nbclient run in this process (the build, and
    ``tools/notebooks.py --record``)."""
    from nbclient.output_widget import OutputWidget

    OutputWidget._publish_msg = _no_reply_to_the_kernel


def setup(app: Sphinx) -> dict[str, Any]:
    from myst_nb.core.execute.direct import NotebookClientDirect

    quiet_output_widgets()

    if not getattr(NotebookClientDirect.start_client, "_kvattn_watched", False):
        NotebookClientDirect.start_client = _watched(NotebookClientDirect.start_client)
        NotebookClientDirect.start_client._kvattn_watched = True
    return {"parallel_read_safe": True, "parallel_write_safe": True}
