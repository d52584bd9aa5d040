"""A progress line on stderr, drawn only when stderr is a terminal.

Export and import run for minutes on a large store; a person at a terminal
wants to see them move, while a script or a log wants none of the carriage
returns. Drawing is throttled (10 times a second), so a fast loop does not
spend its time writing to the terminal.
"""

from __future__ import annotations

import sys
import time
from typing import TextIO

WIDTH = 24


class Progress:
    """``update`` as work goes, ``clear`` before printing a line, ``done`` at the end."""

    def __init__(
        self, what: str, *, total: int | None = None, unit: str = "", stream: TextIO | None = None
    ) -> None:
        self.stream = stream or sys.stderr
        self.enabled = self.stream.isatty()
        self.what = what
        self.total = total
        self.unit = unit
        self.count = 0
        self.done_part = 0
        self._last = 0.0
        self._shown = False

    def update(self, count: int, *, part: int | None = None) -> None:
        """``count`` items so far; ``part`` of ``total`` (bytes read, say) when there is a total."""
        self.count = count
        if part is not None:
            self.done_part = part
        if not self.enabled:
            return
        now = time.monotonic()
        if now - self._last < 0.1:
            return
        self._last = now
        self._draw()

    def _draw(self) -> None:
        text = f"{self.what} {self.count:,}{self.unit}"
        if self.total:
            share = min(1.0, self.done_part / self.total)
            filled = int(share * WIDTH)
            text = f"[{'#' * filled}{'.' * (WIDTH - filled)}] {share:4.0%} {text}"
        self.stream.write("\r" + text + "\x1b[K")
        self.stream.flush()
        self._shown = True

    def clear(self) -> None:
        if self._shown:
            self.stream.write("\r\x1b[K")
            self.stream.flush()
            self._shown = False
            self._last = 0.0  # draw again at the next update

    def done(self) -> None:
        self.clear()
