"""The forked children of ``ltm server run`` (POSIX): the worker processes and the writer.

What every fork of the server needs, whoever forks: stop signals held back
across the fork until the child has set its own, a child's end that never
returns into the code that forked it, and a child that stops when the main
process dies, however it dies.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
import time
import traceback
from collections.abc import Callable, Iterator
from types import FrameType
from typing import Any, NoReturn


class Stop(SystemExit):
    """A stop signal's way out of whatever the process was doing: a clean stop."""


STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)


def stop(signum: int, frame: FrameType | None) -> None:
    """The handler of SIGTERM and SIGINT in every process of the server."""
    raise Stop(0)


@contextlib.contextmanager
def stops_held() -> Iterator[None]:
    """SIGTERM and SIGINT held back in this thread, for a fork and what records the child:
    a stop signal sent at once to every process (a supervisor stopping the whole group)
    never reaches a child still on the default action, which would kill it as if it had
    crashed (the child sets its own, ``let_stops_in``), and reaches the parent only once
    it knows the child it must stop."""
    signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, STOP_SIGNALS)


def let_stops_in(handler: Any) -> None:
    """In a child forked under ``stops_held``: ``handler`` for SIGTERM and SIGINT, then let
    them through (one held back meanwhile arrives now)."""
    for sig in STOP_SIGNALS:
        signal.signal(sig, handler)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, STOP_SIGNALS)


def exit_after(run: Callable[[], None]) -> NoReturn:
    """The end of a forked child: run ``run``, then exit with its status, never returning
    into the code that forked it (1 after a traceback on stderr)."""
    status = 0
    try:
        run()
    except Stop as stopped:  # a signal outside the serving loop: still a clean stop
        status = int(stopped.code or 0)
    except BaseException:
        traceback.print_exc()
        status = 1
    finally:
        sys.stderr.flush()
        os._exit(status)


def die_with(parent: int) -> None:
    """Stop this worker (SIGTERM, a clean stop) when the main process dies, even by SIGKILL.

    Linux: the kernel's parent-death signal. Elsewhere: a thread that watches
    the parent pid once a second.
    """
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(1, signal.SIGTERM, 0, 0, 0) != 0:  # PR_SET_PDEATHSIG
            raise OSError(ctypes.get_errno(), "prctl")
    except (OSError, AttributeError):

        def watch() -> None:
            while os.getppid() == parent:
                time.sleep(1)
            os.kill(os.getpid(), signal.SIGTERM)

        threading.Thread(target=watch, name="ltm-parent-watch", daemon=True).start()
    if os.getppid() != parent:  # it died before the signal was armed
        os.kill(os.getpid(), signal.SIGTERM)
