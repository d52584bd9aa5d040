"""The pydantic models of a Core Memory Packet, and the messages their errors become.

They mirror the published JSON Schemas field for field (every limit, pattern
and enum; no additional properties at any level; strict types, so
``"locked": "yes"`` or ``"goal": 5`` never coerce); the conformance tests hold
them to the published files with the ``jsonschema`` library. Patterns use
ECMA-262 semantics, where ``$`` matches only at the very end: pydantic's
``rust-regex`` engine (pinned in the model config) does exactly that, so
``"docs\\n"`` is not a tag (Python's ``re`` would accept it).

``ltm.packet`` imports this module only for a packet its plain checks find
fault with (every message comes from here), and for the names it re-exports:
importing and building the models costs more than the rest of ``ltm save``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
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

from .packet import _fmt_loc, _match_rfc3339, _short


def _check_date_time(value: str) -> str:
    if _match_rfc3339(value) is None:
        raise PydanticCustomError(
            "date_time", "must be an RFC 3339 date-time such as 2026-04-22T00:00:00Z"
        )
    return value


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

# Fields that v0.2 added, by where they live, to explain them in a v0.1 packet.
_ADDED_IN_V02: dict[tuple[str, ...], frozenset[str]] = {
    (): frozenset(PacketV02.model_fields) - frozenset(PacketV01.model_fields),
    ("decisions",): frozenset(DecisionV02.model_fields) - frozenset(DecisionV01.model_fields),
    ("attempts",): frozenset(AttemptV02.model_fields) - frozenset(AttemptV01.model_fields),
}


@cache
def _items_adapter(model: type[BaseModel], field: str) -> TypeAdapter[Any]:
    item = _ITEM_TYPES[model][field]  # known at run time: list[item] is built then
    return TypeAdapter(cast(Any, list)[item], config=_CONFIG)


# --------------------------------------------------------------------------
# Error messages


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


def errors_of(payload: dict[str, Any], version: str) -> list[str]:
    """Every schema problem of ``payload`` (a plain dict, its version already routed) as
    ``"path: reason"`` lines, by the model of ``version``; none when it conforms."""
    model = MODELS[version]
    errors: list[str] = []
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
