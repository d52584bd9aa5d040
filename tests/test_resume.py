"""The resume block: attention order, locked vs tentative, failures flagged, next step last."""

from __future__ import annotations

import json
from pathlib import Path

from ltm.resume import render

EXAMPLE = json.loads((Path(__file__).parents[1] / "chalicelib" / "example.json").read_text())


def headings(block: str) -> list[str]:
    return [line[3:] for line in block.splitlines() if line.startswith("## ")]


def test_sections_in_attention_order() -> None:
    packet = {
        **EXAMPLE,
        "decisions": [
            {"what": "tentative one", "why": "maybe"},
            {"what": "locked one", "why": "settled", "locked": True},
        ],
        "attempts": [
            {"tried": "worked", "outcome": "succeeded"},
            {"tried": "broke", "outcome": "failed", "learned": "why it broke"},
            {"tried": "half", "outcome": "partial"},
        ],
    }
    assert headings(render(packet)) == [
        "Goal",
        "Done when",
        "Locked decisions (do not revisit)",
        "Failed attempts (do not retry without new information)",
        "Constraints",
        "Methods that worked (apply when the trigger matches)",
        "Attempts that worked",
        "Tentative decisions (revisit only with cause)",
        "Open questions",
        "Packet",
        "Next step (your first action)",
    ]


def test_locked_and_tentative_and_failures_land_in_their_sections() -> None:
    packet = {
        **EXAMPLE,
        "decisions": [
            {"what": "tentative one", "why": "maybe"},
            {"what": "locked one", "why": "settled", "locked": True},
        ],
        "attempts": [
            {"tried": "worked", "outcome": "succeeded"},
            {"tried": "broke", "outcome": "failed", "learned": "why it broke"},
            {"tried": "half", "outcome": "partial"},
        ],
    }
    block = render(packet)
    locked = block.split("## Locked decisions")[1].split("## ")[0]
    assert "locked one" in locked and "tentative one" not in locked
    failed = block.split("## Failed attempts")[1].split("## ")[0]
    assert "[failed] broke" in failed and "[partial] half" in failed and "worked" not in failed
    assert "Learned: why it broke" in failed
    assert "tentative one" in block.split("## Tentative decisions")[1]


def test_next_step_is_the_last_thing_read_and_the_preamble_says_so() -> None:
    block = render(EXAMPLE)
    assert block.rstrip().splitlines()[-1] == EXAMPLE["next_step"]
    assert "locked** are settled" in block
    assert "do not retry" in block
    assert "first action" in block.splitlines()[5]


def test_deterministic() -> None:
    assert render(EXAMPLE) == render(json.loads(json.dumps(EXAMPLE)))


def test_minimal_packet_has_only_what_it_carries() -> None:
    minimal = {
        "ltm_version": "0.1",
        "id": "01MINIMALPACKET00",
        "created_at": "2026-01-01T00:00:00Z",
        "goal": "g",
        "next_step": "n",
    }
    assert headings(render(minimal)) == ["Goal", "Packet", "Next step (your first action)"]


def test_multiline_values_stay_inside_their_bullet() -> None:
    packet = {**EXAMPLE, "constraints": ["line one\n## not a heading"]}
    block = render(packet)
    assert "## not a heading" not in headings(block)
    assert "- line one\n  ## not a heading" in block
