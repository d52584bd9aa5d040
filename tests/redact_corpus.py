"""A labelled corpus for the redaction pre-flight: real-looking secrets, and prose.

``secrets()`` holds true secrets of every secret kind, written the ways they
leak into session notes (assignments, headers, connection strings, base64,
full-width or zero-width-split), the misses of the audit in issue 12 among
them. ``prose()`` holds ordinary engineering text that must pass: this
repository's README, BENCHMARKS and docs, its own code, the two published
example packets, and hand-written near misses for every rule. Both are
assembled at run time (random keys from a seeded generator, prefixes glued
on), so this file holds nothing a push-protection scanner would take for a
live credential, and nothing here reads outside the repository.

Used by tests/test_redact.py (every secret caught, no prose flagged) and by
bench/bench_redact.py (recall and false-positive figures for BENCHMARKS.md).
"""

from __future__ import annotations

import base64
import json
import random
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = Path(__file__).resolve().parents[1] / "spec" / "examples"  # published (spec/README.md)

_UPPER = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
_LOWER = "abcdefghijklmnopqrstuvwxyz"
_DIGITS = "0123456789"
ALNUM = _UPPER + _LOWER + _DIGITS
B64 = ALNUM + "+/"
HEX = "0123456789abcdef"


def cat(*parts: str) -> str:
    return "".join(parts)


class Keys:
    """Random key material from a seeded generator (the same corpus on every run)."""

    def __init__(self, seed: int = 12) -> None:
        self.rng = random.Random(seed)

    def __call__(self, n: int, alphabet: str = ALNUM) -> str:
        return "".join(self.rng.choice(alphabet) for _ in range(n))

    def aws_secret(self) -> str:
        return self(40, B64)


def b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def secrets(seed: int = 12) -> list[tuple[str, str, str]]:
    """(label, kind expected among the hits, text) for each true secret."""
    k = Keys(seed)
    aws_id = cat("AKIA", k(16, _UPPER + _DIGITS))
    aws_secret = k.aws_secret()
    ghp = cat("ghp", "_", k(36))
    pem = cat("-----BEGIN RSA ", "PRIVATE KEY-----\n", "MIIEow", k(60, B64), "\n")
    jwt = ".".join(
        (
            cat("eyJ", "hbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9"),
            cat("eyJ", "zdWIiOiIx", k(30, ALNUM + "_-")),
            k(43, ALNUM + "_-"),
        )
    )
    password = cat(k(6), "!", k(5, _DIGITS))
    zw = "\u200b"
    out = [
        # the token kinds
        ("aws access key id", "aws-access-key", f"export AWS_ACCESS_KEY_ID={aws_id}"),
        ("aws secret near keyword", "aws-secret-key", f"aws_secret_access_key = {aws_secret}"),
        ("aws arn", "aws-arn", "arn:aws:iam::123456789012:role/deploy"),
        ("github classic token", "github-token", f"GH_TOKEN={ghp}"),
        ("github fine-grained", "github-token", cat("github", "_pat_", k(22), "_", k(59))),
        ("gitlab token", "gitlab-token", cat("glpat", "-", k(20))),
        ("npm token", "npm-token", cat("//registry.npmjs.org/:_authToken=npm", "_", k(36))),
        ("ltm token", "ltm-token", cat("LTM_TOKEN=ltm", "_", k(64, HEX))),
        ("pypi token", "pypi-token", cat("pypi-", "AgEIcHlwaS5vcmc", k(70, ALNUM + "_-"))),
        ("jwt", "jwt", f"token={jwt}"),
        ("private key header", "private-key", pem),
        ("google api key", "google-api-key", cat("key=AIza", k(35, ALNUM + "_-"))),
        ("google oauth secret", "google-oauth-secret", cat("GOCSPX", "-", k(28))),
        ("slack bot token", "slack-token", cat("xoxb", "-", k(12, _DIGITS), "-", k(24))),
        (
            "slack webhook",
            "slack-webhook",
            cat("https://hooks.slack.com", "/services/T", k(8, _UPPER), "/B", k(8), "/", k(24)),
        ),
        (
            "discord webhook",
            "discord-webhook",
            cat("https://discord.com", "/api/webhooks/", k(18, _DIGITS), "/", k(68)),
        ),
        ("stripe secret key", "stripe-secret-key", cat("sk_", "live_", k(24))),
        ("stripe restricted key", "stripe-restricted-key", cat("rk_", "live_", k(24))),
        ("stripe webhook secret", "stripe-webhook-secret", cat("whsec", "_", k(32))),
        (
            "ssh public key",
            "ssh-public-key",
            cat("ssh-ed25519 ", "AAAAC3NzaC1lZDI1NTE5", "AAAAI", k(40)),
        ),
        (
            "anthropic key",
            "anthropic-key",
            cat("ANTHROPIC_API_KEY=sk-ant-", "api03-", k(93, ALNUM + "-_")),
        ),
        ("openai key", "openai-key", cat("OPENAI_API_KEY=sk-", "proj-", k(120, ALNUM + "_-"))),
        ("openrouter key", "openrouter-key", cat("sk-or-", "v1-", k(64, HEX))),
        ("huggingface token", "huggingface-token", cat("hf", "_", k(34))),
        ("groq key", "groq-key", cat("gsk", "_", k(52))),
        ("xai key", "xai-key", cat("xai", "-", k(80))),
        ("docker hub token", "docker-hub-token", cat("dckr", "_pat_", k(27))),
        ("digitalocean token", "digitalocean-token", cat("dop", "_v1_", k(64, HEX))),
        ("sendgrid key", "sendgrid-key", cat("SG", ".", k(22), ".", k(43))),
        (
            "url credentials",
            "url-credentials",
            cat("https://deploy:", password, "@git.example.org"),
        ),
        # issue 12's misses
        ("postgres user:pass", "url-credentials", "DATABASE_URL=postgres://user:pass@db:5432/app"),
        (
            "mysql url",
            "url-credentials",
            cat("jdbc:mysql://app:", password, "@db.internal:3306/shop"),
        ),
        ("password=", "secret-assignment", cat("password=", password)),
        ("DB_PASSWORD=", "secret-assignment", cat("DB_PASSWORD=", password)),
        ("PGPASSWORD=", "secret-assignment", cat("PGPASSWORD=", password, " psql -h db")),
        ("secret: yaml", "secret-assignment", cat("client_secret: ", k(24))),
        ("json api_key", "secret-assignment", cat('{"api_key": "', k(32), '"}')),
        ("camelCase token", "secret-assignment", cat("authToken = '", k(20, HEX), "'")),
        (
            "ado.net",
            "connection-string",
            cat("Server=db;Database=shop;User Id=sa;Password=", password, ";"),
        ),
        ("odbc braces", "connection-string", cat("Driver={ODBC};Uid=sa;Pwd={", password, "};")),
        (
            "jdbc query",
            "connection-string",
            cat("jdbc:postgresql://db:5432/shop?user=app&password=", password),
        ),
        (
            "basic auth header",
            "auth-header",
            cat("curl -H 'Authorization: Basic ", b64(cat("admin:", password)), "'"),
        ),
        ("bearer header", "auth-header", cat("Authorization: Bearer ", k(40, ALNUM + "-._"))),
        ("aws secret alone", "aws-secret-key", f"the key is {aws_secret} (rotated)"),
        (
            "base64 pem (kubernetes secret)",
            "private-key",
            cat("tls.key: ", b64(pem + k(200, B64))),
        ),
        ("base64 github token", "base64-secret", cat("GH_AUTH=", b64(ghp))),
        ("base64 .env", "base64-secret", b64(cat("AWS_ACCESS_KEY_ID=", aws_id, "\n"))),
        ("full-width token", "github-token", "".join(chr(ord(c) + 0xFEE0) for c in ghp)),
        ("zero-width split", "github-token", ghp[:2] + zw + ghp[2:6] + zw + ghp[6:]),
        ("soft hyphen split", "aws-access-key", aws_id[:4] + "\u00ad" + aws_id[4:]),
        ("word joiner split", "stripe-secret-key", cat("sk_", "live", "\u2060", "_", k(24))),
    ]
    return out


# Ordinary engineering text that must pass: near misses for every rule.
NEAR_MISSES = [
    "the secret: rotate keys monthly, and keep them in SSM",
    "password: see the team's 1Password vault",
    "Set max_tokens=4096 and temperature=0.2 for the summariser.",
    "token_count: 1800 per request on average",
    "bypass: cache-2024 is the flag name, not a credential",
    "Authorization: Bearer tokens are checked by the service layer.",
    "Authorization: Basic auth is disabled on this deployment",
    "headers = {'Authorization': f'Bearer {token}'}",
    'token = os.getenv("LTM_TOKEN")',
    "password=settings.DB_PASSWORD",
    "DB_PASSWORD=${DB_PASSWORD} docker compose up",
    "api_key: <your-key>",
    "API_KEY=your-api-key-here",
    "export OPENAI_API_KEY=sk-...",
    "password=changeme in the template, replaced at deploy time",
    "secret: '****'",
    "token=xxxxxxxxxxxxxxxx",
    "Server=db;Database=shop;User Id=sa;Password=<password>;",
    "jdbc:postgresql://db:5432/shop?user=app&password=${PGPASSWORD}",
    "postgres://user:${DB_PASSWORD}@db/app",
    "postgres://user:password@localhost/app is the docker-compose default",
    "whsec_" + "a" * 31,
    "AKIA" + "IOSFODNN7" + "EXAMPLE is the key id AWS's documentation uses",
    "ghp_" + "x" * 36,
    "sk_test_" + "x" * 24,
    "the private-key kind masks the header; public keys are fine",
    "a private_key: field in the form is required",
    "The cache key is sha256 of the canonical bytes.",
    "Keyboard shortcuts: Ctrl+K opens the picker.",
    "src/components/UserProfileCard/index.test.tsx renders the avatar",
    "chalicelib/service/packets.py and cli/commands/push.py changed together",
    "AmazonSSMManagedInstanceCore is the policy the role needs",
    "PKCE: S256(dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk) per RFC 7636",
    "commit 9fceb02d0ae598e95dc970b74767f19372d61af8 fixed the test",
    "base64 of a PNG header is iVBORw0KGgoAAAANSUhEUgAA and proves nothing",
    "the JWT header eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9 alone is not a token",
    "UUID 550e8400-e29b-41d4-a716-446655440000 names the fixture tenant",
    "secret_key_base is generated by rails credentials:edit",
    "See RFC 8628 section 5.1 for the device code entropy.",
    "the password field: minimum 12 characters, checked by zxcvbn",
    "pass: true, fail: false",
    "Use Stripe publishable keys (pk_live_...) in the browser only.",
    "pwd: prints the working directory",
    "the token: an opaque string the server hashes with sha256",
]


def _paragraphs(text: str) -> Iterator[str]:
    for para in text.split("\n\n"):
        if para.strip():
            yield para


def _strings(value: object) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for k, v in value.items():
            yield str(k)
            yield from _strings(v)
    elif isinstance(value, list):
        for v in value:
            yield from _strings(v)


def prose() -> list[tuple[str, str]]:
    """(source, text): paragraphs of docs and code, packet strings, near misses."""
    out: list[tuple[str, str]] = []
    docs = [ROOT / "README.md", ROOT / "BENCHMARKS.md", *sorted((ROOT / "docs").glob("*.md"))]
    for path in docs:
        rel = path.relative_to(ROOT).as_posix()
        out += [(rel, p) for p in _paragraphs(path.read_text(encoding="utf-8"))]
    code = sorted(
        p
        for pattern in ("chalicelib/**/*.py", "cli/**/*.py", "infra/*.yaml", "*.py", "Makefile")
        for p in ROOT.glob(pattern)
        if p.name != "redact.py"  # the scanner's own patterns and markers
    )
    for path in code:
        rel = path.relative_to(ROOT).as_posix()
        out += [(rel, p) for p in _paragraphs(path.read_text(encoding="utf-8"))]
    for path in sorted(EXAMPLES.glob("*.json")):
        packet = json.loads(path.read_text(encoding="utf-8"))
        out += [(f"examples/{path.name}", s) for s in _strings(packet)]
    out += [("near misses", s) for s in NEAR_MISSES]
    return out
