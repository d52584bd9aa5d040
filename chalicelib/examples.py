"""The sample v0.2 packet published with the reference (``ltm example``).

Two forms. The reference's example exactly (``example_bytes``: its fixed id,
its April ``created_at``, its project ``ltm-example``), for ``ltm example
--reference`` and the example's resume block. And the form to copy from
(``template_bytes``): the same content without ``id``, ``created_at`` and
``project``, which ``ltm save`` (and the MCP ``save`` tool) fill in with a new
id, the time of the save and the project of the directory. A copy of the
reference's bytes saved twice would replace the first packet under its fixed
id, date itself in the past (so never list as the newest) and claim another
project.
"""

from __future__ import annotations

import json
from pathlib import Path

EXAMPLE_PATH = Path(__file__).with_name("example.json")
# What save fills in when absent: left out of the copy, so each save makes a new packet.
FILLED_BY_SAVE = ("id", "created_at", "project")


def example_bytes() -> bytes:
    """The example exactly as published, ending in a newline."""
    raw = EXAMPLE_PATH.read_bytes()
    return raw if raw.endswith(b"\n") else raw + b"\n"


def template_bytes() -> bytes:
    """The example to copy from: its content, without what ``save`` fills in."""
    data = json.loads(EXAMPLE_PATH.read_bytes())
    kept = {key: value for key, value in data.items() if key not in FILLED_BY_SAVE}
    return (json.dumps(kept, ensure_ascii=False, indent=2) + "\n").encode("utf-8")
