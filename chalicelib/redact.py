"""Client-side redaction pre-flight: find secrets and local paths in a packet.

Packets travel, so before one leaves the machine the writer scans its prose
fields. Any hit blocks the push unless the caller passes the one whole-packet
override (``--allow-unredacted``). This module only *finds*; callers decide.

Each hit is reported as ``field/kind: match`` with the matched text cut to 32
characters (plus ``…``); private-key headers are masked so key material is
never echoed.

Design notes
------------
* Linear time. Python's ``re`` backtracks, so every built-in pattern is written
  without nested or overlapping quantifiers, every repetition is bounded, and
  runs that cannot give anything back are possessive (``{m,n}+``). Boundary
  look-behinds are placed *after* a leading literal so that ``re`` keeps its
  fast literal-prefix search instead of trying the pattern at every offset.
* Speed. All strings of a packet are joined with NUL separators and each
  built-in rule runs once over the joined text (no pattern can match a NUL, so
  no match crosses a field); offsets are mapped back to fields by bisection.
  The one contextual rule (AWS secret keys: a 40-char token near "aws" or
  "secret") only searches windows around its keywords. User rules run field
  by field so ``^``/``$``/``.`` keep their usual meaning. A typical 32 KiB
  packet scans in about 1.2 ms (see BENCHMARKS.md).
* User rules (``ltm sensitive add``) cannot be vetted like the built-ins, so
  they run on RE2 (``google-re2``), which matches in linear time whatever the
  pattern: ``(a+)+$`` cannot hang a push. RE2 has no backreferences,
  look-arounds or possessive quantifiers; such patterns are refused when
  compiled. It is imported on first use, off the CLI's start-up path.
* Deliberate calls: e-mail addresses are *not* flagged (they are ordinary in
  engineering prose and commit metadata; add a user rule if you need it).
  Home-relative paths (``~/work/acme``) *are* flagged as ``abs-path``: they
  describe one machine's layout and do not resume elsewhere. Bare roots such
  as ``/tmp`` or ``/etc`` are not paths to anything and pass; ``/etc/hosts``
  does not. Placeholder passwords in URLs (``${DB_PASSWORD}``, ``****``,
  ``password``) pass. Local URLs are flagged only with a port.
* Scope of ``scan_packet``: the prose fields of the schema, ``parent_id``,
  ``project``, ``tags`` and every key of ``provenance``; ``id``,
  ``created_at`` and ``ltm_version`` are never scanned. A non-conforming
  (lenient) packet is walked defensively: whatever strings sit under a known
  field are scanned, whatever their nesting, and unknown top-level keys are
  scanned too (they would travel with the packet all the same).
"""

from __future__ import annotations

import re
import sys
from bisect import bisect_right
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, overload

__all__ = [
    "BUILTIN_KINDS",
    "BUILTIN_RULES",
    "Hit",
    "Match",
    "Pattern",
    "Rule",
    "compile_user_rule",
    "scan_packet",
    "scan_text",
]

MAX_SHOWN = 32
_ELLIPSIS = "…"
_KEY_MASK = "-----BEGIN … PRIVATE KEY-----"
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


class Pattern(Protocol):
    """What the scanner uses of a compiled pattern.

    Built-in rules hold an ``re.Pattern[str]``; user rules an RE2 pattern
    (``compile_user_rule``). Offsets are in characters for both.
    """

    def finditer(
        self, string: str, pos: int = 0, endpos: int = sys.maxsize, /
    ) -> Iterator[Match]: ...


# A check receives the scanned text and the match; it returns the span to report
# (possibly widened, e.g. to include a URL scheme) or None to drop the match.
Check = Callable[[str, Match], "tuple[int, int] | None"]


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
    non-space characters is skipped too. ``mask`` replaces the shown text.
    ``check`` may veto a match or adjust the reported span.
    """

    kind: str
    pattern: Pattern
    near: tuple[str, ...] = ()
    radius: int = 0
    min_len: int = 0
    mask: str | None = None
    check: Check | None = field(default=None, compare=False)


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


_PLACEHOLDER_PW = re.compile(
    r"(?:\$\{?\w{1,64}\}?|\{\{?[^}]{0,64}\}\}?|%[sd]|\*{1,64}|[xX]{1,64}|\.{3}|"
    r"pass|password|passwd|pwd|secret|changeme|pw|token)",
)


def _url_credentials(text: str, m: Match) -> tuple[int, int] | None:
    if _PLACEHOLDER_PW.fullmatch(m.group("pw")):
        return None
    return _scheme_start(text, m.start()), m.end()


_SECRET_WORDS = ("aws", "secret")
_SECRET_BEFORE = 64  # a keyword this far before the token counts as "next to" it
_SECRET_AFTER = 32  # ... or this far after it
_B64_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789+/=")


def _aws_secret(text: str, m: Match) -> tuple[int, int] | None:
    start, end = m.span()
    # The rule runs on keyword windows, so re-check the token's right edge
    # against the full text (a window end looks like the end of the string).
    if end < len(text) and text[end] in _B64_CHARS:
        return None
    tok = m.group()
    # Real secrets are random base64: mixed case plus digits or symbols. This
    # drops git SHAs (lowercase hex) and long words glued together.
    has_upper = has_lower = has_other = False
    for c in tok:
        if "A" <= c <= "Z":
            has_upper = True
        elif "a" <= c <= "z":
            has_lower = True
        else:
            has_other = True
    if not (has_upper and has_lower and has_other):
        return None
    before = text[max(0, start - _SECRET_BEFORE) : start].rpartition(_SEP)[2].lower()
    after = text[end : end + _SECRET_AFTER].partition(_SEP)[0].lower()
    if any(w in before or w in after for w in _SECRET_WORDS):
        return start, end
    return None


_OPENAI_BODY = re.compile(r"[A-Z0-9]|[a-z]{24}")


def _openai(text: str, m: Match) -> tuple[int, int] | None:
    # "sk-learn-compatible-estimator-wrapper" is prose; keys carry digits or
    # capitals, or at least one long random run.
    return m.span() if _OPENAI_BODY.search(m.group(), 3) else None


def _has_digit(text: str, m: Match) -> tuple[int, int] | None:
    s = m.group()
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
# Built-in rules
# --------------------------------------------------------------------------- #

# Characters that may continue a path once it has started (no whitespace, no NUL,
# no quotes or brackets that usually close prose around a path).
_PATH_CONT = r"""[^\s\x00"'`<>|,;()\[\]{}]{0,4096}+"""
# The first name character after a root: a word-ish char, or a dot + word char
# (".config") but not a sentence-ending dot ("see /etc/.").
_NAME_START = r"(?:[\w\-@+%$]|\.[\w\-])"
_POSIX_ROOTS = "home|Users|root|etc|var|opt|usr|tmp|private|mnt|srv|Volumes|Library|Applications"


def _r(
    kind: str,
    regex: str,
    *,
    near: tuple[str, ...] = (),
    radius: int = 0,
    min_len: int = 0,
    mask: str | None = None,
    check: Check | None = None,
) -> Rule:
    return Rule(kind, re.compile(regex), near, radius, min_len, mask, check)


_PORT = r":[0-9]{2,5}+(?![0-9])"
_OCTET = r"[0-9]{1,3}+"
_SSH_TYPES = (
    "ssh-rsa",
    "ssh-dss",
    "ssh-ed25519",
    "ssh-ed448",
    "ecdsa-sha2-nistp256",
    "ecdsa-sha2-nistp384",
    "ecdsa-sha2-nistp521",
    "sk-ssh-ed25519@openssh.com",
    "sk-ecdsa-sha2-nistp256@openssh.com",
)


def _build_rules() -> tuple[Rule, ...]:
    # Every pattern starts with a literal (or a tiny set of literals) so that `re`
    # finds candidates with its fast prefix search; boundary look-behinds come
    # right after that literal. All repetitions are bounded and, where a run is
    # followed by something it cannot contain, possessive.
    return (
        # Private-key headers: the header alone is matched, and masked anyway.
        _r(
            "private-key",
            r"-----BEGIN (?:[A-Z0-9]{1,12}+ ){0,2}PRIVATE KEY(?: BLOCK)?-----"
            r"|---- BEGIN (?:[A-Z0-9]{1,12}+ ){0,2}PRIVATE KEY ----",
            mask=_KEY_MASK,
        ),
        # Absolute POSIX paths under a home or system root, followed by a name.
        # The look-behind rejects "/home" inside a URL path, a relative path
        # (src/etc/x) or a C:/Users path (left to windows-path); file:///home/x is
        # a local path all the same.
        _r(
            "abs-path",
            rf"/(?:(?<![\w.:/\\~\-]/)|(?<=file:///))(?:{_POSIX_ROOTS})/{_NAME_START}{_PATH_CONT}",
            check=_path,
        ),
        _r("abs-path", rf"~/(?<![\w.:/\\~\-]~/){_NAME_START}{_PATH_CONT}", check=_path),
        # Windows drive paths C:\x, C:/x, C:\\x (JSON-escaped twice). Anchored on
        # the colon; the drive letter must stand alone (not "http:/", "key:/").
        _r(
            "windows-path",
            r":(?<![\w\\][A-Za-z]:)(?<=[A-Za-z]:)(?:\\{1,2}+|/)"
            + _NAME_START
            + r"""[^\s\x00"'`<>|*?]{0,4096}+""",
            check=_drive_path,
        ),
        # UNC paths \\server\share, and device paths \\?\ and \\.\ .
        _r(
            "unc-path",
            r"\\\\(?<![\w/\\]\\\\)\\{0,2}+(?:[?.]\\{1,2}+|[A-Za-z0-9$][\w.$\-]{1,62}+\\{1,2}+)"
            + _NAME_START
            + r"""[^\s\x00"'`<>|*?]{0,4096}+""",
            check=_path,
        ),
        # AWS access key IDs (AKIA long-term, ASIA temporary, other IAM prefixes).
        _r(
            "aws-access-key",
            r"A(?:KIA|SIA|BIA|CCA|GPA|IDA|IPA|NPA|NVA|ROA|PKA)"
            r"(?<![A-Za-z0-9]....)[A-Z0-9]{16}(?![A-Za-z0-9])",
        ),
        # AWS secret access keys: a lone 40-char base64-ish token near "aws"/"secret".
        _r(
            "aws-secret-key",
            r"(?<![A-Za-z0-9/+])[A-Za-z0-9/+]{40}(?![A-Za-z0-9/+=])",
            near=_SECRET_WORDS,
            radius=_SECRET_BEFORE + 40,
            min_len=40,
            check=_aws_secret,
        ),
        _r(
            "aws-arn",
            r"arn:aws(?<![\w\-]arn:aws)(?:-[a-z]{1,12}+){0,3}:[a-z0-9\-]{1,64}+:[a-z0-9\-]{0,32}+:"
            r"""(?:[0-9]{12}|aws)?:[^\s\x00"'`<>,;()\[\]{}]{1,256}+""",
        ),
        _r("github-token", r"gh[pousr]_(?<![\w]gh._)[A-Za-z0-9]{36,251}+"),
        _r("github-token", r"github_pat_[A-Za-z0-9_]{30,255}+"),
        _r("gitlab-token", r"gl(?:pat|dt|ptt|rt|cbt|soat|ft)-[A-Za-z0-9_\-]{20,255}+"),
        _r("npm-token", r"npm_(?<![\w]npm_)[A-Za-z0-9]{36,64}+"),
        # Our own bearer tokens (chalicelib/service/tokens.py): ltm_ + [user id + _] + 64 hex.
        _r("ltm-token", r"ltm_(?<![\w]ltm_)(?:[0-9A-HJKMNP-TV-Z]{26}_)?[0-9a-f]{64}+"),
        _r(
            "pypi-token",
            r"pypi-Ag(?:EIcHlwaS5vcmc|ENdGVzdC5weXBpLm9yZw)[A-Za-z0-9_\-]{32,1024}+",
        ),
        _r(
            "jwt",
            r"eyJ(?<![\w\-]eyJ)[A-Za-z0-9_\-]{7,4096}+\.ey[A-Za-z0-9_\-]{2,8192}+"
            r"\.[A-Za-z0-9_\-]{0,4096}+",
        ),
        _r("google-api-key", r"AIza(?<![\w\-]AIza)[A-Za-z0-9_\-]{35}(?![\w\-])"),
        _r("google-oauth-secret", r"GOCSPX-[A-Za-z0-9_\-]{24,40}+"),
        _r(
            "slack-token",
            r"xox[abeprs]-(?<![\w\-]xox.-)[A-Za-z0-9\-]{10,250}+|xapp-[0-9]-[A-Za-z0-9\-]{10,250}+",
            check=_has_digit,
        ),
        _r(
            "slack-webhook",
            r"hooks\.slack\.com/(?:services|workflows|triggers)/[A-Za-z0-9_/\-]{8,256}+",
        ),
        _r(
            "discord-webhook",
            r"discord(?:app)?\.com/api/webhooks/[0-9]{5,30}+/[A-Za-z0-9_\-]{20,256}+",
        ),
        _r("stripe-secret-key", r"sk_(?<![\w]sk_)(?:live|test)_[A-Za-z0-9]{16,247}+"),
        _r("stripe-restricted-key", r"rk_(?<![\w]rk_)(?:live|test)_[A-Za-z0-9]{16,247}+"),
        _r("stripe-webhook-secret", r"whsec_(?<![\w]whsec_)[A-Za-z0-9+/=]{20,256}+"),
        # SSH public keys, anchored on " AAAA" (the base64 of the key-type length);
        # the key type before it is checked by look-behinds and then shown.
        _r(
            "ssh-public-key",
            r" AAAA(?:"
            + "|".join(f"(?<={re.escape(t)} AAAA)" for t in _SSH_TYPES)
            + r")[A-Za-z0-9+/]{16,8192}+",
            check=_ssh_key_span,
        ),
        _r("anthropic-key", r"sk-ant-(?<![\w\-]sk-ant-)[A-Za-z0-9_\-]{20,400}+"),
        _r("openrouter-key", r"sk-or-v1-(?<![\w\-]sk-or-v1-)[a-f0-9]{64}"),
        _r(
            "openai-key",
            r"sk-(?<![\w\-]sk-)(?!ant-|or-v1-)[A-Za-z0-9_\-]{20,400}+",
            check=_openai,
        ),
        _r("huggingface-token", r"hf_(?<![\w]hf_)[A-Za-z0-9]{34,64}+"),
        _r("groq-key", r"gsk_(?<![\w]gsk_)[A-Za-z0-9]{48,64}+"),
        _r("xai-key", r"xai-(?<![\w\-]xai-)[A-Za-z0-9]{70,100}+"),
        _r("docker-hub-token", r"dckr_pat_[A-Za-z0-9_\-]{24,64}+"),
        _r("digitalocean-token", r"do[por]_v1_[a-f0-9]{64}"),
        _r("sendgrid-key", r"SG\.(?<![\w]SG\.)[A-Za-z0-9_\-]{22}\.[A-Za-z0-9_\-]{43}"),
        # Credentials inside URLs: scheme://user:pass@host (anchored on "://").
        _r(
            "url-credentials",
            r"://(?<=[A-Za-z0-9+.\-]://)[^\s\x00/:@\"'`<>]{0,128}+:"
            r"""(?P<pw>[^\s\x00/@"'`<>]{1,256}+)@[^\s\x00/@"'`<>?#]{1,255}+""",
            check=_url_credentials,
        ),
        # Local and private-network hosts with a port; the scheme is shown if any.
        _r("local-url", r"localhost(?<![\w\-]localhost)" + _PORT, check=_with_scheme),
        _r("local-url", r"host\.docker\.internal" + _PORT, check=_with_scheme),
        _r("local-url", r"0\.0\.0\.0(?<![\w.]0\.0\.0\.0)" + _PORT, check=_with_scheme),
        _r("local-url", r"\[::1?\]" + _PORT, check=_with_scheme),
        # Loopback and RFC 1918 IPv4 hosts, one pass anchored on the leading "1".
        _r(
            "local-url",
            rf"1(?:27\.(?<![\w.]127\.){_OCTET}\.{_OCTET}\.{_OCTET}"
            rf"|0\.(?<![\w.]10\.){_OCTET}\.{_OCTET}\.{_OCTET}"
            rf"|92\.168\.(?<![\w.]192\.168\.){_OCTET}\.{_OCTET}"
            rf"|72\.(?<![\w.]172\.)(?:1[6-9]|2[0-9]|3[01])\.{_OCTET}\.{_OCTET})" + _PORT,
            check=_with_scheme,
        ),
    )


# The built-in rules are compiled on first use, not at import: `import ltm.redact`
# stays cheap on the CLI's start-up path (compiling them all takes a few ms).
BUILTIN_RULES: tuple[Rule, ...]  # provided by __getattr__ below
BUILTIN_KINDS: tuple[str, ...]  # ditto: the distinct kinds, in rule order
_rules: tuple[Rule, ...] | None = None


def _builtin_rules() -> tuple[Rule, ...]:
    global _rules
    if _rules is None:
        _rules = _build_rules()  # idempotent: a race only compiles twice
    return _rules


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
    return Rule(kind, pattern)


def _re2_reason(error: Exception) -> str:
    """RE2's own words for a refused pattern, on one printable line."""
    reason = error.args[0] if error.args else ""
    if isinstance(reason, bytes):
        reason = reason.decode("utf-8", "replace")
    reason = str(reason) or "refused by RE2"
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in reason)


# Characters RE2 cannot take (it reads UTF-8); replaced one for one, so offsets hold.
_SURROGATES = "[\ud800-\udfff]"


class _RE2Pattern:
    """A user pattern compiled by RE2, with the ``finditer`` of ``re.Pattern``.

    RE2 reads UTF-8, so a text with lone surrogates (not Unicode, but they can
    reach the scanner from an unvalidated packet or a non-UTF-8 command line)
    is searched with each one replaced by U+FFFD: same length, same offsets.
    """

    __slots__ = ("_compiled", "pattern")

    def __init__(self, compiled: Any, pattern: str) -> None:
        self._compiled = compiled
        self.pattern = pattern

    def finditer(self, string: str, pos: int = 0, endpos: int = sys.maxsize, /) -> Iterator[Match]:
        if not string.isascii():
            string = re.sub(_SURROGATES, "\ufffd", string)
        it: Iterator[Match] = self._compiled.finditer(string, pos, endpos)
        return it

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


def _shown(rule: Rule, text: str) -> str:
    if rule.mask is not None:
        return rule.mask
    if len(text) > MAX_SHOWN:
        return text[:MAX_SHOWN] + _ELLIPSIS
    return text


_MAX_WINDOWS = 256  # beyond this many keyword hits, scan the whole text once


def _windows(rule: Rule, text: str, lower: list[str]) -> list[tuple[int, int]]:
    """The spans of ``text`` a rule must search: all of it, or keyword windows."""
    if not rule.near:
        return [(0, len(text))]
    if not lower:
        lower.append(text.lower())
    low = lower[0]
    if len(low) != len(text):  # lower() changed the length (rare Unicode): be safe
        return [(0, len(text))]
    hits: list[int] = []
    for word in rule.near:
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


def _spans(text: str, rules: Sequence[Rule], base: int = 0) -> Iterator[tuple[int, int, int]]:
    """(start, end, base + rule index) for every hit of ``rules`` in ``text``."""
    lower: list[str] = []
    for i, rule in enumerate(rules):
        finditer, check = rule.pattern.finditer, rule.check
        for a, b in _windows(rule, text, lower):
            for m in finditer(text, a, b):
                if check is None:
                    s, e = m.span()
                else:
                    span = check(text, m)
                    if span is None:
                        continue
                    s, e = span
                if e > s:  # user patterns are vetted, but never report empty hits
                    yield s, e, base + i


def scan_text(text: str, extra: Sequence[Rule] = ()) -> list[tuple[str, str]]:
    """Scan one string; return ``[(kind, shown_match)]`` in text order."""
    if not isinstance(text, str):
        return []
    builtin = _builtin_rules()
    n = len(builtin)
    rules = (*builtin, *extra)
    found = sorted(
        {*_spans(text, builtin), *_spans(text, extra, n)},
        key=lambda h: (h[0], h[2], h[1]),
    )
    return [(rules[i].kind, _shown(rules[i], text[s:e])) for s, e, i in found]


# Schema order of the scanned top-level fields, and of the keys inside objects.
_TOP_FIELDS = (
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
_NEVER_SCANNED = frozenset({"ltm_version", "id", "created_at"})
_SUBKEYS: dict[str, tuple[str, ...]] = {
    "project": ("name", "ref"),
    "decisions": ("what", "why", "consequences"),
    "methods": ("name", "when_applicable", "how"),
    "attempts": ("tried", "learned"),
    "provenance": ("author_model", "author_human", "source_hash", "confidence"),
}


def _ordered_items(obj: Mapping[Any, Any], known: tuple[str, ...]) -> list[tuple[str, Any]]:
    items = [(k, obj[k]) for k in known if k in obj]
    items += [(str(k), v) for k, v in obj.items() if k not in known]
    return items


def _collect(packet: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(path, string) for every string to scan, in deterministic schema order."""
    out: list[tuple[str, str]] = []
    seen: set[int] = set()
    top = [(k, packet[k]) for k in _TOP_FIELDS if k in packet]
    top += [
        (str(k), v) for k, v in packet.items() if k not in _NEVER_SCANNED and k not in _TOP_FIELDS
    ]
    for name, value in top:
        known = _SUBKEYS.get(name, ())
        # Iterative depth-first walk (no recursion limit, no cycles), children
        # pushed in reverse so they pop in order.
        stack: list[tuple[str, Any, int]] = [(name, value, 0)]
        while stack:
            path, v, depth = stack.pop()
            if isinstance(v, str):
                out.append((path, v))
            elif isinstance(v, Mapping | list | tuple):
                if id(v) in seen:
                    continue
                seen.add(id(v))
                if isinstance(v, Mapping):
                    # Known keys apply to the field's own object (project,
                    # provenance) and to the items of its array (decisions[i]).
                    keys = known if depth <= 1 else ()
                    children = [(f"{path}.{k}", c) for k, c in _ordered_items(v, keys)]
                else:
                    children = [(f"{path}[{i}]", c) for i, c in enumerate(v)]
                stack.extend((p, c, depth + 1) for p, c in reversed(children))
    return out


def scan_packet(packet: Mapping[str, Any], extra: Sequence[Rule] = ()) -> list[Hit]:
    """Scan a packet (a plain dict; may be non-conforming) and list every hit.

    Order is deterministic: by field in schema order, then by position in the
    field, then by rule order (built-ins first, then ``extra``).
    """
    if not isinstance(packet, Mapping):
        return []
    strings = _collect(packet)
    if not strings:
        return []
    starts: list[int] = []
    pos = 0
    for _, text in strings:
        starts.append(pos)
        pos += len(text) + 1
    joined = _SEP.join(text for _, text in strings)

    found: list[tuple[int, int, int, int]] = []  # (field index, start, rule index, end)
    builtin = _builtin_rules()
    for s, e, idx in _spans(joined, builtin):
        f = bisect_right(starts, s) - 1
        base = starts[f]
        found.append((f, s - base, idx, min(e - base, len(strings[f][1]))))
    if extra:
        n = len(builtin)
        for f, (_, text) in enumerate(strings):
            for s, e, idx in _spans(text, extra, n):
                found.append((f, s, idx, e))
    found.sort()

    rules = (*builtin, *extra)
    hits: list[Hit] = []
    last: tuple[int, int, int, int] | None = None
    for item in found:
        if item == last:
            continue
        last = item
        f, s, idx, e = item
        path, text = strings[f]
        rule = rules[idx]
        hits.append(Hit(path, rule.kind, _shown(rule, text[s:e])))
    return hits
