"""The sample v0.2 packet published with the reference (``ltm example``)."""

from __future__ import annotations

from pathlib import Path

EXAMPLE_PATH = Path(__file__).with_name("example.json")


def example_bytes() -> bytes:
    """The example exactly as published, ending in a newline."""
    raw = EXAMPLE_PATH.read_bytes()
    return raw if raw.endswith(b"\n") else raw + b"\n"
