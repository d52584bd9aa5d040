"""The built-in redaction rules as data: what each kind looks like and where it is
searched. ``ltm.redact`` is the engine that compiles and runs them.

A row (``Spec``) names its kind and regex, and what lets the engine skip text:

- ``needles``: literals one of which every match holds; a text without any is not
  searched. Declared with the regex (tests/test_redact.py holds every rule to the
  same rule searched everywhere, over the labelled corpus).
- ``min_len``: the rule matches only inside a run of at least that many base64
  characters (``A-Za-z0-9+/=_-``), so it is searched only in such runs; ``reach``
  lets a match go on that many characters past the run.
- ``near``/``radius``: a contextual rule, run only within ``radius`` characters
  of one of the keywords (lower case); ``anchored``: tried only where one starts.
- ``check``: the name of a post-filter in ``ltm.redact`` (``CHECKS``) that may
  veto a match or adjust its span (``widen``: for ``"widened"``, how many
  characters a look-behind checked before the match).

``secret`` marks the secret class (what the server refuses too); ``rank`` orders
overlapping secret hits (0: a token's own shape, 1: its context, 2: a guess);
``alias`` names a kind a rule before it reports (one search, two verdicts);
``mask`` replaces the shown text. Every pattern is written for linear time (see
``ltm.redact``): bounded repetitions, possessive runs, look-behinds after a
leading literal.
"""

from __future__ import annotations

import re
from typing import NamedTuple


class Spec(NamedTuple):
    kind: str
    regex: str
    near: tuple[str, ...] = ()
    radius: int = 0
    min_len: int = 0
    mask: str | None = None
    check: str | None = None
    secret: bool = True
    rank: int = 0
    anchored: bool = False
    alias: bool = False
    reach: int = 0
    needles: tuple[str, ...] = ()
    widen: int = 0


KEY_MASK = "-----BEGIN … PRIVATE KEY-----"

CLI_VALUE = r"""(?P<v>'[^'\n\x00]{1,128}+'|"[^"\n\x00]{1,128}+"|[^\s\x00'"`;|&<>()]{1,128}+)"""


# Prefixed vendor tokens, searched in one pass over the runs of token
# characters (like the base64 rules: prose has few runs of 24 or more, so this
# costs next to nothing on it). (kind, literal prefixes, body): each prefix is
# a branch of its own, with the boundary look-behind right after it. The rule
# ids cited are gitleaks' (config/gitleaks.toml) unless marked otherwise.
VENDOR_TABLE: tuple[tuple[str, tuple[str, ...], str], ...] = (
    # shopify-access-token, -custom-access-token, -private-app-access-token, -shared-secret
    ("shopify-token", ("shpat_", "shpca_", "shppa_", "shpss_"), r"[a-fA-F0-9]{32}"),
    ("databricks-token", ("dapi",), r"[a-f0-9]{32}(?:-[0-9])?"),  # databricks-api-token
    # atlassian-api-token (ATATT3...), and Bitbucket app passwords (ATBB...)
    ("atlassian-token", ("ATATT3", "ATCTT3"), r"[A-Za-z0-9_=\-]{150,300}+"),
    ("atlassian-token", ("ATBB",), r"[A-Za-z0-9_=\-]{28,64}+"),
    ("linear-key", ("lin_api_",), r"[A-Za-z0-9]{40}"),  # linear-api-key
    ("linear-key", ("lin_oauth_",), r"[a-f0-9]{64}"),
    # notion-api-token (ntn_), and internal integration secrets before 2024 (secret_)
    ("notion-token", ("ntn_",), r"[0-9]{11}[A-Za-z0-9]{35}"),
    ("notion-token", ("secret_",), r"[A-Za-z0-9]{43}"),
    ("mailgun-key", ("key-",), r"[a-z0-9]{32}"),  # mailgun-private-api-token
    ("sentry-token", ("sntryu_",), r"[a-f0-9]{64}"),  # sentry-user-token
    ("sentry-token", ("sntrys_",), r"eyJ[A-Za-z0-9+/=_]{40,600}+"),  # sentry-org-token
    # twilio-api-key (SK...); detect-secrets' twilio.py also has the account SID (AC...)
    ("twilio-key", ("SK", "AC"), r"[0-9a-fA-F]{32}"),
    ("age-secret-key", ("AGE-SECRET-KEY-1",), r"[QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L]{58}"),
    ("1password-token", ("ops_",), r"eyJ[A-Za-z0-9+/]{200,4000}+={0,3}+"),
    ("perplexity-key", ("pplx-",), r"[A-Za-z0-9]{48}"),
    (
        "planetscale-token",
        ("pscale_tkn_", "pscale_pw_", "pscale_oauth_"),
        r"[A-Za-z0-9_=\-]{32,64}+",
    ),
    ("postman-key", ("PMAK-",), r"[a-f0-9]{24}-[a-f0-9]{34}"),
    ("pulumi-token", ("pul-",), r"[a-f0-9]{40}"),
    ("grafana-token", ("glc_",), r"[A-Za-z0-9+/]{32,400}+={0,3}+"),
    ("grafana-token", ("glsa_",), r"[A-Za-z0-9]{32}_[A-Fa-f0-9]{8}"),
    ("grafana-token", ("eyJrIjoi",), r"[A-Za-z0-9]{70,400}+={0,3}+"),
    ("newrelic-key", ("NRAK-",), r"[A-Z0-9]{27}"),
    ("newrelic-key", ("NRJS-",), r"[a-f0-9]{19}"),
    ("newrelic-key", ("NRII-",), r"[A-Za-z0-9\-]{32}"),
    ("heroku-key", ("HRKU-AA",), r"[A-Za-z0-9_\-]{58}"),  # heroku-api-key-v2
    ("rubygems-token", ("rubygems_",), r"[a-f0-9]{48}"),
    ("flyio-token", ("fo1_",), r"[A-Za-z0-9_\-]{43}"),
    ("flyio-token", ("fm2_", "fm1a_", "fm1r_"), r"[A-Za-z0-9+/]{100,4000}+={0,3}+"),
    ("square-token", ("sq0atp-", "sq0csp-"), r"[A-Za-z0-9_\-]{22,60}+"),
    ("square-token", ("EAAA",), r"[A-Za-z0-9_\-]{60}"),
    ("sendinblue-key", ("xkeysib-",), r"[a-f0-9]{64}-[A-Za-z0-9]{16}"),
    ("artifactory-token", ("AKCp",), r"[A-Za-z0-9]{69}"),
    ("facebook-token", ("EAAM", "EAAC"), r"[A-Za-z0-9]{100,400}+"),
    ("alibaba-key", ("LTAI",), r"[A-Za-z0-9]{20}"),
    ("easypost-key", ("EZAK", "EZTK"), r"[A-Za-z0-9]{54}"),
    ("shippo-token", ("shippo_live_", "shippo_test_"), r"[a-fA-F0-9]{40}"),
    ("prefect-key", ("pnu_",), r"[A-Za-z0-9]{36}"),
    ("readme-key", ("rdme_",), r"[a-z0-9]{70}"),
    ("sourcegraph-token", ("sgp_",), r"(?:[a-fA-F0-9]{16}_|local_)?[a-fA-F0-9]{40}"),
    ("clojars-token", ("CLOJARS_",), r"[a-z0-9]{60}"),
    ("duffel-token", ("duffel_test_", "duffel_live_"), r"[A-Za-z0-9_=\-]{43}"),
    ("frameio-token", ("fio-u-",), r"[A-Za-z0-9_=\-]{64}"),
    ("scalingo-token", ("tk-us-",), r"[A-Za-z0-9_\-]{48}"),
    ("infracost-key", ("ico-",), r"[A-Za-z0-9]{32}"),
    ("octopus-key", ("API-",), r"[A-Z0-9]{26}"),
    ("adobe-secret", ("p8e-",), r"[A-Za-z0-9]{32}"),
    ("gitlab-token", ("glagent-",), r"[A-Za-z0-9_\-]{50}"),
    ("gitlab-token", ("gloas-",), r"[A-Za-z0-9_\-]{64}"),
    ("gitlab-token", ("glimt-",), r"[A-Za-z0-9_\-]{25}"),
    ("gitlab-token", ("glffct-",), r"[A-Za-z0-9_\-]{20}"),
    ("gitlab-token", ("GR1348941",), r"[A-Za-z0-9_\-]{20}"),  # gitlab-rrt
    # Not in gitleaks, met by coding agents: the vendors' documented prefixes.
    # https://tailscale.com/kb/1085/auth-keys, https://supabase.com/docs/guides/api/api-keys
    (
        "tailscale-key",
        ("tskey-auth-", "tskey-api-", "tskey-client-"),
        r"[A-Za-z0-9]{6,20}+-[A-Za-z0-9]{16,64}+",
    ),
    ("supabase-token", ("sbp_",), r"[a-f0-9]{40}"),
    ("replicate-token", ("r8_",), r"[A-Za-z0-9]{37}"),
    ("langsmith-key", ("lsv2_pt_", "lsv2_sk_"), r"[a-f0-9]{32}_[a-f0-9]{10}"),
    ("tavily-key", ("tvly-dev-", "tvly-"), r"[A-Za-z0-9]{32}"),
    ("nuget-key", ("oy2",), r"[a-z0-9]{43}"),
    # Cloudflare's scannable credentials: a prefix, 40 characters and a checksum.
    # https://developers.cloudflare.com/fundamentals/api/get-started/token-formats
    ("cloudflare-token", ("cfut_", "cfat_"), r"[A-Za-z0-9_\-]{40,80}+"),
    ("cloudflare-key", ("cfk_",), r"[A-Za-z0-9_\-]{40,80}+"),
)
# Kinds reported by the one vendor search, in alias order (BUILTIN_RULES).
VENDOR_KINDS: tuple[str, ...] = tuple(dict.fromkeys(k for k, _, _ in VENDOR_TABLE))
VENDOR_ANY_BODY: frozenset[str] = frozenset()
# group name -> (kind, where the body starts in the match, characters to widen)
VENDOR_GROUPS: dict[str, tuple[str, int, int]] = {}


def vendor_regex() -> str:
    """One alternation, one branch per first character of the prefixes.

    ``re`` tries a position's alternatives one by one, so the branches are
    grouped by the prefix's first character (outside any group, a literal):
    at each position only the prefixes that start there are tried, which
    halves the cost on prose. Prefixes that share a first character keep
    their table order. Each named group is one prefix (``lastgroup``, for
    the check).
    """
    by_first: dict[str, list[str]] = {}
    n = 0
    for kind, prefixes, body in VENDOR_TABLE:
        for prefix in prefixes:
            name = f"v{n}"
            n += 1
            VENDOR_GROUPS[name] = (kind, len(prefix), 0)
            look = rf"(?<![A-Za-z0-9_\-.]{re.escape(prefix)})"
            by_first.setdefault(re.escape(prefix[0]), []).append(
                f"(?P<{name}>{re.escape(prefix[1:])}{look}{body})"
            )
    return "|".join(
        first + (alts[0] if len(alts) == 1 else f"(?:{'|'.join(alts)})")
        for first, alts in by_first.items()
    )


# Characters that may continue a path once it has started (no whitespace, no NUL,
# no quotes or brackets that usually close prose around a path).
_PATH_CONT = r"""[^\s\x00"'`<>|,;()\[\]{}]{0,4096}+"""
# The first name character after a root: a word-ish char, or a dot + word char
# (".config") but not a sentence-ending dot ("see /etc/.").
_NAME_START = r"(?:[\w\-@+%$]|\.[\w\-])"
_POSIX_ROOTS = "home|Users|root|etc|var|opt|usr|tmp|private|mnt|srv|Volumes|Library|Applications"

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


# Assignment names (case-insensitive): the name ends in one of these (Rails'
# SECRET_KEY_BASE among them: the key its sessions and cookies are signed with).
_ASSIGN_NAMES = (
    r"(?i:passw(?:or)?d|passphrase|pass|pwd|secret(?:[_\-]?(?:access[_\-]?)?key(?:[_\-]?base)?)?"
    r"|token"
    r"|api[_\-]?key|access[_\-]?key|auth[_\-]?key|private[_\-]?key)"
)
# Where an assignment name can start (lower case): the keyword search of the
# anchored rule (_spans) tries the pattern at each of these and nowhere else.
_ASSIGN_NEAR = (
    *("pass", "pwd", "secret", "token"),
    *("api_key", "api-key", "apikey", "access_key", "access-key", "accesskey"),
    *("auth_key", "auth-key", "authkey", "private_key", "private-key", "privatekey"),
)
# 40 base64 characters (not base64url: a run glued to "-" or "_" is something else).
_AWS_SECRET = r"(?<![A-Za-z0-9/+_\-])[A-Za-z0-9/+]{40}(?![A-Za-z0-9/+=_\-])"
# The characters of an assignment's value (it ends at space, quote, bracket, "=").
_VALUE = r"""[^\s\x00"'`<>,;&|()\[\]{}=]"""
# A base64 (or base64url) run, with its padding.
B64_MIN = 24
B64_RUN = r"(?<![A-Za-z0-9+/_\-])[A-Za-z0-9+/_\-]{24,32768}+={0,2}+(?![A-Za-z0-9+/_\-])"


# Every row, in the order hits of one position are reported.
# Every pattern starts with a literal (or a tiny set of literals) so that `re`
# finds candidates with its fast prefix search; boundary look-behinds come
# right after that literal. All repetitions are bounded and, where a run is
# followed by something it cannot contain, possessive.
RULES: tuple[Spec, ...] = (
    # Private-key headers: the header alone is matched, and masked anyway.
    Spec(
        "private-key",
        r"-----BEGIN (?:[A-Z0-9]{1,12}+ ){0,2}PRIVATE KEY(?: BLOCK)?-----"
        r"|---- BEGIN (?:[A-Z0-9]{1,12}+ ){0,2}PRIVATE KEY ----",
        mask=KEY_MASK,
        needles=("-----BEGIN ", "---- BEGIN "),
    ),
    # PuTTY's key files (.ppk): the first line, "PuTTY-User-Key-File-<version>:
    # <algorithm>", heads a file that holds the private key (encrypted or not),
    # whatever its line ends; the algorithm is an SSH name (ssh-rsa, ecdsa-sha2-...).
    # https://the.earth.li/~sgtatham/putty/0.78/htmldoc/AppendixC.html
    Spec(
        "private-key",
        r"PuTTY-User-Key-File-[0-9]{1,2}+:[ \t]{1,4}+[a-z][a-z0-9@.]{1,31}+-[a-z0-9@.\-]{1,63}+",
        mask="PuTTY private key",
        needles=("PuTTY-User-Key-File-",),
    ),
    # Absolute POSIX paths under a home or system root, followed by a name.
    # The look-behind rejects "/home" inside a URL path, a relative path
    # (src/etc/x) or a C:/Users path (left to windows-path); file:///home/x is
    # a local path all the same.
    Spec(
        "abs-path",
        rf"/(?:(?<![\w.:/\\~\-]/)|(?<=file:///))(?:{_POSIX_ROOTS})/{_NAME_START}{_PATH_CONT}",
        check="path",
        secret=False,
        needles=(
            "/home/",
            "/Users/",
            "/root/",
            "/etc/",
            "/var/",
            "/opt/",
            "/usr/",
            "/tmp/",
            "/private/",
            "/mnt/",
            "/srv/",
            "/Volumes/",
            "/Library/",
            "/Applications/",
        ),
    ),
    Spec(
        "abs-path",
        rf"~/(?<![\w.:/\\~\-]~/){_NAME_START}{_PATH_CONT}",
        check="path",
        secret=False,
        needles=("~/",),
    ),
    # Windows drive paths C:\x, C:/x, C:\\x (JSON-escaped twice). Anchored on
    # the colon; the drive letter must stand alone (not "http:/", "key:/").
    Spec(
        "windows-path",
        r":(?<![\w\\][A-Za-z]:)(?<=[A-Za-z]:)(?:\\{1,2}+|/)"
        + _NAME_START
        + r"""[^\s\x00"'`<>|*?]{0,4096}+""",
        check="drive_path",
        secret=False,
        needles=(":",),
    ),
    # UNC paths \\server\share, and device paths \\?\ and \\.\ .
    Spec(
        "unc-path",
        r"\\\\(?<![\w/\\]\\\\)\\{0,2}+(?:[?.]\\{1,2}+|[A-Za-z0-9$][\w.$\-]{1,62}+\\{1,2}+)"
        + _NAME_START
        + r"""[^\s\x00"'`<>|*?]{0,4096}+""",
        check="path",
        secret=False,
        needles=("\\\\",),
    ),
    # AWS access key IDs (AKIA long-term, ASIA temporary, other IAM prefixes).
    Spec(
        "aws-access-key",
        r"A(?:KIA|SIA|BIA|CCA|GPA|IDA|IPA|NPA|NVA|ROA|PKA)"
        r"(?<![A-Za-z0-9]....)[A-Z0-9]{16}(?![A-Za-z0-9])",
        needles=(
            "AKIA",
            "ASIA",
            "ABIA",
            "ACCA",
            "AGPA",
            "AIDA",
            "AIPA",
            "ANPA",
            "ANVA",
            "AROA",
            "APKA",
        ),
    ),
    # AWS secret access keys: a lone 40-char base64 token, near "aws"/"secret"
    # or random enough on its own (then only a guess: rank 2).
    Spec("aws-secret-key", _AWS_SECRET, min_len=40, check="aws_secret"),
    Spec("aws-secret-key", _AWS_SECRET, rank=2, alias=True),
    Spec(
        "aws-arn",
        r"arn:aws(?<![\w\-]arn:aws)(?:-[a-z]{1,12}+){0,3}:[a-z0-9\-]{1,64}+:[a-z0-9\-]{0,32}+:"
        r"""(?:[0-9]{12}|aws)?:[^\s\x00"'`<>,;()\[\]{}]{1,256}+""",
        secret=False,  # an identifier (and an account id), not a credential
        needles=("arn:aws",),
    ),
    Spec(
        "github-token",
        r"gh[pousr]_(?<![\w]gh._)[A-Za-z0-9]{36,251}+",
        needles=("ghp_", "gho_", "ghu_", "ghs_", "ghr_"),
        min_len=40,
    ),
    Spec("github-token", r"github_pat_[A-Za-z0-9_]{30,255}+", needles=("github_pat_",), min_len=41),
    Spec(
        "gitlab-token",
        r"gl(?:pat|dt|ptt|rt|cbt|soat|ft)-[A-Za-z0-9_\-]{20,255}+",
        needles=("glpat-", "gldt-", "glptt-", "glrt-", "glcbt-", "glsoat-", "glft-"),
        min_len=25,
    ),
    Spec("npm-token", r"npm_(?<![\w]npm_)[A-Za-z0-9]{36,64}+", needles=("npm_",), min_len=40),
    # Our own bearer tokens (chalicelib/service/tokens.py): ltm_ + [user id + _] + 64 hex.
    Spec(
        "ltm-token",
        r"ltm_(?<![\w]ltm_)(?:[0-9A-HJKMNP-TV-Z]{26}_)?[0-9a-f]{64}+",
        needles=("ltm_",),
        min_len=68,
    ),
    Spec(
        "pypi-token",
        r"pypi-Ag(?:EIcHlwaS5vcmc|ENdGVzdC5weXBpLm9yZw)[A-Za-z0-9_\-]{32,1024}+",
        needles=("pypi-AgEIcHlwaS5vcmc", "pypi-AgENdGVzdC5weXBpLm9yZw"),
        min_len=52,
    ),
    Spec(
        "jwt",
        r"eyJ(?<![\w\-]eyJ)[A-Za-z0-9_\-]{7,4096}+\.ey[A-Za-z0-9_\-]{2,8192}+"
        r"\.[A-Za-z0-9_\-]{0,4096}+",
        needles=("eyJ",),
    ),
    Spec("google-api-key", r"AIza(?<![\w\-]AIza)[A-Za-z0-9_\-]{35}(?![\w\-])", needles=("AIza",)),
    Spec("google-oauth-secret", r"GOCSPX-[A-Za-z0-9_\-]{24,40}+", needles=("GOCSPX-",), min_len=31),
    Spec(
        "slack-token",
        r"xox[abeprs]-(?<![\w\-]xox.-)[A-Za-z0-9\-]{10,250}+|xapp-[0-9]-[A-Za-z0-9\-]{10,250}+",
        check="has_digit",
        needles=("xox", "xapp-"),
    ),
    Spec(
        "slack-webhook",
        # also JSON-escaped ("hooks.slack.com\/services\/...")
        r"hooks\.slack\.com\\{0,2}/(?:services|workflows|triggers)\\{0,2}/"
        r"(?:[A-Za-z0-9_\-]|\\{0,2}/){8,256}+",
        needles=("hooks.slack.com",),
    ),
    Spec(
        "discord-webhook",
        r"discord(?:app)?\.com\\{0,2}/api\\{0,2}/(?:v[0-9]{1,2}\\{0,2}/)?webhooks\\{0,2}/"
        r"[0-9]{5,30}+\\{0,2}/[A-Za-z0-9_\-]{20,256}+",
        needles=("webhooks",),
    ),
    Spec(
        "stripe-secret-key",
        r"sk_(?<![\w]sk_)(?:live|test)_[A-Za-z0-9]{16,247}+",
        needles=("sk_live_", "sk_test_"),
        min_len=24,
    ),
    Spec(
        "stripe-restricted-key",
        r"rk_(?<![\w]rk_)(?:live|test)_[A-Za-z0-9]{16,247}+",
        needles=("rk_live_", "rk_test_"),
        min_len=24,
    ),
    Spec(
        "stripe-webhook-secret",
        r"whsec_(?<![\w]whsec_)[A-Za-z0-9+/=]{20,256}+",
        needles=("whsec_",),
        min_len=26,
    ),
    # SSH public keys, anchored on " AAAA" (the base64 of the key-type length);
    # the key type before it is checked by look-behinds and then shown.
    Spec(
        "ssh-public-key",
        r" AAAA(?:"
        + "|".join(f"(?<={re.escape(t)} AAAA)" for t in _SSH_TYPES)
        + r")[A-Za-z0-9+/]{16,8192}+",
        check="ssh_key_span",
        secret=False,  # a public key: it says whose machine, it opens nothing
        needles=(" AAAA",),
    ),
    Spec(
        "anthropic-key",
        r"sk-ant-(?<![\w\-]sk-ant-)[A-Za-z0-9_\-]{20,400}+",
        needles=("sk-ant-",),
        min_len=27,
    ),
    Spec(
        "openrouter-key",
        r"sk-or-v1-(?<![\w\-]sk-or-v1-)[a-f0-9]{64}",
        needles=("sk-or-v1-",),
        min_len=73,
    ),
    Spec(
        "openai-key",
        r"sk-(?<![\w\-]sk-)(?!ant-|or-v1-)[A-Za-z0-9_\-]{20,400}+",
        check="openai",
        needles=("sk-",),
    ),
    Spec("huggingface-token", r"hf_(?<![\w]hf_)[A-Za-z0-9]{34,64}+", needles=("hf_",), min_len=37),
    Spec("groq-key", r"gsk_(?<![\w]gsk_)[A-Za-z0-9]{48,64}+", needles=("gsk_",), min_len=52),
    Spec("xai-key", r"xai-(?<![\w\-]xai-)[A-Za-z0-9]{70,100}+", needles=("xai-",), min_len=74),
    Spec(
        "docker-hub-token", r"dckr_pat_[A-Za-z0-9_\-]{24,64}+", needles=("dckr_pat_",), min_len=33
    ),
    Spec(
        "digitalocean-token",
        r"do[por]_v1_[a-f0-9]{64}",
        needles=("dop_v1_", "doo_v1_", "dor_v1_"),
        min_len=71,
    ),
    Spec(
        "sendgrid-key", r"SG\.(?<![\w]SG\.)[A-Za-z0-9_\-]{22}\.[A-Za-z0-9_\-]{43}", needles=("SG.",)
    ),
    # ------------------------------------------------------------------ #
    # Formats added after a security review. Sources: gitleaks' rules
    # (config/gitleaks.toml, rule ids in VENDOR_TABLE and below) and
    # detect-secrets' plugins; the rules are this module's own.
    # ------------------------------------------------------------------ #
    # Prefixed vendor tokens: one search over runs of token characters, the
    # first kind reported by the rule itself, the others by its aliases.
    Spec(VENDOR_KINDS[0], vendor_regex(), min_len=B64_MIN, check="vendor"),
    *(Spec(kind, "(?!)", alias=True) for kind in VENDOR_KINDS[1:]),
    # Mapbox secret (sk.) and temporary (tk.) tokens: "k.eyJ1" is the base64 of
    # '{"u"' after the type letter (gitleaks mapbox-api-token knows the pk. form).
    Spec(
        "mapbox-token",
        r"k\.eyJ1(?<=[st]k\.eyJ1)(?<![A-Za-z0-9_\-.].k\.eyJ1)[A-Za-z0-9_\-]{16,400}+"
        r"\.[A-Za-z0-9_\-]{16,64}+",
        check="widened",
        widen=1,
        needles=("k.eyJ1",),
    ),
    # Public tokens (pk.) are meant for browsers: flagged here, not refused by the server.
    Spec(
        "mapbox-public-token",
        r"k\.eyJ1(?<=pk\.eyJ1)(?<![A-Za-z0-9_\-.]pk\.eyJ1)[A-Za-z0-9_\-]{16,400}+"
        r"\.[A-Za-z0-9_\-]{16,64}+",
        check="widened",
        widen=1,
        secret=False,
        needles=("k.eyJ1",),
    ),
    # vault-service-token (hvs.), vault-batch-token (hvb.)
    Spec(
        "vault-token",
        r"hv[sb]\.(?<![A-Za-z0-9_\-.]hv.\.)[A-Za-z0-9_\-]{90,300}+",
        check="widened",
        widen=0,
        needles=("hvs.", "hvb."),
    ),
    # Vault's service tokens before 1.10 ("s." + 24): only next to the word "vault".
    Spec(
        "vault-token",
        r"s\.(?<![A-Za-z0-9_\-.]s\.)[A-Za-z0-9]{24}",
        near=("vault",),
        radius=120,
        check="vault_legacy",
        needles=("s.",),
    ),
    # hashicorp-tf-api-token: 14 characters, ".atlasv1.", 60-70 more
    Spec(
        "terraform-token",
        r"\.atlasv1\.(?<=[A-Za-z0-9]{14}\.atlasv1\.)(?<![A-Za-z0-9_\-][A-Za-z0-9]{14}\.atlasv1\.)"
        r"[A-Za-z0-9_=\-]{60,70}+",
        check="widened",
        widen=14,
        needles=(".atlasv1.",),
    ),
    Spec(
        "dynatrace-token",
        r"dt0c01\.(?<![\w\-.]dt0c01\.)[A-Za-z0-9]{24}\.[A-Za-z0-9]{64}",
        needles=("dt0c01.",),
    ),
    Spec(
        "doppler-token",
        r"dp\.(?<![\w\-.]dp\.)(?:pt|st|sa|ct|scim|audit)\.[A-Za-z0-9]{40,44}+",
        check="widened",
        widen=0,
        needles=("dp.pt.", "dp.st.", "dp.sa.", "dp.ct.", "dp.scim.", "dp.audit."),
    ),
    # A Cloudflare API token before the scannable format: 40 token characters,
    # only next to the name (CLOUDFLARE_API_TOKEN, "the Cloudflare token").
    Spec(
        "cloudflare-token",
        r"(?<![A-Za-z0-9_\-])[A-Za-z0-9_\-]{40}(?![A-Za-z0-9_\-])",
        near=("cloudflare", "cf_api", "cf-api", "cf_token", "cf-token"),
        radius=80,
        min_len=40,
        check="random_token",
    ),
    # Sentry DSNs: http(s)://PUBLIC_KEY@HOST[/PATH]/PROJECT_ID, the key 32 hex
    # characters (with ":SECRET_KEY" after it, the older form, url-credentials has it);
    # JSON-escaped too ("https:\/\/...").
    # https://docs.sentry.io/concepts/key-terms/dsn-explainer/
    Spec(
        "sentry-dsn",
        r"@(?<=/[a-f0-9]{32}@)(?<![a-f0-9]{33}@)[A-Za-z0-9.\-]{1,253}+(?::[0-9]{2,5}+)?"
        r"\\{0,2}+/(?:[A-Za-z0-9_.\-]{1,64}+\\{0,2}+/){0,4}+[0-9]{1,20}+(?![A-Za-z0-9])",
        check="sentry_dsn",
        needles=("@",),
    ),
    Spec(
        "cloudflare-origin-key",
        r"v1\.0-(?<![\w\-.]v1\.0-)[a-f0-9]{24}-[a-f0-9]{146}",
        needles=("v1.0-",),
    ),
    Spec(
        "openshift-token",
        r"sha256~(?<![\w\-.]sha256~)[A-Za-z0-9_\-]{43}",
        check="widened",
        widen=0,
        needles=("sha256~",),
    ),
    # microsoft-teams-webhook (also JSON-escaped: "\/")
    Spec(
        "teams-webhook",
        r"webhook\.office\.com\\{0,2}/webhookb2\\{0,2}/[A-Za-z0-9@\-]{40,200}+\\{0,2}/"
        r"IncomingWebhook\\{0,2}/[A-Za-z0-9]{32}\\{0,2}/[A-Za-z0-9\-]{36}",
        needles=("webhook.office.com",),
    ),
    # azure-ad-client-secret: 3 characters, a digit, "Q~", 31-34 more
    Spec(
        "azure-ad-secret",
        r"Q~(?<=[A-Za-z0-9_~.]{3}[0-9]Q~)(?<![A-Za-z0-9_~.\-][A-Za-z0-9_~.]{3}[0-9]Q~)"
        r"[A-Za-z0-9_~.\-]{31,34}+",
        check="azure_ad_secret",
        needles=("Q~",),
    ),
    # Azure storage account keys and Service Bus/Event Hubs keys in connection
    # strings (detect-secrets azure_storage_key.py: 86 base64 characters and "==").
    # https://learn.microsoft.com/en-us/azure/storage/common/storage-configure-connection-string
    Spec(
        "azure-storage-key",
        r"(?i:accountkey|sharedaccesskey)\s{0,3}+=\s{0,3}+(?P<v>[A-Za-z0-9+/]{30,128}+={0,2}+)",
        near=("accountkey", "sharedaccesskey"),
        check="azure_key",
        anchored=True,
    ),
    Spec(
        "azure-storage-key",
        r"(?<![A-Za-z0-9+/])[A-Za-z0-9+/]{86}==",
        near=("azure", "storage", "account_key", "accountkey", "account-key"),
        radius=160,
        min_len=88,
        check="azure_key_near",
        needles=("==",),
    ),
    # Shared access signatures: the sig= of a SAS URL or SharedAccessSignature.
    Spec(
        "azure-sas",
        r"sig=(?P<v>[A-Za-z0-9%+/=]{30,256}+)",
        near=("sig=",),
        check="azure_sas",
        anchored=True,
    ),
    # mailchimp-api-key: 32 hex, "-us", the data centre's number
    Spec(
        "mailchimp-key",
        r"-us(?<=[0-9a-f]{32}-us)(?<![A-Za-z0-9_\-][0-9a-f]{32}-us)[0-9]{1,2}+(?![A-Za-z0-9_\-])",
        check="widened",
        widen=32,
        needles=("-us",),
    ),
    # mailgun-signing-key, and Mailgun's private keys since 2020: 32-8-8 hex
    Spec(
        "mailgun-key",
        r"-(?<=[0-9a-f]{32}-)(?<![A-Za-z0-9_\-][0-9a-f]{32}-)[0-9a-f]{8}-[0-9a-f]{8}"
        r"(?![A-Za-z0-9_\-])",
        check="widened",
        widen=32,
        needles=("-",),
    ),
    # telegram-bot-api-token and detect-secrets telegram_token.py: "<bot id>:<35>"
    Spec(
        "telegram-bot-token",
        r":(?<=[0-9]{8}:)(?<![0-9]{11}:)(?P<t>[A-Za-z0-9_\-]{35})",
        check="telegram",
        needles=(":",),
    ),
    # detect-secrets discord.py: bot tokens, the base64 of the bot's id first
    Spec(
        "discord-token",
        r"(?P<id>[MNO](?<![A-Za-z0-9_\-.][MNO])[A-Za-z0-9_\-]{23,27}+)\.[A-Za-z0-9_\-]{6}"
        r"\.[A-Za-z0-9_\-]{27,38}+",
        check="discord_token",
        # The id part is a run of 24-28 base64 characters; the rest, 46 at most,
        # follows the run's end.
        min_len=24,
        reach=46,
        needles=(".",),
    ),
    # Private key material without its PEM header (a service account's key
    # pasted from JSON, a key cut from its armour): PKCS#1 and PKCS#8 RSA,
    # SEC1 and PKCS#8 EC, PKCS#8 Ed25519.
    Spec(
        "private-key",
        r"M(?<![A-Za-z0-9+/]M)(?:II[A-Za-z0-9+/]{3}IBAAK[CG]A|II[A-Za-z0-9+/]{3}IBADANBgkqhkiG9w0BAQEFAASC"
        r"|HcCAQEEI|IGkAgEBBDA|IG[A-Za-z0-9+/]AgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQg"
        r"|C4CAQAwBQYDK2VwBCIEI)(?:\\n|[A-Za-z0-9+/]){16,8192}+",
        mask="base64 of a private key",
        check="private_key_body",
        needles=("MII", "MHcCAQEEI", "MIG", "MC4CAQAwBQYDK2VwBCIEI"),
    ),
    # ... and OpenSSH's own format (ssh-keygen's default since 7.8): the base64 of
    # "openssh-key-v1" and its NUL, then the cipher's name (encrypted or not).
    # https://github.com/openssh/openssh-portable/blob/master/PROTOCOL.key
    Spec(
        "private-key",
        r"b3BlbnNzaC1rZXktdjEA(?<![A-Za-z0-9+/]b3BlbnNzaC1rZXktdjEA)(?:\\n|[A-Za-z0-9+/]){16,8192}+",
        mask="base64 of a private key",
        check="private_key_body",
        needles=("b3BlbnNzaC1rZXktdjEA",),
    ),
    # A Google service account key file: its "private_key_id" (40 hex) says the
    # whole file was pasted.
    # https://cloud.google.com/iam/docs/keys-create-delete#creating
    Spec(
        "gcp-service-account",
        r"""private_key_id["'`]?\s{0,3}+[:=]\s{0,3}+["'`]?(?P<v>[a-f0-9]{40})(?![A-Za-z0-9])""",
        near=("private_key_id",),
        check="gcp_key_id",
        anchored=True,
    ),
    # Docker's config.json: "auth" is base64("user:password"); identity and
    # registry tokens are tokens (JSON-escaped quotes too).
    Spec(
        "docker-auth",
        r'"(?P<k>auth|identitytoken|registrytoken)\\?"\s{0,3}+:\s{0,3}+\\?"'
        r"(?P<v>[A-Za-z0-9+/=_.\-]{8,4096}+)",
        near=('"auth', '"identitytoken', '"registrytoken'),
        check="docker_auth",
        anchored=True,
    ),
    # .netrc: "machine HOST login USER password PASS"
    Spec(
        "netrc-password",
        r"password[ \t]{1,8}+(?P<v>[^\s\x00]{1,256}+)",
        near=("password",),
        check="netrc",
        anchored=True,
    ),
    # Passwords on command lines: mysql -p..., sshpass -p, curl -u user:pass ...
    # (gitleaks curl-auth-user for curl; each command's manual for the rest,
    # cited in _cli_flag_rules).
    Spec(
        "cli-password",
        r"(?P<cmd>mysql[a-z\-]{0,12}+|mariadb[a-z\-]{0,12}+|sshpass|curl|wget|redis-cli"
        r"|mongo[a-z]{0,8}+|sqlcmd|bcp|ldap[a-z]{2,10}+|htpasswd|smbclient|zip|unzip)"
        r"(?![A-Za-z0-9_\-.])(?P<rest>(?:\\\n|[^\n\x00;|&`]){0,400}+)",
        near=(
            *("mysql", "mariadb", "sshpass", "curl", "wget", "redis-cli", "mongo"),
            *("sqlcmd", "bcp", "ldap", "htpasswd", "smbclient", "zip", "unzip"),
        ),
        check="cli_password",
        anchored=True,
    ),
    # docker login -p, podman login --password, oc login -p, az login -p ...
    Spec(
        "cli-password",
        r"(?P<login>login)(?![A-Za-z0-9_\-])(?P<rest>(?:\\\n|[^\n\x00;|&`]){0,400}+)",
        near=("login",),
        check="login_password",
        anchored=True,
    ),
    # --password VALUE, --client-secret=VALUE, --api-key VALUE: any command.
    Spec(
        "cli-password",
        r"--(?:db-|admin-|root-|master-|client-|app-|api-|auth-|access-|user-|registry-"
        r"|http-|ftp-|proxy-|bind-|store-|key-)?"
        r"(?:password|passwd|pass|passphrase|secret|token|api-key|apikey|access-key|secret-key)"
        rf"(?:=|\s{{1,4}}+){CLI_VALUE}",
        near=("--",),
        check="flag_password",
        anchored=True,
    ),
    # openssl -passin pass:SECRET, -passout pass:SECRET, -pass pass:SECRET
    # https://docs.openssl.org/master/man1/openssl-passphrase-options/
    Spec(
        "cli-password",
        rf"-pass(?:in|out)?\s{{1,4}}+pass:{CLI_VALUE}",
        near=("-pass",),
        check="openssl_pass",
        anchored=True,
    ),
    # keytool/jarsigner -storepass SECRET -keypass SECRET
    # https://docs.oracle.com/en/java/javase/21/docs/specs/man/keytool.html
    Spec(
        "cli-password",
        rf"-(?:src|dest|new)?(?:store|key)?pass\s{{1,4}}+{CLI_VALUE}",
        near=("-storepass", "-keypass", "-srcstorepass", "-deststorepass", "-srckeypass"),
        check="flag_password",
        anchored=True,
    ),
    # MAPBOX_KEY=..., "twilio_key": "...": a name ending in _key and a random value
    # (the names ending in api_key, access_key, secret_key... are the rule above).
    Spec(
        "secret-assignment",
        r"[_\-](?i:key)[\"'`]?\s{0,3}+(?::=|=>|=|:)\s{0,3}+[\"'`]?"
        rf"(?P<v>{_VALUE}{{16,256}}+={{0,2}}+)",
        near=("_key", "-key"),
        check="env_key",
        rank=1,
        anchored=True,
    ),
    # Credentials inside URLs: scheme://user:pass@host (anchored on "://").
    Spec(
        "url-credentials",
        r"://(?<=[A-Za-z0-9+.\-]://)[^\s\x00/:@\"'`<>]{0,128}+:"
        r"""(?P<pw>[^\s\x00/@"'`<>]{1,256}+)@[^\s\x00/@"'`<>?#]{1,255}+""",
        check="url_credentials",
        needles=("://",),
    ),
    # ... and JSON-escaped ("https:\/\/user:pass@host").
    Spec(
        "url-credentials",
        r":\\/\\/(?<=[A-Za-z0-9+.\-]:\\/\\/)[^\s\x00/:@\"'`<>\\]{0,128}+:"
        r"""(?P<pw>[^\s\x00/@"'`<>\\]{1,256}+)@[^\s\x00/@"'`<>?#\\]{1,255}+""",
        check="url_credentials",
        needles=(":\\/\\/",),
    ),
    # Passwords in connection strings: ADO.NET/ODBC (";Password=...;", "Pwd={...}")
    # and JDBC query strings ("?user=app&password=..."); URL forms are above.
    Spec(
        "connection-string",
        r"(?i:password|pwd)\s{0,3}+=\s{0,3}+(?P<v>\{[^}\x00]{1,256}+\}|\"[^\"\x00]{1,256}+\""
        r"""|'[^'\x00]{1,256}+'|[^\s\x00;&"'`<>]{1,256}+)""",
        near=("password", "pwd"),
        check="conn_password",
        anchored=True,
    ),
    # DB_PASSWORD=..., "api_key": "...", secret: ... (a value that looks secret).
    Spec(
        "secret-assignment",
        rf"(?P<kw>{_ASSIGN_NAMES})[\"'`]?\s{{0,3}}+(?::=|=>|=|:)\s{{0,3}}+[\"'`]?"
        # The value holds a digit or a symbol (a word or a variable name does
        # not): decided inside the regex, so prose fails fast (bounded: 256).
        rf"(?P<v>(?={_VALUE}{{0,255}}[0-9!#$%*+/:?@^~]){_VALUE}{{6,256}}+={{0,2}}+)",
        near=_ASSIGN_NEAR,
        check="assignment",
        rank=1,
        anchored=True,
    ),
    # Authorization: Basic|Bearer|Token <credentials> (HTTP headers, curl -H).
    Spec(
        "auth-header",
        r"(?i:authorization)[\"'`]?\s{0,3}+[:=]\s{0,3}+[\"'`]?\s{0,3}+"
        r"(?P<scheme>(?i:basic|bearer|token))\s{1,3}+(?P<v>[A-Za-z0-9._~+/=\-]{8,4096}+)",
        near=("authorization",),
        check="auth_header",
        rank=1,
        anchored=True,
    ),
    # Base64-wrapped secrets: a PEM private key (LS0tLS1CRUdJTi...), or a run
    # that decodes to text holding a secret (an .env file, a token).
    Spec("base64-secret", B64_RUN, min_len=B64_MIN, check="b64_secret"),
    Spec("private-key", B64_RUN, mask="base64 of a private key", alias=True),
    # Local and private-network hosts with a port; the scheme is shown if any.
    Spec(
        "local-url",
        r"localhost(?<![\w\-]localhost)" + _PORT,
        check="with_scheme",
        secret=False,
        needles=("localhost:",),
    ),
    Spec(
        "local-url",
        r"host\.docker\.internal" + _PORT,
        check="with_scheme",
        secret=False,
        needles=("host.docker.internal:",),
    ),
    Spec(
        "local-url",
        r"0\.0\.0\.0(?<![\w.]0\.0\.0\.0)" + _PORT,
        check="with_scheme",
        secret=False,
        needles=("0.0.0.0:",),
    ),
    Spec("local-url", r"\[::1?\]" + _PORT, check="with_scheme", secret=False, needles=("[::",)),
    # Loopback and RFC 1918 IPv4 hosts, one pass anchored on the leading "1".
    Spec(
        "local-url",
        rf"1(?:27\.(?<![\w.]127\.){_OCTET}\.{_OCTET}\.{_OCTET}"
        rf"|0\.(?<![\w.]10\.){_OCTET}\.{_OCTET}\.{_OCTET}"
        rf"|92\.168\.(?<![\w.]192\.168\.){_OCTET}\.{_OCTET}"
        rf"|72\.(?<![\w.]172\.)(?:1[6-9]|2[0-9]|3[01])\.{_OCTET}\.{_OCTET})" + _PORT,
        check="with_scheme",
        secret=False,
        needles=("127.", "10.", "192.168.", "172."),
    ),
)
