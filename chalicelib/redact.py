"""Redaction pre-flight: find secrets and local paths in a packet.

Packets travel, so before one leaves the machine the writer scans it. Any hit
blocks the push unless the caller passes the one whole-packet override
(``--allow-unredacted``). The server runs the secret class of the same rules
as defense in depth (``scan_packet(..., secrets_only=True)``; see
``ltm.service.packets``). This module only *finds*; callers decide.

Each hit is reported as ``field/kind: match``: a path or local URL cut to 32
characters (plus ``…``), a secret or a match of the user's own patterns by its head
alone (``SECRET_SHOWN``: at most 8 characters and a quarter of the match,
``ghp_aB3d…``), a private key masked, so
a report (a terminal, an agent's context, a CI log) never echoes a usable secret.

Design notes
------------
* Linear time. Python's ``re`` backtracks, so every built-in pattern is written
  without nested or overlapping quantifiers, every repetition is bounded, and
  runs that cannot give anything back are possessive (``{m,n}+``). Boundary
  look-behinds are placed *after* a leading literal so that ``re`` keeps its
  fast literal-prefix search instead of trying the pattern at every offset.
  Rules with no literal to start on are searched only where it can match:
  keyword rules are tried once at each place a keyword starts (``anchored``),
  and the long-token rules (AWS secret keys, base64) only inside runs of
  base64 characters, found by one ``bytes.translate`` + ``bytes.find`` pass.
  Each of these is one bounded match per candidate, and candidates do not
  overlap. Base64 is decoded once per run, and only one level deep.
* Speed. All strings of a packet are joined with NUL separators and each
  built-in rule runs once over the joined text (no pattern can match a NUL, so
  no match crosses a field); offsets are mapped back to fields by bisection.
  User rules run field by field so ``^``/``$``/``.`` keep their usual meaning.
  A rule's needles (literals one of which every match holds) or keywords
  missing from the text skip it; a process that scans many packets rules out
  every missing needle and keyword in one pass of an RE2 set of them
  (``_Literals``).
  A typical 32 KiB packet scans in about 1.4 ms alone, 0.4 ms in a process
  that scans many (see BENCHMARKS.md).
* Normalization. Every string is matched after ``normalize``: zero-width and
  other invisible format characters removed, then NFKC, so a full-width
  ``ｇｈｐ＿…`` or a ``gh\u200bp_…`` split by a zero-width space is caught.
  ASCII text skips it (nothing to fold).
* User rules (``ltm sensitive add``) cannot be vetted like the built-ins, so
  they run on RE2 (``google-re2``), which matches in linear time whatever the
  pattern: ``(a+)+$`` cannot hang a push. RE2 has no backreferences,
  look-arounds or possessive quantifiers; such patterns are refused when
  compiled. It is imported on first use, off the CLI's start-up path.
* Placeholders pass (``_placeholder``): one repeated character
  (``whsec_aaaa…``), ``xxxx``, ``****``, ``<your-key>``, ``${VAR}``/``$VAR``,
  ``{{ var }}``, an ``EXAMPLE`` marker (AWS's ``AKIAIOSFODNN7EXAMPLE``),
  ``changeme``. A ``password=`` style assignment needs a value that looks
  secret: six characters or more, not a word or variable name (letters, ``_``,
  ``.`` and ``-`` only), not a number, a call, a URL or a path.
* Deliberate calls: e-mail addresses are *not* flagged (they are ordinary in
  engineering prose and commit metadata; add a user rule if you need it).
  Home-relative paths (``~/work/acme``) *are* flagged as ``abs-path``: they
  describe one machine's layout and do not resume elsewhere. Bare roots such
  as ``/tmp`` or ``/etc`` are not paths to anything and pass; ``/etc/hosts``
  does not. The password ``password`` in a URL passes (a compose-file
  default), ``pass`` does not. Local URLs are flagged only with a port. A
  40-character token with no "aws"/"secret" near it is an ``aws-secret-key``
  only when it looks random (entropy and character classes, tuned on random
  keys and on this repository: BENCHMARKS.md).
* Scope of ``scan_packet``: every string of the packet, ``id``,
  ``created_at`` and ``ltm_version`` included (a token was once pushed as an
  id), and every object key the schema does not define. A non-conforming
  (lenient) packet is walked defensively, whatever its nesting. A key is
  named in a field path as ``path.<key 3>`` (by position) unless it is short
  and plain and no secret, and a hit in the key itself is reported at
  ``path.key(key)``.
"""

from __future__ import annotations

import re
import sys
from bisect import bisect_left, bisect_right
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import accumulate, islice
from typing import Any, Literal, NamedTuple, Protocol, cast, overload

from .redact_rules import (
    B64_MIN,
    B64_RUN,
    CLI_VALUE,
    RULES,
    VENDOR_ANY_BODY,
    VENDOR_GROUPS,
    VENDOR_KINDS,
    Spec,
)

__all__ = [
    "BUILTIN_KINDS",
    "BUILTIN_RULES",
    "Hit",
    "Match",
    "Pattern",
    "Rule",
    "compile_user_rule",
    "is_secret_kind",
    "normalize",
    "quotable",
    "scan_packet",
    "scan_text",
]

MAX_SHOWN = 32
_ELLIPSIS = "…"
_SEP = "\x00"
_KIND_RE = re.compile(r"[a-z0-9][a-z0-9-]{0,31}")


class Match(Protocol):
    """What the scanner and the checks use of a match: ``re.Match[str]`` or RE2's."""

    def start(self, group: int | str = 0, /) -> int: ...

    def end(self, group: int | str = 0, /) -> int: ...

    def span(self, group: int | str = 0, /) -> tuple[int, int]: ...

    @overload
    def group(self, group: Literal[0] = 0, /) -> str: ...

    @overload
    def group(self, group: int | str, /) -> str | Any: ...

    @property
    def lastgroup(self) -> str | None: ...


class Pattern(Protocol):
    """What the scanner uses of a compiled pattern.

    Built-in rules hold an ``re.Pattern[str]``; user rules an RE2 pattern
    (``compile_user_rule``). Offsets are in characters for both.
    """

    @property
    def pattern(self) -> str: ...

    def finditer(
        self, string: str, pos: int = 0, endpos: int = sys.maxsize, /
    ) -> Iterator[Match]: ...


# A check receives the scanned text and the match; it returns the span to report
# (possibly widened, e.g. to include a URL scheme) or None to drop the match. A
# third number k reports the hit under the rule k places after this one (an
# ``alias``: another kind, mask or rank for what the same search found).
Check = Callable[[str, Match], "tuple[int, int] | tuple[int, int, int] | None"]


@dataclass(frozen=True, slots=True)
class Hit:
    """One finding: where (packet path), what (kind) and the shown text."""

    field: str
    kind: str
    match: str

    def __str__(self) -> str:
        return f"{self.field}/{self.kind}: {self.match}"

    def as_dict(self) -> dict[str, str]:
        return {"field": self.field, "kind": self.kind, "match": self.match}


@dataclass(frozen=True, slots=True)
class Rule:
    """A detector: ``kind`` is reported, ``pattern`` finds candidates.

    ``near`` (lower-case keywords) makes the rule contextual: it only runs
    within ``radius`` characters of a keyword (case-insensitive), and not at
    all on text without one; a keyword window with no run of ``min_len``
    non-space characters is skipped too. Without ``near``, ``min_len`` makes
    the rule run only on runs of at least that many base64 characters
    (``A-Za-z0-9+/=_-``), found by one fast pass shared by such rules.
    An ``alias`` is never searched itself: it names the kind, mask and rank
    under which the check of a rule before it reports some of its hits (one
    search, two verdicts). With ``anchored``, the pattern is tried only where
    a keyword of ``near``
    starts (``near`` then lists the lower-case starts of every match): one
    bounded match per keyword, however often letters of it occur in prose.
    ``mask`` replaces the shown text. ``check`` may veto a match or adjust
    the reported span. ``needles`` are texts one of which every match contains
    (declared with a built-in rule, ``ltm.redact_rules``): a text without any of
    them is not searched.
    ``reach`` lets a match that starts in a run go on past it (``min_len``
    without ``near``): each run is searched with that many characters more.

    ``secret`` marks the secret class (keys, tokens, credentials: what the
    server refuses too; not paths or local URLs): a match that is a
    placeholder (``_placeholder``) is dropped. ``rank`` orders secret rules
    by how telling their kind is: a hit yields to an overlapping secret hit
    of a lower rank in the same field, so one secret is reported once. 0: a
    token's own shape (ghp_..., a JWT); 1: its context only (a ``password=``
    assignment, an ``Authorization`` header); 2: a guess from randomness alone
    (a 40-character base64 token with no keyword near).
    """

    kind: str
    pattern: Pattern
    near: tuple[str, ...] = ()
    radius: int = 0
    min_len: int = 0
    mask: str | None = None
    check: Check | None = field(default=None, compare=False)
    secret: bool = False
    rank: int = 0
    anchored: bool = False
    alias: bool = False
    needles: tuple[str, ...] = ()
    reach: int = 0
    # Shown by its head alone, as a secret is, without the secret class's placeholder
    # filter and ranks: a user's pattern, which may describe a token ltm has no rule for.
    head_only: bool = False


# --------------------------------------------------------------------------- #
# Checks (post-filters). All are O(window) with a small bounded window.
# --------------------------------------------------------------------------- #

_WORDISH = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-")
_SCHEME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789+.-")


def _scheme_start(text: str, pos: int) -> int:
    """Start of a ``scheme`` that ends right before ``pos`` (which points at "://")."""
    start = pos
    limit = max(0, pos - 32)
    while start > limit and text[start - 1] in _SCHEME_CHARS:
        start -= 1
    return start


def _with_scheme(text: str, m: Match) -> tuple[int, int] | None:
    """Widen a host match to the left to include ``scheme://`` when present."""
    start = m.start()
    if start and text[start - 1] in _WORDISH:
        return None  # host glued to a word: "xlocalhost:80" is not a host
    if text.endswith("://", 0, start):
        s = _scheme_start(text, start - 3)
        if s < start - 3:
            return s, m.end()
    return m.span()


# Placeholders pass: what documentation, templates and examples put where a
# secret goes. Markers are searched case-insensitively anywhere in the value.
_PLACEHOLDER_MARKERS = (
    "example",  # AWS's AKIAIOSFODNN7EXAMPLE, "sk_test_example..."
    "changeme",
    "change_me",
    "change-me",
    "replace",  # REPLACE_ME, replace-with-your-key
    "placeholder",
    "redacted",
    "your",  # <your-key>, YOUR_TOKEN, your_api_key_here
    "mypass",  # connection-string docs: Password=myPassword
    "dummy",
    "xxxx",
    "****",
    "...",
    "…",
    "<",
    ">",
    "${",
    "{{",
    "%s",
    "%(",
)
# A value that is only one of these words is a placeholder too.
_PLACEHOLDER_WORDS = frozenset(
    {
        *("password", "passwd", "secret", "token", "changeme", "changeit"),
        *("none", "null", "nil", "true", "false", "empty", "string", "str", "required"),
        *("optional", "hidden", "unset", "todo", "tbd"),
    }
)
_MARKERS = re.compile("|".join(map(re.escape, _PLACEHOLDER_MARKERS)))
# One character repeated 8 times (whsec_aaaa..., AKIA0000...): no random key has it.
_REPEAT = re.compile(r"([^\-_.])\1{7}")


def _placeholder(value: str) -> bool:
    """Whether a matched secret is a stand-in: ``xxxx``, ``<your-key>``, ``${VAR}``...

    Linear: a few substring searches and one bounded regex over the value.
    """
    v = value.strip("\"'` ")
    if not v or v[0] in "${%" or len(set(v)) == 1:
        return True  # $VAR, ${VAR}, {{var}}, %(name)s; "****", "aaaaaa"
    low = v.lower()
    if low in _PLACEHOLDER_WORDS or _MARKERS.search(low) is not None:
        return True
    return _REPEAT.search(v) is not None


def _url_credentials(text: str, m: Match) -> tuple[int, int] | None:
    if _placeholder(m.group("pw")):
        return None
    return _scheme_start(text, m.start()), m.end()


_SECRET_WORDS = ("aws", "secret")
_SECRET_BEFORE = 64  # a keyword this far before the token counts as "next to" it
_SECRET_AFTER = 32  # ... or this far after it
_B64_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789+/=_-")
# A lone 40-char token with no "aws"/"secret" nearby must look random: Shannon
# entropy (bits per character) at least this, 4 to 26 upper-case and 4 to 26
# lower-case letters (CamelCaseIdentifiersOfFortyCharacters have more) and a
# digit. Measured (BENCHMARKS.md; bench/bench_redact.py prints the rate): 99.75% of
# random keys pass; of the 40-char runs in this repository and its virtualenv's
# Python (8,700 files), one does.
_RANDOM_BITS = 4.3
_RANDOM_CASE = (4, 26)


def _entropy(s: str) -> float:
    from collections import Counter
    from math import log2

    n = len(s)
    return -sum(c / n * log2(c / n) for c in Counter(s).values())


_UPPER_B = b"ABCDEFGHIJKLMNOPQRSTUVWXYZ"
_LOWER_B = b"abcdefghijklmnopqrstuvwxyz"
_DIGIT_B = b"0123456789"


def _aws_secret(text: str, m: Match) -> tuple[int, int] | tuple[int, int, int] | None:
    """A 40-char base64 token next to "aws"/"secret", or (a guess) random enough alone.

    Without a keyword, a path such as src/components/UserProfileCard/x.ts or a
    40-character CamelCaseIdentifier does not pass; the guess is reported
    under the next rule (rank 2), so that any more telling hit wins.
    """
    start, end = m.span()
    # The rule runs on base64 runs, so re-check the token's right edge against
    # the full text (a window end looks like the end of the string).
    if end < len(text) and text[end] in _B64_CHARS:
        return None
    tok = m.group()
    raw = tok.encode("ascii")  # the pattern matched ASCII only; counted in C
    n = len(raw)
    upper = n - len(raw.translate(None, _UPPER_B))
    lower = n - len(raw.translate(None, _LOWER_B))
    digits = n - len(raw.translate(None, _DIGIT_B))
    # Real secrets are random base64: mixed case plus digits or symbols. This
    # drops git SHAs (lowercase hex) and long words glued together.
    if not (upper and lower and upper + lower < n):
        return None
    before = text[max(0, start - _SECRET_BEFORE) : start].rpartition(_SEP)[2].lower()
    after = text[end : end + _SECRET_AFTER].partition(_SEP)[0].lower()
    if any(w in before or w in after for w in _SECRET_WORDS):
        return None if _placeholder(tok) else (start, end)
    lo, hi = _RANDOM_CASE
    if not (lo <= upper <= hi and lo <= lower <= hi and digits > 0):
        return None
    # 2 ** 4.3 is about 20: fewer distinct characters cannot reach the entropy.
    if len(set(tok)) < 20 or _entropy(tok) < _RANDOM_BITS or _placeholder(tok):
        return None
    return start, end, 1


# Assignments such as DB_PASSWORD=..., "api_key": "...", secret: ... . The value
# must look like a secret: not a placeholder, not a variable name or a word
# (letters, "_" and "." only), not a number, not a call (getenv(...)), a URL or
# a path.
_ASSIGN_MIN = 6
_WORDLIKE = re.compile(r"[A-Za-z_.\-]{1,4096}+")


def _secret_value(value: str, after: str) -> bool:
    value = value.rstrip("=")  # base64 padding
    if len(value) < _ASSIGN_MIN or (after and after in "(["):
        return False
    if _WORDLIKE.fullmatch(value) or value.replace(".", "").isdigit():
        return False
    if "://" in value or value[0] in "/~.{-":
        return False
    return not _placeholder(value)


def _assignment(text: str, m: Match) -> tuple[int, int] | None:
    start = m.start()
    # "pass", "pwd", "token", "secret" and "api_key" must start a part of the
    # name (DB_PASSWORD, authToken): "bypass:" is no password. "password" may
    # be glued on (PGPASSWORD).
    glued = start and text[start - 1].isalnum()
    camel = glued and text[start - 1].islower() and text[start].isupper()
    if glued and not camel and not m.group("kw").lower().startswith("passw"):
        return None
    v_end = m.end("v")
    if not _secret_value(m.group("v"), text[v_end : v_end + 1]):
        return None
    # Show the whole name (DB_PASSWORD=..., not PASSWORD=...).
    limit = max(0, start - 32)
    while start > limit and (text[start - 1].isalnum() or text[start - 1] in "_-."):
        start -= 1
    return start, v_end


def _conn_password(text: str, m: Match) -> tuple[int, int] | None:
    # Inside a connection string (";Password=", "?password=", "&pwd="): the
    # separator before it says so; any value that is not a placeholder is a hit.
    i = m.start()
    limit = max(0, i - 8)
    while i > limit and text[i - 1] in " \t":
        i -= 1
    if i == 0 or text[i - 1] not in ";?&":
        return None
    value = m.group("v")
    if value[:1] in ("{", '"', "'"):
        value = value[1:-1]
    if not value or _placeholder(value):
        return None
    return m.span()


def _auth_header(text: str, m: Match) -> tuple[int, int] | None:
    value = m.group("v")
    if _placeholder(value):
        return None
    if m.group("scheme").lower() == "basic":
        _, sep, password = _b64_text(value).partition(":")
        if sep and password and not _placeholder(password):
            return m.span()
    # A token: long enough, and not a word or a variable name.
    if len(value) >= 8 and not _WORDLIKE.fullmatch(value) and not value.isdigit():
        return m.span()
    return None


# Base64-wrapped secrets. A base64 run is decoded once (cached per run) and,
# when it decodes to readable text, the secret rules run over that text: one
# level deep, linear in the size of the run.
_URLSAFE = str.maketrans("-_", "+/")


def _b64_text(run: str) -> str:
    """The text a base64 (or base64url) run decodes to, or "" when it is not text."""
    import binascii

    s = run.rstrip("=")
    if ("-" in s or "_" in s) and ("+" in s or "/" in s):
        return ""  # both alphabets: an identifier or a path, not base64
    s = s.translate(_URLSAFE)
    if len(s) % 4 == 1:
        s = s[:-1]
    try:
        text = binascii.a2b_base64(s + "=" * (-len(s) % 4)).decode("utf-8")
    except (binascii.Error, ValueError):
        return ""
    # Readable text only (a PEM, an .env file, a token); binary is not looked at.
    if not text.replace("\n", "").replace("\r", "").replace("\t", "").isprintable():
        return ""
    return text


_B64_CACHE: dict[str, frozenset[str]] = {}


def _b64_kinds(run: str) -> frozenset[str]:
    """The secret kinds found in what a base64 run decodes to."""
    found = _B64_CACHE.get(run)
    if found is None:
        text = _b64_text(run)
        kinds: set[str] = set()
        if text:
            rules = _inner_rules()
            kinds = {rules[i].kind for _, _, i in _spans(text, rules)}
        found = frozenset(kinds)
        if len(_B64_CACHE) >= 64:
            _B64_CACHE.clear()
        _B64_CACHE[run] = found
    return found


# Widths base64 is wrapped at: PEM's 64, MIME's and `base64`'s 76. A secret that
# straddles two lines is in neither line's decoding, only in the block's.
_WRAP_WIDTHS = frozenset({64, 76})
_B64_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/=")


def _wrapped(text: str, start: int, end: int) -> str | None:
    """The base64 block a full-width line at ``start:end`` begins, its line breaks
    taken out; None when the line is not full width, is not the block's first (the
    first decodes the block, once) or no line follows."""
    width = end - start
    if width not in _WRAP_WIDTHS:
        return None
    before = text[max(0, start - width - 2) : start]
    if before.endswith("\n"):
        line = before[:-1].removesuffix("\r")
        full = len(line) >= width and all(c in _B64_CHARS for c in line[-width:])
        if full and (len(line) == width or line[-width - 1] == "\n"):
            return None  # a line inside the block
    lines = [text[start:end]]
    pos = end
    while True:
        nl = 2 if text.startswith("\r\n", pos) else 1 if text.startswith("\n", pos) else 0
        if not nl:
            break
        pos += nl
        stop = pos
        while stop < len(text) and stop - pos <= width and text[stop] in _B64_CHARS:
            stop += 1
        if stop == pos or stop - pos > width:
            break
        lines.append(text[pos:stop])
        pos = stop
        if len(lines[-1]) < width:
            break  # the block's last line
    return "".join(lines) if len(lines) > 1 else None


def _b64_secret(text: str, m: Match) -> tuple[int, int] | tuple[int, int, int] | None:
    """A base64 run holding a secret, alone or as the first line of a wrapped block
    (reported at that line); a private key goes to the next rule (masked)."""
    kinds = _b64_kinds(m.group())
    start, end = m.span()
    if not kinds and end - start in _WRAP_WIDTHS:
        block = _wrapped(text, start, end)
        kinds = _b64_kinds(block) if block else frozenset()
    if not kinds:
        return None
    return (start, end, 1) if "private-key" in kinds else (start, end)


_OPENAI_BODY = re.compile(r"[A-Z0-9]|[a-z]{24}")


def _openai(text: str, m: Match) -> tuple[int, int] | None:
    # "sk-learn-compatible-estimator-wrapper" is prose; keys carry digits or
    # capitals, or at least one long random run.
    if _placeholder(m.group()[3:]):
        return None
    return m.span() if _OPENAI_BODY.search(m.group(), 3) else None


def _has_digit(text: str, m: Match) -> tuple[int, int] | None:
    s = m.group()
    if _placeholder(s[5:]):
        return None
    return m.span() if any(c.isdigit() for c in s[5:]) else None


def _ssh_key_span(text: str, m: Match) -> tuple[int, int] | None:
    """Widen a " AAAA..." match to the left over the key type (e.g. "ssh-ed25519")."""
    start = m.start()
    limit = max(0, start - 40)
    while start > limit and text[start - 1] in _KEYTYPE_CHARS:
        start -= 1
    return start, m.end()


_KEYTYPE_CHARS = frozenset("abcdefghijklmnopqrstuvwxyz0123456789-@.")


_TRAILING = frozenset(".,:;!?")


def _path_span(text: str, m: Match, start: int | None = None) -> tuple[int, int]:
    """The path without trailing sentence punctuation ("see /etc/hosts.")."""
    s = m.start() if start is None else start
    e = m.end()
    while e - s > 3 and text[e - 1] in _TRAILING:
        e -= 1
    return s, e


def _path(text: str, m: Match) -> tuple[int, int] | None:
    return _path_span(text, m)


def _drive_path(text: str, m: Match) -> tuple[int, int] | None:
    """Windows paths are anchored on the colon: include the drive letter."""
    return _path_span(text, m, m.start() - 1)


# --------------------------------------------------------------------------- #
# Vendor formats: checks for the rules after a security review (credentials the
# scan missed). Sources of the formats, cited per rule below: gitleaks' default
# rules (https://github.com/gitleaks/gitleaks/blob/master/config/gitleaks.toml)
# and detect-secrets' plugins
# (https://github.com/Yelp/detect-secrets/tree/master/detect_secrets/plugins).
# The rules are written here, bounded and anchored like the others.
# --------------------------------------------------------------------------- #

_TOKEN_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-")


def _mixed(s: str) -> bool:
    """Letters and digits both: what a random key has and a word or a number has not."""
    return any(c.isdigit() for c in s) and any(c.isalpha() for c in s)


def _vendor(text: str, m: Match) -> tuple[int, int] | tuple[int, int, int] | None:
    """One search for every prefixed vendor token; the group names the kind.

    A token glued to more token characters on the right is something else
    (an identifier that happens to start like one); a body with no digit, or
    none but digits, is a word or a number, not a key.
    """
    name = m.lastgroup or ""
    start, end = m.span()
    if end < len(text) and text[end] in _TOKEN_CHARS:
        return None
    kind, body_at, widen = VENDOR_GROUPS[name]
    body = text[start + body_at : end]
    if not _mixed(body) and kind not in VENDOR_ANY_BODY:
        return None
    if _placeholder(body):
        return None
    return start - widen, end, VENDOR_KINDS.index(kind)


def _random_token(text: str, m: Match) -> tuple[int, int] | None:
    """A token with upper case, lower case and digits (a word, a hex digest or a
    number has not all three), that is no placeholder."""
    value = m.group()
    lower = value.lower()
    if value == lower or value == value.upper() or not _mixed(value) or _placeholder(value):
        return None
    return m.span()


def _sentry_dsn(text: str, m: Match) -> tuple[int, int] | None:
    """A DSN from its "@" on (the rarest character of it to search for): the 32 hex
    characters before it must follow ``http(s)://`` (or its JSON-escaped forms)."""
    key = m.start() - 32
    for sep in ("://", ":\\/\\/", ":\\\\/\\\\/"):
        if text.endswith(sep, 0, key):
            break
    else:
        return None
    colon = key - len(sep)
    start = _scheme_start(text, colon)
    if text[start:colon].lower() not in ("http", "https") or _placeholder(text[key : m.start()]):
        return None
    return start, m.end()


def end_glued(text: str, end: int) -> bool:
    """Whether a match is followed by more token characters (so it is not the whole token)."""
    return end < len(text) and text[end] in _TOKEN_CHARS


def _private_key_body(text: str, m: Match) -> tuple[int, int] | None:
    """DER key material in base64 with no PEM header (the header rule reports the rest).

    PKCS#1 and PKCS#8 private keys start with fixed bytes (the version and the
    algorithm), so their base64 starts alike; a public key (SubjectPublicKeyInfo,
    "MIIBIjANBgkqhkiG9w0BAQEFAAOC") has a BIT STRING where these have an OCTET
    STRING ("...AASC"), and does not match.
    """
    before = text[max(0, m.start() - 96) : m.start()]
    if "PRIVATE KEY" in before:
        return None  # under its header, already reported (once)
    return m.span()


def _telegram(text: str, m: Match) -> tuple[int, int] | None:
    """A bot token "<bot id>:<35 characters>": widen over the id the look-behind checked."""
    secret = m.group("t")
    if end_glued(text, m.end()) or not _mixed(secret) or secret.lower() == secret:
        return None
    start = m.start()
    while start > 0 and text[start - 1].isdigit():
        start -= 1
    return start, m.end()


def _discord_token(text: str, m: Match) -> tuple[int, int] | None:
    """A bot token's first part is the base64 of the bot's numeric id: decode it."""
    import binascii

    if end_glued(text, m.end()):
        return None
    first = m.group("id")
    try:
        raw = binascii.a2b_base64(first + "=" * (-len(first) % 4))
    except binascii.Error:
        return None
    return m.span() if raw.isdigit() and 15 <= len(raw) <= 20 else None


def _widened(width: int) -> Check:
    """A token whose first ``width`` characters a look-behind checked: include them."""

    def check(text: str, m: Match) -> tuple[int, int] | None:
        if end_glued(text, m.end()):
            return None
        start = m.start() - width
        if not _mixed(text[start : m.end()]) or _placeholder(text[start : m.end()]):
            return None
        return start, m.end()

    return check


def _azure_ad_secret(text: str, m: Match) -> tuple[int, int] | None:
    if m.end() < len(text) and text[m.end()] in _TOKEN_CHARS | {"~", "."}:
        return None
    if not _mixed(m.group()) or _placeholder(m.group()):
        return None
    return m.start() - 4, m.end()


# Keys published for local emulators (Azurite, the Cosmos DB emulator): known
# to everyone, like AWS's AKIAIOSFODNN7EXAMPLE.
# https://learn.microsoft.com/en-us/azure/storage/common/storage-use-azurite#connection-strings
_AZURE_EMULATOR_KEYS = (
    "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==",
    "C2y6yDjf5/R+ob0N8A7Cgv30VRDJIWEHLM+4QDU5DE2nQ9nDuVTqobD4b8mGGyPMbIZnqyMsEcaGQy67XIw/Jw==",
)


def _azure_key(text: str, m: Match) -> tuple[int, int] | None:
    value = m.group("v")
    if value in _AZURE_EMULATOR_KEYS or _placeholder(value) or not _mixed(value):
        return None
    return m.span()


def _azure_key_near(text: str, m: Match) -> tuple[int, int] | None:
    """A lone 88-character base64 key (64 bytes) next to "azure"/"storage"/"accountkey"."""
    start, end = m.span()
    if (end < len(text) and text[end] in _B64_CHARS) or m.group() in _AZURE_EMULATOR_KEYS:
        return None
    if start and (text[start - 1].isalnum() or text[start - 1] in "+/"):
        return None
    before = text[max(0, start - 16) : start].lower()
    if "sha512-" in before or "sha384-" in before:
        return None  # a subresource-integrity digest (package-lock.json)
    return None if _placeholder(m.group()) else m.span()


_SAS_FIELDS = ("sv=", "sr=", "se=", "sp=", "skn=", "sharedaccesssignature")


def _azure_sas(text: str, m: Match) -> tuple[int, int] | None:
    """A SAS ``sig=``: in a query or a SharedAccessSignature, next to the fields a SAS has.

    https://learn.microsoft.com/en-us/rest/api/storageservices/create-service-sas
    """
    start = m.start()
    if start == 0 or text[start - 1] not in "?&; \"'":
        return None
    window = text[max(0, start - 400) : m.end() + 200].lower()
    if sum(f in window for f in _SAS_FIELDS) < 2:
        return None
    value = m.group("v")
    # The signature is the base64 of an HMAC-SHA256 (32 bytes), often %-encoded.
    plain = value.replace("%2B", "+").replace("%2b", "+").replace("%2F", "/")
    plain = plain.replace("%2f", "/").replace("%3D", "=").replace("%3d", "=")
    if len(plain.rstrip("=")) < 40 or _placeholder(plain) or not _mixed(plain):
        return None
    return start, m.end()


def _docker_auth(text: str, m: Match) -> tuple[int, int] | None:
    """A config.json ``"auth"``: the base64 of ``user:password``.

    https://docs.docker.com/reference/cli/docker/login/#credential-stores
    """
    value = m.group("v")
    if m.group("k").lower() != "auth":  # identitytoken, registrytoken: a token as is
        return m.span() if len(value) >= 16 and not _placeholder(value) else None
    user, sep, password = _b64_text(value).partition(":")
    if not sep or not password or _placeholder(password) or _placeholder(user + "x"):
        return None
    return m.span()


def _gcp_key_id(text: str, m: Match) -> tuple[int, int] | None:
    return None if _placeholder(m.group("v")) or not _mixed(m.group("v")) else m.span()


# .netrc: "machine HOST login USER password PASS", on one line or several.
# https://www.gnu.org/software/inetutils/manual/html_node/The-_002enetrc-file.html
_NETRC_BEFORE = re.compile(
    r"(?:machine[ \t\r\n]{1,16}+[^\s\x00]{1,253}+|default)"
    r"(?:[ \t\r\n]{1,16}+(?:login|account|port)[ \t\r\n]{1,16}+[^\s\x00]{1,256}+){1,3}"
    r"[ \t\r\n]{1,16}+"
)


def _netrc(text: str, m: Match) -> tuple[int, int] | None:
    start = m.start()
    if start and text[start - 1] not in " \t\n":
        return None
    before = text[max(0, start - 240) : start]
    last = before.rfind("\n\n")
    before = before[last + 2 :] if last != -1 else before
    i = max(before.rfind("machine"), before.rfind("default"))
    if i == -1 or "login" not in before[i:] or _NETRC_BEFORE.fullmatch(before, i) is None:
        return None
    value = m.group("v")
    if len(value) < 3 or _placeholder(value) or value in _NETRC_WORDS:
        return None
    return start, m.end()


_NETRC_WORDS = frozenset({"machine", "default", "login", "password", "account", "macdef", "port"})


# Passwords on command lines. A flag's value is a secret where the command
# takes a password there; the checks below say which flag of which command.
_SENTENCE_END = ".,;:!?)"


def _cli_secret(value: str, after: str, glued: bool = False) -> bool:
    """Whether a command-line value is a real password, not prose or a variable.

    A value with a digit or a symbol is one (unless a placeholder). A value of
    letters only is one when glued to its flag (``-pSecret``), or when the
    command goes on the way command lines do (another flag, a host, a path);
    "sshpass -p takes the password" is prose.
    """
    if _placeholder(value):
        return False  # before trimming: "id=..." ends in a placeholder's dots
    quoted = value[:1] in "'\"" and value[-1:] == value[:1] and len(value) > 1
    v = value[1:-1] if quoted else value.rstrip(_SENTENCE_END)
    if len(v) < 3 or _placeholder(v) or v[0] in "-$%{<~/." or "://" in v:
        return False  # a variable, a flag, a path or a URL
    if "=" in v.rstrip("="):
        return False  # key=value: a flag's spec (--secret id=npmrc,src=...), not a password
    if not v.isalpha():
        return not v.isdigit() or len(v) >= 6
    if glued or quoted or (v.lower() != v and v.upper() != v):
        return True
    nxt = after.split(None, 1)[0] if after.strip() else ""
    if v.lower() in _COMMAND_WORDS:
        return False  # a command's name, not its password ("sshpass -p sshpass")
    if nxt in _REMOTE_COMMANDS:
        return True  # sshpass -p raspberry ssh pi@host
    return bool(nxt) and (nxt[0] in "-@/" or any(c in nxt for c in ".:@/"))


_REMOTE_COMMANDS = frozenset({"ssh", "scp", "sftp", "rsync"})
_COMMAND_WORDS = _REMOTE_COMMANDS | {"sshpass", "mysql", "docker", "podman", "login", "curl"}


def _cli_flag_rules() -> tuple[tuple[re.Pattern[str], re.Pattern[str]], ...]:
    """(command name, flag and value) for each command that takes a password as a flag."""
    v = CLI_VALUE
    return tuple(
        (re.compile(cmd), re.compile(flag))
        for cmd, flag in (
            # mysql -pSECRET (glued: "-p SECRET" prompts and takes a database name)
            # https://dev.mysql.com/doc/refman/8.0/en/connection-options.html#option_general_password
            (
                r"(?:mysql|mariadb)[a-z\-]{0,12}",
                rf"\s(?:-p(?P<g>)(?=[^\s])|--password=){v}",
            ),
            # sshpass -p SECRET (https://linux.die.net/man/1/sshpass)
            (r"sshpass", rf"\s-p\s{{0,4}}+{v}"),
            # curl -u user:SECRET, --user, the proxy's -U (https://curl.se/docs/manpage.html#-u)
            (
                r"curl",
                r"\s(?:-[A-Za-z]{0,5}?[uU]|--user|--proxy-user)(?:=|\s{0,4}+)"
                r"""(?P<v>'[^'\n\x00]{1,256}+'|"[^"\n\x00]{1,256}+"|[^\s\x00'"`;|&<>()]{1,256}+)""",
            ),
            # wget --password=, --http-password=, --ftp-password= (GNU wget manual)
            (r"wget", rf"\s--(?:http-|ftp-|proxy-)?password(?:=|\s{{1,4}}+){v}"),
            # redis-cli -a SECRET (https://redis.io/docs/latest/develop/tools/cli/)
            (r"redis-cli", rf"\s(?:-a|--pass)\s{{1,4}}+{v}"),
            # mongosh/mongodump -p SECRET, --password SECRET
            (r"mongo[a-z]{0,8}", rf"\s(?:-p|--password)(?:=|\s{{1,4}}+){v}"),
            # sqlcmd/bcp -P SECRET
            (r"sqlcmd|bcp", rf"\s-P\s{{0,4}}+{v}"),
            # ldapsearch & co -w SECRET
            (r"ldap[a-z]{2,10}", rf"\s-w\s{{1,4}}+{v}"),
            # htpasswd -b FILE USER SECRET
            (r"htpasswd", rf"\s-[a-zA-Z]{{0,4}}b[a-zA-Z]{{0,4}}\s+\S+\s+\S+\s+{v}"),
            # smbclient -U user%SECRET
            (r"smbclient", r"\s-U\s{0,4}+[^\s%\x00]{1,64}+%(?P<v>[^\s\x00'\"`;|&]{1,128}+)"),
            # zip -P SECRET / unzip -P SECRET
            (r"(?:un)?zip", rf"\s-P\s{{1,4}}+{v}"),
        )
    )


_CLI_FLAGS: tuple[tuple[re.Pattern[str], re.Pattern[str]], ...] | None = None


def _cli_password(text: str, m: Match) -> tuple[int, int] | None:
    """A password flag of the command this match starts with, in the rest of its line."""
    global _CLI_FLAGS
    if _CLI_FLAGS is None:
        _CLI_FLAGS = _cli_flag_rules()
    cmd = m.group("cmd")
    start = m.start()
    if start and (text[start - 1].isalnum() or text[start - 1] in "_-."):
        return None  # part of a longer word (libcurl, pymysql)
    flag = next((f for name, f in _CLI_FLAGS if name.fullmatch(cmd)), None)
    if flag is None:
        return None
    f = flag.search(text, m.end("cmd"), m.end())
    while f is not None:
        v_end = f.end("v")
        glued = "g" in flag.groupindex and f.group("g") is not None
        value = f.group("v")
        if cmd == "curl":
            _, sep, password = value.strip("'\"").partition(":")
            ok = bool(sep) and _cli_secret(password, "", glued=True)
        else:
            ok = _cli_secret(value, text[v_end : min(v_end + 64, m.end())], glued)
        if ok:
            return f.start() + 1, v_end
        f = flag.search(text, f.end(), m.end())
    return None


# Commands whose "login" takes -p/--password: docker, podman, helm registry,
# the OpenShift, Azure and Cloud Foundry CLIs and others.
# https://docs.docker.com/reference/cli/docker/login/ (and the like)
_LOGIN_CMD = re.compile(
    r"(?:^|[\s`'\"(;&|$])(?:sudo\s+)?(?:docker|podman|nerdctl|buildah|skopeo|finch|oras|helm\s+registry"
    r"|crane\s+auth|regctl\s+registry|oc|az(?:\s+acr)?|cf|argocd|kubectl\s+oidc)\s+$"
)
_LOGIN_FLAG = re.compile(rf"\s(?:-p|--password)(?:=|\s{{1,4}}+){CLI_VALUE}")


def _login_password(text: str, m: Match) -> tuple[int, int] | None:
    start = m.start()
    line_start = max(text.rfind("\n", 0, start), start - 48)
    if _LOGIN_CMD.search(text, max(0, line_start), start) is None:
        return None
    f = _LOGIN_FLAG.search(text, m.end("login"), m.end())
    while f is not None:
        v_end = f.end("v")
        if _cli_secret(f.group("v"), text[v_end : min(v_end + 64, m.end())]):
            return f.start() + 1, v_end
        f = _LOGIN_FLAG.search(text, f.end(), m.end())
    return None


def _flag_password(text: str, m: Match) -> tuple[int, int] | None:
    """``--password VALUE``, ``--client-secret=VALUE`` and the like, any command."""
    if m.start() and text[m.start() - 1] not in " \t\n\\\"'`(":
        return None
    v_end = m.end("v")
    return m.span() if _cli_secret(m.group("v"), text[v_end : v_end + 64]) else None


def _openssl_pass(text: str, m: Match) -> tuple[int, int] | None:
    return m.span() if _cli_secret(m.group("v"), "", glued=True) else None


# Key names ending in "key" that do not name a secret.
_NOT_SECRET_KEYS = (
    "primary",
    "foreign",
    "sort",
    "partition",
    "hash",
    "range",
    "row",
    "cache",
    "idempotency",
    "public",
    "publishable",
    "object",
    "bucket",
    "lookup",
    "dedup",
    "group",
    "map",
    "dict",
    "index",
    "composite",
    "natural",
    "surrogate",
    "shard",
    "routing",
    "message",
    "site",
    "license",
)


def _env_key(text: str, m: Match) -> tuple[int, int] | None:
    """``MAPBOX_KEY=...``, ``"stripe_secret_key": "..."``: a name ending in _key, a random value."""
    start = m.start()
    limit = max(0, start - 40)
    s = start
    while s > limit and (text[s - 1].isalnum() or text[s - 1] in "_-."):
        s -= 1
    name = text[s:start].lower().rstrip("_-.")
    if not name or any(name.endswith(w) for w in _NOT_SECRET_KEYS):
        return None
    value = m.group("v")
    v_end = m.end("v")
    if len(value) < 16 or not _mixed(value) or not _secret_value(value, text[v_end : v_end + 1]):
        return None
    return s, v_end


def _vault_legacy(text: str, m: Match) -> tuple[int, int] | None:
    body = m.group()[2:]
    if end_glued(text, m.end()) or not _mixed(body) or body.lower() == body:
        return None
    return None if _placeholder(body) else m.span()


# --------------------------------------------------------------------------- #
# Built-in rules
# --------------------------------------------------------------------------- #


# One byte per character: 0x61 inside the base64 alphabet, 0x20 outside (``_Text.runs``).
_RUN_TABLE = bytes(
    0x61 if chr(c).isascii() and (chr(c).isalnum() or chr(c) in "+/=_-") else 0x20
    for c in range(256)
)


# The checks a rule of the table (``ltm.redact_rules``) names.
CHECKS: dict[str, Check] = {
    "assignment": _assignment,
    "auth_header": _auth_header,
    "aws_secret": _aws_secret,
    "azure_ad_secret": _azure_ad_secret,
    "azure_key": _azure_key,
    "azure_key_near": _azure_key_near,
    "azure_sas": _azure_sas,
    "b64_secret": _b64_secret,
    "cli_password": _cli_password,
    "conn_password": _conn_password,
    "discord_token": _discord_token,
    "docker_auth": _docker_auth,
    "drive_path": _drive_path,
    "env_key": _env_key,
    "flag_password": _flag_password,
    "gcp_key_id": _gcp_key_id,
    "has_digit": _has_digit,
    "login_password": _login_password,
    "netrc": _netrc,
    "openai": _openai,
    "openssl_pass": _openssl_pass,
    "path": _path,
    "private_key_body": _private_key_body,
    "random_token": _random_token,
    "sentry_dsn": _sentry_dsn,
    "ssh_key_span": _ssh_key_span,
    "telegram": _telegram,
    "url_credentials": _url_credentials,
    "vault_legacy": _vault_legacy,
    "vendor": _vendor,
    "with_scheme": _with_scheme,
}


class _Builtin:
    """A built-in rule's ``re`` pattern, compiled at its first search, not when the rules
    are built: a scan searches only the rules whose needles or keywords its text holds,
    and compiling all of them cost every ``ltm save`` about 20 ms of its start-up
    (bench/bench_cli_startup.py)."""

    __slots__ = ("_compiled", "pattern")

    def __init__(self, regex: str) -> None:
        self.pattern = regex
        self._compiled: re.Pattern[str] | None = None

    def compiled(self) -> re.Pattern[str]:
        compiled = self._compiled
        if compiled is None:
            compiled = self._compiled = re.compile(self.pattern)  # a race compiles twice
        return compiled

    def finditer(self, string: str, pos: int = 0, endpos: int = sys.maxsize, /) -> Iterator[Match]:
        return self.compiled().finditer(string, pos, endpos)

    def match(self, string: str, pos: int = 0, endpos: int = sys.maxsize) -> Match | None:
        return self.compiled().match(string, pos, endpos)

    def search(self, string: str, pos: int = 0, endpos: int = sys.maxsize) -> Match | None:
        return self.compiled().search(string, pos, endpos)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Builtin) and other.pattern == self.pattern

    def __hash__(self) -> int:
        return hash((_Builtin, self.pattern))

    def __repr__(self) -> str:
        return f"re.compile({self.pattern!r})"


def _compiled(spec: Spec) -> Rule:
    """A row of the table, compiled: its check named there looked up here."""
    check = _widened(spec.widen) if spec.check == "widened" else CHECKS.get(spec.check or "")
    if spec.check and check is None:
        raise KeyError(f"no check {spec.check!r} for the rule of {spec.kind}")
    return Rule(
        spec.kind,
        _Builtin(spec.regex),
        spec.near,
        spec.radius,
        spec.min_len,
        spec.mask,
        check,
        spec.secret,
        spec.rank,
        spec.anchored,
        spec.alias,
        spec.needles,
        spec.reach,
    )


def _build_rules() -> tuple[Rule, ...]:
    return tuple(_compiled(spec) for spec in RULES)


# The built-in rules are built on first use, not at import: `import ltm.redact` stays
# cheap on the CLI's start-up path (each pattern is compiled at its first search).
BUILTIN_RULES: tuple[Rule, ...]  # provided by __getattr__ below
BUILTIN_KINDS: tuple[str, ...]  # ditto: the distinct kinds, in rule order
_rules: tuple[Rule, ...] | None = None


_secret_rules: tuple[Rule, ...] | None = None
_inner: tuple[Rule, ...] | None = None


def _builtin_rules() -> tuple[Rule, ...]:
    global _rules
    if _rules is None:
        _rules = _build_rules()  # idempotent: a race only compiles twice
    return _rules


def _secret_builtin_rules() -> tuple[Rule, ...]:
    """The secret class alone: what the server-side scan runs."""
    global _secret_rules
    if _secret_rules is None:
        _secret_rules = tuple(r for r in _builtin_rules() if r.secret)
    return _secret_rules


def _inner_rules() -> tuple[Rule, ...]:
    """The rules run over decoded base64: the secret class, minus the base64 rules."""
    global _inner
    if _inner is None:
        _inner = tuple(r for r in _secret_builtin_rules() if r.pattern.pattern != B64_RUN)
    return _inner


def is_secret_kind(kind: str) -> bool:
    """Whether a built-in kind is of the secret class (keys, tokens, credentials)."""
    return any(r.kind == kind and r.secret for r in _builtin_rules())


def quotable(value: object) -> str | None:
    """None if ``value`` may be quoted in a message; else what to say instead.

    Error messages quote what they judged (an unknown field's name, a date that is
    not one); a secret put there would be echoed by the very refusal, to a
    terminal, an agent's context or a server's 4xx body.
    """
    if not isinstance(value, str):
        return None
    for kind, _ in scan_text(value):
        if is_secret_kind(kind):
            return f"<a {kind}, not shown>"
    return None


def __getattr__(name: str) -> Any:
    if name == "BUILTIN_RULES":
        return _builtin_rules()
    if name == "BUILTIN_KINDS":
        return tuple(dict.fromkeys(r.kind for r in _builtin_rules()))
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


# --------------------------------------------------------------------------- #
# User rules
# --------------------------------------------------------------------------- #


_RE2_LIMITS = "no backreferences, look-arounds or possessive quantifiers"


def compile_user_rule(kind: str, regex: str) -> Rule:
    """Compile a user-defined pattern (from config) into a Rule that runs on RE2.

    Raises ValueError with a one-line message for a bad kind, an empty pattern,
    a pattern RE2 refuses (invalid, or a feature RE2 leaves out because it
    cannot run in linear time) or a pattern that can match the empty string.
    """
    if not isinstance(kind, str) or not _KIND_RE.fullmatch(kind):
        raise ValueError(
            f"invalid kind {kind!r}: use 1-32 chars of a-z, 0-9 and '-', starting with a-z or 0-9"
        )
    if not isinstance(regex, str) or not regex:
        raise ValueError(f"empty pattern for kind {kind!r}")
    import re2  # type: ignore[import-untyped]  # here, not at import: start-up time

    options = re2.Options()
    options.log_errors = False  # RE2 would also log the error to stderr
    # Folded as the text it runs on is (``normalize``): a pattern with a full-width letter,
    # a ligature or a decomposed accent never matched, not even its own text.
    regex = normalize(regex)
    try:
        compiled = re2.compile(regex, options)
    except re2.error as e:
        raise ValueError(
            f"invalid regex for kind {kind!r}: {_re2_reason(e)} (a pattern must be RE2 "
            f"syntax, which is linear-time: {_RE2_LIMITS})"
        ) from None
    except UnicodeEncodeError:  # a lone surrogate, e.g. from a non-UTF-8 command line
        raise ValueError(f"invalid regex for kind {kind!r}: not valid Unicode text") from None
    pattern = _RE2Pattern(compiled, regex)
    if _can_match_empty(pattern):
        raise ValueError(f"pattern for kind {kind!r} matches the empty string: {regex!r}")
    return Rule(kind, pattern, head_only=True)


def _re2_reason(error: Exception) -> str:
    """RE2's own words for a refused pattern, on one printable line."""
    reason = error.args[0] if error.args else ""
    if isinstance(reason, bytes):
        reason = reason.decode("utf-8", "replace")
    reason = str(reason) or "refused by RE2"
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in reason)


# Characters RE2 cannot take (it reads UTF-8); replaced one for one, so offsets hold.
_SURROGATES = "[\ud800-\udfff]"


# RE2 finds one match in linear time, but every match is a search of its own from
# where the last one ended, and a search may read to the end of the text before it
# settles (``x*y|x`` on a run of x: each one-character hit reads the whole run). So
# a user pattern's scan of a field stops after this many hits: O(USER_HITS x n) (9.7 ms
# for 32 KiB where 32,768 hits took 1.1 s: BENCHMARKS.md); one hit already blocks the push.
USER_HITS = 100


class _RE2Pattern:
    """A user pattern compiled by RE2, with the ``finditer`` of ``re.Pattern``.

    RE2 reads UTF-8, so a text with lone surrogates (not Unicode, but they can
    reach the scanner from an unvalidated packet or a non-UTF-8 command line)
    is searched with each one replaced by U+FFFD: same length, same offsets.
    At most ``USER_HITS`` matches per call (one field).
    """

    __slots__ = ("_compiled", "pattern")

    def __init__(self, compiled: Any, pattern: str) -> None:
        self._compiled = compiled
        self.pattern = pattern

    def finditer(self, string: str, pos: int = 0, endpos: int = sys.maxsize, /) -> Iterator[Match]:
        if not string.isascii():
            string = re.sub(_SURROGATES, "\ufffd", string)
        it: Iterator[Match] = self._compiled.finditer(string, pos, endpos)
        return islice(it, USER_HITS)

    def fullmatch(self, string: str, pos: int = 0, endpos: int = sys.maxsize) -> Match | None:
        m: Match | None = self._compiled.fullmatch(string, pos, endpos)
        return m

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _RE2Pattern) and other.pattern == self.pattern

    def __hash__(self) -> int:
        return hash((_RE2Pattern, self.pattern))

    def __repr__(self) -> str:
        return f"re2.compile({self.pattern!r})"


# Every context an empty match can see: the character before it (none, a
# newline, an ASCII word character, anything else) and the one after it.
_SIDES = ("", "\n", "a", " ")


def _can_match_empty(pattern: _RE2Pattern) -> bool:
    """Whether the pattern can match the empty string, anywhere in any text.

    An empty match reads no character, so whether one exists at a position
    depends only on RE2's zero-width assertions there (``^ $ \\A \\z \\b \\B``,
    with or without ``(?m)``), and those look only at the two neighbours: the
    start or end of the text, a newline, an ASCII word character (RE2's ``\\b``
    is ASCII), or anything else. So the 16 pairs of neighbours below cover
    every case, and anchoring both ends on the empty span between them keeps a
    longer alternative (``x|``) from hiding the empty one.
    """
    return any(
        pattern.fullmatch(before + after, len(before), len(before)) is not None
        for before in _SIDES
        for after in _SIDES
    )


# --------------------------------------------------------------------------- #
# Scanning
# --------------------------------------------------------------------------- #


# A secret is shown by its head alone: at most this many characters, and a quarter
# of the match, enough to find it by (ghp_aB3d…, DB_PA…), never enough to use it.
# Cut at 32 characters, a 40-character GitHub token lost only its last 8, six of
# them its checksum.
SECRET_SHOWN = 8


def _shown(rule: Rule, text: str, masked: bool = True) -> str:
    """What a report shows of a match: the mask, a secret's head, or the text cut.

    ``masked=False`` (a caller that only locates secrets, never prints them) cuts a
    secret like any other match."""
    if rule.mask is not None:
        return rule.mask
    if masked and (rule.secret or rule.head_only):
        return text[: min(SECRET_SHOWN, len(text) // 4)] + _ELLIPSIS
    if len(text) > MAX_SHOWN:
        return text[:MAX_SHOWN] + _ELLIPSIS
    return text


# Characters that render as nothing and can split a key so that no pattern sees
# it: Unicode's Default_Ignorable_Code_Point, all of it (DerivedCoreProperties.txt):
# soft hyphen, Hangul fillers, Khmer inherent vowels, Mongolian and other variation
# selectors, zero-width space/joiners, bidi marks and overrides, word joiner and
# the invisible operators, BOM, the tag characters (E0000-E0FFF, which smuggle
# ASCII invisibly) and the unassigned rest of that property.
_INVISIBLE = re.compile(
    "[\u00ad\u034f\u061c\u115f\u1160\u17b4\u17b5\u180b-\u180f\u200b-\u200f"
    "\u202a-\u202e\u2060-\u206f\u3164\ufe00-\ufe0f\ufeff\uffa0\ufff0-\ufff8"
    "\U0001bca0-\U0001bca3\U0001d173-\U0001d17a\U000e0000-\U000e0fff]"
)


def normalize(text: str) -> str:
    """The text as matched: invisible format characters removed, then NFKC.

    NFKC folds full-width and other compatibility forms (``ｇｈｐ＿`` is
    ``ghp_``). Reported matches are cut from this text. ASCII is returned as
    it is (nothing to fold), so a typical packet pays nothing for this.
    """
    if text.isascii():
        return text
    import unicodedata

    text = _INVISIBLE.sub("", text)
    if not unicodedata.is_normalized("NFKC", text):
        text = unicodedata.normalize("NFKC", text)
    return text


# Characters of a base64 run; anything else (and non-ASCII) ends one.


class _Literals:
    """Which of many literals a text lacks, found in one pass: an RE2 set of the
    literals, matched byte for byte (Latin-1 over the text's UTF-8, so a lone
    surrogate is a byte like any other) instead of one ``in`` search a literal.

    A set whose match failed would read as "every literal absent" (the binding
    returns no indices either way: RE2::Set::Match's verdict is dropped), and the
    rules would be skipped. RE2 fails a match only when its DFA outgrows its memory
    budget; the automaton of a set of literals has at most one state a prefix of
    them (a few hundred here, under a megabyte), and the budget is set far above
    that. The set is also tried once on every literal before it is used.
    """

    def __init__(self, words: Iterable[str]) -> None:
        import re2

        options = re2.Options()
        options.encoding = re2.Options.Encoding.LATIN1
        options.literal = True
        options.max_mem = 64 << 20
        self.words = tuple(sorted(set(words)))
        self._all = frozenset(self.words)
        self._set = re2.Set.SearchSet(options)
        for word in self.words:
            self._set.Add(word.encode())
        self._set.Compile()
        if self.absent("\x00".join(self.words)):
            raise RuntimeError("the RE2 set of literals does not find them")

    def absent(self, text: str) -> frozenset[str]:
        hits = self._set.Match(text.encode("utf-8", "surrogatepass"))
        return self._all.difference(self.words[i] for i in hits) if hits else self._all


# The built-in rules' needles, and their keywords: built by ``_counted`` once a
# process has scanned ``_SETS_AFTER`` times. Building them imports RE2 (about 2.4 ms,
# BENCHMARKS.md's import costs), more than a few scans win back (``ltm save`` scans
# once); a process that scans many packets (an import, a server, the MCP shim) gets
# them early.
_SETS_AFTER = 8
# A text shorter than this is searched needle by needle (``in``): the set's pass has
# a fixed cost of about a microsecond, which ``in`` over a short text beats.
_SET_MIN_LEN = 128
_sets: tuple[_Literals, _Literals] | None = None
_scans = 0


def _counted() -> None:
    """One scan more in this process; at ``_SETS_AFTER``, the literal sets are built."""
    global _scans
    if _scans >= _SETS_AFTER:
        return
    _scans += 1
    if _scans >= _SETS_AFTER:
        _build_sets()


def ready_for_many() -> None:
    """Make this process ready to scan many packets now: the built-in rules compiled and
    their literal sets built, which its first scans would otherwise do (an import's
    worker processes, while the importer reads the first lines)."""
    global _scans
    if _scans < _SETS_AFTER:
        _scans = _SETS_AFTER
        _build_sets()


def _build_sets() -> None:
    global _sets
    rules = _builtin_rules()
    needles = (needle for r in rules for needle in r.needles)
    try:
        _sets = (_Literals(needles), _Literals(w for r in rules for w in r.near))
    except (ImportError, RuntimeError):  # without them, each needle is searched for
        _sets = None


_NONE: frozenset[str] = frozenset()


class _Text:
    """One text to scan, and what several rules derive from it (computed once)."""

    __slots__ = ("_found", "_lower", "_no_needles", "_no_words", "_runs", "text")

    def __init__(self, text: str) -> None:
        self.text = text
        self._lower: str | None = None
        self._runs: list[tuple[int, int]] | None = None
        self._found: dict[str, list[int]] = {}
        self._no_needles: frozenset[str] | None = None
        self._no_words: frozenset[str] | None = None

    def absent_needles(self) -> frozenset[str]:
        """Built-in needles the text is known to lack: where the sets exist and the text is
        long, one pass rules out every one it lacks (most of them); else none is known."""
        absent = self._no_needles
        if absent is None:
            sets = _sets
            long = len(self.text) >= _SET_MIN_LEN
            absent = self._no_needles = (
                sets[0].absent(self.text) if sets is not None and long else _NONE
            )
        return absent

    def absent_words(self) -> frozenset[str]:
        """Built-in keywords the lower-cased text is known to lack (none known without
        the sets, or in a short text: each keyword is then searched where it is used)."""
        absent = self._no_words
        if absent is None:
            sets = _sets
            long = len(self.text) >= _SET_MIN_LEN
            absent = self._no_words = (
                sets[1].absent(self.lower()) if sets is not None and long else _NONE
            )
        return absent

    def lower(self) -> str:
        if self._lower is None:
            self._lower = self.text.lower()
        return self._lower

    def positions(self, word: str) -> list[int]:
        """Every start of ``word`` in the lower-cased text (searched once per text)."""
        found = self._found.get(word)
        if found is None:
            low, found = self.lower(), []
            i = low.find(word)
            while i != -1:
                found.append(i)
                i = low.find(word, i + 1)
            self._found[word] = found
        return found

    def runs(self) -> list[tuple[int, int]]:
        """Spans of the runs of at least ``B64_MIN`` base64 characters.

        One pass in C: each character maps to one byte ("a" inside the base64
        alphabet, " " outside, non-ASCII included: offsets hold), then
        ``bytes.find`` jumps from run to run.
        """
        if self._runs is None:
            mapped = self.text.encode("ascii", "replace").translate(_RUN_TABLE)
            needle, n = b"a" * B64_MIN, len(mapped)
            runs: list[tuple[int, int]] = []
            i = mapped.find(needle)
            while i != -1:
                j = mapped.find(b" ", i + B64_MIN)
                j = n if j == -1 else j
                runs.append((i, j))
                i = mapped.find(needle, j)
            self._runs = runs
        return self._runs


_MAX_WINDOWS = 256  # beyond this many keyword hits, scan the whole text once
_MAX_RUNS = 32  # beyond this many base64 runs, a rule searching runs searches the whole text


def _windows(rule: Rule, t: _Text) -> list[tuple[int, int]]:
    """The spans of the text a rule must search: all of it, keyword windows or runs."""
    text = t.text
    if not rule.near:
        n = len(text)
        if rule.min_len:
            k, reach = rule.min_len, rule.reach
            runs = [(a, min(n, b + reach)) for a, b in t.runs() if b - a >= k]
            # Each search has a fixed cost: past a few dozen runs, one pass over the
            # whole text is cheaper where the rule has a needle for re's prefix search to
            # skip to, and finds the same (tests/test_redact.py).
            return runs if len(runs) <= _MAX_RUNS or not rule.needles else [(0, n)]
        return [(0, n)]
    low = t.lower()
    if len(low) != len(text):  # lower() changed the length (rare Unicode): be safe
        return [(0, len(text))]
    hits: list[int] = []
    absent = t.absent_words()
    for word in rule.near:
        if word in absent:
            continue
        i = low.find(word)
        while i != -1:
            hits.append(i)
            if len(hits) > _MAX_WINDOWS:
                return [(0, len(text))]
            i = low.find(word, i + 1)
    if not hits:
        return []
    hits.sort()
    r, n, w = rule.radius, len(text), max(map(len, rule.near))
    merged: list[tuple[int, int]] = []
    for i in hits:
        a, b = max(0, i - r), min(n, i + w + r)
        if merged and a <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], b))
        else:
            merged.append((a, b))
    if rule.min_len:
        k = rule.min_len
        merged = [(a, b) for a, b in merged if any(len(t) >= k for t in text[a:b].split())]
    return merged


_MAX_TAIL_HITS = 64  # past this many, search a shared ending's keywords one by one


_TAILS: dict[tuple[str, ...], list[tuple[str, frozenset[str], tuple[int, ...]]]] = {}


def _tails(near: tuple[str, ...]) -> list[tuple[str, frozenset[str], tuple[int, ...]]]:
    """A rule's keywords grouped by their last three letters, with their lengths (once)."""
    found = _TAILS.get(near)
    if found is None:
        groups: dict[str, set[str]] = {}
        for word in near:
            groups.setdefault(word[-3:], set()).add(word)
        found = [
            (tail, frozenset(words), tuple(sorted({len(w) for w in words})))
            for tail, words in groups.items()
        ]
        _TAILS[near] = found
    return found


def _anchors(rule: Rule, t: _Text) -> list[int] | None:
    """Where an anchored rule starts, in order; None to search the whole text.

    Keywords that end alike (api_key, access-key, privatekey...) are found with
    one search for the shared ending, then checked in place; each search of
    the text is made once per scan, whichever rules ask for it. Where the
    ending is everywhere ("pass" in a run of "password="), each keyword is
    searched on its own instead: a ``str.find`` pass in C beats a Python
    step per occurrence of the ending.
    """
    low = t.lower()
    if len(low) != len(t.text):  # lower() changed the length (rare Unicode)
        return None
    starts: set[int] = set()
    absent = t.absent_words()
    for tail, words, lengths in _tails(rule.near):
        if words <= absent:
            continue
        ends = t.positions(tail) if len(words) > 1 else ()
        if len(ends) > _MAX_TAIL_HITS or len(words) == 1:
            for word in words:
                starts.update(t.positions(word))
            continue
        for i in ends:
            end = i + len(tail)
            for n in lengths:  # one slice and one set lookup per length
                if n <= end and low[end - n : end] in words:
                    starts.add(end - n)
    return sorted(starts)


def _matches(rule: Rule, t: _Text) -> Iterator[Match]:
    """Every match of a rule's pattern, searched where the rule says (see Rule)."""
    text, pattern = t.text, rule.pattern
    if rule.anchored:
        starts = _anchors(rule, t)
        if starts is not None:
            # Anchored rules are built-in; the compiled pattern's own method, as it is
            # called at every keyword (65,536 times on 32 KiB of dashes).
            match = cast(_Builtin, pattern).compiled().match
            end = 0
            for i in starts:
                if i >= end:  # not inside the previous match: linear overall
                    m = match(text, i)
                    if m is not None:
                        end = m.end()
                        yield m
            return
        yield from pattern.finditer(text)
        return
    for a, b in _windows(rule, t):
        yield from pattern.finditer(text, a, b)


class _Plan(NamedTuple):
    """A rule list's search order, made once: the rules searched on every text, and those
    with needles grouped by needle, so a text's needles rule out their rules together."""

    always: tuple[int, ...]  # neither an alias nor with needles
    needles: dict[str, tuple[int, ...]]  # needle: the rules it is one of the needles of
    all_needles: frozenset[str]
    # Without the literal sets: the needles of the rules with one, and the rules with
    # several, which are searched (see _searched).
    single: dict[str, tuple[int, ...]]
    several: tuple[int, ...]


_PLANS: dict[int, tuple[Sequence[Rule], _Plan]] = {}


def _plan(rules: Sequence[Rule]) -> _Plan:
    """``rules``' plan, kept for a tuple (the built-in lists, made once a process: the
    few others a caller may pass are forgotten past a handful)."""
    held = _PLANS.get(id(rules))
    if held is not None and held[0] is rules:
        return held[1]
    needles: dict[str, list[int]] = {}
    single: dict[str, list[int]] = {}
    for i, rule in enumerate(rules):
        if not rule.alias:
            for needle in rule.needles:
                needles.setdefault(needle, []).append(i)
            if len(rule.needles) == 1:
                single.setdefault(rule.needles[0], []).append(i)
    plan = _Plan(
        tuple(i for i, r in enumerate(rules) if not r.alias and not r.needles),
        {needle: tuple(found) for needle, found in needles.items()},
        frozenset(needles),
        {needle: tuple(found) for needle, found in single.items()},
        tuple(i for i, r in enumerate(rules) if not r.alias and len(r.needles) > 1),
    )
    if isinstance(rules, tuple):
        if len(_PLANS) >= 8:
            _PLANS.clear()
        _PLANS[id(rules)] = (rules, plan)  # the tuple is kept alive with its plan
    return plan


def _searched(rules: Sequence[Rule], t: _Text) -> list[int]:
    """The indices of the rules to search ``t`` with, in order: every rule but the aliases
    and those none of whose needles ``t`` holds.

    Where the literal sets ruled out the needles ``t`` lacks (``absent_needles``), the
    few left are looked for. Without them (a process's first scans, a short text), a
    rule with several needles is searched without looking for each: an ``in`` test a
    needle, each a walk of the text, costs more than the pattern's own prefix search.
    """
    plan = _plan(rules)
    text = t.text
    absent = t.absent_needles()
    found = set(plan.always)
    if absent:
        for needle in plan.all_needles.difference(absent):
            if needle in text:
                found.update(plan.needles[needle])
    else:
        found.update(plan.several)
        for needle, ruled in plan.single.items():
            if needle in text:
                found.update(ruled)
    return sorted(found)


def _spans(
    text: str | _Text, rules: Sequence[Rule], base: int = 0
) -> Iterator[tuple[int, int, int]]:
    """(start, end, base + rule index) for every hit of ``rules`` in ``text``."""
    t = text if isinstance(text, _Text) else _Text(text)
    for i in _searched(rules, t):
        rule = rules[i]
        check = rule.check
        # A check decides on placeholders itself; a plain secret pattern gets the veto.
        veto = rule.secret and check is None and rule.mask is None
        for m in _matches(rule, t):
            k = 0
            if check is None:
                if veto and _placeholder(m.group()):
                    continue
                s, e = m.span()
            else:
                span = check(t.text, m)
                if span is None:
                    continue
                s, e = span[0], span[1]
                if len(span) == 3:
                    k = span[2]
            if e > s:  # user patterns are vetted, but never report empty hits
                yield s, e, base + i + k


Found = tuple[int, int, int, int]  # (field index, start, rule index, end)


def _unshadowed(found: list[Found], rules: Sequence[Rule]) -> list[Found]:
    """Drop each hit that overlaps a secret hit of a lower rank in the same field,
    and each that repeats one before it (same field, span and kind: two rules, such
    as the two assignment rules on ``API_KEY="..."``, that found the same thing).

    ``api_key = sk-ant-...`` is an anthropic-key, not also a secret-assignment.
    O(h log h) in the number of hits.
    """
    top = max((rules[i].rank for _, _, i, _ in found), default=0)
    for rank in range(1, top + 1):
        lower: dict[int, list[tuple[int, int]]] = {}
        for f, s, i, e in found:
            if rules[i].secret and rules[i].rank < rank:
                lower.setdefault(f, []).append((s, e))
        index: dict[int, tuple[list[int], list[int]]] = {}
        for f, spans in lower.items():
            spans.sort()
            index[f] = ([s for s, _ in spans], list(accumulate((e for _, e in spans), max)))
        kept: list[Found] = []
        for item in found:
            f, s, i, e = item
            if rules[i].rank == rank and f in index:
                starts, reach = index[f]
                j = bisect_left(starts, e) - 1  # the lower hits that start before this ends
                if j >= 0 and reach[j] > s:
                    continue
            kept.append(item)
        found = kept
    seen: set[tuple[int, int, str, int]] = set()
    once: list[Found] = []
    for item in found:
        f, s, i, e = item
        key = (f, s, rules[i].kind, e)
        if key not in seen:
            seen.add(key)
            once.append(item)
    return once


def scan_text(
    text: str, extra: Sequence[Rule] = (), *, masked: bool = True
) -> list[tuple[str, str]]:
    """Scan one string; return ``[(kind, shown_match)]`` in text order.

    ``masked=False`` shows the first 32 characters of a secret too (``_shown``), for a
    caller that only needs to find it in the text."""
    if not isinstance(text, str):
        return []
    _counted()
    t = _Text(normalize(text))
    builtin = _builtin_rules()
    n = len(builtin)
    rules = (*builtin, *extra)
    found = sorted(
        {(0, s, i, e) for s, e, i in (*_spans(t, builtin), *_spans(t, extra, n))},
        key=lambda h: (h[1], h[2], h[3]),
    )
    shown = [
        (rules[i].kind, _shown(rules[i], t.text[s:e], masked))
        for _, s, i, e in _unshadowed(found, rules)
    ]
    decoded = _decoded_hits([("", t.text)], set(shown), masked)
    return shown + [(hit.kind, hit.match) for hit in decoded]


# Schema order of the top-level fields, and of the keys inside objects. Every
# string is scanned, the id and timestamps included (an id can be a pasted token).
_TOP_FIELDS = (
    "ltm_version",
    "id",
    "created_at",
    "parent_id",
    "project",
    "goal",
    "success_criteria",
    "constraints",
    "decisions",
    "methods",
    "attempts",
    "open_questions",
    "next_step",
    "tags",
    "provenance",
)
_SUBKEYS: dict[str, tuple[str, ...]] = {
    "project": ("name", "ref"),
    "decisions": ("what", "why", "consequences"),
    "methods": ("name", "when_applicable", "how"),
    "attempts": ("tried", "learned"),
    "provenance": ("author_model", "author_human", "source_hash", "confidence"),
}
# Key names the schema defines are not scanned as text; any other key is.
_SCHEMA_KEYS = frozenset(
    (*_TOP_FIELDS, *(k for keys in _SUBKEYS.values() for k in keys), "locked", "outcome")
)
# A key outside the schema is named in a field path only when it is short and
# plain; otherwise by position (``<key 2>``), so no path echoes a long secret or
# a control character.
_PLAIN_KEY = re.compile(r"[A-Za-z0-9_\-]{1,32}")


_ORDERS: dict[tuple[str, ...], dict[str, int]] = {}
_CONTAINERS = frozenset({dict, list, tuple})  # checked by type first: ABC checks are slow


def _ordered_items(
    obj: Mapping[Any, Any], known: tuple[str, ...], hidden: frozenset[str] = frozenset()
) -> list[tuple[str, Any, str]]:
    """(path segment, value, key text) in ``known`` order, then the others in theirs.

    The key text is "" for a schema key (not scanned as text). A key in ``hidden``
    (one a hit was found in) is named by position however plain it is.
    """
    order = _ORDERS.get(known)
    if order is None:
        order = _ORDERS[known] = {k: n for n, k in enumerate(known)}
    first: list[tuple[int, str, Any]] = []
    rest: list[tuple[int, Any, Any]] = []
    for i, (k, v) in enumerate(obj.items()):
        if isinstance(k, str) and k in order:
            first.append((order[k], k, v))
        else:
            rest.append((i, k, v))
    first.sort(key=_by_rank)
    items: list[tuple[str, Any, str]] = [(k, v, "") for _, k, v in first]
    for i, k, v in rest:
        name = str(k)
        if name in _SCHEMA_KEYS:
            items.append((name, v, ""))
        else:
            plain = _PLAIN_KEY.fullmatch(name) and name not in hidden
            items.append((name if plain else f"<key {i}>", v, name))
    return items


def _by_rank(item: tuple[int, str, Any]) -> int:
    return item[0]


def _collect(
    packet: Mapping[str, Any], hidden: frozenset[str] = frozenset()
) -> list[tuple[str, str]]:
    """(path, string) for every string to scan, keys included, in schema order.

    A key outside the schema is listed as ``path(key)`` right before its value.
    ``hidden``: keys to name by position (``_ordered_items``).
    """
    out: list[tuple[str, str]] = []
    seen: set[int] = {id(packet)}
    for name, value, key in _ordered_items(packet, _TOP_FIELDS, hidden):
        if key:
            out.append((f"{name}(key)", key))
        known = _SUBKEYS.get(name, ()) if not key else ()
        # Iterative depth-first walk (no recursion limit, no cycles), children
        # pushed in reverse so they pop in order.
        stack: list[tuple[str, Any, int]] = [(name, value, 0)]
        while stack:
            path, v, depth = stack.pop()
            if type(v) is str or isinstance(v, str):
                out.append((path, v))
            elif type(v) in _CONTAINERS or isinstance(v, Mapping | list | tuple):
                if id(v) in seen:
                    continue
                seen.add(id(v))
                children: list[tuple[str, Any]] = []
                if type(v) is dict or isinstance(v, Mapping):
                    # Known keys apply to the field's own object (project,
                    # provenance) and to the items of its array (decisions[i]).
                    for seg, c, k in _ordered_items(v, known if depth <= 1 else (), hidden):
                        if k:
                            children.append((f"{path}.{seg}(key)", k))
                        children.append((f"{path}.{seg}", c))
                else:
                    children = [(f"{path}[{i}]", c) for i, c in enumerate(v)]
                stack.extend((p, c, depth + 1) for p, c in reversed(children))
    return out


_SCALARS = frozenset({int, float, bool, type(None)})


def _plain_texts(packet: Mapping[str, Any]) -> list[str] | None:
    """The strings ``_collect`` lists, in its order, without their paths (which only a
    hit needs), walked fast; None unless the packet is plain JSON values shaped as the
    schema has them (strings, lists of strings, objects or lists of objects of
    strings and scalars) under schema keys alone: ``_collect`` then walks it."""
    top = _schema_items(packet, _TOP_FIELDS) if type(packet) is dict else None
    if top is None:
        return None
    seen = {id(packet)}
    out: list[str] = []
    for name, value in top:
        if type(value) is str:
            out.append(value)
            continue
        if type(value) in _SCALARS:
            continue
        if type(value) not in (list, dict) or id(value) in seen:
            return None  # deeper shapes, and one object twice (_collect lists it once)
        known = _SUBKEYS.get(name, ())
        for item in value if type(value) is list else (value,):
            if type(item) is str:
                out.append(item)
                continue
            if type(item) in _SCALARS:
                continue
            items = _schema_items(item, known) if type(item) is dict else None
            if items is None or id(item) in seen:
                return None
            seen.add(id(item))
            for _, leaf in items:
                if type(leaf) is str:
                    out.append(leaf)
                elif type(leaf) not in _SCALARS:
                    return None
        seen.add(id(value))
    return out


def _schema_items(obj: dict[Any, Any], known: tuple[str, ...]) -> list[tuple[str, Any]] | None:
    """``obj``'s items in ``_ordered_items``'s order when every key is a schema key (none
    is scanned as text); None otherwise."""
    order = _ORDERS.get(known)
    if order is None:
        order = _ORDERS[known] = {k: n for n, k in enumerate(known)}
    first: list[tuple[int, str, Any]] = []
    rest: list[tuple[str, Any]] = []
    for k, v in obj.items():
        if type(k) is not str:
            return None
        rank = order.get(k)
        if rank is not None:
            first.append((rank, k, v))
        elif k in _SCHEMA_KEYS:
            rest.append((k, v))
        else:
            return None
    first.sort(key=_by_rank)
    return [(k, v) for _, k, v in first] + rest


def scan_packet(
    packet: Mapping[str, Any], extra: Sequence[Rule] = (), *, secrets_only: bool = False
) -> list[Hit]:
    """Scan a packet (a plain dict; may be non-conforming) and list every hit.

    Every string is scanned, object keys included, after ``normalize``. Order
    is deterministic: by field in schema order, then by position in the field,
    then by rule order (built-ins first, then ``extra``). ``secrets_only``
    runs the secret class alone (the server-side scan: no paths, no local URLs).
    """
    if not isinstance(packet, Mapping):
        return []
    _counted()
    plain = _plain_texts(packet)
    strings = None if plain is not None else _strings(packet)
    texts = [normalize(t) for t in plain] if plain is not None else [t for _, t in strings or ()]
    if not texts:
        return []
    starts: list[int] = []
    pos = 0
    for text in texts:
        starts.append(pos)
        pos += len(text) + 1
    joined = _Text(_SEP.join(texts))

    found: list[Found] = []
    builtin = _secret_builtin_rules() if secrets_only else _builtin_rules()
    for s, e, idx in _spans(joined, builtin):
        f = bisect_right(starts, s) - 1
        base = starts[f]
        found.append((f, s - base, idx, min(e - base, len(texts[f]))))
    if extra:
        n = len(builtin)
        for f, text in enumerate(texts):
            for s, e, idx in _spans(text, extra, n):
                found.append((f, s, idx, e))
    escaped = (  # one search of the joined text: most packets have no %XX at all
        [f for f, text in enumerate(texts) if _PERCENT.search(text)]
        if "%" in joined.text and _PERCENT.search(joined.text)
        else []
    )
    if not found and not escaped:
        return []
    found.sort()
    if strings is None:  # the paths, for the hits
        strings = _strings(packet)

    rules = (*builtin, *extra)
    hits: list[Hit] = []
    last: Found | None = None
    for item in _unshadowed(found, rules):
        if item == last:
            continue
        last = item
        f, s, idx, e = item
        path, text = strings[f]
        rule = rules[idx]
        hits.append(Hit(path, rule.kind, _shown(rule, text[s:e])))
    if escaped:
        seen = {(h.field, h.kind, h.match) for h in hits}
        hits += _decoded_hits([strings[f] for f in escaped], seen)
    return _keys_hidden(packet, strings, hits)


def _keys_hidden(
    packet: Mapping[str, Any], strings: list[tuple[str, str]], hits: list[Hit]
) -> list[Hit]:
    """``hits`` with every key a secret was found in named by position in every path.

    A short plain key names its path (``notes.db(key)``), but a key that is itself
    a secret (an AWS key id as an object key) would then be echoed by the field of
    every report, the server's refusal included, which lists fields alone.
    """
    secret_paths = {h.field for h in hits if h.field.endswith("(key)") and is_secret_kind(h.kind)}
    hidden = frozenset(
        text for path, text in strings if path in secret_paths and _PLAIN_KEY.fullmatch(text)
    )
    if not hidden:
        return hits
    renamed = dict(
        zip((p for p, _ in strings), (p for p, _ in _collect(packet, hidden)), strict=True)
    )
    return [Hit(renamed.get(h.field, h.field), h.kind, h.match) for h in hits]


# A percent-encoded octet (RFC 3986 §2.1): a secret in a URL's query or path is often
# written so (ghp%5F...), which no rule reads as itself.
_PERCENT = re.compile(r"%[0-9A-Fa-f]{2}")


def _decoded_hits(strings: Sequence[tuple[str, str]], seen: Any, masked: bool = True) -> list[Hit]:
    """The secrets in each (path, text) once its %XX escapes are decoded (one level, as
    base64 is), other than those the text itself showed (``seen``: (path, kind, shown),
    or (kind, shown) for ``scan_text``)."""
    from urllib.parse import unquote

    rules = _secret_builtin_rules()
    out: list[Hit] = []
    for path, text in strings:
        if "%" not in text or not _PERCENT.search(text):
            continue
        decoded = normalize(unquote(text, errors="replace"))
        found = sorted((0, s, idx, e) for s, e, idx in _spans(decoded, rules))
        for _, s, idx, e in _unshadowed(found, rules):
            hit = Hit(path, rules[idx].kind, _shown(rules[idx], decoded[s:e], masked))
            key = (hit.kind, hit.match) if not path else (path, hit.kind, hit.match)
            if key not in seen:
                seen.add(key)
                out.append(hit)
    return out


def _strings(packet: Mapping[str, Any]) -> list[tuple[str, str]]:
    return [(path, normalize(text)) for path, text in _collect(packet)]
