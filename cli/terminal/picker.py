"""A small list picker for the terminal, on termios alone.

Up/down (or k/j, Ctrl-P/Ctrl-N), Page Up/Down and Home/End move; Enter picks;
Esc (or q) cancels. The list is drawn in place below the cursor (no alternate
screen, no full-screen framework) and erased when done, so the terminal looks
as it did before. Ctrl-C still interrupts: the terminal is restored either way.
"""

from __future__ import annotations

import os
import select
import sys
from collections.abc import Sequence
from typing import TextIO

UP = {b"\x1b[A", b"\x1bOA", b"k", b"\x10"}
DOWN = {b"\x1b[B", b"\x1bOB", b"j", b"\x0e"}
PAGE_UP = {b"\x1b[5~"}
PAGE_DOWN = {b"\x1b[6~"}
HOME = {b"\x1b[H", b"\x1bOH", b"\x1b[1~", b"g"}
END = {b"\x1b[F", b"\x1bOF", b"\x1b[4~", b"G"}
ENTER = {b"\r", b"\n"}
CANCEL = {b"\x1b", b"q", b"\x04"}
ESC_WAIT = 0.05  # how long a lone Esc waits for the rest of an escape sequence

REVERSE, RESET = "\x1b[7m", "\x1b[0m"
HIDE_CURSOR, SHOW_CURSOR = "\x1b[?25l", "\x1b[?25h"


class KeyReader:
    """Whole keys from a terminal in cbreak mode: one byte, or one escape sequence."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.buffer = b""

    def _fill(self, timeout: float | None) -> bool:
        ready, _, _ = select.select([self.fd], [], [], timeout)
        if not ready:
            return False
        data = os.read(self.fd, 64)
        if not data:
            raise EOFError
        self.buffer += data
        return True

    def _take(self, n: int) -> bytes:
        key, self.buffer = self.buffer[:n], self.buffer[n:]
        return key

    def next(self) -> bytes:
        while not self.buffer:
            self._fill(None)
        if self.buffer[:1] != b"\x1b":
            return self._take(1)
        if len(self.buffer) == 1 and not self._fill(ESC_WAIT):
            return self._take(1)  # a lone Esc
        kind = self.buffer[1:2]
        if kind == b"O":  # SS3: ESC O <final>
            if len(self.buffer) < 3:
                self._fill(ESC_WAIT)
            return self._take(3)
        if kind != b"[":
            return self._take(1)  # Esc, then an ordinary key: take the Esc alone
        i = 2  # CSI: ESC [ <parameters 0x30-0x3F>* <intermediates 0x20-0x2F>* <final 0x40-0x7E>
        while True:
            if i >= len(self.buffer) and not self._fill(ESC_WAIT):
                return self._take(len(self.buffer))
            if 0x40 <= self.buffer[i] <= 0x7E:
                return self._take(i + 1)
            i += 1


def pick(
    rows: Sequence[str],
    *,
    title: str,
    fd: int | None = None,
    out: TextIO | None = None,
    height: int | None = None,
) -> int | None:
    """Let the user choose one of ``rows``; its index, or None when cancelled."""
    import shutil
    import termios
    import tty

    if not rows:
        return None
    from ltm.cli.terminal.output import safe

    # Rows carry packet text: escape its controls here, so no caller can forget to.
    rows = [safe(row) for row in rows]
    title = safe(title)
    fd = sys.stdin.fileno() if fd is None else fd
    out = out or sys.stdout
    size = shutil.get_terminal_size((80, 24))
    width = max(20, size.columns - 1)  # never write to the last column: no wrapping
    visible = height or max(1, min(len(rows), 10, size.lines - 3))
    hint = "↑/↓ move · enter picks · esc cancels"
    saved = termios.tcgetattr(fd)
    drawn = 0
    selected, top = 0, 0

    def draw() -> None:
        nonlocal drawn, top
        if selected < top:
            top = selected
        elif selected >= top + visible:
            top = selected - visible + 1
        lines = [_clip(f"{title}  ({hint})", width)]
        for index in range(top, min(top + visible, len(rows))):
            line = _clip(f"{'>' if index == selected else ' '} {rows[index]}", width)
            lines.append(f"{REVERSE}{line}{RESET}" if index == selected else line)
        if len(rows) > visible:
            lines.append(_clip(f"  {selected + 1}/{len(rows)}", width))
        text = _home(drawn) + "\x1b[J"
        out.write(text + "\n".join(lines))
        out.flush()
        drawn = len(lines)

    def erase() -> None:
        out.write(_home(drawn) + "\x1b[J" + SHOW_CURSOR)
        out.flush()

    keys = KeyReader(fd)
    try:
        tty.setcbreak(fd, termios.TCSANOW)
        out.write(HIDE_CURSOR)
        draw()
        while True:
            try:
                key = keys.next()
            except EOFError:
                return None
            if key in ENTER:
                return selected
            if key in CANCEL:
                return None
            last = len(rows) - 1
            if key in UP:
                selected = max(0, selected - 1)
            elif key in DOWN:
                selected = min(last, selected + 1)
            elif key in PAGE_UP:
                selected = max(0, selected - visible)
            elif key in PAGE_DOWN:
                selected = min(last, selected + visible)
            elif key in HOME:
                selected = 0
            elif key in END:
                selected = last
            else:
                continue
            draw()
    finally:
        if drawn:
            erase()
        else:
            out.write(SHOW_CURSOR)
            out.flush()
        termios.tcsetattr(fd, termios.TCSADRAIN, saved)


def _home(drawn: int) -> str:
    """Back to the first column of the first line drawn."""
    return f"\r\x1b[{drawn - 1}A" if drawn > 1 else "\r"


def _clip(text: str, width: int) -> str:
    flat = " ".join(text.split()) if "\n" in text or "\t" in text else text
    return flat if len(flat) <= width else flat[: width - 1] + "…"
