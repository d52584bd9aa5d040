"""Core Memory Packets: parse, check, fill in, canonicalize.

The published JSON Schemas (``core-memory.v0.1.json`` and ``core-memory.v0.2.json``)
are the normative shape; the pydantic models of ``ltm.models`` mirror them field
for field (every limit, pattern and enum; no additional properties at any level;
strict types, so ``"locked": "yes"`` or ``"goal": 5`` never coerce), and the
plain checks here give the models' verdict without importing pydantic (see "The
schema as plain data"). The conformance tests hold both to the published files
with the ``jsonschema`` library.

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
  that, and so does ``fullmatch`` here, so ``"docs\\n"`` is not a tag. Python's
  ``re.match`` with ``$`` would accept it.
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
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, cast

if TYPE_CHECKING:
    from .models import (
        MODELS,
        AttemptV01,
        AttemptV02,
        DecisionV01,
        DecisionV02,
        Method,
        PacketV01,
        PacketV02,
        Project,
        Provenance,
    )

__all__ = [
    "CURRENT_VERSION",
    "MAX_PACKET_BYTES",
    "MAX_TEXT_BYTES",
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
    "encode",
    "fill_defaults",
    "new_id",
    "parse",
]

SUPPORTED_VERSIONS: tuple[str, ...] = ("0.1", "0.2")
CURRENT_VERSION = "0.2"
MAX_PACKET_BYTES = 32_768
# The most bytes :func:`parse` reads. The cap itself is judged by :func:`check` on the
# compact encoding; a packet's text may be longer by its whitespace and escapes: the
# canonical form a store hands back is indented, and a reference server's is indented
# too, with ``<``, ``>`` and ``&`` as six-byte ``\u003c`` escapes. So a packet at the cap,
# pulled from either, still parses; a file past this bound is no packet at all.
MAX_TEXT_BYTES = 8 * MAX_PACKET_BYTES

# The pydantic models live in ltm.models and are imported on first use of these names:
# importing them costs more than most commands that read or write a packet.
_FROM_MODELS = frozenset(
    {
        "MODELS",
        "AttemptV01",
        "AttemptV02",
        "DecisionV01",
        "DecisionV02",
        "Method",
        "PacketV01",
        "PacketV02",
        "Project",
        "Provenance",
    }
)


def __getattr__(name: str) -> Any:
    if name in _FROM_MODELS:
        from . import models

        return getattr(models, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


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
# The schema as plain data
#
# Most packets conform, and the pydantic models (``ltm.models``) cost more to import and
# build than the whole rest of ``ltm save`` (~45 ms). So a packet is first judged by
# these plain checks, which say "conforms" exactly when the models do
# (tests/test_conformance.py holds the two verdicts equal over its whole corpus, hand
# written and generated); only a packet they find fault with goes to the models, whose
# messages name every problem. Each check takes only what a JSON parse gives (exact
# str, bool, list, dict): anything else goes to the models too, which judge it as ever.
# Fields are in the schema's order, which the canonical form follows.

_Check = Callable[[Any], bool]


def _text(low: int = 0, high: int | None = 1024, pattern: str | None = None) -> _Check:
    """A string of ``low``..``high`` code points (pydantic counts them too), matching
    ``pattern`` whole: ``fullmatch`` is ECMA-262's ``^...$``, where ``$`` is the very end."""
    fits = re.compile(pattern).fullmatch if pattern else None
    return lambda value: (
        type(value) is str
        and low <= len(value)
        and (high is None or len(value) <= high)
        and (fits is None or fits(value) is not None)
    )


def _one_of(*values: str) -> _Check:
    return lambda value: type(value) is str and value in values


def _boolean(value: Any) -> bool:
    return type(value) is bool


def _date_time(value: Any) -> bool:
    return type(value) is str and _match_rfc3339(value) is not None


def _array(item: _Check, most: int) -> _Check:
    return lambda value: type(value) is list and len(value) <= most and all(map(item, value))


class _Object:
    """An object with these fields (in the schema's order), ``required`` among them, and
    no other: null is never a value (an optional field is omitted instead)."""

    __slots__ = ("fields", "required")

    def __init__(self, fields: dict[str, _Check], required: tuple[str, ...] = ()) -> None:
        self.fields = fields
        self.required = frozenset(required)

    def __call__(self, value: Any) -> bool:
        if type(value) is not dict or not self.required <= value.keys():
            return False
        fields = self.fields
        return all(key in fields and fields[key](item) for key, item in value.items())


_TEXT = _text()
_NON_EMPTY = _text(1)
_PACKET_ID = _text(10, 64)
_CONFIDENCE = _one_of("low", "medium", "high")
_OUTCOME = _one_of("succeeded", "failed", "partial")
_TAGS = _array(_text(high=None, pattern=r"[a-z0-9][a-z0-9-]{0,31}"), 16)
_PROJECT = _Object({"name": _text(high=128), "ref": _text(high=256)})
_PROVENANCE = _Object(
    {
        "author_model": _text(high=128),
        "author_human": _text(high=128),
        "source_hash": _text(high=None, pattern=r"sha256:[a-f0-9]{64}"),
        "confidence": _CONFIDENCE,
    }
)
_DECISION = {
    "0.1": _Object({"what": _TEXT, "why": _TEXT, "locked": _boolean}, ("what", "why")),
    "0.2": _Object(
        {"what": _TEXT, "why": _TEXT, "consequences": _TEXT, "locked": _boolean}, ("what", "why")
    ),
}
_ATTEMPT = {
    "0.1": _Object({"tried": _TEXT, "outcome": _OUTCOME, "learned": _TEXT}, ("tried", "outcome")),
    "0.2": _Object(
        {"tried": _TEXT, "outcome": _OUTCOME, "learned": _TEXT, "confidence": _CONFIDENCE},
        ("tried", "outcome"),
    ),
}
_METHOD = _Object(
    {
        "name": _text(high=128, pattern=r"[a-z0-9][a-z0-9-]{0,127}"),
        "when_applicable": _TEXT,
        "how": _text(high=2048),
    },
    ("name", "when_applicable", "how"),
)
_REQUIRED = ("ltm_version", "id", "created_at", "goal", "next_step")
_SHAPES: dict[str, _Object] = {
    "0.1": _Object(
        {
            "ltm_version": _one_of("0.1"),
            "id": _PACKET_ID,
            "created_at": _date_time,
            "project": _PROJECT,
            "goal": _NON_EMPTY,
            "constraints": _array(_TEXT, 32),
            "decisions": _array(_DECISION["0.1"], 64),
            "attempts": _array(_ATTEMPT["0.1"], 64),
            "open_questions": _array(_TEXT, 32),
            "next_step": _NON_EMPTY,
            "tags": _TAGS,
            "provenance": _PROVENANCE,
        },
        _REQUIRED,
    ),
    "0.2": _Object(
        {
            "ltm_version": _one_of("0.2"),
            "id": _PACKET_ID,
            "parent_id": _PACKET_ID,
            "created_at": _date_time,
            "project": _PROJECT,
            "goal": _NON_EMPTY,
            "success_criteria": _array(_TEXT, 16),
            "constraints": _array(_TEXT, 32),
            "decisions": _array(_DECISION["0.2"], 64),
            "methods": _array(_METHOD, 32),
            "attempts": _array(_ATTEMPT["0.2"], 64),
            "open_questions": _array(_TEXT, 32),
            "next_step": _NON_EMPTY,
            "tags": _TAGS,
            "provenance": _PROVENANCE,
        },
        _REQUIRED,
    ),
}

# Canonical key order, the v0.2 schema's (v0.1's order is a subsequence of it): top
# level, then the objects inside the named fields.
_TOP_ORDER: tuple[str, ...] = tuple(_SHAPES["0.2"].fields)
_NESTED_ORDER: dict[str, tuple[str, ...]] = {
    "project": tuple(_PROJECT.fields),
    "provenance": tuple(_PROVENANCE.fields),
    "decisions": tuple(_DECISION["0.2"].fields),
    "methods": tuple(_METHOD.fields),
    "attempts": tuple(_ATTEMPT["0.2"].fields),
}


# --------------------------------------------------------------------------
# Error messages


def _short(value: object, limit: int = 40) -> str:
    """``value`` as an error message quotes it: cut, and never a secret (``quotable``)."""
    from .redact import quotable  # only a message about a bad value pays for it

    instead = quotable(value)
    if instead is not None:
        return instead
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


def _routed(data: dict[str, Any]) -> tuple[list[str], str, dict[str, Any]]:
    """The version errors, and the version and payload the schema judges next: a missing
    or unsupported version is reported, and the rest judged by the current version's."""
    declared = data.get("ltm_version")
    if isinstance(declared, str) and declared in SUPPORTED_VERSIONS:
        return [], declared, data
    supported = ", ".join(SUPPORTED_VERSIONS)
    if "ltm_version" not in data:
        error = f"ltm_version: required (supported: {supported})"
    elif not isinstance(declared, str):
        error = f"ltm_version: must be a string (supported: {supported})"
    else:
        error = f"ltm_version: unsupported version {_short(declared)}; supported: {supported}"
    return [error], CURRENT_VERSION, {**data, "ltm_version": CURRENT_VERSION}


def _schema_errors(data: dict[str, Any]) -> list[str]:
    errors, version, payload = _routed(data)
    if not _SHAPES[version](payload):
        from .models import errors_of  # pydantic: only for a packet with something wrong

        errors += errors_of(payload, version)
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
    return encode(data)[0]


def encode(data: Mapping[str, Any]) -> tuple[bytes, bool]:
    """``canonical_bytes``, and whether ``data`` is ordered as they are: every object's
    keys already in canonical order, so decoding the bytes gives ``data`` back, key order
    included. A packet read from a bundle is (an export wrote it so), and a store that
    reads fields from the decoded bytes (``Store.derive``) may then take ``data`` as is
    and skip the decoding."""
    tree = _ordered(data, _TOP_ORDER, True)
    # https://docs.python.org/3/library/json.html#json.dumps
    text = json.dumps(tree, indent=2, ensure_ascii=False, allow_nan=False)
    return text.encode("utf-8"), _same_order(data, tree)


def _same_order(given: Any, canonical: Any) -> bool:
    """Whether ``given`` is ``canonical`` already: dicts with string keys in its order,
    lists where it has lists (a tuple or another mapping decodes as something else)."""
    if isinstance(canonical, dict):
        return (
            type(given) is dict
            and list(given) == list(canonical)
            and all(type(key) is str for key in given)
            and all(_same_order(given[key], value) for key, value in canonical.items())
        )
    if isinstance(canonical, list):
        return type(given) is list and all(map(_same_order, given, canonical))
    return True


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

    Text over ``MAX_TEXT_BYTES`` (a ``str`` counts as its UTF-8 encoding) is refused
    before any decoding; the 32 KiB cap itself is :func:`check`'s, on the compact
    encoding, so whitespace (an indented file, a pulled packet) never counts against
    it. A server holds a request body to the cap as sent, before parsing (the wire
    rule, as the reference does). The input must be UTF-8 (one leading byte
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
    if len(data) > MAX_TEXT_BYTES:
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
        if not text.strip():  # a closed stdin, an empty file: "line 1, column 1" said nothing
            raise PacketError("packet: empty (no JSON at all)") from None
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
    if "\\ud" in text or "\\uD" in text:
        # A lone surrogate can only come from an escape (the UTF-8 decoding above refuses
        # encoded ones), and only \uD800-\uDFFF escape one: without those, what json.loads
        # made is plain already, and is not walked.
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
    # ``data`` is what the body decodes to, key order included (``encode``'s ordered).
    ordered: bool = field(default=False, init=False, compare=False, repr=False)

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


def check(data: Mapping[str, Any], *, lenient: bool = False, parsed: bool = False) -> Checked:
    """Validate a packet against the model of its declared ``ltm_version``.

    Reports every problem, including the 32 KiB cap. The cap is measured on
    the compact encoding (no insignificant whitespace): a sender's bytes are
    never smaller, so nothing the reference accepts on the wire is refused
    here, while the stored canonical form may indent a little past the cap.
    Not lenient: raises :class:`PacketError` when there is any. Lenient:
    returns them in ``Checked.errors`` (``conforming`` False) for the caller
    to flag. Either way, what no packet can be raises: not an object,
    non-string keys, lone surrogates, values JSON cannot encode.

    ``parsed``: ``data`` is what :func:`parse` returned, which made it plain and
    refused what JSON cannot carry already; it is taken as it is, not copied again.
    """
    if not isinstance(data, Mapping):
        raise PacketError("packet: must be a JSON object")
    if parsed and isinstance(data, dict):
        plain = data
    else:
        problems: list[str] = []
        try:
            plain = _plain(data, (), problems)
        except RecursionError:
            raise PacketError("packet: nested too deeply") from None
        if problems:
            raise PacketError(problems)
    errors = _schema_errors(plain)
    try:
        # The canonical form is the compact one plus whitespace (the same keys and
        # values, indented): within the cap, so is the compact one, and whoever stores
        # the packet needs the canonical bytes anyway.
        body, ordered = encode(plain)
        size = len(body) if len(body) <= MAX_PACKET_BYTES else len(_compact_bytes(plain))
    except (TypeError, ValueError, RecursionError) as exc:
        raise PacketError(f"packet: cannot be encoded as JSON ({exc})") from None
    if size > MAX_PACKET_BYTES:
        errors.append(_too_large(size))
    if errors and not lenient:
        raise PacketError(errors)
    checked = Checked(plain, tuple(errors))
    object.__setattr__(checked, "_body", body)
    object.__setattr__(checked, "ordered", ordered)
    return checked


# --------------------------------------------------------------------------
# Defaults


def new_id() -> str:
    """A new ULID (26 characters, time-ordered)."""
    from .ids import new_ulid

    return new_ulid()


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
