"""Core Memory Packets: parse, check, fill in, canonicalize.

The published JSON Schemas (``core-memory.v0.1.json`` and ``core-memory.v0.2.json``)
are the normative shape; the pydantic models below mirror them field for field
(every limit, pattern and enum; no additional properties at any level; strict
types, so ``"locked": "yes"`` or ``"goal": 5`` never coerce). The conformance
tests hold these models to the published files with the ``jsonschema`` library.

Decisions worth knowing:

* ``created_at`` is an RFC 3339 date-time with *any* offset (``Z``, ``z`` or
  ``±HH:MM``; ``T`` may be ``t``), which is what the schemas' ``format:
  date-time`` means; the protocol's "UTC" describes what writers emit, and
  :func:`fill_defaults` always writes ``YYYY-MM-DDTHH:MM:SSZ``. Readers order by
  :func:`created_at_sort_key`, which normalizes any offset to UTC. As with
  jsonschema's checker (rfc3339-validator), year 0000 and leap second ``:60``
  are rejected; nothing may follow the offset (not even a newline).
* Patterns use ECMA-262 semantics, where ``$`` matches only at the very end:
  pydantic's ``rust-regex`` engine (pinned in the model config) does exactly
  that, so ``"docs\\n"`` is not a tag. Python's ``re`` would accept it.
* Lengths count code points, as JSON Schema does: an astral character counts 1.
* :func:`parse` rejects duplicate object keys (I-JSON, RFC 7493: different
  parsers keep different duplicates, so such a packet means different things
  to different readers), NaN/Infinity, numbers that overflow, and strings with
  lone surrogates (``"\\ud800"``), which are not Unicode and cannot be encoded
  as UTF-8. A single leading UTF-8 byte order mark is tolerated and dropped.
* Version routing: ``ltm_version`` picks the model. A missing or unsupported
  version is an error naming the supported ones; the rest of the packet is
  then still checked against the current version's model so that every
  problem is reported at once.
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from functools import cache
from typing import Annotated, Any, Literal, TypeVar, cast

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StringConstraints,
    TypeAdapter,
    ValidationError,
)
from pydantic_core import PydanticCustomError

__all__ = [
    "CURRENT_VERSION",
    "MAX_PACKET_BYTES",
    "MODELS",
    "SUPPORTED_VERSIONS",
    "AttemptV01",
    "AttemptV02",
    "Checked",
    "DecisionV01",
    "DecisionV02",
    "Method",
    "PacketError",
    "PacketV01",
    "PacketV02",
    "Project",
    "Provenance",
    "canonical_bytes",
    "check",
    "created_at_sort_key",
    "fill_defaults",
    "new_id",
    "parse",
]

SUPPORTED_VERSIONS: tuple[str, ...] = ("0.1", "0.2")
CURRENT_VERSION = "0.2"
MAX_PACKET_BYTES = 32_768


class PacketError(ValueError):
    """Raised with every problem found, not the first only.

    ``errors`` holds one ``"path: reason"`` string per problem, e.g.
    ``"attempts[2].outcome: must be one of succeeded, failed, partial"``;
    problems with the packet as a whole use the path ``packet``.
    """

    errors: list[str]

    def __init__(self, errors: Iterable[str] | str) -> None:
        self.errors = [errors] if isinstance(errors, str) else list(errors)
        super().__init__("; ".join(self.errors))

    def __str__(self) -> str:
        return "; ".join(self.errors)

    def __reduce__(self) -> tuple[type[PacketError], tuple[list[str]]]:
        return (PacketError, (self.errors,))


# --------------------------------------------------------------------------
# RFC 3339 date-time


_RFC3339 = re.compile(
    r"(?P<year>[0-9]{4})-(?P<month>0[1-9]|1[0-2])-(?P<day>[0-9]{2})"
    r"[Tt](?P<hour>[01][0-9]|2[0-3]):(?P<minute>[0-5][0-9]):(?P<second>[0-5][0-9])"
    r"(?:\.(?P<frac>[0-9]+))?"
    r"(?:[Zz]|(?P<sign>[+-])(?P<off_h>[01][0-9]|2[0-3]):(?P<off_m>[0-5][0-9]))"
)
_DAYS_IN_MONTH = (31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)


def _match_rfc3339(value: str) -> re.Match[str] | None:
    m = _RFC3339.fullmatch(value)  # fullmatch: no trailing "\n" sneaks past a `$`
    if m is None:
        return None
    year, month, day = int(m["year"]), int(m["month"]), int(m["day"])
    leap = year % 4 == 0 and (year % 100 != 0 or year % 400 == 0)
    last_day = 29 if month == 2 and leap else _DAYS_IN_MONTH[month - 1]
    if year == 0 or not 1 <= day <= last_day:
        return None
    return m


def _check_date_time(value: str) -> str:
    if _match_rfc3339(value) is None:
        raise PydanticCustomError(
            "date_time", "must be an RFC 3339 date-time such as 2026-04-22T00:00:00Z"
        )
    return value


def created_at_sort_key(value: str) -> str:
    """Normalize an RFC 3339 timestamp to UTC ``YYYY-MM-DDTHH:MM:SS.ffffffZ``.

    Keys compare as strings in time order. Sub-microsecond digits are
    truncated; the one instant past year 9999 in UTC (a late 9999-12-31 with a
    negative offset) is clamped to the last representable microsecond, and an
    early 0001-01-01 with a positive offset lands in year 0000. Raises
    ``ValueError`` when ``value`` is not an RFC 3339 date-time.
    """
    m = _match_rfc3339(value) if isinstance(value, str) else None
    if m is None:
        raise ValueError(f"not an RFC 3339 date-time: {_short(value)}")
    # Work 400 years away from the edges (the Gregorian calendar repeats every
    # 400 years) so that shifting to UTC cannot overflow datetime's range.
    year = int(m["year"])
    shift = 400 if year <= 400 else -400
    local = datetime(
        year + shift,
        int(m["month"]),
        int(m["day"]),
        int(m["hour"]),
        int(m["minute"]),
        int(m["second"]),
        int((m["frac"] or "")[:6].ljust(6, "0")),
    )
    if m["sign"] is not None:
        offset = timedelta(hours=int(m["off_h"]), minutes=int(m["off_m"]))
        local = local - offset if m["sign"] == "+" else local + offset
    utc_year = local.year - shift
    if utc_year > 9999:
        return "9999-12-31T23:59:59.999999Z"
    return (
        f"{utc_year:04d}-{local.month:02d}-{local.day:02d}T"
        f"{local.hour:02d}:{local.minute:02d}:{local.second:02d}.{local.microsecond:06d}Z"
    )


# --------------------------------------------------------------------------
# Models


def _reject_null(value: Any) -> Any:
    if value is None:
        raise PydanticCustomError("null", "must not be null (omit the field instead)")
    return value


def _drop_null_from_schema(schema: dict[str, Any]) -> None:
    """JSON Schema for an optional field: the type itself, without ``null``."""
    branches = schema.pop("anyOf", None)
    if branches is not None:
        for branch in branches:
            if branch != {"type": "null"}:
                schema.update(branch)
    schema.pop("default", None)


_T = TypeVar("_T")

# An optional field: may be omitted, but an explicit null is an error, as in the
# schemas (no field there admits null). Python sees None when it was omitted.
Omittable = Annotated[
    _T | None, BeforeValidator(_reject_null), Field(json_schema_extra=_drop_null_from_schema)
]


Text = Annotated[str, StringConstraints(strict=True, max_length=1024)]
Text128 = Annotated[str, StringConstraints(strict=True, max_length=128)]
Text256 = Annotated[str, StringConstraints(strict=True, max_length=256)]
Text2048 = Annotated[str, StringConstraints(strict=True, max_length=2048)]
NonEmptyText = Annotated[str, StringConstraints(strict=True, min_length=1, max_length=1024)]
PacketId = Annotated[str, StringConstraints(strict=True, min_length=10, max_length=64)]
Tag = Annotated[str, StringConstraints(strict=True, pattern=r"^[a-z0-9][a-z0-9-]{0,31}$")]
MethodName = Annotated[
    str, StringConstraints(strict=True, max_length=128, pattern=r"^[a-z0-9][a-z0-9-]{0,127}$")
]
SourceHash = Annotated[str, StringConstraints(strict=True, pattern=r"^sha256:[a-f0-9]{64}$")]
DateTime = Annotated[
    str,
    StringConstraints(strict=True),
    AfterValidator(_check_date_time),
    Field(json_schema_extra={"format": "date-time"}),
]
Outcome = Literal["succeeded", "failed", "partial"]
Confidence = Literal["low", "medium", "high"]


# strict: no coercion at all; forbid: additionalProperties false; rust-regex:
# ECMA-262-like anchors ("$" only at the very end; Python's re differs).
_CONFIG = ConfigDict(extra="forbid", strict=True, regex_engine="rust-regex", frozen=True)


class _Strict(BaseModel):
    model_config = _CONFIG


class Project(_Strict):
    name: Omittable[Text128] = None
    ref: Omittable[Text256] = None


class Provenance(_Strict):
    author_model: Omittable[Text128] = None
    author_human: Omittable[Text128] = None
    source_hash: Omittable[SourceHash] = None
    confidence: Omittable[Confidence] = None


class DecisionV01(_Strict):
    what: Text
    why: Text
    locked: Omittable[bool] = None


class DecisionV02(_Strict):
    what: Text
    why: Text
    consequences: Omittable[Text] = None
    locked: Omittable[bool] = None


class AttemptV01(_Strict):
    tried: Text
    outcome: Outcome
    learned: Omittable[Text] = None


class AttemptV02(_Strict):
    tried: Text
    outcome: Outcome
    learned: Omittable[Text] = None
    confidence: Omittable[Confidence] = None


class Method(_Strict):
    name: MethodName
    when_applicable: Text
    how: Text2048


class PacketV01(_Strict):
    """Core Memory Packet, ``ltm_version`` 0.1 (fields in the schema's order)."""

    ltm_version: Literal["0.1"]
    id: PacketId
    created_at: DateTime
    project: Omittable[Project] = None
    goal: NonEmptyText
    constraints: Omittable[Annotated[list[Text], Field(max_length=32)]] = None
    decisions: Omittable[Annotated[list[DecisionV01], Field(max_length=64)]] = None
    attempts: Omittable[Annotated[list[AttemptV01], Field(max_length=64)]] = None
    open_questions: Omittable[Annotated[list[Text], Field(max_length=32)]] = None
    next_step: NonEmptyText
    tags: Omittable[Annotated[list[Tag], Field(max_length=16)]] = None
    provenance: Omittable[Provenance] = None


class PacketV02(_Strict):
    """Core Memory Packet, ``ltm_version`` 0.2 (fields in the schema's order)."""

    ltm_version: Literal["0.2"]
    id: PacketId
    parent_id: Omittable[PacketId] = None
    created_at: DateTime
    project: Omittable[Project] = None
    goal: NonEmptyText
    success_criteria: Omittable[Annotated[list[Text], Field(max_length=16)]] = None
    constraints: Omittable[Annotated[list[Text], Field(max_length=32)]] = None
    decisions: Omittable[Annotated[list[DecisionV02], Field(max_length=64)]] = None
    methods: Omittable[Annotated[list[Method], Field(max_length=32)]] = None
    attempts: Omittable[Annotated[list[AttemptV02], Field(max_length=64)]] = None
    open_questions: Omittable[Annotated[list[Text], Field(max_length=32)]] = None
    next_step: NonEmptyText
    tags: Omittable[Annotated[list[Tag], Field(max_length=16)]] = None
    provenance: Omittable[Provenance] = None


MODELS: dict[str, type[BaseModel]] = {"0.1": PacketV01, "0.2": PacketV02}

# Item types of the array fields: when an array has too many items pydantic
# stops before checking them, so check() checks the items on its own (lazily).
_ITEM_TYPES: dict[type[BaseModel], dict[str, Any]] = {
    PacketV01: {
        "constraints": Text,
        "decisions": DecisionV01,
        "attempts": AttemptV01,
        "open_questions": Text,
        "tags": Tag,
    },
    PacketV02: {
        "success_criteria": Text,
        "constraints": Text,
        "decisions": DecisionV02,
        "methods": Method,
        "attempts": AttemptV02,
        "open_questions": Text,
        "tags": Tag,
    },
}

# Canonical key order, taken from the v0.2 models (v0.1's order is a
# subsequence of it): top level, then the objects inside the named fields.
_TOP_ORDER: tuple[str, ...] = tuple(PacketV02.model_fields)
_NESTED_ORDER: dict[str, tuple[str, ...]] = {
    "project": tuple(Project.model_fields),
    "provenance": tuple(Provenance.model_fields),
    "decisions": tuple(DecisionV02.model_fields),
    "methods": tuple(Method.model_fields),
    "attempts": tuple(AttemptV02.model_fields),
}

# Fields that v0.2 added, by where they live, to explain them in a v0.1 packet.
_ADDED_IN_V02: dict[tuple[str, ...], frozenset[str]] = {
    (): frozenset(PacketV02.model_fields) - frozenset(PacketV01.model_fields),
    ("decisions",): frozenset(DecisionV02.model_fields) - frozenset(DecisionV01.model_fields),
    ("attempts",): frozenset(AttemptV02.model_fields) - frozenset(AttemptV01.model_fields),
}


@cache
def _items_adapter(model: type[BaseModel], field: str) -> TypeAdapter[Any]:
    return TypeAdapter(list[_ITEM_TYPES[model][field]], config=_CONFIG)  # type: ignore[misc]


# --------------------------------------------------------------------------
# Error messages


def _short(value: object, limit: int = 40) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _fmt_loc(loc: Iterable[str | int]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else part
    return out or "packet"


_QUOTED = re.compile(r"'([^']*)'")


def _reason(err: Any) -> str:
    kind = err["type"]
    ctx = err.get("ctx") or {}
    value = err.get("input")
    if kind == "missing":
        return "required"
    if kind == "string_type":
        return "must be a string"
    if kind == "bool_type":
        return "must be a boolean (true or false)"
    if kind == "list_type":
        return "must be an array"
    if kind in ("model_type", "model_attributes_type", "dict_type"):
        return "must be an object"
    if kind == "string_too_short":
        if ctx["min_length"] == 1:
            return "must not be empty"
        return f"must be at least {ctx['min_length']} characters (got {len(value)})"
    if kind == "string_too_long":
        return f"must be at most {ctx['max_length']} characters (got {len(value)})"
    if kind == "too_long":
        return f"must have at most {ctx['max_length']} items (got {ctx['actual_length']})"
    if kind == "string_pattern_mismatch":
        return f"must match {ctx['pattern']}"
    if kind == "literal_error":
        return "must be one of " + ", ".join(_QUOTED.findall(str(ctx["expected"])))
    return str(err["msg"])


def _messages(errors: Iterable[Any], version: str, prefix: tuple[str | int, ...] = ()) -> list[str]:
    out = []
    for err in errors:
        loc = prefix + tuple(err["loc"])
        if err["type"] == "extra_forbidden":
            *parent, key = loc
            where = tuple(p for p in parent if isinstance(p, str))
            if version == "0.1" and key in _ADDED_IN_V02.get(where, ()):
                reason = f"field {_short(key)} needs ltm_version 0.2 (not part of 0.1)"
            else:
                reason = f"unknown field {_short(key)}"
            out.append(f"{_fmt_loc(parent)}: {reason}")
        else:
            out.append(f"{_fmt_loc(loc)}: {_reason(err)}")
    return out


def _schema_errors(data: dict[str, Any]) -> list[str]:
    errors: list[str] = []
    declared = data.get("ltm_version")
    if isinstance(declared, str) and declared in MODELS:
        version, payload = declared, data
    else:
        supported = ", ".join(SUPPORTED_VERSIONS)
        if "ltm_version" not in data:
            errors.append(f"ltm_version: required (supported: {supported})")
        elif not isinstance(declared, str):
            errors.append(f"ltm_version: must be a string (supported: {supported})")
        else:
            errors.append(
                f"ltm_version: unsupported version {_short(declared)}; supported: {supported}"
            )
        # Check everything else against the current version, so all is reported.
        version, payload = CURRENT_VERSION, {**data, "ltm_version": CURRENT_VERSION}
    model = MODELS[version]
    try:
        model.model_validate(payload)
    except ValidationError as exc:
        found = exc.errors(include_url=False)
        errors += _messages(found, version)
        for err in found:
            field = err["loc"][0] if len(err["loc"]) == 1 else None
            if err["type"] == "too_long" and field in _ITEM_TYPES[model]:
                try:
                    _items_adapter(model, field).validate_python(payload[field])
                except ValidationError as items_exc:
                    errors += _messages(items_exc.errors(include_url=False), version, (field,))
    return errors


# --------------------------------------------------------------------------
# Canonical form


def _sorted_tree(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {k: _sorted_tree(value[k]) for k in sorted(value)}
    if isinstance(value, list | tuple):
        return [_sorted_tree(v) for v in value]
    return value


def _ordered(obj: Mapping[str, Any], order: tuple[str, ...], top: bool) -> dict[str, Any]:
    out = {}
    for key in order:
        if key in obj:
            value = obj[key]
            nested = _NESTED_ORDER.get(key) if top else None
            if nested is None:
                out[key] = _sorted_tree(value)
            elif isinstance(value, Mapping):
                out[key] = _ordered(value, nested, False)
            elif isinstance(value, list):
                out[key] = [
                    _ordered(v, nested, False) if isinstance(v, Mapping) else _sorted_tree(v)
                    for v in value
                ]
            else:
                out[key] = _sorted_tree(value)
    for key in sorted(k for k in obj if k not in order):
        out[key] = _sorted_tree(obj[key])
    return out


def canonical_bytes(data: Mapping[str, Any]) -> bytes:
    """The packet's canonical encoding.

    Keys in the schema's property order at every level, unknown keys (lenient
    packets only) after them in sorted order, sorted keys inside unknown
    values; list items keep their order. Two-space indent, non-ASCII as is,
    UTF-8, no trailing newline. Encoding the parsed output again gives the same
    bytes. Raises ``TypeError``/``ValueError`` for what JSON cannot carry
    (non-string keys, NaN, lone surrogates).
    """
    parts: list[str] = []
    _object(data, _TOP_ORDER, True, "\n", parts)
    return "".join(parts).encode("utf-8")


# What ``json.dumps(_ordered(data, ...), indent=2, ensure_ascii=False, allow_nan=False)``
# gives, the same bytes (tests/test_packet.py holds the two equal), in a third of the
# time: with ``indent`` the json module falls back to its pure-Python encoder
# (generators, a closure per level), and ``_ordered`` builds a whole copy of the tree
# first. This walks the tree once, in canonical order, and leaves each string to the C
# routine the json module's own encoder uses (``encode_basestring``;
# https://docs.python.org/3/library/json.html#json.dumps).
_encode_string = json.encoder.encode_basestring
_float_repr = float.__repr__
_int_repr = int.__repr__


def _key_text(key: object) -> str:
    """A dict key as ``json.dumps`` writes it (it converts these scalars; others raise)."""
    if isinstance(key, str):
        return key
    if key is True:
        return "true"
    if key is False:
        return "false"
    if key is None:
        return "null"
    if isinstance(key, int):
        return _int_repr(key)
    if isinstance(key, float):
        return _float_text(key)
    raise TypeError(f"keys must be str, int, float, bool or None, not {type(key).__name__}")


def _float_text(value: float) -> str:
    if value != value or value in (_INF, -_INF):
        raise ValueError(f"Out of range float values are not JSON compliant: {value!r}")
    return _float_repr(value)


_INF = float("inf")


def _object(
    obj: Mapping[str, Any], order: tuple[str, ...], top: bool, newline: str, out: list[str]
) -> None:
    """An object in canonical key order (``_ordered``'s): the schema's, then sorted."""
    keys = [key for key in order if key in obj]
    keys += sorted(k for k in obj if k not in order)
    if not keys:
        out.append("{}")
        return
    inner = newline + "  "
    sep = "{" + inner
    for key in keys:
        out.append(sep)
        out.append(_encode_string(_key_text(key)))
        out.append(": ")
        value = obj[key]
        nested = _NESTED_ORDER.get(key) if top and key in order else None
        if nested is None:
            _value(value, inner, out)
        elif isinstance(value, Mapping):
            _object(value, nested, False, inner, out)
        elif isinstance(value, list) and value:
            item_newline = inner + "  "
            item_sep = "[" + item_newline
            for item in value:
                out.append(item_sep)
                if isinstance(item, Mapping):
                    _object(item, nested, False, item_newline, out)
                else:
                    _value(item, item_newline, out)
                item_sep = "," + item_newline
            out.append(inner + "]")
        else:
            _value(value, inner, out)
        sep = "," + inner
    out.append(newline + "}")


def _value(value: Any, newline: str, out: list[str]) -> None:
    """Any value with sorted object keys (``_sorted_tree``'s order); ``newline`` is the
    line break plus the indentation of the current level."""
    if isinstance(value, str):
        out.append(_encode_string(value))
    elif isinstance(value, Mapping):
        _object(value, (), False, newline, out)
    elif isinstance(value, list | tuple):
        if not value:
            out.append("[]")
            return
        inner = newline + "  "
        sep = "[" + inner
        for item in value:
            out.append(sep)
            _value(item, inner, out)
            sep = "," + inner
        out.append(newline + "]")
    elif value is None:
        out.append("null")
    elif value is True:
        out.append("true")
    elif value is False:
        out.append("false")
    elif isinstance(value, int):
        out.append(_int_repr(value))
    elif isinstance(value, float):
        out.append(_float_text(value))
    else:
        raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


# --------------------------------------------------------------------------
# Parsing


_SURROGATE = re.compile("[\ud800-\udfff]")


def _plain(value: Any, loc: tuple[str | int, ...], problems: list[str]) -> Any:
    """A copy with dicts for mappings; notes what JSON cannot carry."""
    if isinstance(value, str):
        if not value.isascii() and _SURROGATE.search(value):
            problems.append(f"{_fmt_loc(loc)}: contains a lone surrogate (not valid Unicode)")
        return value
    if isinstance(value, Mapping):
        out = {}
        for key, item in value.items():
            if not isinstance(key, str):
                problems.append(f"{_fmt_loc(loc)}: key {_short(key)} is not a string")
                continue
            if not key.isascii() and _SURROGATE.search(key):
                problems.append(f"{_fmt_loc(loc)}: a key contains a lone surrogate")
                continue
            out[key] = _plain(item, (*loc, key), problems)
        return out
    if isinstance(value, list):
        return [_plain(item, (*loc, i), problems) for i, item in enumerate(value)]
    return value


def _compact_bytes(data: Mapping[str, Any]) -> bytes:
    return json.dumps(data, ensure_ascii=False, allow_nan=False, separators=(",", ":")).encode()


def _too_large(size: int) -> str:
    return f"packet: {size} bytes, over the {MAX_PACKET_BYTES}-byte limit"


def parse(raw: bytes | str) -> dict[str, Any]:
    """Decode a packet's bytes into a dict; raises :class:`PacketError`.

    The 32 KiB cap applies to the raw bytes (a ``str`` counts as its UTF-8
    encoding) before any decoding. The input must be UTF-8 (one leading byte
    order mark is dropped) holding one JSON object. Duplicate keys are
    rejected, as are NaN/Infinity, overflowing numbers and lone surrogates.
    Only the syntax is checked here; :func:`check` judges the content.
    """
    if isinstance(raw, str):
        try:
            data = raw.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise PacketError(
                f"packet: not valid UTF-8 (lone surrogate at character {exc.start})"
            ) from None
    elif isinstance(raw, bytes | bytearray | memoryview):
        data = bytes(raw)
    else:
        raise TypeError(f"parse() takes bytes or str, not {type(raw).__name__}")
    if len(data) > MAX_PACKET_BYTES:
        raise PacketError(_too_large(len(data)))
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise PacketError(
            f"packet: not valid UTF-8 (byte 0x{data[exc.start]:02x} at offset {exc.start})"
        ) from None

    duplicates: list[str] = []

    def pairs_hook(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        obj: dict[str, Any] = {}
        for key, value in pairs:
            if key in obj:
                duplicates.append(f"packet: duplicate key {_short(key)}")
            obj[key] = value
        return obj

    def reject_constant(name: str) -> Any:
        raise ValueError(f"{name} is not JSON")

    def parse_int(literal: str) -> int:
        try:
            return int(literal)
        except ValueError:  # over sys.get_int_max_str_digits() (4300 by default)
            raise ValueError(f"integer of {len(literal.lstrip('-'))} digits is too long") from None

    def parse_float(literal: str) -> float:
        number = float(literal)
        if number in (float("inf"), float("-inf")):
            raise ValueError(f"number {literal[:20]} is out of range")
        return number

    try:
        value = json.loads(
            text,
            object_pairs_hook=pairs_hook,
            parse_constant=reject_constant,
            parse_float=parse_float,
            parse_int=parse_int,
        )
    except json.JSONDecodeError as exc:
        raise PacketError(
            f"packet: not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})"
        ) from None
    except RecursionError:
        raise PacketError("packet: not valid JSON (nested too deeply)") from None
    except ValueError as exc:  # NaN, Infinity, 1e400, overlong integers
        raise PacketError(f"packet: not valid JSON ({exc})") from None
    if duplicates:
        raise PacketError(duplicates)
    if not isinstance(value, dict):
        raise PacketError("packet: must be a JSON object")
    problems: list[str] = []
    value = _plain(value, (), problems)
    if problems:
        raise PacketError(problems)
    return value


# --------------------------------------------------------------------------
# Checking


@dataclass(frozen=True)
class Checked:
    """The outcome of :func:`check`: the packet as a plain dict and its errors."""

    data: dict[str, Any]
    errors: tuple[str, ...]
    _body: bytes | None = field(default=None, init=False, compare=False, repr=False)

    @property
    def conforming(self) -> bool:
        return not self.errors

    def body(self) -> bytes:
        """The canonical bytes of ``data``, encoded once: whoever needs them first pays
        (an import's worker process, ahead of the process that writes them)."""
        if self._body is None:
            object.__setattr__(self, "_body", canonical_bytes(self.data))
        return cast("bytes", self._body)

    @property
    def version(self) -> str | None:
        """The declared ``ltm_version`` as written (supported or not), else None."""
        declared = self.data.get("ltm_version")
        return declared if isinstance(declared, str) else None


def check(data: Mapping[str, Any], *, lenient: bool = False) -> Checked:
    """Validate a packet against the model of its declared ``ltm_version``.

    Reports every problem, including the 32 KiB cap. The cap is measured on
    the compact encoding (no insignificant whitespace): a sender's bytes are
    never smaller, so nothing the reference accepts on the wire is refused
    here, while the stored canonical form may indent a little past the cap.
    Not lenient: raises :class:`PacketError` when there is any. Lenient:
    returns them in ``Checked.errors`` (``conforming`` False) for the caller
    to flag. Either way, what no packet can be raises: not an object,
    non-string keys, lone surrogates, values JSON cannot encode.
    """
    if not isinstance(data, Mapping):
        raise PacketError("packet: must be a JSON object")
    problems: list[str] = []
    try:
        plain = _plain(data, (), problems)
    except RecursionError:
        raise PacketError("packet: nested too deeply") from None
    if problems:
        raise PacketError(problems)
    errors = _schema_errors(plain)
    try:
        size = len(_compact_bytes(plain))
    except (TypeError, ValueError, RecursionError) as exc:
        raise PacketError(f"packet: cannot be encoded as JSON ({exc})") from None
    if size > MAX_PACKET_BYTES:
        errors.append(_too_large(size))
    if errors and not lenient:
        raise PacketError(errors)
    return Checked(plain, tuple(errors))


# --------------------------------------------------------------------------
# Defaults


def new_id() -> str:
    """A new ULID (26 characters, time-ordered)."""
    from ulid import ULID  # imported on first use: minting is rare, imports are not free

    return str(ULID())


def _utc_stamp(now: datetime | None) -> str:
    moment = datetime.now(UTC) if now is None else now
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)  # a naive datetime is taken as UTC
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def fill_defaults(data: Mapping[str, Any], *, now: datetime | None = None) -> dict[str, Any]:
    """A copy with ``ltm_version``, ``id`` and ``created_at`` added where absent.

    Only absent keys are filled (a present value, even null or invalid, is
    kept for :func:`check` to judge): ``ltm_version`` = CURRENT_VERSION, ``id``
    = a new ULID, ``created_at`` = ``now`` (default: the current time; a naive
    datetime is taken as UTC) as ``YYYY-MM-DDTHH:MM:SSZ``.
    """
    out: dict[str, Any] = {}
    if "ltm_version" not in data:
        out["ltm_version"] = CURRENT_VERSION
    if "id" not in data:
        out["id"] = new_id()
    if "created_at" not in data:
        out["created_at"] = _utc_stamp(now)
    out.update(copy.deepcopy(dict(data)))
    return out
