"""Conformance: our models against the published JSON Schemas.

Every packet here is judged twice, by ``ltm.packet.check`` and by the schema
files the protocol publishes (copied into ``spec/schema/``, see spec/README.md)
through the ``jsonschema`` library, and the two verdicts must agree.
The corpus is a hand-written set of edge cases at every bound plus
hypothesis-generated packets (valid-leaning, mutated, and random objects).

The reference verdict is the published schema named by the packet's declared
``ltm_version``, plus two protocol rules the schemas cannot express (README,
"The packet"): a version without a published schema is rejected (the v0.1
schema's ``^\\d+\\.\\d+$`` alone would accept "0.9"), and the serialized
packet is at most 32 KiB.

Two deliberate refinements of the library, both the same pitfall: Python's
``re`` lets ``$`` match before a trailing newline, ECMA-262 (the regex
dialect JSON Schema specifies) does not.

* ``pattern``: jsonschema runs ``re.search(pattern, instance)``, which would
  accept the tag ``"docs\\n"``. The validator below swaps in a pattern check
  with ECMA-262 semantics (``$`` -> ``\\Z``, ASCII ``\\d``).
* ``format: date-time``: rfc3339-validator's regex ends in ``$`` too, so it
  accepts ``"2026-04-22T00:00:00Z\\n"``. The format checker below is the
  library's own, refined to reject a trailing newline; RFC 3339 allows
  nothing after the offset.

Strings with lone surrogates are kept out of the comparison: they are not
Unicode, cannot be encoded as UTF-8 (so the 32 KiB rule cannot even measure
them) and the schemas say nothing about them; test_packet.py checks that we
reject them.
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Iterator
from functools import cache
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator, FormatChecker, ValidationError
from jsonschema.validators import extend

from ltm.models import errors_of
from ltm.packet import (
    _SHAPES,
    PacketError,
    PacketV01,
    PacketV02,
    _routed,
    check,
    parse,
)

# The published files, carried in the repo (spec/README.md says where from). A
# missing one is an error at import: the conformance cases fail, never skip.
SPEC_DIR = Path(__file__).resolve().parents[1] / "spec"
SCHEMA_DIR = SPEC_DIR / "schema"
EXAMPLES_DIR = SPEC_DIR / "examples"
SCHEMA_FILES = {"0.1": "core-memory.v0.1.json", "0.2": "core-memory.v0.2.json"}

PROTOCOL_MAX_BYTES = 32 * 1024  # README, "The packet": serialized size at most 32 KiB


# --------------------------------------------------------------------------
# The reference judge: the published schemas through jsonschema


@cache
def _ecma_regex(pattern: str) -> re.Pattern[str]:
    """A Python regex with ECMA-262 semantics, for the constructs the schemas use."""
    if re.search(r"\\[sSpPu]|\(\?", pattern):  # constructs whose meaning differs; none used
        raise NotImplementedError(f"pattern needs a fuller ECMA-262 translation: {pattern}")
    out, i, in_class = [], 0, False
    while i < len(pattern):
        char = pattern[i]
        if char == "\\":
            out.append(pattern[i : i + 2])
            i += 2
            continue
        if in_class:
            in_class = char != "]"
        elif char == "[":
            in_class = True
        elif char == "$":
            char = r"\Z"  # ECMA `$` (no multiline flag): the very end, never before a "\n"
        out.append(char)
        i += 1
    return re.compile("".join(out), re.ASCII)  # ECMA `\d` is [0-9], not any Unicode digit


def _ecma_pattern(
    validator: Any, pattern: str, instance: Any, schema: dict[str, Any]
) -> Iterator[ValidationError]:
    if validator.is_type(instance, "string") and not _ecma_regex(pattern).search(instance):
        yield ValidationError(f"{instance!r} does not match {pattern!r}")


EcmaValidator = extend(Draft202012Validator, {"pattern": _ecma_pattern})

LIBRARY_FORMATS = Draft202012Validator.FORMAT_CHECKER
FORMATS = FormatChecker()


@FORMATS.checks("date-time")
def _date_time(instance: object) -> bool:
    if not isinstance(instance, str):
        return True
    return not instance.endswith("\n") and LIBRARY_FORMATS.conforms(instance, "date-time")


def _load(name: str) -> dict[str, Any]:
    return json.loads((SCHEMA_DIR / name).read_text(encoding="utf-8"))


SCHEMAS = {version: _load(name) for version, name in SCHEMA_FILES.items()}
VALIDATORS = {
    version: EcmaValidator(schema, format_checker=FORMATS) for version, schema in SCHEMAS.items()
}


def reference_accepts(packet: Any) -> bool:
    """The verdict of the published schemas (plus the two README rules)."""
    version = packet.get("ltm_version") if isinstance(packet, dict) else None
    if not isinstance(version, str):
        # Both schemas require a string version; they must agree it is invalid.
        assert not any(v.is_valid(packet) for v in VALIDATORS.values())
        return False
    validator = VALIDATORS.get(version)
    if validator is None:
        return False  # no published schema for it: rejected, never degraded
    if not validator.is_valid(packet):
        return False
    # The README caps the serialized size; whitespace is the writer's choice, so the
    # cap applies to the packet's compact serialization (a sender's bytes are never fewer).
    return len(_compact(packet)) <= PROTOCOL_MAX_BYTES


def our_verdict(packet: dict[str, Any]) -> bool:
    """check()'s verdict; lenient and strict mode must tell the same story, and so must
    the plain checks and the pydantic models (check() asks the models only when the
    plain checks find fault, so each must say "conforms" exactly when the other does)."""
    checked = check(packet, lenient=True)
    _, version, payload = _routed(checked.data)
    plain, models = _SHAPES[version](payload), not errors_of(payload, version)
    assert plain == models, f"plain checks say {plain}, the models say {models}"
    if checked.conforming:
        assert check(packet).errors == ()
    else:
        with pytest.raises(PacketError) as raised:
            check(packet)
        assert raised.value.errors == list(checked.errors)
        assert all(": " in message for message in checked.errors)
    return checked.conforming


def assert_agree(packet: dict[str, Any], expected: bool | None = None) -> None:
    ours, theirs = our_verdict(packet), reference_accepts(packet)
    detail = "" if ours else f" (ours: {check(packet, lenient=True).errors})"
    assert ours == theirs, f"check() says {ours}, published schema says {theirs}{detail}"
    if expected is not None:
        assert ours == expected, f"expected {'valid' if expected else 'invalid'}{detail}"


# --------------------------------------------------------------------------
# The harness itself


def test_schemas_are_valid_draft_2020_12() -> None:
    for schema in SCHEMAS.values():
        assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
        Draft202012Validator.check_schema(schema)


def test_format_checker_really_checks_date_time() -> None:
    # Without rfc3339-validator, jsonschema silently accepts any string as date-time.
    assert "date-time" in LIBRARY_FORMATS.checkers
    assert not LIBRARY_FORMATS.conforms("yesterday", "date-time")
    assert not FORMATS.conforms("2026-02-30T00:00:00Z", "date-time")
    assert FORMATS.conforms("2026-04-22T00:00:00Z", "date-time")
    # The refinement: the library alone lets a trailing newline through.
    assert LIBRARY_FORMATS.conforms("2026-04-22T00:00:00Z\n", "date-time")
    assert not FORMATS.conforms("2026-04-22T00:00:00Z\n", "date-time")


def test_pattern_check_has_ecma_semantics() -> None:
    tag = SCHEMAS["0.2"]["properties"]["tags"]["items"]
    assert re.search(tag["pattern"], "docs\n")  # Python's `$`: the pitfall
    tags = EcmaValidator({"items": tag}, format_checker=FORMATS)
    assert not tags.is_valid(["docs\n"])
    assert tags.is_valid(["docs"])
    assert not _ecma_regex(r"^\d+\.\d+$").search("٠.٢")  # Arabic-Indic digits: not ECMA \d


def _strip(schema: Any, defs: dict[str, Any]) -> Any:
    if isinstance(schema, dict):
        if "$ref" in schema:
            return _strip(defs[schema["$ref"].rsplit("/", 1)[-1]], defs)
        drop = {"title", "description", "default", "$defs", "$schema", "$id"}
        return {k: _strip(v, defs) for k, v in schema.items() if k not in drop}
    if isinstance(schema, list):
        return [_strip(v, defs) for v in schema]
    return schema


@pytest.mark.parametrize("version", ["0.1", "0.2"])
def test_models_mirror_the_published_schema(version: str) -> None:
    """The models' own JSON Schema is the published one, keyword for keyword.

    The one difference: v0.1's ``ltm_version`` is the pattern ``^\\d+\\.\\d+$``
    there, and const "0.1" here (a version picks its model; see the README).
    """
    model = {"0.1": PacketV01, "0.2": PacketV02}[version]
    ours = model.model_json_schema()
    ours = _strip(ours, ours.get("$defs", {}))
    published = _strip(SCHEMAS[version], {})
    if version == "0.1":
        assert published["properties"]["ltm_version"] == {
            "type": "string",
            "pattern": r"^\d+\.\d+$",
        }
        assert ours["properties"]["ltm_version"] == {"type": "string", "const": "0.1"}
        del published["properties"]["ltm_version"], ours["properties"]["ltm_version"]
    assert ours == published
    # Same property order too: canonical form follows it.
    assert list(ours["properties"]) == list(published["properties"])


@pytest.mark.parametrize("version", ["0.1", "0.2"])
def test_plain_checks_have_the_models_fields(version: str) -> None:
    """The plain checks (ltm.packet) name the models' fields at every level, in the same
    order (canonical form follows it) and with the same ones required."""
    from ltm import models
    from ltm import packet as plain

    v = version.replace(".", "")
    pairs = [
        (plain._SHAPES[version], models.MODELS[version]),
        (plain._PROJECT, models.Project),
        (plain._PROVENANCE, models.Provenance),
        (plain._DECISION[version], getattr(models, f"DecisionV{v}")),
        (plain._ATTEMPT[version], getattr(models, f"AttemptV{v}")),
        (plain._METHOD, models.Method),
    ]
    for shape, model in pairs:
        assert tuple(shape.fields) == tuple(model.model_fields), model.__name__
        required = {name for name, field in model.model_fields.items() if field.is_required()}
        assert shape.required == required, model.__name__
    assert tuple(models.PacketV02.model_fields) == plain._TOP_ORDER
    nested = {"project": models.Project, "provenance": models.Provenance}
    nested |= {"decisions": models.DecisionV02, "methods": models.Method}
    nested |= {"attempts": models.AttemptV02}
    assert {k: tuple(m.model_fields) for k, m in nested.items()} == plain._NESTED_ORDER


@pytest.mark.parametrize("name", ["example.v0.2.json", "reference-benchmark.v0.1.json"])
def test_published_examples_validate(name: str) -> None:
    packet = parse((EXAMPLES_DIR / name).read_bytes())
    assert_agree(packet, expected=True)
    assert check(packet).version == packet["ltm_version"]
    assert VALIDATORS[packet["ltm_version"]].is_valid(packet)


def test_the_shipped_example_is_the_published_one() -> None:
    # `ltm example` prints chalicelib/example.json (it ships in the package and on
    # Lambda, where spec/ is absent); spec/ holds the published file: one content.
    from ltm.examples import EXAMPLE_PATH

    assert EXAMPLE_PATH.read_bytes() == (EXAMPLES_DIR / "example.v0.2.json").read_bytes()


# --------------------------------------------------------------------------
# Hand-written corpus


def _packet(version: str, **extra: Any) -> dict[str, Any]:
    return {
        "ltm_version": version,
        "id": "01JS5LTMEXAMPLEPACKET00001A",
        "created_at": "2026-04-22T00:00:00Z",
        "goal": "Ship the packet core.",
        "next_step": "Write the conformance tests.",
        **extra,
    }


MIN = {"0.1": _packet("0.1"), "0.2": _packet("0.2")}
FULL = {
    "0.1": _packet(
        "0.1",
        project={"name": "ltm", "ref": "github.com/example/ltm"},
        constraints=["Python 3.11"],
        decisions=[{"what": "pydantic", "why": "speed", "locked": True}],
        attempts=[{"tried": "dataclasses", "outcome": "failed", "learned": "too loose"}],
        open_questions=["Lambda cold start?"],
        tags=["python", "ltm"],
        provenance={
            "author_model": "model",
            "author_human": "human",
            "source_hash": "sha256:" + "0123456789abcdef" * 4,
            "confidence": "high",
        },
    ),
}
FULL["0.2"] = {
    **FULL["0.1"],
    "ltm_version": "0.2",
    "parent_id": "01JS5LTMEXAMPLEPACKET00000Z",
    "success_criteria": ["tests pass"],
    "decisions": [{"what": "pydantic", "why": "speed", "consequences": "v2 only", "locked": False}],
    "methods": [{"name": "red-green", "when_applicable": "always", "how": "test first"}],
    "attempts": [
        {"tried": "dataclasses", "outcome": "partial", "learned": "loose", "confidence": "low"}
    ],
}
BOTH = ("0.1", "0.2")
V02 = ("0.2",)

Path_ = tuple[str | int, ...]
_DELETE = object()


def _with(packet: dict[str, Any], path: Path_, value: Any) -> dict[str, Any]:
    out = copy.deepcopy(packet)
    target: Any = out
    for part in path[:-1]:
        target = target[part]
    if value is _DELETE:
        del target[path[-1]]
    else:
        target[path[-1]] = value
    return out


def _name(path: Path_) -> str:
    return ".".join(str(p) for p in path)


# (path, minLength, maxLength, versions): every bounded string of the schemas
STRINGS: list[tuple[Path_, int, int, tuple[str, ...]]] = [
    (("id",), 10, 64, BOTH),
    (("parent_id",), 10, 64, V02),
    (("goal",), 1, 1024, BOTH),
    (("next_step",), 1, 1024, BOTH),
    (("project", "name"), 0, 128, BOTH),
    (("project", "ref"), 0, 256, BOTH),
    (("success_criteria", 0), 0, 1024, V02),
    (("constraints", 0), 0, 1024, BOTH),
    (("decisions", 0, "what"), 0, 1024, BOTH),
    (("decisions", 0, "why"), 0, 1024, BOTH),
    (("decisions", 0, "consequences"), 0, 1024, V02),
    (("methods", 0, "when_applicable"), 0, 1024, V02),
    (("methods", 0, "how"), 0, 2048, V02),
    (("attempts", 0, "tried"), 0, 1024, BOTH),
    (("attempts", 0, "learned"), 0, 1024, BOTH),
    (("open_questions", 0), 0, 1024, BOTH),
    (("provenance", "author_model"), 0, 128, BOTH),
    (("provenance", "author_human"), 0, 128, BOTH),
]

# (field, maxItems, one item, versions)
ARRAYS: list[tuple[str, int, Any, tuple[str, ...]]] = [
    ("success_criteria", 16, "done", V02),
    ("constraints", 32, "c", BOTH),
    ("decisions", 64, {"what": "w", "why": "y"}, BOTH),
    ("methods", 32, {"name": "m", "when_applicable": "w", "how": "h"}, V02),
    ("attempts", 64, {"tried": "t", "outcome": "failed"}, BOTH),
    ("open_questions", 32, "q", BOTH),
    ("tags", 16, "t", BOTH),
]

# (path, values, versions)
ENUMS: list[tuple[Path_, tuple[str, ...], tuple[str, ...]]] = [
    (("attempts", 0, "outcome"), ("succeeded", "failed", "partial"), BOTH),
    (("attempts", 0, "confidence"), ("low", "medium", "high"), V02),
    (("provenance", "confidence"), ("low", "medium", "high"), BOTH),
]
NOT_IN_ENUMS = ["", "Failed", "HIGH", "success", " low", "low ", "low\n", "meh"]

TAG_OK = ["a", "0", "a-", "a-b", "9lives", "a" * 32, "x-" * 16, "0-0-0"]
TAG_BAD = ["", "-a", "A", "aB", "a_b", "a b", "a" * 33, "docs\n", "\ndocs", "docs\r", "dócs"]
TAG_BAD += ["ａ", "a\x00", "a.b", " a", "a-b-c-d-e-f-g-h-i-j-k-l-m-n-o-p-q"]
HEX = "0123456789abcdef" * 4
HASH_OK = ["sha256:" + HEX, "sha256:" + "0" * 64, "sha256:" + "f" * 64]
HASH_BAD = ["sha256:" + HEX.upper(), "sha256:" + HEX[:63], "sha256:" + HEX + "0", "sha256:"]
HASH_BAD += ["SHA256:" + HEX, "sha512:" + HEX, "sha256:" + HEX + "\n", " sha256:" + HEX]
HASH_BAD += ["sha256:" + "g" * 64, "sha256 " + HEX, HEX]
METHOD_OK = ["a", "0", "a-b", "a" * 128, "a" + "-" * 127, "red-green-refactor"]
METHOD_BAD = ["", "A", "-a", "a" * 129, "a\n", "a_b", "a b", "é"]

DATES_OK = [
    "2026-04-22T00:00:00Z",
    "2026-04-22t00:00:00z",  # RFC 3339 §5.6; the reference refuses it (compatibility.md)
    "2026-04-22T23:59:59+02:00",
    "2026-04-22T00:00:00-05:30",
    "2026-04-22T00:00:00+23:59",
    "2026-04-22T00:00:00-00:00",
    "2026-04-22T00:00:00.1Z",
    "2026-04-22T00:00:00.123456789Z",
    "2024-02-29T12:00:00Z",
    "2000-02-29T12:00:00Z",
    "0001-01-01T00:00:00Z",
    "9999-12-31T23:59:59Z",
]
DATES_BAD = [
    "",
    "2026-04-22",
    "2026-04-22T00:00:00",
    "2026-04-22 00:00:00Z",
    "2026-04-22T00:00Z",
    "2026-04-22T00:00:60Z",  # leap second: rejected here and by the library
    "2026-04-22T24:00:00Z",
    "2026-04-22T00:60:00Z",
    "2026-04-22T00:00:00+24:00",
    "2026-04-22T00:00:00+0200",
    "2026-04-22T00:00:00+02",
    "2026-04-22T00:00:00.Z",
    "2026-04-22T00:00:00Z\n",
    "\n2026-04-22T00:00:00Z",
    " 2026-04-22T00:00:00Z",
    "2026-04-22T00:00:00ZZ",
    "2023-02-29T00:00:00Z",
    "1900-02-29T00:00:00Z",
    "2026-04-31T00:00:00Z",
    "2026-13-01T00:00:00Z",
    "2026-00-01T00:00:00Z",
    "2026-04-00T00:00:00Z",
    # Go's time parser, the reference's judge of created_at, takes these three: not ours
    # (docs/compatibility.md, "Packets the two judge differently").
    "2026-04-22T00:00:00,5Z",
    "2026-04-22T9:00:00Z",
    "0000-01-01T00:00:00Z",
    "26-04-22T00:00:00Z",
    "+2026-04-22T00:00:00Z",
    "２０２６-04-22T00:00:00Z",
    "2026-04-22T00:00:00UTC",
    "now",
]
VERSIONS_BAD: list[Any] = ["0.9", "0.3", "1.0", "0.10", "00.1", "0.1.0", "v0.2", "", " 0.2"]
VERSIONS_BAD += ["0.2\n", "0.2 ", "٠.٢", 0.2, 2, 1, None, True, ["0.2"], {"v": "0.2"}]

# Values of the wrong JSON type, by the type the schema wants.
WRONG = {
    "string": [5, 1.5, 0, True, False, None, [], ["x"], {}, {"x": "y"}],
    "boolean": ["yes", "true", "false", 1, 0, 1.0, None, [], {}],
    "array": ["x", "", 5, True, None, {}, {"0": "x"}],
    "object": ["x", 5, True, None, [], [{"name": "x"}]],
}
# (path, JSON type, versions)
TYPED: list[tuple[Path_, str, tuple[str, ...]]] = [
    *((path, "string", versions) for path, _, _, versions in STRINGS),
    (("ltm_version",), "string", BOTH),
    (("created_at",), "string", BOTH),
    (("tags", 0), "string", BOTH),
    (("methods", 0, "name"), "string", V02),
    (("provenance", "source_hash"), "string", BOTH),
    *((path, "string", versions) for path, _, versions in ENUMS),
    (("decisions", 0, "locked"), "boolean", BOTH),
    *(((field,), "array", versions) for field, _, _, versions in ARRAYS),
    (("project",), "object", BOTH),
    (("provenance",), "object", BOTH),
    (("decisions", 0), "object", BOTH),
    (("attempts", 0), "object", BOTH),
    (("methods", 0), "object", V02),
]
REQUIRED: list[tuple[Path_, tuple[str, ...]]] = [
    *(((key,), BOTH) for key in ("ltm_version", "id", "created_at", "goal", "next_step")),
    (("decisions", 0, "what"), BOTH),
    (("decisions", 0, "why"), BOTH),
    (("attempts", 0, "tried"), BOTH),
    (("attempts", 0, "outcome"), BOTH),
    (("methods", 0, "name"), V02),
    (("methods", 0, "when_applicable"), V02),
    (("methods", 0, "how"), V02),
]
OBJECTS: list[tuple[Path_, tuple[str, ...]]] = [
    ((), BOTH),
    (("project",), BOTH),
    (("provenance",), BOTH),
    (("decisions", 0), BOTH),
    (("attempts", 0), BOTH),
    (("methods", 0), V02),
]
# What v0.2 added, each with a valid value: all of it is invalid in a v0.1 packet.
ADDED_IN_V02: list[tuple[Path_, Any]] = [
    (("parent_id",), "01JS5LTMEXAMPLEPACKET00000Z"),
    (("success_criteria",), ["tests pass"]),
    (("methods",), [{"name": "m", "when_applicable": "w", "how": "h"}]),
    (("decisions", 0, "consequences"), "none"),
    (("attempts", 0, "confidence"), "high"),
]


def _compact(packet: dict[str, Any]) -> bytes:
    """The size the cap is measured on: JSON without insignificant whitespace."""
    return json.dumps(packet, ensure_ascii=False, separators=(",", ":")).encode()


def _sized(version: str, target: int, filler: str = "x") -> dict[str, Any]:
    """A valid-shaped packet whose compact serialization is exactly ``target`` bytes."""
    packet = _with(FULL[version], ("constraints",), [])
    packet["goal"] = ""
    missing = target - len(_compact(packet))
    while missing > 1000:
        packet["constraints"].append("x" * min(1024, missing - 900))
        missing = target - len(_compact(packet))
    width = len(filler.encode("utf-8"))
    packet["goal"] = filler * (missing // width) + "x" * (missing % width)
    assert len(_compact(packet)) == target
    return packet


def corpus() -> Iterator[tuple[str, dict[str, Any], bool]]:
    for version in BOTH:
        yield f"{version}-minimal", MIN[version], True
        yield f"{version}-full", FULL[version], True
        yield (
            f"{version}-empty-containers",
            _packet(version, project={}, provenance={}, constraints=[], tags=[], decisions=[]),
            True,
        )
        yield f"{version}-empty-strings", _with(FULL[version], ("constraints",), [""]), True
        yield f"{version}-blank-goal", _with(MIN[version], ("goal",), " "), True
        yield f"{version}-control-chars", _with(MIN[version], ("goal",), "a\x00\x1f\u2028"), True

    yield "0.1-content-declared-0.2", _with(FULL["0.1"], ("ltm_version",), "0.2"), True
    yield "0.2-content-declared-0.1", _with(FULL["0.2"], ("ltm_version",), "0.1"), False
    for version in VERSIONS_BAD:
        for base in BOTH:
            yield f"{base}-version-{version!r}", _with(MIN[base], ("ltm_version",), version), False

    for path, low, high, versions in STRINGS:
        for version in versions:
            name = f"{version}-{_name(path)}"
            for char in ("x", "é", "😀"):  # length counts code points, not bytes or UTF-16 units
                yield f"{name}-max-{char}", _with(FULL[version], path, char * high), True
                yield f"{name}-max+1-{char}", _with(FULL[version], path, char * (high + 1)), False
            yield f"{name}-min", _with(FULL[version], path, "x" * low), True
            if low:
                yield f"{name}-min-1", _with(FULL[version], path, "x" * (low - 1)), False

    for field, high, item, versions in ARRAYS:
        for version in versions:
            name = f"{version}-{field}"
            yield f"{name}-empty", _with(FULL[version], (field,), []), True
            yield f"{name}-max", _with(FULL[version], (field,), [item] * high), True
            yield f"{name}-max+1", _with(FULL[version], (field,), [item] * (high + 1)), False

    for path, values, versions in ENUMS:
        for version in BOTH:
            for value in values:
                ok = version in versions
                yield f"{version}-{_name(path)}-{value}", _with(FULL[version], path, value), ok
            for value in NOT_IN_ENUMS:
                yield f"{version}-{_name(path)}-{value!r}", _with(FULL[version], path, value), False

    for version in BOTH:
        for values, path, ok in (
            (TAG_OK, ("tags", 0), True),
            (TAG_BAD, ("tags", 0), False),
            (HASH_OK, ("provenance", "source_hash"), True),
            (HASH_BAD, ("provenance", "source_hash"), False),
            (DATES_OK, ("created_at",), True),
            (DATES_BAD, ("created_at",), False),
        ):
            for value in values:
                yield f"{version}-{_name(path)}-{value!r}", _with(FULL[version], path, value), ok
    for value in METHOD_OK:
        yield f"0.2-method-name-{value!r}", _with(FULL["0.2"], ("methods", 0, "name"), value), True
    for value in METHOD_BAD:
        yield f"0.2-method-name-{value!r}", _with(FULL["0.2"], ("methods", 0, "name"), value), False

    for path, versions in REQUIRED:
        for version in versions:
            yield f"{version}-missing-{_name(path)}", _with(FULL[version], path, _DELETE), False

    for path, versions in OBJECTS:
        for version in versions:
            for key in ("foo", "", "Goal", "LTM_VERSION", "what ", "__proto__"):
                packet = _with(FULL[version], (*path, key), "x")
                yield f"{version}-extra-{_name(path) or 'top'}-{key!r}", packet, False

    for path, kind, versions in TYPED:
        for version in versions:
            for value in WRONG[kind]:
                packet = _with(FULL[version], path, value)
                yield f"{version}-{_name(path)}-as-{value!r}", packet, False
    for version in BOTH:  # array items of the wrong type
        for field, item in (("constraints", 5), ("tags", None), ("decisions", "x")):
            yield f"{version}-{field}-item-{item!r}", _with(FULL[version], (field,), [item]), False
        for path in (("project",), ("decisions", 0, "locked"), ("tags",), ("provenance",)):
            yield f"{version}-{_name(path)}-null", _with(FULL[version], path, None), False

    for path, value in ADDED_IN_V02:
        yield f"0.1-carries-{_name(path)}", _with(FULL["0.1"], path, value), False
        yield f"0.2-carries-{_name(path)}", _with(FULL["0.2"], path, value), True

    for version in BOTH:
        for filler in ("x", "é"):
            yield f"{version}-size-32768-{filler}", _sized(version, 32_768, filler), True
            yield f"{version}-size-32769-{filler}", _sized(version, 32_769, filler), False


CORPUS = list(corpus())


def test_corpus_ids_are_unique_and_both_verdicts_occur() -> None:
    ids = [name for name, _, _ in CORPUS]
    assert len(ids) == len(set(ids))
    assert sum(ok for _, _, ok in CORPUS) > 100
    assert sum(not ok for _, _, ok in CORPUS) > 400


@pytest.mark.parametrize(("name", "packet", "valid"), CORPUS, ids=[c[0] for c in CORPUS])
def test_corpus(name: str, packet: dict[str, Any], valid: bool) -> None:
    assert_agree(packet, expected=valid)
    # The same verdict after a trip through the bytes (parse() then check()).
    raw = json.dumps(packet, ensure_ascii=False).encode("utf-8")
    if len(raw) <= PROTOCOL_MAX_BYTES:
        assert our_verdict(parse(raw)) == valid


# --------------------------------------------------------------------------
# Generated packets
#
# ``packets(valid=True)`` keeps every value within the schema (the packet may
# still exceed 32 KiB); ``packets(valid=False)`` also steps one past the
# bounds, off the patterns and enums, and puts v0.2 fields into v0.1 packets.
# ``mutated()`` breaks valid packets in one to three places.


def _text(low: int, high: int, valid: bool) -> st.SearchStrategy[str]:
    """Short strings mostly, and strings right at the bounds (or one past them)."""
    lengths = [low, high] if valid else [max(0, low - 1), low, high, high + 1]
    return st.one_of(
        st.text(min_size=low, max_size=max(low, min(high, 12))),
        st.builds(
            lambda char, n: char * n,
            st.sampled_from(["x", "é", "😀", " ", "\n"]),
            st.sampled_from(lengths),
        ),
    )


TAG = r"^[a-z0-9][a-z0-9-]{0,31}$"
METHOD = r"^[a-z0-9][a-z0-9-]{0,127}$"
SOURCE_HASH = r"^sha256:[a-f0-9]{64}$"


def _patterned(regex: str, valid: bool, near: list[str]) -> st.SearchStrategy[str]:
    if valid:
        return st.from_regex(regex, fullmatch=True)
    # Without fullmatch, from_regex honours Python's `$` and also yields matches
    # ending in "\n": exactly the strings where the two regex dialects part ways.
    return st.one_of(st.from_regex(regex), st.sampled_from(near), st.text(max_size=6))


def _offsets(valid: bool) -> st.SearchStrategy[str]:
    hours, minutes = (23, 59) if valid else (24, 60)
    numeric = st.builds(
        lambda sign, h, m: f"{sign}{h:02d}:{m:02d}",
        st.sampled_from("+-"),
        st.integers(0, hours),
        st.integers(0, minutes),
    )
    return st.one_of(st.sampled_from(["Z", "z"] if valid else ["Z", "z", "", "UTC"]), numeric)


VALID_CREATED_AT = st.builds(
    lambda moment, sep, frac, offset: (
        f"{moment.year:04d}-{moment:%m-%d}{sep}{moment:%H:%M:%S}{frac}{offset}"
    ),
    st.datetimes(),
    st.sampled_from("Tt"),
    st.sampled_from(["", ".0", ".123456", ".123456789"]),
    _offsets(valid=True),
)


@st.composite
def _created_at_lookalike(draw: st.DrawFn) -> str:
    """RFC 3339 look-alikes with every part at or just past its bounds."""
    year = draw(st.sampled_from([0, 1, 1900, 2000, 2023, 2024, 2026, 9999]))
    month, day = draw(st.integers(0, 13)), draw(st.integers(0, 32))
    hour, minute, second = (
        draw(st.integers(0, 24)),
        draw(st.integers(0, 60)),
        draw(st.integers(0, 60)),
    )
    frac = draw(st.sampled_from(["", ".0", ".123456", ".123456789", "."]))
    sep = draw(st.sampled_from(["T", "T", "t", " "]))
    offset = draw(_offsets(valid=False))
    tail = draw(st.sampled_from(["", "", "", "\n", " "]))
    date = f"{year:04d}-{month:02d}-{day:02d}"
    return f"{date}{sep}{hour:02d}:{minute:02d}:{second:02d}{frac}{offset}{tail}"


def _created_at(valid: bool) -> st.SearchStrategy[str]:
    if valid:
        return VALID_CREATED_AT
    return st.one_of(VALID_CREATED_AT, _created_at_lookalike(), st.text(max_size=25))


def _enum(values: list[str], valid: bool) -> st.SearchStrategy[str]:
    return st.sampled_from(values if valid else [*values, values[0].title(), ""])


def _object(required: dict[str, Any], optional: dict[str, Any]) -> st.SearchStrategy[Any]:
    @st.composite
    def build(draw: st.DrawFn) -> dict[str, Any]:
        out = {key: draw(strategy) for key, strategy in required.items()}
        for key, strategy in optional.items():
            if draw(st.booleans()):
                out[key] = draw(strategy)
        return out

    return build()


def _lists(items: st.SearchStrategy[Any], limit: int, valid: bool) -> st.SearchStrategy[Any]:
    """Few items mostly; sometimes exactly the limit (or one over)."""
    counts = [limit] if valid else [limit, limit + 1]
    return st.one_of(
        st.lists(items, max_size=3),
        st.builds(
            lambda item, n: [copy.deepcopy(item) for _ in range(n)],
            items,
            st.sampled_from(counts),
        ),
    )


@st.composite
def packets(draw: st.DrawFn, valid: bool) -> dict[str, Any]:
    """Packets of the schema's shape with values at and around every bound."""
    version = draw(st.sampled_from(["0.1", "0.2"]))
    v02 = version == "0.2" or (not valid and draw(st.integers(0, 9)) == 0)
    short = st.text(max_size=8)
    text = _text(0, 1024, valid)
    confidence = _enum(["low", "medium", "high"], valid)
    fields: dict[str, Any] = {
        "ltm_version": st.just(version),
        "id": _text(10, 64, valid),
        "parent_id": _text(10, 64, valid) if v02 else None,
        "created_at": _created_at(valid),
        "project": _object({}, {"name": _text(0, 128, valid), "ref": _text(0, 256, valid)}),
        "goal": _text(1, 1024, valid),
        "success_criteria": _lists(text, 16, valid) if v02 else None,
        "constraints": _lists(short, 32, valid),
        "decisions": _lists(
            _object(
                {"what": text, "why": short},
                {"consequences": text, "locked": st.booleans()}
                if v02
                else {"locked": st.booleans()},
            ),
            64,
            valid,
        ),
        "methods": _lists(
            _object(
                {
                    "name": _patterned(METHOD, valid, ["a" * 128, "a" * 129, "-a"]),
                    "when_applicable": short,
                    "how": _text(0, 2048, valid),
                },
                {},
            ),
            32,
            valid,
        )
        if v02
        else None,
        "attempts": _lists(
            _object(
                {"tried": short, "outcome": _enum(["succeeded", "failed", "partial"], valid)},
                {"learned": text, "confidence": confidence} if v02 else {"learned": text},
            ),
            64,
            valid,
        ),
        "open_questions": _lists(text, 32, valid),
        "next_step": _text(1, 1024, valid),
        "tags": _lists(
            _patterned(TAG, valid, ["a" * 32, "a" * 33, "docs\n", "-x", "X"]), 16, valid
        ),
        "provenance": _object(
            {},
            {
                "author_model": _text(0, 128, valid),
                "author_human": short,
                "source_hash": _patterned(SOURCE_HASH, valid, ["sha256:" + "A" * 64]),
                "confidence": confidence,
            },
        ),
    }
    required = {"ltm_version", "id", "created_at", "goal", "next_step"}
    out: dict[str, Any] = {}
    for key, strategy in fields.items():
        if strategy is not None and (key in required or draw(st.booleans())):
            out[key] = draw(strategy)
    return out


JSON_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=10),
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=6), children, max_size=3)
    ),
    max_leaves=6,
)
NAMES = [
    *PacketV02.model_fields,
    *("what", "why", "locked", "consequences", "tried", "outcome", "learned", "confidence"),
    *("name", "ref", "how", "when_applicable", "source_hash", "author_model", "foo"),
]
KEYS = st.sampled_from(NAMES) | st.text(max_size=6)


def _get(packet: Any, path: Path_) -> Any:
    for part in path:
        packet = packet[part]
    return packet


def _slots(value: Any, path: Path_ = ()) -> Iterator[Path_]:
    """Every place in a packet where a value sits."""
    if isinstance(value, dict | list):
        items = value.items() if isinstance(value, dict) else enumerate(value)
        for key, item in items:
            yield (*path, key)
            yield from _slots(item, (*path, key))


def _objects(value: Any, path: Path_ = ()) -> Iterator[Path_]:
    """Every object in a packet, the packet itself included."""
    if isinstance(value, dict):
        yield path
    if isinstance(value, dict | list):
        items = value.items() if isinstance(value, dict) else enumerate(value)
        for key, item in items:
            yield from _objects(item, (*path, key))


@st.composite
def mutated(draw: st.DrawFn) -> dict[str, Any]:
    """A valid packet changed in one to three places (most changes break it)."""
    packet = draw(packets(valid=True))
    for _ in range(draw(st.integers(1, 3))):
        kind = draw(st.sampled_from(["delete", "replace", "add", "version", "grow"]))
        slots = list(_slots(packet))
        if kind == "delete" and slots:
            packet = _with(packet, draw(st.sampled_from(slots)), _DELETE)
        elif kind == "replace" and slots:
            limit = draw(st.sampled_from([10, 64, 128, 256, 1024, 2048]))
            value = draw(JSON_VALUES | _text(0, limit, valid=False) | _created_at(valid=False))
            packet = _with(packet, draw(st.sampled_from(slots)), value)
        elif kind == "add":
            where = draw(st.sampled_from(list(_objects(packet))))
            packet = _with(packet, (*where, draw(KEYS)), draw(JSON_VALUES))
        elif kind == "version":
            value = draw(st.sampled_from(["0.1", "0.2", *VERSIONS_BAD]) | st.text(max_size=4))
            packet = _with(packet, ("ltm_version",), value)
        elif kind == "grow":
            arrays = [slot for slot in slots if isinstance(_get(packet, slot), list)]
            if arrays:
                path = draw(st.sampled_from(arrays))
                items = _get(packet, path) or [draw(JSON_VALUES)]
                count = draw(st.sampled_from([16, 17, 32, 33, 64, 65]))
                packet = _with(
                    packet, path, [copy.deepcopy(items[i % len(items)]) for i in range(count)]
                )
    return packet


GENERATED = settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
SIZE_ONLY = re.compile(r"packet: \d+ bytes, over the 32768-byte limit")


@GENERATED
@given(packets(valid=True))
def test_generated_valid_packets_agree(packet: dict[str, Any]) -> None:
    assert_agree(packet)
    # Built within every bound, so at most the 32 KiB cap can object.
    assert all(SIZE_ONLY.fullmatch(error) for error in check(packet, lenient=True).errors)


@GENERATED
@given(packets(valid=False))
def test_generated_edgy_packets_agree(packet: dict[str, Any]) -> None:
    assert_agree(packet)


@GENERATED
@given(mutated())
def test_mutated_packets_agree(packet: dict[str, Any]) -> None:
    assert_agree(packet)


@settings(GENERATED, max_examples=100)
@given(st.dictionaries(KEYS, JSON_VALUES | _text(0, 1024, valid=False), max_size=8))
def test_random_objects_agree(packet: dict[str, Any]) -> None:
    assert_agree(packet)


@settings(GENERATED, max_examples=200)
@given(st.sampled_from(["0.1", "0.2"]), _created_at(valid=False))
def test_created_at_verdicts_agree(version: str, value: str) -> None:
    assert_agree(_with(MIN[version], ("created_at",), value))
