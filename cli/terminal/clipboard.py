"""Copy text to the system clipboard, or say in a few words why not."""

from __future__ import annotations

import sys


def copy(text: str) -> str | None:
    """None when the text is on the clipboard; otherwise the reason it is not."""
    try:
        import pyperclip
    except ImportError:
        return "pyperclip is missing from this installation; reinstall ltm"
    try:
        pyperclip.copy(text)
    except pyperclip.PyperclipException:
        if sys.platform.startswith("linux"):
            return "no clipboard tool found; install wl-clipboard, xclip or xsel"
        return "no clipboard available"
    except OSError as exc:
        return f"the clipboard tool failed: {exc.strerror or exc}"
    return None
