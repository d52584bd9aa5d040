"""The packet core: error messages, parsing, lenient mode, canonical form, defaults."""

from __future__ import annotations

import json
import pickle
import re
import subprocess
import sys
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError
from ulid import ULID

from ltm.packet import (
    CURRENT_VERSION,
    MAX_PACKET_BYTES,
    MAX_TEXT_BYTES,
    SUPPORTED_VERSIONS,
    Checked,
    PacketError,
    PacketV01,
    PacketV02,
    canonical_bytes,
    check,
    created_at_sort_key,
    fill_defaults,
    new_id,
    parse,
)

SETTINGS = settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
EXAMPLES = Path(__file__).resolve().parents[1] / "spec" / "examples"  # published (spec/README.md)


def packet(version: str = "0.2", **fields: Any) -> dict[str, Any]:
    return {
        "ltm_version": version,
        "id": "01JS5LTMEXAMPLEPACKET00001A",
        "created_at": "2026-04-22T00:00:00Z",
        "goal": "Ship the packet core.",
        "next_step": "Write the tests.",
        **fields,
    }


def errors_of(data: Any) -> list[str]:
    with pytest.raises(PacketError) as raised:
        check(data)
    return raised.value.errors


def test_constants() -> None:
    assert SUPPORTED_VERSIONS == ("0.1", "0.2")
    assert CURRENT_VERSION == "0.2"
    assert MAX_PACKET_BYTES == 32_768
    from ltm import limits

    assert limits.MAX_BODY == MAX_PACKET_BYTES  # every route takes one push of a whole packet


# --------------------------------------------------------------------------
# Error messages: every problem, each as "path: reason"


def test_all_errors_at_once_with_paths_and_reasons() -> None:
    bad = packet(
        attempts=[
            {"tried": "a", "outcome": "failed"},
            {"tried": "b", "outcome": "partial"},
            {"tried": "c", "outcome": "won"},
        ],
        tags=["docs\n", "ok"],
        decisions=[{"what": "w", "why": "y"}, {"what": "w", "why": "y", "foo": 1}],
    )
    del bad["goal"]
    with pytest.raises(PacketError) as raised:
        check(bad)
    assert raised.value.errors == [
        "goal: required",
        "decisions[1]: unknown field 'foo'",
        "attempts[2].outcome: must be one of succeeded, failed, partial",
        "tags[0]: must match ^[a-z0-9][a-z0-9-]{0,31}$",
    ]
    assert str(raised.value) == "; ".join(raised.value.errors)
    assert isinstance(raised.value, ValueError)


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"goal": 5}, "goal: must be a string"),
        ({"goal": ""}, "goal: must not be empty"),
        ({"goal": "x" * 1025}, "goal: must be at most 1024 characters (got 1025)"),
        ({"goal": "😀" * 1025}, "goal: must be at most 1024 characters (got 1025)"),
        ({"id": "x" * 9}, "id: must be at least 10 characters (got 9)"),
        ({"id": 1234567890}, "id: must be a string"),
        ({"created_at": "2026-04-22"}, "created_at: must be an RFC 3339 date-time"),
        ({"created_at": "2026-04-22T00:00:00Z\n"}, "created_at: must be an RFC 3339 date-time"),
        ({"project": []}, "project: must be an object"),
        ({"project": None}, "project: must not be null (omit the field instead)"),
        ({"project": {"name": "x" * 129}}, "project.name: must be at most 128 characters"),
        ({"tags": "docs"}, "tags: must be an array"),
        ({"tags": ["a"] * 17}, "tags: must have at most 16 items (got 17)"),
        (
            {"decisions": [{"what": "w", "why": "y", "locked": "yes"}]},
            "decisions[0].locked: must be a boolean",
        ),
        (
            {"decisions": [{"what": "w", "why": "y", "locked": 1}]},
            "decisions[0].locked: must be a boolean",
        ),
        ({"decisions": ["w"]}, "decisions[0]: must be an object"),
        ({"decisions": [{"why": "y"}]}, "decisions[0].what: required"),
        (
            {"methods": [{"name": "X", "when_applicable": "w", "how": "h"}]},
            "methods[0].name: must match",
        ),
        (
            {"provenance": {"confidence": "sure"}},
            "provenance.confidence: must be one of low, medium, high",
        ),
        ({"provenance": {"source_hash": "sha256:"}}, "provenance.source_hash: must match"),
        ({"foo": 1}, "packet: unknown field 'foo'"),
        ({"project": {"url": "x"}}, "project: unknown field 'url'"),
    ],
)
def test_single_error_messages(fields: dict[str, Any], message: str) -> None:
    errors = errors_of(packet(**fields))
    assert len(errors) == 1
    assert errors[0].startswith(message), errors


def test_too_many_items_still_reports_the_bad_items() -> None:
    # pydantic stops at the length; check() goes on to the items themselves.
    errors = errors_of(packet(tags=["ok"] * 16 + ["docs\n"], attempts=[{"tried": 1}] * 65))
    assert errors[:2] == [
        "attempts: must have at most 64 items (got 65)",
        "tags: must have at most 16 items (got 17)",
    ]
    assert "tags[16]: must match ^[a-z0-9][a-z0-9-]{0,31}$" in errors
    assert "attempts[64].tried: must be a string" in errors
    assert "attempts[0].outcome: required" in errors
    assert len(errors) == 2 + 1 + 65 * 2


def test_v02_fields_in_a_v01_packet_are_named_as_such() -> None:
    errors = errors_of(
        packet(
            "0.1",
            parent_id="01JS5LTMEXAMPLEPACKET00000Z",
            decisions=[{"what": "w", "why": "y", "consequences": "c"}],
            attempts=[{"tried": "t", "outcome": "failed", "confidence": "low"}],
            methods=[],
        )
    )
    assert sorted(errors) == [
        "attempts[0]: field 'confidence' needs ltm_version 0.2 (not part of 0.1)",
        "decisions[0]: field 'consequences' needs ltm_version 0.2 (not part of 0.1)",
        "packet: field 'methods' needs ltm_version 0.2 (not part of 0.1)",
        "packet: field 'parent_id' needs ltm_version 0.2 (not part of 0.1)",
    ]
    # The same packet declared 0.2 is fine.
    assert check(packet(parent_id="01JS5LTMEXAMPLEPACKET00000Z", methods=[])).conforming


@pytest.mark.parametrize(
    ("version", "message"),
    [
        ("0.9", "ltm_version: unsupported version '0.9'; supported: 0.1, 0.2"),
        ("1.0", "ltm_version: unsupported version '1.0'; supported: 0.1, 0.2"),
        ("", "ltm_version: unsupported version ''; supported: 0.1, 0.2"),
        (0.2, "ltm_version: must be a string (supported: 0.1, 0.2)"),
        (None, "ltm_version: must be a string (supported: 0.1, 0.2)"),
    ],
)
def test_unsupported_versions_name_the_supported_ones(version: Any, message: str) -> None:
    # ...and the rest of the packet is still checked, so nothing is hidden.
    assert errors_of(packet(version, goal="")) == [message, "goal: must not be empty"]


def test_missing_version() -> None:
    data = packet()
    del data["ltm_version"]
    assert errors_of(data) == ["ltm_version: required (supported: 0.1, 0.2)"]


def test_long_values_are_truncated_in_messages() -> None:
    (message,) = errors_of(packet(**{"k" * 500: 1}))
    assert len(message) < 80
    (message,) = errors_of(packet("9" * 500))
    assert len(message) < 120


def compact_size(data: dict[str, Any]) -> int:
    return len(json.dumps(data, ensure_ascii=False, separators=(",", ":")).encode())


def test_size_cap_applies_to_the_compact_encoding() -> None:
    big = packet(constraints=["x" * 1024] * 32, open_questions=["y" * 1024] * 8)
    size = compact_size(big)
    assert size > MAX_PACKET_BYTES
    assert errors_of(big) == [f"packet: {size} bytes, over the 32768-byte limit"]


def near_the_cap() -> dict[str, Any]:
    """A packet whose compact form fits the cap and whose indented forms do not."""
    near = packet(tags=["a"] * 16, constraints=["c<&>" * 250] * 32, open_questions=["q"])
    near["open_questions"][0] = "q" * (1 + MAX_PACKET_BYTES - 20 - compact_size(near))
    assert compact_size(near) <= MAX_PACKET_BYTES < len(canonical_bytes(near))
    return near


def test_indentation_alone_never_pushes_a_packet_over_the_cap() -> None:
    # Many short items: the compact form fits, the indented canonical form does not.
    near = near_the_cap()
    assert check(near).conforming
    over = {**near, "open_questions": [near["open_questions"][0] + "q" * 30]}
    assert compact_size(over) > MAX_PACKET_BYTES
    assert errors_of(over) == [f"packet: {compact_size(over)} bytes, over the 32768-byte limit"]


def test_check_encodes_the_canonical_bytes_it_measures() -> None:
    checked = check(packet(goal="é" * 10))
    assert checked.body() == canonical_bytes(checked.data)


def test_packet_error_pickles_and_takes_a_single_message() -> None:
    error = PacketError(["a: x", "b: y"])
    again = pickle.loads(pickle.dumps(error))
    assert again.errors == ["a: x", "b: y"] and str(again) == "a: x; b: y"
    assert PacketError("packet: must be a JSON object").errors == ["packet: must be a JSON object"]


# --------------------------------------------------------------------------
# check(): strict and lenient


def test_check_returns_a_plain_copy() -> None:
    data = packet(tags=["a"])
    checked = check(data)
    assert checked == Checked(data, ())
    assert checked.conforming and checked.version == "0.2"
    data["tags"].append("b")
    assert checked.data["tags"] == ["a"]


@pytest.mark.parametrize(
    "data",
    [
        packet(tags=["a", "é"]),
        packet("0.9", goal=5, extra={"b": 1, "a": 2}),
        packet(goal="\u2028 \U0001f600", tags=[]),
    ],
)
def test_check_takes_a_parsed_packet_as_it_is_and_judges_it_alike(data: dict[str, Any]) -> None:
    parsed = parse(json.dumps(data))
    checked = check(parsed, lenient=True, parsed=True)
    assert checked.data is parsed  # parse made it plain: no second copy
    assert checked == check(parse(json.dumps(data)), lenient=True)
    assert checked.body() == check(data, lenient=True).body()
    if checked.errors:
        with pytest.raises(PacketError):
            check(parsed, parsed=True)


def test_lenient_flags_instead_of_raising() -> None:
    bad = packet("0.9", goal=5, extra={"b": 1, "a": 2})
    checked = check(bad, lenient=True)
    assert not checked.conforming
    assert checked.version == "0.9"
    assert checked.errors == (
        "ltm_version: unsupported version '0.9'; supported: 0.1, 0.2",
        "goal: must be a string",
        "packet: unknown field 'extra'",
    )
    assert checked.data == bad
    with pytest.raises(PacketError) as raised:
        check(bad)
    assert tuple(raised.value.errors) == checked.errors


def test_lenient_reports_the_size_cap_too() -> None:
    big = packet(constraints=["x" * 1024] * 32, open_questions=["y" * 1024] * 8)
    checked = check(big, lenient=True)
    assert not checked.conforming
    assert checked.errors[0].endswith("over the 32768-byte limit")


def test_version_is_none_when_absent_or_not_a_string() -> None:
    assert check({"goal": "g"}, lenient=True).version is None
    assert check(packet(5), lenient=True).version is None


@pytest.mark.parametrize("data", [[], "x", None, 5, [packet()]])
def test_not_an_object_raises_even_when_lenient(data: Any) -> None:
    with pytest.raises(PacketError, match=r"^packet: must be a JSON object$"):
        check(data, lenient=True)


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (packet(goal="\ud800"), "goal: contains a lone surrogate (not valid Unicode)"),
        (packet(tags=["a", "\udfff"]), "tags[1]: contains a lone surrogate (not valid Unicode)"),
        ({**packet(), 1: "x"}, "packet: key 1 is not a string"),
        (packet(project={"name": "n", 2: "x"}), "project: key 2 is not a string"),
        (packet(extra=float("nan")), "packet: cannot be encoded as JSON"),
        (packet(extra={1, 2}), "packet: cannot be encoded as JSON"),
    ],
)
def test_unusable_data_raises_even_when_lenient(data: dict[Any, Any], message: str) -> None:
    with pytest.raises(PacketError) as raised:
        check(data, lenient=True)
    assert raised.value.errors[0].startswith(message)


def test_a_mapping_that_is_not_a_dict() -> None:
    from types import MappingProxyType

    checked = check(MappingProxyType(packet(project=MappingProxyType({"name": "n"}))))
    assert type(checked.data) is dict and type(checked.data["project"]) is dict


def test_models_alone_are_strict_and_use_ecma_anchors() -> None:
    base = packet()
    assert PacketV02.model_validate(base).goal == base["goal"]
    for bad in (
        {**base, "tags": ["docs\n"]},
        {**base, "goal": 5},
        {**base, "decisions": [{"what": "w", "why": "y", "locked": "yes"}]},
        {**base, "project": None},
        {**base, "goal": "😀" * 1025},
        {**base, "foo": 1},
    ):
        with pytest.raises(ValidationError):
            PacketV02.model_validate(bad)
    assert PacketV02.model_validate({**base, "goal": "😀" * 1024})
    with pytest.raises(ValidationError):
        PacketV01.model_validate(base)  # ltm_version must be "0.1"


def test_model_json_schema_is_usable_as_tool_input_schema() -> None:
    schema = PacketV02.model_json_schema()
    text = json.dumps(schema)
    assert '"null"' not in text and "anyOf" not in text  # optional, never nullable
    assert schema["properties"]["created_at"] == {
        "format": "date-time",
        "title": "Created At",
        "type": "string",
    }
    assert schema["additionalProperties"] is False
    assert schema["required"] == ["ltm_version", "id", "created_at", "goal", "next_step"]


# --------------------------------------------------------------------------
# parse()


def test_parse_accepts_bytes_str_bytearray_memoryview() -> None:
    raw = json.dumps(packet(goal="héllo")).encode()
    for form in (raw, raw.decode(), bytearray(raw), memoryview(raw)):
        assert parse(form) == packet(goal="héllo")
    with pytest.raises(TypeError):
        parse(packet())  # type: ignore[arg-type]


def go_encoded(data: dict[str, Any]) -> bytes:
    """The bytes a reference server answers ``GET /v1/packets/{id}`` with: Go's
    ``json.Encoder`` with a two-space indent, ``<``, ``>`` and ``&`` escaped."""
    text = json.dumps(data, indent=2, ensure_ascii=False)
    for char, escape in (("<", "\\u003c"), (">", "\\u003e"), ("&", "\\u0026")):
        text = text.replace(char, escape)
    return text.encode()


def test_a_packet_at_the_cap_parses_from_any_indented_text() -> None:
    # What a store hands back (canonical, indented) and what a reference server does
    # (indented, escaped) can be longer than the cap: the packet must still parse, or
    # `ltm pull ID -o f.json` then `ltm push f.json` would refuse the packet just pulled.
    near = near_the_cap()
    for raw in (canonical_bytes(near), go_encoded(near), json.dumps(near, indent="\t").encode()):
        assert len(raw) > MAX_PACKET_BYTES
        assert check(parse(raw)).data == near


def test_parse_bounds_the_text_before_decoding_and_check_caps_the_packet() -> None:
    raw = json.dumps(packet()).encode()
    padded = raw + b" " * (MAX_TEXT_BYTES - len(raw))
    assert parse(padded) == packet()  # whitespace is the writer's: it never counts
    with pytest.raises(PacketError) as raised:
        parse(padded + b" ")
    assert raised.value.errors == [f"packet: {MAX_TEXT_BYTES + 1} bytes, over the 32768-byte limit"]
    # Garbage past the bound is too large, not "not JSON" or "not UTF-8".
    with pytest.raises(PacketError, match=r"^packet: 300000 bytes, over the 32768-byte limit$"):
        parse(b"\xff" * 300_000)
    # A str counts as its UTF-8 bytes, not its characters; the cap is check()'s.
    text = '{"goal": "' + "é" * 16_380 + '"}'
    assert len(text) < MAX_PACKET_BYTES < len(text.encode())
    assert errors_of(parse(text))[-1] == "packet: 32771 bytes, over the 32768-byte limit"


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        (b"", "packet: empty (no JSON at all)"),
        (b" \n\t", "packet: empty (no JSON at all)"),
        (b'{\n  "goal": \n}', "packet: not valid JSON (line 3, column 1: Expecting value)"),
        (b'{"goal": "x",}', "packet: not valid JSON (line 1, column 14: "),
        (b"{'goal': 'x'}", "packet: not valid JSON (line 1, column 2: Expecting property name"),
        (b'{"a": 1} {"b": 2}', "packet: not valid JSON (line 1, column 10: Extra data)"),
        (b'{"a": "\x01"}', "packet: not valid JSON (line 1, column 8: Invalid control character"),
        (b'{"a": NaN}', "packet: not valid JSON (NaN is not JSON)"),
        (b'{"a": -Infinity}', "packet: not valid JSON (-Infinity is not JSON)"),
        (b'{"a": 1e400}', "packet: not valid JSON (number 1e400 is out of range)"),
        (
            b'{"a": ' + b"9" * 5000 + b"}",
            "packet: not valid JSON (integer of 5000 digits is too long)",
        ),
        (b"[" * 20_000, "packet: not valid JSON (nested too deeply)"),
        (b"[]", "packet: must be a JSON object"),
        (b'"packet"', "packet: must be a JSON object"),
        (b"42", "packet: must be a JSON object"),
        (b"null", "packet: must be a JSON object"),
        (b"true", "packet: must be a JSON object"),
        (b'{"goal": "\xff"}', "packet: not valid UTF-8 (byte 0xff at offset 10)"),
        (b'{"goal": "\xc3"}', "packet: not valid UTF-8 (byte 0xc3 at offset 10)"),
        (b'{"goal": "\xed\xa0\x80"}', "packet: not valid UTF-8 (byte 0xed at offset 10)"),
        (b'{"goal": "\xc0\xaf"}', "packet: not valid UTF-8 (byte 0xc0 at offset 10)"),
        (b"\xff\xfe{\x00}\x00", "packet: not valid UTF-8 (byte 0xff at offset 0)"),  # UTF-16
        ('{"goal": "\udc80"}', "packet: not valid UTF-8 (lone surrogate at character 10)"),
        (b'{"goal": "\\ud800"}', "goal: contains a lone surrogate (not valid Unicode)"),
        (b'{"a": {"b": ["\\udc00"]}}', "a.b[0]: contains a lone surrogate (not valid Unicode)"),
        # Escapes in upper case, in a key, deep in a list: parse walks what it made only
        # when the text holds such an escape, so each form must make it walk.
        (b'{"goal": "\\uD800"}', "goal: contains a lone surrogate (not valid Unicode)"),
        (b'{"\\uDFFF": "x"}', "packet: a key contains a lone surrogate"),
        (b'{"a": [{"b": "\\uDbff"}]}', "a[0].b: contains a lone surrogate (not valid Unicode)"),
    ],
)
def test_parse_errors(raw: bytes | str, message: str) -> None:
    with pytest.raises(PacketError) as raised:
        parse(raw)
    assert len(raised.value.errors) == 1
    assert raised.value.errors[0].startswith(message), raised.value.errors


def test_parse_rejects_duplicate_keys_at_any_depth() -> None:
    with pytest.raises(PacketError) as raised:
        parse(b'{"goal": "a", "project": {"name": "x", "name": "y"}, "goal": "b"}')
    assert raised.value.errors == ["packet: duplicate key 'name'", "packet: duplicate key 'goal'"]


def test_parse_odd_but_valid_json() -> None:
    assert parse(b'\xef\xbb\xbf{"a": 1}') == {"a": 1}  # one UTF-8 BOM is dropped
    assert parse(b'{"a": "\\ud83d\\ude00"}') == {"a": "😀"}  # an escaped surrogate pair
    assert parse(b' \r\n\t{"a": [1.5, -0, 1e2, true, null]} \n') == {
        "a": [1.5, 0, 100.0, True, None]
    }


def test_parse_only_judges_syntax() -> None:
    assert parse(b'{"ltm_version": "0.9"}') == {"ltm_version": "0.9"}


# --------------------------------------------------------------------------
# canonical_bytes()


def _example(name: str) -> bytes:
    return (EXAMPLES / name).read_bytes()


@pytest.mark.parametrize("name", ["example.v0.2.json", "reference-benchmark.v0.1.json"])
def test_canonical_form_of_the_published_examples(name: str) -> None:
    data = parse(_example(name))
    out = canonical_bytes(data)
    assert out == json.dumps(data, indent=2, ensure_ascii=False).encode()  # already in order
    assert not out.endswith(b"\n") and out.startswith(b'{\n  "ltm_version": "')
    assert "—".encode() in out  # non-ASCII stays as is
    reordered = dict(reversed(list(data.items())))
    reordered["decisions"] = [dict(reversed(list(d.items()))) for d in data["decisions"]]
    assert canonical_bytes(reordered) == out
    assert canonical_bytes(parse(out)) == out


_SCALARS = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text()
)
_KEYS = st.sampled_from(
    ["goal", "decisions", "what", "why", "tags", "project", "name", "zz", "a", "é", ""]
) | st.text(max_size=8)
_TREES = st.recursive(
    _SCALARS,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_KEYS, inner, max_size=5),
    max_leaves=30,
)


# Shaped as packets are: the schema's objects with their keys in any order, and now and
# then a value of another type, an unknown key or a nested list.
_LEAF_VALUES = (
    st.text() | st.booleans() | st.sampled_from([None, 1, 2.5, [], {}, ["x"], {"k": "v"}])
)
_SCHEMA_OBJECTS = {
    "project": ("name", "ref"),
    "provenance": ("author_model", "author_human", "source_hash", "confidence"),
    "decisions": ("what", "why", "consequences", "locked"),
    "methods": ("name", "when_applicable", "how"),
    "attempts": ("tried", "outcome", "learned", "confidence"),
}


@st.composite
def _schema_object(draw: st.DrawFn, keys: tuple[str, ...]) -> dict[str, Any]:
    chosen = draw(st.lists(st.sampled_from([*keys, "zz"]), unique=True, max_size=5))
    if draw(st.booleans()):
        chosen = [k for k in keys if k in chosen]  # the schema's order
    plain = draw(st.booleans())
    return {k: draw(st.text() | st.booleans() if plain else _LEAF_VALUES) for k in chosen}


@st.composite
def _packet_shaped(draw: st.DrawFn) -> dict[str, Any]:
    data: dict[str, Any] = {"goal": draw(st.text()), "tags": draw(st.lists(st.text(), max_size=3))}
    for name, keys in _SCHEMA_OBJECTS.items():
        one = _schema_object(keys)
        if name in ("project", "provenance"):
            data[name] = draw(one)
        else:
            data[name] = draw(st.lists(one | st.text(), max_size=3))
    data["constraints"] = draw(st.lists(st.text() | st.integers(), max_size=3))
    if draw(st.booleans()):
        data = dict(reversed(list(data.items())))
    return data


@pytest.mark.parametrize(
    "data",
    [
        {"goal": float("nan")},
        {"goal": [1, {"x": float("inf")}]},
        {"zz": {1.5: "a", None: "b", True: "c", 2: "d"}},
        {"goal": '\u2028 \x00 \ud800 "quoted" \\ é'},
        {"zz": {"k": object()}},
    ],
)
def test_canonical_bytes_refuse_what_json_cannot_carry(data: dict[str, Any]) -> None:
    with pytest.raises((TypeError, ValueError)):
        canonical_bytes(data)


def test_canonical_order_at_every_level() -> None:
    scrambled = {
        "provenance": {"confidence": "low", "author_model": "m"},
        "tags": ["b", "a"],
        "next_step": "n",
        "attempts": [{"learned": "l", "outcome": "failed", "tried": "t", "confidence": "low"}],
        "methods": [{"how": "h", "name": "n", "when_applicable": "w"}],
        "decisions": [{"locked": True, "consequences": "c", "why": "y", "what": "w"}],
        "goal": "g",
        "project": {"ref": "r", "name": "n"},
        "created_at": "2026-04-22T00:00:00Z",
        "parent_id": "0123456789",
        "id": "0123456789",
        "ltm_version": "0.2",
    }
    keys = re.findall(rb'"(\w+)":', canonical_bytes(scrambled))
    assert [k.decode() for k in keys] == [
        *("ltm_version", "id", "parent_id", "created_at", "project", "name", "ref", "goal"),
        *("decisions", "what", "why", "consequences", "locked"),
        *("methods", "name", "when_applicable", "how"),
        *("attempts", "tried", "outcome", "learned", "confidence"),
        *("next_step", "tags", "provenance", "author_model", "confidence"),
    ]
    assert b'"tags": [\n    "b",\n    "a"\n  ]' in canonical_bytes(scrambled)  # items keep order


def test_unknown_keys_go_last_sorted_and_sorted_inside() -> None:
    data = {
        "zeta": {"b": 1, "a": [{"d": 1, "c": 2}]},
        "goal": "g",
        "alpha": 1,
        "ltm_version": "0.2",
    }
    data["decisions"] = [{"why": "y", "zz": 1, "what": "w", "aa": 2}, "not an object"]
    text = canonical_bytes(data).decode()
    order = [m.group(1) for m in re.finditer(r'"(\w+)":', text)]
    assert order == [
        *("ltm_version", "goal", "decisions", "what", "why", "aa", "zz"),
        *("alpha", "zeta", "a", "c", "d", "b"),
    ]
    assert '"not an object"' in text


def test_canonical_encoding_details() -> None:
    out = canonical_bytes(packet(goal='é\u2028\x00"\\ 😀'))
    assert '"goal": "é\u2028\\u0000\\"\\\\ 😀"'.encode() in out
    assert b"\n  " in out and b"\n   " not in out.split(b"[")[0]  # two-space indent
    with pytest.raises(ValueError):
        canonical_bytes(packet(goal=float("inf")))


def _key_orders(value: Any) -> Any:
    """``value`` with every object as the list of its items: equal only in the same order."""
    if isinstance(value, dict):
        return [(k, _key_orders(v)) for k, v in value.items()]
    if isinstance(value, list | tuple):
        return (type(value).__name__, [_key_orders(v) for v in value])
    return value


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_packet_shaped() | st.dictionaries(_KEYS, _TREES, max_size=8))
def test_encode_says_when_the_data_decodes_back_as_it_is(data: dict[str, Any]) -> None:
    # ``ordered`` lets a store take the data for what its bytes decode to (Store.derive):
    # it must never be said of data that does not decode back the same, key order included.
    from ltm.packet import encode

    try:
        body, ordered = encode(data)
    except (TypeError, ValueError):
        return
    back = json.loads(body)
    assert ordered == (_key_orders(back) == _key_orders(data))
    assert encode(back) == (body, True)  # what the bytes decode to is ordered


def test_encode_is_not_ordered_for_tuples_or_other_mappings() -> None:
    from types import MappingProxyType

    from ltm.packet import encode

    assert encode({"goal": "g", "tags": ["a"]})[1]
    assert not encode({"goal": "g", "tags": ("a",)})[1]
    assert not encode({"goal": "g", "project": MappingProxyType({"name": "n"})})[1]
    assert not encode({"tags": ["a"], "goal": "g"})[1]


# Strategies for round trips: valid packets, and arbitrary JSON objects.
_TEXT = st.text(max_size=40)
_VALID = st.fixed_dictionaries(
    {
        "ltm_version": st.sampled_from(SUPPORTED_VERSIONS),
        "id": st.text(min_size=10, max_size=64),
        "created_at": st.just("2026-04-22T00:00:00+02:00"),
        "goal": st.text(min_size=1, max_size=200),
        "next_step": st.text(min_size=1, max_size=200),
    },
    optional={
        "project": st.fixed_dictionaries({}, optional={"name": _TEXT, "ref": _TEXT}),
        "constraints": st.lists(_TEXT, max_size=32),
        "decisions": st.lists(
            st.fixed_dictionaries(
                {"what": _TEXT, "why": _TEXT}, optional={"locked": st.booleans()}
            ),
            max_size=8,
        ),
        "attempts": st.lists(
            st.fixed_dictionaries(
                {"tried": _TEXT, "outcome": st.sampled_from(["succeeded", "failed", "partial"])},
                optional={"learned": _TEXT},
            ),
            max_size=8,
        ),
        "open_questions": st.lists(_TEXT, max_size=5),
        "tags": st.lists(st.from_regex(r"[a-z0-9][a-z0-9-]{0,31}", fullmatch=True), max_size=16),
        "provenance": st.fixed_dictionaries(
            {}, optional={"author_model": _TEXT, "confidence": st.sampled_from(["low", "high"])}
        ),
    },
)
_JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=20),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=20,
)
_ANY_OBJECT = st.dictionaries(
    st.sampled_from(["goal", "project", "decisions", "tags", "attempts", "zz", "a"])
    | st.text(max_size=8),
    _JSON,
    max_size=8,
)


@SETTINGS
@given(_VALID, st.randoms(use_true_random=False))
def test_valid_packets_round_trip_byte_identical(data: dict[str, Any], rnd: Any) -> None:
    checked = check(data)
    out = canonical_bytes(checked.data)
    assert canonical_bytes(parse(out)) == out
    assert parse(out) == data
    items = list(data.items())
    rnd.shuffle(items)
    assert canonical_bytes(dict(items)) == out  # key order in, one form out


@SETTINGS
@given(_ANY_OBJECT)
def test_any_json_object_round_trips_byte_identical(data: dict[str, Any]) -> None:
    out = canonical_bytes(data)
    assert not out.endswith(b"\n")
    assert canonical_bytes(parse(out)) == out
    assert parse(out) == json.loads(out)


# --------------------------------------------------------------------------
# fill_defaults() and new_id()

STAMP = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z")


def test_fill_defaults_lets_an_agent_send_only_content() -> None:
    content = {"goal": "g", "next_step": "n", "tags": ["a"]}
    filled = fill_defaults(content)
    assert filled["ltm_version"] == CURRENT_VERSION
    assert str(ULID.from_str(filled["id"])) == filled["id"]
    assert STAMP.fullmatch(filled["created_at"])
    stamp = datetime.strptime(filled["created_at"], "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
    assert abs(datetime.now(UTC) - stamp) < timedelta(minutes=1)
    assert check(filled).conforming
    assert content == {"goal": "g", "next_step": "n", "tags": ["a"]}  # input untouched
    filled["tags"].append("b")
    assert content["tags"] == ["a"]  # a deep copy


def test_fill_defaults_never_overwrites() -> None:
    given_values = {"ltm_version": "0.1", "id": None, "created_at": "yesterday", "goal": "g"}
    assert fill_defaults(given_values) == given_values
    partial = fill_defaults({"id": "0123456789ABCDEF"})
    assert partial["id"] == "0123456789ABCDEF" and partial["ltm_version"] == "0.2"


@pytest.mark.parametrize(
    ("now", "stamp"),
    [
        (datetime(2026, 4, 22, 12, 30, 15, 999_999, tzinfo=UTC), "2026-04-22T12:30:15Z"),
        (datetime(2026, 4, 22, 1, 0, tzinfo=timezone(timedelta(hours=2))), "2026-04-21T23:00:00Z"),
        (datetime(2026, 4, 22, 1, 0), "2026-04-22T01:00:00Z"),  # naive: taken as UTC
    ],
)
def test_fill_defaults_now(now: datetime, stamp: str) -> None:
    assert fill_defaults({}, now=now)["created_at"] == stamp


def test_new_id_is_a_fresh_ulid() -> None:
    ids = [new_id() for _ in range(1000)]
    assert len(set(ids)) == 1000
    assert all(len(i) == 26 and str(ULID.from_str(i)) == i for i in ids)
    assert ULID.from_str(ids[0]).timestamp <= ULID.from_str(ids[-1]).timestamp
    assert ids == sorted(ids)  # many a millisecond: each is the last plus one, as python-ulid's
    assert abs(ULID.from_str(ids[0]).datetime - datetime.now(UTC)) < timedelta(minutes=1)


# --------------------------------------------------------------------------
# created_at_sort_key()


@pytest.mark.parametrize(
    ("value", "key"),
    [
        ("2026-04-22T00:00:00Z", "2026-04-22T00:00:00.000000Z"),
        ("2026-04-22t00:00:00z", "2026-04-22T00:00:00.000000Z"),
        ("2026-04-22T01:30:00+02:00", "2026-04-21T23:30:00.000000Z"),
        ("2026-04-21T22:00:00-05:30", "2026-04-22T03:30:00.000000Z"),
        ("2026-04-22T00:00:00-00:00", "2026-04-22T00:00:00.000000Z"),
        ("2026-04-22T00:00:00.5Z", "2026-04-22T00:00:00.500000Z"),
        ("2026-04-22T00:00:00.123456789Z", "2026-04-22T00:00:00.123456Z"),
        ("2024-12-31T23:59:59.999999-01:00", "2025-01-01T00:59:59.999999Z"),
        ("0001-01-01T00:00:00+01:00", "0000-12-31T23:00:00.000000Z"),
        ("0009-01-01T00:00:00Z", "0009-01-01T00:00:00.000000Z"),
        ("9999-12-31T23:00:00-01:00", "9999-12-31T23:59:59.999999Z"),  # clamped
    ],
)
def test_created_at_sort_key(value: str, key: str) -> None:
    assert created_at_sort_key(value) == key


@pytest.mark.parametrize(
    "value", ["", "yesterday", "2026-04-22", "2026-02-30T00:00:00Z", "2026-04-22T00:00:00Z\n", 5]
)
def test_created_at_sort_key_rejects_non_rfc3339(value: Any) -> None:
    with pytest.raises(ValueError, match="not an RFC 3339 date-time"):
        created_at_sort_key(value)


_MOMENTS = st.tuples(
    st.datetimes(min_value=datetime(1, 1, 2), max_value=datetime(9999, 12, 30)),
    st.integers(-(23 * 60 + 59), 23 * 60 + 59),
)


def _rfc3339(moment: datetime, offset_minutes: int) -> str:
    sign = "-" if offset_minutes < 0 else "+"
    hours, minutes = divmod(abs(offset_minutes), 60)
    return (
        f"{moment.year:04d}-{moment:%m-%dT%H:%M:%S}.{moment.microsecond:06d}"
        f"{sign}{hours:02d}:{minutes:02d}"
    )


@SETTINGS
@given(_MOMENTS, _MOMENTS)
def test_sort_keys_order_like_the_instants(
    a: tuple[datetime, int], b: tuple[datetime, int]
) -> None:
    def instant(moment: datetime, offset: int) -> datetime:
        return moment.replace(tzinfo=timezone(timedelta(minutes=offset)))

    key_a, key_b = created_at_sort_key(_rfc3339(*a)), created_at_sort_key(_rfc3339(*b))
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z", key_a)
    assert (key_a < key_b) == (instant(*a) < instant(*b))
    assert (key_a == key_b) == (instant(*a) == instant(*b))
    assert key_a == instant(*a).astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ").rjust(27, "0")


# --------------------------------------------------------------------------
# Import cost


def test_import_is_light() -> None:
    code = (
        "import sys, ltm.packet; ltm.packet.new_id();"
        "print(sorted(m for m in ('ulid', 'jsonschema', 'hypothesis') if m in sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert out.strip() == "[]"  # ids are minted without python-ulid (its import reads metadata)


def test_a_conforming_packet_is_judged_without_pydantic() -> None:
    """The plain checks judge a conforming packet; the pydantic models (ltm.models) are
    imported only to name what is wrong with one that is not."""
    code = (
        "import sys, json; from ltm import packet\n"
        f"data = packet.parse(open({str(EXAMPLES / 'example.v0.2.json')!r}, 'rb').read())\n"
        "assert packet.check(data).conforming\n"
        "print('pydantic' in sys.modules, end=' ')\n"
        "data['tags'] = ['Docs']\n"
        "print(packet.check(data, lenient=True).errors, 'pydantic' in sys.modules)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert out.strip() == "False ('tags[0]: must match ^[a-z0-9][a-z0-9-]{0,31}$',) True"
