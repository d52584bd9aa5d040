"""The redaction pre-flight scanner (ltm.redact).

Fake secrets are assembled from pieces at run time so this file holds nothing
that looks like a live credential to a push-protection scanner.
"""

from __future__ import annotations

import base64
import itertools
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import redact_corpus
import tomli_w
from clikit import Cli
from hypothesis import given, settings
from hypothesis import strategies as st
from timing import scaled

from ltm import redact
from ltm.redact import (
    BUILTIN_KINDS,
    BUILTIN_RULES,
    Hit,
    Rule,
    compile_user_rule,
    is_secret_kind,
    normalize,
    scan_packet,
    scan_text,
)

SPEC = Path(__file__).resolve().parents[1] / "spec"  # the published files (spec/README.md)
MASK = "-----BEGIN … PRIVATE KEY-----"
N = 32_768


def cut(s: str) -> str:
    return s if len(s) <= 32 else s[:32] + "…"


def head(s: str) -> str:
    """How a report shows a secret: at most 8 characters, a quarter of it at most."""
    return s[: min(8, len(s) // 4)] + "…"


def cat(*parts: str) -> str:
    return "".join(parts)


ALNUM = "aB3dE5gH7jK9mN1pQ2sT4vW6yZ8"  # mixed case + digits, to repeat/slice


def rnd(n: int, alphabet: str = ALNUM) -> str:
    return (alphabet * (n // len(alphabet) + 1))[:n]


HEX = "0123456789abcdef"
LOW_ENTROPY_40 = cat("Abcdefghij1", "Abcdefghij2", "Abcdefghij3", "Abcdefg")
AWS_SECRET = cat("wJalrXUtnFEMI/K7MDENG/", "bPxRfiCYq3Zt8vLw2N")  # AWS docs' shape, no EXAMPLE
AWS_KEY_ID = cat("AKIA", "QYLPMN5H", "T2ZRW3VK")
JWT = ".".join(
    (
        cat("eyJ", "hbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9"),
        cat("eyJ", "zdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkphbmUifQ"),
        cat("dBjftJeZ4CVP", "-mB92K27uhbUJU1p1r_wW1gFWFOEjXk"),
    )
)
SSH_RSA = cat("ssh-rsa ", "AAAAB3NzaC1yc2E", "AAAADAQABAAABAQC", rnd(60, "xYz09+/"))
KEY_BODY = cat("MIIEow", "IBAAKCAQEA", rnd(56, "Qw3/Er+T"))

# (kind, text, the exact substring reported before truncation)
POSITIVES: list[tuple[str, str, str]] = [
    # abs-path
    ("abs-path", "edited /home/alice/proj/app.py today", "/home/alice/proj/app.py"),
    ("abs-path", "cd /Users/bob/code/ltm && make", "/Users/bob/code/ltm"),
    ("abs-path", "cat /etc/hosts", "/etc/hosts"),
    ("abs-path", "key in /root/.ssh/config", "/root/.ssh/config"),
    ("abs-path", "tail /var/log/syslog.", "/var/log/syslog"),
    ("abs-path", "is it /etc/hosts?", "/etc/hosts"),
    ("abs-path", "open file:///home/alice/report.html", "/home/alice/report.html"),
    ("abs-path", "brew in /opt/homebrew/bin", "/opt/homebrew/bin"),
    ("abs-path", "PATH=/usr/local/bin:$PATH", "/usr/local/bin:$PATH"),
    ("abs-path", "wrote /tmp/build-123/out.log", "/tmp/build-123/out.log"),
    ("abs-path", "/private/var/folders/xy/T", "/private/var/folders/xy/T"),
    ("abs-path", "mounted at /mnt/data/set", "/mnt/data/set"),
    ("abs-path", "served from /srv/www/app", "/srv/www/app"),
    ("abs-path", "copied to /Volumes/External/backup", "/Volumes/External/backup"),
    ("abs-path", 'config at "/home/ci/.config/ltm"', "/home/ci/.config/ltm"),
    ("abs-path", "(see /Users/x/notes.md)", "/Users/x/notes.md"),
    ("abs-path", "secrets in ~/work/acme/.env", "~/work/acme/.env"),
    ("abs-path", "~/.aws/credentials", "~/.aws/credentials"),
    # windows-path
    ("windows-path", r"opened C:\Users\alice\proj\x.sln", r"C:\Users\alice\proj\x.sln"),
    ("windows-path", "saved to C:/Users/alice/Desktop", "C:/Users/alice/Desktop"),
    ("windows-path", r"d:\work\repo", r"d:\work\repo"),
    ("windows-path", r'"C:\\Users\\bob\\app"', r"C:\\Users\\bob\\app"),
    ("windows-path", "file:///C:/Users/x/a.txt", "C:/Users/x/a.txt"),
    # unc-path
    ("unc-path", r"share at \\fileserver\team\docs", r"\\fileserver\team\docs"),
    ("unc-path", r"\\corp.example\dfs$\builds", r"\\corp.example\dfs$\builds"),
    ("unc-path", r"\\?\C:\very\long\path", r"\\?\C:\very\long\path"),
    ("unc-path", r"\\\\nas01\\media", r"\\\\nas01\\media"),
    # aws-access-key
    ("aws-access-key", f"key id {AWS_KEY_ID} in env", AWS_KEY_ID),
    ("aws-access-key", cat("ASIA", "Y3FJ2X7Q", "ABCDEFGH"), cat("ASIA", "Y3FJ2X7Q", "ABCDEFGH")),
    ("aws-access-key", f"AWS_ACCESS_KEY_ID={AWS_KEY_ID}", AWS_KEY_ID),
    # aws-secret-key
    ("aws-secret-key", f"aws_secret_access_key = {AWS_SECRET}", AWS_SECRET),
    ("aws-secret-key", f'AWS_SECRET_ACCESS_KEY="{AWS_SECRET}"', AWS_SECRET),
    ("aws-secret-key", f'{{"SecretAccessKey": "{AWS_SECRET}"}}', AWS_SECRET),
    ("aws-secret-key", f"{AWS_SECRET} is the AWS secret", AWS_SECRET),
    # aws-arn
    (
        "aws-arn",
        "role arn:aws:iam::123456789012:role/deploy",
        "arn:aws:iam::123456789012:role/deploy",
    ),
    ("aws-arn", "arn:aws:s3:::my-bucket/key.txt", "arn:aws:s3:::my-bucket/key.txt"),
    (
        "aws-arn",
        "arn:aws:lambda:us-east-1:123456789012:function:ltm",
        "arn:aws:lambda:us-east-1:123456789012:function:ltm",
    ),
    (
        "aws-arn",
        "arn:aws-cn:sns:cn-north-1:123456789012:t",
        "arn:aws-cn:sns:cn-north-1:123456789012:t",
    ),
    # github-token
    *[
        ("github-token", f"token {p}_{rnd(36)} used", f"{p}_{rnd(36)}")
        for p in ("ghp", "gho", "ghu", "ghs", "ghr")
    ],
    (
        "github-token",
        cat("github", "_pat_", rnd(22), "_", rnd(59)),
        cat("github", "_pat_", rnd(22), "_", rnd(59)),
    ),
    # gitlab-token
    ("gitlab-token", cat("glpat", "-", rnd(20)), cat("glpat", "-", rnd(20))),
    # npm-token
    ("npm-token", cat("//registry.npmjs.org/:_authToken=npm", "_", rnd(36)), cat("npm_", rnd(36))),
    # ltm-token (our own bearer tokens)
    ("ltm-token", cat("Authorization: Bearer ltm", "_", rnd(64, HEX)), cat("ltm_", rnd(64, HEX))),
    (
        "ltm-token",
        cat("LTM_TOKEN=ltm", "_01JCZZ8Q4V7W1K3M5N9P2R6T0A_", rnd(64, HEX)),
        cat("ltm", "_01JCZZ8Q4V7W1K3M5N9P2R6T0A_", rnd(64, HEX)),
    ),
    # pypi-token
    (
        "pypi-token",
        cat("password = pypi-", "AgEIcHlwaS5vcmc", rnd(70, ALNUM + "_-")),
        cat("pypi-", "AgEIcHlwaS5vcmc", rnd(70, ALNUM + "_-")),
    ),
    # jwt
    ("jwt", f"Authorization: Bearer {JWT}", JWT),
    ("jwt", f"token={JWT}&x=1", JWT),
    # private-key (masked)
    ("private-key", cat("-----BEGIN RSA ", "PRIVATE KEY-----\n", KEY_BODY), MASK),
    ("private-key", cat("-----BEGIN EC ", "PRIVATE KEY-----"), MASK),
    ("private-key", cat("-----BEGIN DSA ", "PRIVATE KEY-----"), MASK),
    ("private-key", cat("-----BEGIN OPENSSH ", "PRIVATE KEY-----"), MASK),
    ("private-key", cat("-----BEGIN ENCRYPTED ", "PRIVATE KEY-----"), MASK),
    ("private-key", cat("-----BEGIN ", "PRIVATE KEY-----"), MASK),
    ("private-key", cat("-----BEGIN PGP ", "PRIVATE KEY BLOCK-----"), MASK),
    ("private-key", cat("---- BEGIN SSH2 ENCRYPTED ", "PRIVATE KEY ----"), MASK),
    # google-api-key
    ("google-api-key", cat("key=AIza", rnd(35, ALNUM + "_-")), cat("AIza", rnd(35, ALNUM + "_-"))),
    # slack-token and slack-webhook
    *[
        ("slack-token", cat(p, "-", "123456789012-", "1234567890123-", rnd(24)), None)
        for p in ("xoxb", "xoxp", "xoxa", "xoxr", "xoxs")
    ],
    ("slack-token", cat("xapp", "-1-", "A01B2C3D4E5-", "1234567890-", rnd(40)), None),
    (
        "slack-webhook",
        cat("POST https://hooks.slack.com", "/services/T04B", "7KJ2Q/B05C9D1F7/", rnd(24)),
        cat("hooks.slack.com", "/services/T04B", "7KJ2Q/B05C9D1F7/", rnd(24)),
    ),
    # stripe
    ("stripe-secret-key", cat("sk_", "live_", rnd(24)), cat("sk_", "live_", rnd(24))),
    ("stripe-secret-key", cat("STRIPE_KEY=sk_", "test_", rnd(24)), cat("sk_", "test_", rnd(24))),
    ("stripe-restricted-key", cat("rk_", "live_", rnd(24)), cat("rk_", "live_", rnd(24))),
    ("stripe-restricted-key", cat("rk_", "test_", rnd(24)), cat("rk_", "test_", rnd(24))),
    ("stripe-webhook-secret", cat("whsec", "_", rnd(32)), cat("whsec", "_", rnd(32))),
    # ssh-public-key
    ("ssh-public-key", f"authorized_keys: {SSH_RSA} alice@laptop", SSH_RSA),
    (
        "ssh-public-key",
        cat("ssh-ed25519 ", "AAAAC3NzaC1lZDI1NTE5", "AAAAI", rnd(40)),
        cat("ssh-ed25519 ", "AAAAC3NzaC1lZDI1NTE5", "AAAAI", rnd(40)),
    ),
    (
        "ssh-public-key",
        cat("ecdsa-sha2-nistp256 ", "AAAAE2VjZHNhLXNoYTItbmlzdHAyNTY", rnd(40)),
        cat("ecdsa-sha2-nistp256 ", "AAAAE2VjZHNhLXNoYTItbmlzdHAyNTY", rnd(40)),
    ),
    # LLM providers
    (
        "anthropic-key",
        cat("ANTHROPIC_API_KEY=sk-ant-", "api03-", rnd(93, ALNUM + "-_"), "AA"),
        cat("sk-ant-", "api03-", rnd(93, ALNUM + "-_"), "AA"),
    ),
    ("openai-key", cat("sk-", rnd(48)), cat("sk-", rnd(48))),
    (
        "openai-key",
        cat("OPENAI_API_KEY=sk-", "proj-", rnd(120, ALNUM + "_-")),
        cat("sk-", "proj-", rnd(120, ALNUM + "_-")),
    ),
    ("huggingface-token", cat("hf", "_", rnd(34)), cat("hf", "_", rnd(34))),
    ("openrouter-key", cat("sk-or-", "v1-", rnd(64, HEX)), cat("sk-or-", "v1-", rnd(64, HEX))),
    ("groq-key", cat("gsk", "_", rnd(52)), cat("gsk", "_", rnd(52))),
    ("xai-key", cat("xai", "-", rnd(80)), cat("xai", "-", rnd(80))),
    # other cloud and registry tokens
    ("docker-hub-token", cat("dckr", "_pat_", rnd(27)), cat("dckr", "_pat_", rnd(27))),
    ("digitalocean-token", cat("dop", "_v1_", rnd(64, HEX)), cat("dop", "_v1_", rnd(64, HEX))),
    ("google-oauth-secret", cat("GOCSPX", "-", rnd(28)), cat("GOCSPX", "-", rnd(28))),
    ("sendgrid-key", cat("SG", ".", rnd(22), ".", rnd(43)), cat("SG", ".", rnd(22), ".", rnd(43))),
    (
        "discord-webhook",
        cat("https://discord.com", "/api/webhooks/", "123456789012345678/", rnd(68)),
        cat("discord.com", "/api/webhooks/", "123456789012345678/", rnd(68)),
    ),
    # url-credentials
    ("url-credentials", "https://user:hunter2@example.com/x", "https://user:hunter2@example.com"),
    (
        "url-credentials",
        "DATABASE_URL=postgres://app:s3cr3t@db.internal:5432/app",
        "postgres://app:s3cr3t@db.internal:5432",
    ),
    ("url-credentials", "redis://:pw123@cache:6379/0", "redis://:pw123@cache:6379"),
    # local-url
    ("local-url", "open http://localhost:8080/docs", "http://localhost:8080"),
    ("local-url", "psql -h 127.0.0.1:5432", "127.0.0.1:5432"),
    ("local-url", "bind 0.0.0.0:3000", "0.0.0.0:3000"),
    ("local-url", "curl http://[::1]:8000/", "http://[::1]:8000"),
    ("local-url", "host.docker.internal:5432", "host.docker.internal:5432"),
    ("local-url", "api.localhost:3000", "localhost:3000"),
    ("local-url", "http://192.168.1.20:8000/admin", "http://192.168.1.20:8000"),
    ("local-url", "es at 10.0.0.5:9200", "10.0.0.5:9200"),
    ("local-url", "db 172.17.0.2:5432", "172.17.0.2:5432"),
    # secret-assignment (the whole name is shown)
    ("secret-assignment", "DB_PASSWORD=hunter22", "DB_PASSWORD=hunter22"),
    ("secret-assignment", 'password = "s3cr3t-Pa55"', 'password = "s3cr3t-Pa55'),
    ("secret-assignment", cat("client_secret: ", rnd(24)), cat("client_secret: ", rnd(24))),
    # connection-string
    (
        "connection-string",
        "Server=db;Database=x;User Id=sa;Password=Str0ng!Pass;",
        "Password=Str0ng!Pass",
    ),
    ("connection-string", "jdbc:postgresql://db/x?user=u&password=pw4app", "password=pw4app"),
    # auth-header
    (
        "auth-header",
        cat("Authorization: Basic ", "YWRtaW46aHVudGVyMjI="),
        cat("Authorization: Basic ", "YWRtaW46aHVudGVyMjI="),
    ),
    ("auth-header", cat("Authorization: Bearer ", rnd(40)), cat("Authorization: Bearer ", rnd(40))),
    # base64-secret (base64 of a GitHub token)
    (
        "base64-secret",
        cat("R0hfVE9LRU49Z2hwX", "2FCM2RFNWdIN2pLOW1OMXBRMnNUNHZXNnlaOGFCM2RFNWdIN2o="),
        cat("R0hfVE9LRU49Z2hwX", "2FCM2RFNWdIN2pLOW1OMXBRMnNUNHZXNnlaOGFCM2RFNWdIN2o="),
    ),
]


@pytest.mark.parametrize(("kind", "text", "expected"), POSITIVES)
def test_positive(kind: str, text: str, expected: str | None) -> None:
    found = scan_text(text, masked=False)
    kinds = [k for k, _ in found]
    assert kind in kinds, found
    if expected is not None:
        assert (kind, expected if expected == MASK else cut(expected)) in found


@pytest.mark.parametrize(
    ("kind", "text", "expected"),
    [(k, t, e) for k, t, e in POSITIVES if is_secret_kind(k) and e not in (None, MASK)],
)
def test_a_secret_is_shown_by_its_head_alone(kind: str, text: str, expected: str) -> None:
    # Cut at 32 characters, a report echoed most of a token (all of a short one).
    assert (kind, head(expected)) in scan_text(text)
    (hit,) = [h for h in scan_packet(base_packet(goal=text)) if h.kind == kind]
    assert hit.match == head(expected) and expected[8:] not in str(hit)


def test_every_builtin_kind_has_a_positive() -> None:
    # The vendor formats' positives are in the corpus (tests/redact_corpus.py).
    kinds = {k for k, _, _ in POSITIVES} | {k for _, k, _ in redact_corpus.formats()}
    assert kinds == set(BUILTIN_KINDS)


NEGATIVES = [
    "PuTTY keys start with a PuTTY-User-Key-File-3: line",  # prose about the format
    "src/app.py",
    "./scripts/x.sh",
    "../foo/bar.py",
    "see tests/fixtures/etc/config.yaml",
    "/v1/packets",
    "POST /v1/packets?team=core then GET /v1/packets/{id}",
    "/api/users/{id}",
    "/api/users/{id}/teams",
    "/healthz",
    "v1.2.3",
    "1.2.3-rc.1",
    "commit a1b2c3d",
    "full sha " + rnd(40, HEX),
    "https://github.com/org/repo",
    "https://docs.python.org/3/",
    "https://example.com/home/user/profile",
    "https://example.com:8443/etc/x",
    cat("pk_", "live_", rnd(24)),
    cat("pk_", "test_", rnd(24)),
    "TCP/IP",
    "a/b",
    "and/or",
    "I/O",
    "2024-01-02",
    "2024/01/02 at 10:30",
    "ratio 16:9",
    "user@example.com",
    "mail the maintainer <dev@example.org>",
    "task-based desk-top risk-free sk-learn",
    "sk-learn-compatible-estimator-wrapper-for-pipelines",
    "risk_test_environment_variables",
    "the disk_live_migration flag",
    "550e8400-e29b-41d4-a716-446655440000",
    "sha256:" + rnd(64, HEX),
    "etc/ and so on, etc.",
    "see /etc/.",
    "bare roots: /tmp, /etc and /home",
    "/usr",
    "http://localhost/",
    "runs on localhost",
    "127.0.0.1",
    "git@github.com:org/repo.git",
    "ssh://git@github.com/org/repo",
    "postgres://user:${DB_PASSWORD}@db/x",
    "postgres://user:password@db/x",
    "https://user:****@example.com",
    "hf_hub_download",
    "npm_config_registry",
    "xoxp-style tokens are user tokens",
    "ghp_ is the prefix of classic tokens",
    "AKIA prefixes long-term keys",
    "-----BEGIN PUBLIC KEY-----",
    "-----BEGIN CERTIFICATE-----",
    "ssh-rsa is deprecated",
    "aws " + rnd(40, HEX),  # a SHA next to "aws" is not a secret
    "the secret is to use " + "aB" * 30,  # too long for an AWS secret
    "namespace::function and std::vector",
    "https://",
    "http://a:b",
    "Note:/x and key:/value",
    r"regex \\d+\\w* and \\s",
    "10:30 and 1.10.0.1 and v10.0.0",
    "ip 8.8.8.8:53",
    "eyJ alone and eyJhbGciOiJIUzI1NiJ9 without payload",
    *redact_corpus.FORMAT_NEAR_MISSES,
    "",
    " ",
]


# Prose near the second round's rules: checked with the other NEGATIVES.
PROSE = [
    "the secret: rotate keys monthly",
    "password: see the team vault",
    "Set max_tokens=4096 and temperature=0.2.",
    "bypass: cache-2024 is a flag",
    "Authorization: Bearer tokens are checked by the service layer.",
    "Authorization: Basic auth is disabled",
    'token = os.getenv("LTM_TOKEN")',
    "password=settings.DB_PASSWORD",
    'headers = {"Authorization": f"Bearer {token}"}',
    "secret_key_base comes from rails credentials",
    "pwd: prints the working directory",
    "api_key: required",
    "the password field: minimum 12 characters",
    "src/components/UserProfileCard/index.test.tsx",
    "AmazonSSMManagedInstanceCore policy",
    "PKCE: E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM (RFC 7636 appendix B)",
    "iVBORw0KGgoAAAANSUhEUgAA is a PNG header in base64",
    "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9 is a JWT header alone",
    "ｆｕｌｌ－ｗｉｄｔｈ ｔｅｘｔ ａｎｄ a soft\u00adhyphen are ordinary",
]


@pytest.mark.parametrize("text", NEGATIVES + PROSE)
def test_negative(text: str) -> None:
    assert scan_text(text) == []


@pytest.mark.parametrize(
    "name", ["example.v0.2.json", "reference-benchmark.v0.1.json"], ids=lambda n: n
)
def test_published_examples_are_clean(name: str) -> None:
    packet = json.loads((SPEC / "examples" / name).read_text())
    assert scan_packet(packet) == []


# --------------------------------------------------------------------------- #
# Hits, fields and order
# --------------------------------------------------------------------------- #


def base_packet(**fields: Any) -> dict[str, Any]:
    return {
        "ltm_version": "0.2",
        "id": "01JS5LTMEXAMPLEPACKET00001A",
        "created_at": "2026-04-22T00:00:00Z",
        "goal": "ship it",
        "next_step": "run the tests",
        **fields,
    }


def test_field_paths_and_schema_order() -> None:
    packet = base_packet(
        # deliberately out of schema order
        provenance={
            "author_human": "/home/alice",
            "author_model": "m",
            "source_hash": "sha256:" + rnd(64, HEX),
        },
        tags=["ok", "also-ok", "~/x"],
        next_step="then open http://localhost:3000",
        open_questions=["fine", "what about /etc/hosts?"],
        attempts=[
            {"tried": "x", "outcome": "failed"},
            {"tried": "y", "outcome": "failed", "learned": "see /tmp/a and /tmp/b"},
        ],
        methods=[{"name": "m", "when_applicable": "w", "how": "ssh to 10.0.0.5:22"}],
        decisions=[
            {"what": "a", "why": "b"},
            {"what": "c", "why": f"key {AWS_KEY_ID}", "consequences": "/var/lib/x"},
        ],
        constraints=["keep /opt/app/x"],
        success_criteria=["no /srv/a", "none"],
        goal="fix C:\\Users\\bob\\x",
        project={"ref": "/Users/bob/ltm", "name": "/home/bob/ltm"},
        parent_id="/home/p/parent",
    )
    assert [str(h) for h in scan_packet(packet)] == [
        "parent_id/abs-path: /home/p/parent",
        "project.name/abs-path: /home/bob/ltm",
        "project.ref/abs-path: /Users/bob/ltm",
        "goal/windows-path: C:\\Users\\bob\\x",
        "success_criteria[0]/abs-path: /srv/a",
        "constraints[0]/abs-path: /opt/app/x",
        f"decisions[1].why/aws-access-key: {head(AWS_KEY_ID)}",
        "decisions[1].consequences/abs-path: /var/lib/x",
        "methods[0].how/local-url: 10.0.0.5:22",
        "attempts[1].learned/abs-path: /tmp/a",
        "attempts[1].learned/abs-path: /tmp/b",
        "open_questions[1]/abs-path: /etc/hosts",
        "next_step/local-url: http://localhost:3000",
        "tags[2]/abs-path: ~/x",
        "provenance.author_human/abs-path: /home/alice",
    ]


def test_order_is_independent_of_key_order() -> None:
    packet = base_packet(
        constraints=["/home/a", "/home/b"],
        goal="/home/g",
        decisions=[{"why": "/home/why", "what": "/home/what"}],
    )
    reordered = dict(reversed(list(packet.items())))
    reordered["decisions"] = [dict(reversed(list(packet["decisions"][0].items())))]
    expected = [
        "goal/abs-path: /home/g",
        "constraints[0]/abs-path: /home/a",
        "constraints[1]/abs-path: /home/b",
        "decisions[0].what/abs-path: /home/what",
        "decisions[0].why/abs-path: /home/why",
    ]
    assert [str(h) for h in scan_packet(packet)] == expected
    assert [str(h) for h in scan_packet(reordered)] == expected


def test_id_created_at_and_version_are_scanned_too() -> None:
    # A ghp_ id was pushed once: every string of the packet is scanned.
    token = cat("ghp_", rnd(36))
    packet = base_packet(id=token, created_at=f"{AWS_KEY_ID}", ltm_version="/var/v")
    assert [str(h) for h in scan_packet(packet)] == [
        "ltm_version/abs-path: /var/v",
        f"id/github-token: {head(token)}",
        f"created_at/aws-access-key: {head(AWS_KEY_ID)}",
    ]


def test_several_kinds_in_one_field_in_position_order() -> None:
    text = f"/home/a then {AWS_KEY_ID} then postgres://u:pw1@localhost:5432/db"
    assert [k for k, _ in scan_text(text)] == [
        "abs-path",
        "aws-access-key",
        "url-credentials",
        "local-url",
    ]


def test_hit_str_and_dict() -> None:
    (hit,) = scan_packet(base_packet(goal="see /home/alice/x"))
    assert hit == Hit("goal", "abs-path", "/home/alice/x")
    assert str(hit) == "goal/abs-path: /home/alice/x"
    assert hit.as_dict() == {"field": "goal", "kind": "abs-path", "match": "/home/alice/x"}


def test_matches_never_cross_fields() -> None:
    # Joined scanning must not glue a prefix in one field to a body in the next.
    packet = base_packet(constraints=["ghp_" + rnd(20), rnd(20)], success_criteria=["aws"])
    # Shaped like an AWS secret but not random enough to pass without a keyword,
    # and "aws" sits in an earlier field only.
    packet["open_questions"] = [LOW_ENTROPY_40]
    assert scan_packet(packet) == []
    packet["open_questions"] = [f"aws {LOW_ENTROPY_40}"]
    assert [h.kind for h in scan_packet(packet)] == ["aws-secret-key"]


# --------------------------------------------------------------------------- #
# Shown text: truncation and masking
# --------------------------------------------------------------------------- #


@pytest.mark.parametrize(
    ("path", "shown"),
    [
        ("/home/" + "a" * 26, "/home/" + "a" * 26),  # exactly 32: no ellipsis
        ("/home/" + "a" * 27, "/home/" + "a" * 26 + "…"),  # 33: cut
        ("/home/" + "a" * 200, "/home/" + "a" * 26 + "…"),
    ],
)
def test_truncation(path: str, shown: str) -> None:
    assert scan_text(f"x {path} y") == [("abs-path", shown)]
    (hit,) = scan_packet(base_packet(goal=path))
    assert hit.match == shown


def test_private_key_material_never_echoed() -> None:
    pem = cat("-----BEGIN RSA ", "PRIVATE KEY-----\n", KEY_BODY, "\n-----END RSA PRIVATE KEY-----")
    packet = base_packet(
        goal=pem, constraints=[cat("-----BEGIN OPENSSH ", "PRIVATE KEY-----", KEY_BODY)]
    )
    hits = scan_packet(packet)
    assert [h.kind for h in hits] == ["private-key", "private-key"]
    out = json.dumps([h.as_dict() for h in hits]) + "".join(map(str, hits))
    out += repr(scan_text(pem))
    assert all(h.match == MASK for h in hits)
    assert KEY_BODY[:8] not in out
    assert "RSA" not in out and "OPENSSH" not in out


# --------------------------------------------------------------------------- #
# User rules
# --------------------------------------------------------------------------- #


@pytest.mark.parametrize(
    ("kind", "regex", "message"),
    [
        ("acme", "(", "invalid regex"),
        ("acme", "a{2,1}", "invalid regex"),
        ("acme", "", "empty pattern"),
        ("acme", "a*", "matches the empty string"),
        ("acme", r"\b", "matches the empty string"),
        ("acme", "^", "matches the empty string"),
        ("acme", "x|", "matches the empty string"),
        # RE2 syntax: the stdlib parser used to decide this, and cannot read all of it
        ("acme", "[[:alpha:]]*", "matches the empty string"),
        ("acme", r"\pL*", "matches the empty string"),
        ("acme", r"(?m)$", "matches the empty string"),
        ("acme", r"\z", "matches the empty string"),
        ("acme", r"(?i)\B|x", "matches the empty string"),
        ("", "x", "invalid kind"),
        ("Acme", "x", "invalid kind"),
        ("-acme", "x", "invalid kind"),
        ("acme_host", "x", "invalid kind"),
        ("a" * 33, "x", "invalid kind"),
        ("acme host", "x", "invalid kind"),
    ],
)
def test_user_rule_errors(kind: str, regex: str, message: str) -> None:
    with pytest.raises(ValueError, match=message) as exc:
        compile_user_rule(kind, regex)
    assert "\n" not in str(exc.value)


@pytest.mark.parametrize(
    ("regex", "reason"),
    [
        (r"(a)\1", r"invalid escape sequence: \1"),  # backreference
        ("(?P<n>a)(?P=n)", "invalid perl operator: (?P"),  # named backreference
        ("(?=x)", "invalid perl operator: (?="),  # look-ahead
        ("(?<!x)y", "invalid perl operator: (?<!"),  # look-behind
        ("a++", "bad repetition operator: ++"),  # possessive
        (r"x\Z", r"invalid escape sequence: \Z"),  # Python's end of text; RE2's is \z
        ("x(\ny", r"missing ): x(\ny"),  # RE2 quotes the pattern: kept on one line
    ],
)
def test_user_rule_must_be_re2_syntax(regex: str, reason: str) -> None:
    with pytest.raises(ValueError) as exc:
        compile_user_rule("acme", regex)
    message = str(exc.value)
    assert message.startswith(f"invalid regex for kind 'acme': {reason} ")
    assert "must be RE2 syntax, which is linear-time" in message
    assert "\n" not in message


@pytest.mark.parametrize("regex", [r"\bx\b", "^x$", "(?m)^x$", "[[:alpha:]]+", r"\pL+", "x|y"])
def test_user_rule_that_cannot_match_empty_is_accepted(regex: str) -> None:
    assert compile_user_rule("acme", regex).kind == "acme"


# Pieces of RE2 patterns, heavy on the zero-width assertions, and the texts an
# empty match is looked for in: every string up to 3 chars over a, _, space,
# newline and é (a non-ASCII letter: not a word character for RE2's \b).
_ATOMS = ["a", " ", r"\n", "^", "$", r"\A", r"\z", r"\b", r"\B", "(?m:^)", "(?m:$)", "a*", r"\w"]
_TEXTS = ["".join(t) for n in range(4) for t in itertools.product("a_ \né", repeat=n)]


@settings(max_examples=150, deadline=None)
@given(
    st.recursive(
        st.sampled_from(_ATOMS),
        lambda inner: st.one_of(
            st.tuples(inner, inner).map("".join),
            st.tuples(inner, inner).map(lambda t: f"(?:{t[0]}|{t[1]})"),
            inner.map(lambda t: f"(?:{t})?"),
        ),
        max_leaves=5,
    )
)
def test_empty_match_check_agrees_with_brute_force(regex: str) -> None:
    # The check probes 16 neighbour pairs; here every position of every short text.
    import re2

    compiled = re2.compile(regex)
    empty_somewhere = any(
        compiled.fullmatch(text, i, i) is not None for text in _TEXTS for i in range(len(text) + 1)
    )
    if empty_somewhere:
        with pytest.raises(ValueError, match="matches the empty string"):
            compile_user_rule("acme", regex)
    else:
        rule = compile_user_rule("acme", regex)
        # ... and the scanner never meets an empty match of it.
        assert all(m.end() > m.start() for t in _TEXTS for m in rule.pattern.finditer(t))


def test_user_rule_matches_and_reports_its_kind() -> None:
    rule = compile_user_rule("acme-host", r"[a-z0-9-]+\.acme\.internal")
    assert isinstance(rule, Rule)
    assert rule.kind == "acme-host"
    # Shown by its head, as a secret is: a user's pattern may describe a token of theirs.
    assert scan_text("deploy to db-1.acme.internal now", [rule]) == [
        ("acme-host", head("db-1.acme.internal"))
    ]
    packet = base_packet(constraints=["ok", "cache-2.acme.internal and /home/x"])
    assert [str(h) for h in scan_packet(packet, [rule])] == [
        f"constraints[1]/acme-host: {head('cache-2.acme.internal')}",
        "constraints[1]/abs-path: /home/x",
    ]


def test_user_rules_run_per_field() -> None:
    # ^ and $ anchor to each field, not to the whole packet.
    rule = compile_user_rule("codename", r"^Project [A-Z][a-z]+$")
    packet = base_packet(goal="ship", constraints=["Project Falcon", "not Project Falcon here"])
    assert [str(h) for h in scan_packet(packet, [rule])] == [
        f"constraints[0]/codename: {head('Project Falcon')}"
    ]


def test_user_rule_after_builtin_at_same_position_and_cut() -> None:
    rule = compile_user_rule("any-home", r"/home/\S+")
    long = "/home/" + "z" * 40
    assert scan_text(long, [rule]) == [("abs-path", cut(long)), ("any-home", head(long))]


def test_kind_can_be_32_chars() -> None:
    assert compile_user_rule("a" * 32, "x").kind == "a" * 32


def test_user_rule_offsets_are_characters_and_survive_lone_surrogates() -> None:
    # RE2 works on UTF-8 bytes: hits must still land on the right characters.
    rule = compile_user_rule("codename", r"blue\w+")
    assert scan_text("éé ünï bluebird — ok", [rule]) == [("codename", head("bluebird"))]
    packet = base_packet(goal="日本語 bluebird", constraints=["\ud800 bluejay \udfff"])
    assert [str(h) for h in scan_packet(packet, [rule])] == [
        f"goal/codename: {head('bluebird')}",
        f"constraints[0]/codename: {head('bluejay')}",
    ]


@pytest.mark.parametrize(
    "regex",
    ["ｐｒｏｊｅｃｔ-ｘ", "ﬁnance-db", "cafe\u0301-code", "blue\u200bbird"],
    ids=["full-width", "ligature", "decomposed", "zero-width"],
)
def test_a_user_rule_is_folded_as_the_text_it_runs_on(regex: str) -> None:
    """The text is matched after NFKC, invisible characters removed: a pattern that kept
    its full-width letters, ligature or decomposed accent never matched, not even itself."""
    rule = compile_user_rule("codename", regex)
    assert [kind for kind, _ in scan_text(f"see {regex} now", [rule])] == ["codename"]


def test_a_user_rule_with_a_hit_per_character_stops_at_user_hits_per_field() -> None:
    # x*y|x: every x is a hit, and RE2 reads to the end of the run for each one (one
    # search per hit); without the cap that is 32,768 searches of up to 32 KiB each.
    from ltm.redact import USER_HITS

    rule = compile_user_rule("exes", "x*y|x")
    packet = base_packet(goal="x" * N, next_step="xy then x")
    hits = [str(h) for h in scan_packet(packet, [rule])]
    assert len(hits) == USER_HITS + 2  # the cap is per field: next_step's two are there
    assert hits[:2] == ["goal/exes: …", "goal/exes: …"]  # its head: none of one character
    assert hits[-2:] == ["next_step/exes: …", "next_step/exes: …"]
    assert len(scan_text("x" * N, [rule])) == USER_HITS


def test_user_rules_compare_by_pattern() -> None:
    assert compile_user_rule("k", "x+") == compile_user_rule("k", "x+")
    assert compile_user_rule("k", "x+") != compile_user_rule("k", "y+")


# Patterns that backtrack catastrophically in Python's `re`, with the 32 KiB input
# that makes them do it; on RE2 each scan is linear. (With `re` these take from
# about a minute, (.*a){20}, to far beyond a lifetime.) Speed is measured in
# bench/bench_redact.py.
CATASTROPHIC: dict[str, tuple[str, str, str]] = {
    # name: (pattern, adversarial near-miss, a text it does match)
    "nested-plus": (r"(a+)+$", "a" * N + "!", "a" * N),
    "overlapping-plus": (r"(x+x+)+y", "x" * N, "x" * 40 + "y"),
    # [a-z], not \w: every string is scanned, and \w+$ would match the packet's id
    "words-and-spaces": (r"([a-z]+\s?)+$", "ab " * (N // 3) + "!", "ab " * (N // 3) + "ab"),
    "alternation": (r"(a|aa)+b", "a" * N, "a" * N + "b"),
    "dot-star-repeat": (r"(.*a){20}", "a" * 19 + "b" * N, "ba" * 20),
}


@pytest.mark.parametrize("name", list(CATASTROPHIC))
def test_catastrophic_user_patterns_finish_with_the_right_answer(name: str) -> None:
    regex, near_miss, hit = CATASTROPHIC[name]
    rule = compile_user_rule("slow", regex)
    assert scan_text(near_miss, [rule]) == []
    assert scan_packet(base_packet(goal=near_miss, next_step="go."), [rule]) == []
    assert scan_text(hit, [rule]) == [("slow", head(hit))]
    assert [str(h) for h in scan_packet(base_packet(goal=hit, next_step="go."), [rule])] == [
        f"goal/slow: {head(hit)}"
    ]


# --------------------------------------------------------------------------- #
# User rules through the real CLI (one person's config dir, real subprocesses)
# --------------------------------------------------------------------------- #

CONTENT = {"goal": "Ship it.", "next_step": "Run the tests."}  # no hit for words below


@pytest.fixture
def cli(tmp_path: Path) -> Cli:
    # Outside any checkout, in a folder whose name the catastrophic rules below do not
    # match: save fills project.name from the working directory, and the scan judges it.
    work = tmp_path / "Work-1"
    work.mkdir()
    return Cli(tmp_path).at(work)


def write_patterns(cli: Cli, patterns: list[dict[str, str]]) -> None:
    cli.config.mkdir(parents=True, exist_ok=True)
    (cli.config / "settings.toml").write_text(tomli_w.dumps({"sensitive": patterns}))


@pytest.mark.parametrize(
    ("flags", "near_miss", "hit", "where"),
    [
        # a conforming packet: fields are at most 1024 chars, so 30 of them
        (
            [],
            {"constraints": ["a" * 1000 + "!"] * 30},
            {"constraints": ["a" * 1000]},
            "constraints[0]",
        ),
        # a lenient one: the whole 32 KiB in one field
        (["--lenient"], {"goal": "a" * 31_000 + "!"}, {"goal": "a" * 31_000}, "goal"),
    ],
)
def test_cli_saves_an_adversarial_packet_with_a_catastrophic_rule(
    cli: Cli, flags: list[str], near_miss: dict[str, Any], hit: dict[str, Any], where: str
) -> None:
    cli.ok("sensitive", "add", "slow", r"(a+)+$")
    cli.ok("sensitive", "add", "words", r"([a-z]+\s?)+$")  # not \w: the id is scanned too
    packet = json.dumps({**CONTENT, "next_step": "ab " * 300 + "!", **near_miss})
    assert 30_000 < len(packet) < 32_768
    # The timeout only guards against a hang (with `re`, this never returned).
    saved = cli.run("save", *flags, "-", stdin=packet, timeout=scaled(120))
    assert saved.returncode == 0, saved.stderr
    assert len(saved.stdout.strip()) == 26  # the new packet's id
    blocked = cli.run(
        "save", *flags, "-", stdin=json.dumps({**CONTENT, **hit}), timeout=scaled(120)
    )
    assert blocked.returncode == 1
    assert f"  {where}/slow: {'a' * 8}…\n  {where}/words: {'a' * 8}…\n" in blocked.stderr


@pytest.mark.parametrize("regex", [r"(a)\1", "(?=x)"])
def test_cli_refuses_syntax_re2_does_not_have(cli: Cli, regex: str) -> None:
    line = cli.fails("sensitive", "add", "codename", regex, code=2)
    assert "must be RE2 syntax, which is linear-time" in line
    assert cli.ok("sensitive", "ls") == ""
    assert not (cli.config / "settings.toml").exists()


def test_cli_names_a_saved_pattern_re2_refuses(cli: Cli) -> None:
    # e.g. saved by an earlier build, which took Python `re` syntax
    write_patterns(cli, [{"kind": "ok", "regex": "bluebird"}, {"kind": "old", "regex": "x(?=y)"}])
    for args in (("save", "-"), ("validate", "-"), ("sensitive", "test", "hello")):
        line = cli.fails(*args, stdin=json.dumps(CONTENT))
        assert line.startswith("ltm: your sensitive pattern 'old' cannot be used: ")
        assert "invalid perl operator: (?=" in line and "RE2" in line
        assert line.endswith(
            "fix it with `ltm sensitive rm old`, then `ltm sensitive add` it again"
        )
    assert cli.ok("sensitive", "ls") == "ok\tbluebird\nold\tx(?=y)\n"
    cli.ok("sensitive", "rm", "old")
    assert cli.ok("save", "-", stdin=json.dumps(CONTENT))
    blocked = cli.run("save", "-", stdin=json.dumps({**CONTENT, "goal": "a bluebird"}))
    assert blocked.returncode == 1 and "goal/ok: bl…" in blocked.stderr


def test_cli_names_a_malformed_saved_entry(cli: Cli) -> None:
    write_patterns(cli, [{"regex": "x"}])
    line = cli.fails("save", "-", stdin=json.dumps(CONTENT))
    assert line == "ltm: bad sensitive pattern in settings.toml: {'regex': 'x'}"


@pytest.mark.parametrize("command", [["example"], ["ls"], ["--version"]])
def test_cli_plain_verbs_do_not_load_re2(cli: Cli, command: list[str]) -> None:
    write_patterns(cli, [{"kind": "codename", "regex": "bluebird"}])
    imported = cli.imports(*command)
    assert "re2" not in imported and "ltm.redact" not in imported


# --------------------------------------------------------------------------- #
# Non-conforming packets (lenient mode)
# --------------------------------------------------------------------------- #


def test_wrong_types_do_not_crash_and_strings_are_still_found() -> None:
    packet: dict[str, Any] = {
        "goal": 123,
        "next_step": None,
        "constraints": "one string with /home/a",
        "success_criteria": [1, None, True, ["nested /home/b"]],
        "decisions": ["a string /home/c", {"what": ["/home/d"]}, None, 5, {"why": 3.5}],
        "methods": {"how": "/home/e"},
        "attempts": [{"tried": {"deep": "/home/f"}, "outcome": "/home/g"}],
        "project": "/home/h",
        "tags": {"x": "/home/i"},
        "provenance": {"author_human": 7, "extra": "/home/j"},
        "open_questions": [[[["/home/k"]]]],
        "unknown_field": "/home/l",
        "id": "/home/id",
        42: "/home/m",
    }
    assert [str(h) for h in scan_packet(packet)] == [
        "id/abs-path: /home/id",
        "project/abs-path: /home/h",
        "success_criteria[3][0]/abs-path: /home/b",
        "constraints/abs-path: /home/a",
        "decisions[0]/abs-path: /home/c",
        "decisions[1].what[0]/abs-path: /home/d",
        "methods.how/abs-path: /home/e",
        "attempts[0].tried.deep/abs-path: /home/f",
        "attempts[0].outcome/abs-path: /home/g",
        "open_questions[0][0][0][0]/abs-path: /home/k",
        "tags.x/abs-path: /home/i",
        "provenance.extra/abs-path: /home/j",
        "unknown_field/abs-path: /home/l",
        "42/abs-path: /home/m",
    ]


@pytest.mark.parametrize("packet", [None, "str", 5, [], ["/home/a"], {}])
def test_not_a_packet(packet: Any) -> None:
    assert scan_packet(packet) == []


def test_deep_and_cyclic_structures() -> None:
    deep: Any = "/home/deep"
    for _ in range(5000):
        deep = [deep]
    cyclic: dict[str, Any] = {"why": "/home/cyc"}
    cyclic["self"] = cyclic
    packet = base_packet(constraints=deep, decisions=[cyclic])
    hits = scan_packet(packet)
    assert [h.kind for h in hits] == ["abs-path", "abs-path"]
    assert hits[0].field.startswith("constraints[0][0]")
    assert hits[1].field == "decisions[0].why"


def test_scan_text_tolerates_non_strings() -> None:
    assert scan_text(None) == []  # type: ignore[arg-type]


def test_unicode_that_changes_length_when_lowered() -> None:
    # "İ".lower() is two code points: keyword windows must stay aligned.
    text = "İ" * 50 + f" aws_secret_access_key={AWS_SECRET}"
    assert scan_text(text, masked=False) == [("aws-secret-key", cut(AWS_SECRET))]


def test_many_keywords_fall_back_to_a_full_scan() -> None:
    text = "aws " * 400 + f"secret: {AWS_SECRET} " + "aws " * 400
    assert scan_text(text, masked=False) == [("aws-secret-key", cut(AWS_SECRET))]


# --------------------------------------------------------------------------- #
# Adversarial corpus: 32 KiB near-misses for every rule. A catastrophic pattern
# would hang here; speed itself is measured in bench/bench_redact.py.
# --------------------------------------------------------------------------- #

ADVERSARIAL: dict[str, str] = {
    "A": "A" * N,
    "dash": "-" * N,
    "slash": "/" * N,
    "backslash": "\\" * N,
    "colon": ":" * N,
    "a-colon": "a:" * (N // 2),
    "drive": "C:" * (N // 2),
    "drive-slash": "C:/ " * (N // 4),
    "eyJ-dots": "eyJ" + "a." * 16000,
    "eyJ-run": "eyJ" * (N // 3),
    "eyJ-seg": ("eyJ" + "a" * 6 + ".") * (N // 10),
    "sk-run": "sk-" * (N // 3),
    "sk-ant": "sk-ant- " * (N // 8),
    "sk_live": "sk_live_" * (N // 8),
    "aws-words": "aws secret " * (N // 11),
    "b64-41": ("aws " + "aB3/" * 10 + "x ") * (N // 46),
    "b64-run": "aB3/" * (N // 4),
    "home-run": "/homes" * (N // 6),
    "home-slash": "/home/ " * (N // 7),
    "tilde": "~/" * (N // 2),
    "tilde-dot": "~/." * (N // 3),
    "scheme": "a://" * (N // 4),
    "url-creds": "http://u:" * (N // 9),
    "at-colon": ":@" * (N // 2),
    "url-at": "://a:" + "b" * N,
    "localhost": "localhost:" * (N // 10),
    "ip-dots": "127.0.0.1." * (N // 10),
    "ten-dots": "10." * (N // 3),
    "ipv6": "[::1]" * (N // 5),
    "digits": "1" * N,
    "AKIA": "AKIA" * (N // 4),
    "AIza": "AIza" * (N // 4),
    "ghp": "ghp_" * (N // 4),
    "xoxb": "xoxb-" * (N // 5),
    "BEGIN": "-----BEGIN " * (N // 11),
    "PRIVATE": "-----BEGIN A B C " * (N // 17),
    "ssh": "ssh-rsa AAAA " * (N // 13),
    "AAAA": " AAAA" * (N // 5),
    "arn": "arn:aws:" * (N // 8),
    "arn-colons": "arn:aws" + ":" * N,
    "pypi": "pypi-Ag" * (N // 7),
    "unc": "\\\\a" * (N // 3),
    "spaces": " " * N,
    "newlines": "\n" * N,
    "nul": "\x00" * N,
    "prose-slashes": "and/or I/O TCP/IP a/b " * (N // 22),
    # the rules of the second round
    "password-eq": "password=" * (N // 9),
    "secret-colon": "secret: x " * (N // 10),
    "token-values": "token=abcdef " * (N // 13),
    "conn-semis": ";Password=" * (N // 10),
    "conn-brace": ";Pwd={" * (N // 6),
    "authz": "Authorization: Bearer " * (N // 22),
    "authz-basic": "Authorization: Basic dXNlcg " * (N // 28),
    "b64-40": ("aB3/" * 10 + " ") * (N // 41),
    "b64-40-dash": ("aB3/" * 10 + "-") * (N // 41),
    "pem-b64": "LS0tLS1CRUdJTi" * (N // 14),
    "b64-prose": base64.b64encode(b"Refactored the store; tests pass. " * (N // 46)).decode(),
    "zero-width": "g\u200bh\u00adp_" * (N // 6),
    "full-width": "ｇｈｐ＿ａｂ " * (N // 7),
    "bidi": "\u202e\u2066" * (N // 2),
    # the vendor formats and command lines
    "vendor-prefixes": "shpat_dapiATATT3lin_api_ntn_key-SKACpplx-PMAK-glc_NRAK-" * (N // 54),
    "hex-dashes": ("0123456789abcdef" * 2 + "-") * (N // 33),
    "hex-us": ("0123456789abcdef" * 2 + "-us") * (N // 35),
    "digits-colon": "12345678:" * (N // 9),
    "digits-colon-run": ("123456789:" + "aB3dE5gH7j" * 3) * (N // 40),
    "q-tilde": "a1bQ~" * (N // 5),
    "M-run": "M" * N,
    "MII": "MIIEowIBAAKCAQEA " * (N // 17),
    "discord-shape": ("MTA5ODc2NTQzMjEwOTg3NjU0Mw" + ".") * (N // 27),
    "k-eyJ1": "sk.eyJ1" * (N // 7),
    "atlasv1": ".atlasv1." * (N // 9),
    "accountkey": "AccountKey=" * (N // 11),
    "azure-words": "azure storage " * (N // 14),
    "sig": "?sv=1&sig=" * (N // 10),
    "auth-json": '"auth": "' * (N // 9),
    "netrc": "machine a login b " * (N // 18),
    "netrc-password": "machine h login u password " * (N // 27),
    "mysql": "mysql -p " * (N // 9),
    "mysql-run": "mysql" + " -x" * (N // 3),
    "curl": "curl -u " * (N // 8),
    "sshpass": "sshpass -p " * (N // 11),
    "login": "docker login -p " * (N // 16),
    "dashes-flags": "--password " * (N // 11),
    "double-dash": "--" * (N // 2),
    "private-key-id": "private_key_id: " * (N // 16),
    "env-key": "A_KEY=" * (N // 6),
    "pass-flag": "-pass pass:" * (N // 11),
    "storepass": "-storepass " * (N // 11),
}


@pytest.mark.parametrize("name", list(ADVERSARIAL))
def test_adversarial_near_misses(name: str) -> None:
    text = ADVERSARIAL[name]
    assert scan_text(text) == []
    assert scan_packet(base_packet(goal=text)) == []


@pytest.mark.parametrize("name", list(ADVERSARIAL))
def test_adversarial_prefix_does_not_hide_a_real_hit(name: str) -> None:
    text = ADVERSARIAL[name] + " then /home/alice/x and " + cat("ghp_", rnd(36))
    kinds = [k for k, _ in scan_text(text)]
    assert kinds[-2:] == ["abs-path", "github-token"]


# Floods of real-looking hits: every one is reported, in order, without blowing up.
FLOODS: dict[str, tuple[str, str, int, int]] = {
    "paths": ("/home/a " * (N // 8), "abs-path", N // 8, N // 8),
    "glued-paths": ("/home" * (N // 5), "abs-path", 1, 1),  # one long /home/home/...
    "jwt-like": (("eyJ" + rnd(10) + ".") * (N // 14), "jwt", 780, 780),
    # a path longer than 4 KiB is reported in 4 KiB pieces
    "drives": ("C:/" * (N // 3), "windows-path", 1, N // 4096 + 1),
    "ports": ("localhost:8080 " * (N // 15), "local-url", N // 15, N // 15),
}


@pytest.mark.parametrize("name", list(FLOODS))
def test_hit_floods(name: str) -> None:
    text, kind, lo, hi = FLOODS[name]
    found = scan_text(text)
    assert {k for k, _ in found} == {kind}
    assert lo <= len(found) <= hi


# --------------------------------------------------------------------------- #
# Properties and rule hygiene
# --------------------------------------------------------------------------- #


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=300))
def test_arbitrary_text(text: str) -> None:
    for kind, shown in scan_text(text):
        assert kind in BUILTIN_KINDS
        assert 0 < len(shown) <= 33


@settings(max_examples=100, deadline=None)
@given(st.text(alphabet="/\\:.~-_@AaKkIi0123456789 eyJsk", max_size=400))
def test_arbitrary_near_miss_alphabet(text: str) -> None:
    for _, shown in scan_text(text):
        assert 0 < len(shown) <= 33


def test_builtin_rules_are_well_formed() -> None:
    # Packets are scanned as one NUL-joined text: no built-in match may span a NUL.
    texts = [text.replace(" ", "\x00") for _, text, _ in POSITIVES]
    texts += [text.replace("/", "\x00/") for _, text, _ in POSITIVES]
    for rule in BUILTIN_RULES:
        assert rule.kind in BUILTIN_KINDS
        assert rule.pattern.search("") is None
        for text in texts:
            for m in rule.pattern.finditer(text):
                assert "\x00" not in m.group(), (rule.kind, text)


def test_import_is_light_and_lazy() -> None:
    # On the CLI's start-up path: stdlib only, and no pattern compiled at import.
    code = (
        "import sys, ltm.redact as r; "
        "heavy = {'pydantic', 'typer', 'httpx', 'jsonschema', 're2'} & set(sys.modules); "
        "print(r._rules is None, sorted(heavy))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert out.strip() == "True []"


# --------------------------------------------------------------------------- #
# Every miss of an earlier audit, placeholders, prose
# --------------------------------------------------------------------------- #

GHP = cat("ghp_", rnd(36))


def test_a_token_as_the_id_is_caught() -> None:
    (hit,) = scan_packet(base_packet(id=GHP))
    assert str(hit) == f"id/github-token: {head(GHP)}"


def test_object_keys_are_scanned_and_named_without_echoing_them() -> None:
    # A lenient packet can carry any key; a long or odd key is named by position.
    packet: dict[str, Any] = base_packet(
        provenance={"author_model": "m", GHP: "the value", "note": "/home/x"},
        **{AWS_KEY_ID: "top-level key", "x\u202e" + "y": "bidi in a key"},
    )
    assert [str(h) for h in scan_packet(packet)] == [
        f"provenance.<key 1>(key)/github-token: {head(GHP)}",
        "provenance.note/abs-path: /home/x",
        f"<key 6>(key)/aws-access-key: {head(AWS_KEY_ID)}",  # plain, but the secret itself
    ]
    # A plain key names the path of its value; schema keys are not scanned as text.
    nested = base_packet(decisions=[{"what": "w", "why": "y", "password": "hunter22!"}])
    assert [str(h) for h in scan_packet(nested)] == []
    nested["decisions"][0]["db_password=hunter22!"] = "x"
    assert [str(h) for h in scan_packet(nested)] == [
        "decisions[0].<key 3>(key)/secret-assignment: db_pa…"
    ]


AUDIT_MISSES: dict[str, tuple[str, str]] = {
    # name: (text, kind)
    "password=": ("password=hunter22", "secret-assignment"),
    "DB_PASSWORD=": ("DB_PASSWORD=Tr0ub4dor&3", "secret-assignment"),
    "SECRET_KEY_BASE=": (cat("SECRET_KEY_BASE=", rnd(128, HEX)), "secret-assignment"),
    "secret:": ("secret: 9f8e7d6c5b4a", "secret-assignment"),
    "PGPASSWORD": ("PGPASSWORD=pg-S3cret psql -h db", "secret-assignment"),
    "jdbc url": ("jdbc:mysql://app:Sh0pP4ss@db:3306/shop", "url-credentials"),
    "jdbc query": ("jdbc:sqlserver://db;user=sa;password=Sa-P4ssw0rd;", "connection-string"),
    "ado.net": (
        "Data Source=db;Initial Catalog=x;User ID=sa;Password=Pa55w0rd;",
        "connection-string",
    ),
    "postgres user:pass": ("postgres://user:pass@db:5432/app", "url-credentials"),
    "basic header": ("Authorization: Basic YWRtaW46czNjcjN0", "auth-header"),
    "bearer header": (cat("Authorization: Bearer ", rnd(32)), "auth-header"),
    "aws secret, no keyword": (f"rotate {AWS_SECRET} tonight", "aws-secret-key"),
    "base64 pem": (
        "tls.key: "
        + base64.b64encode(
            cat("-----BEGIN RSA ", "PRIVATE KEY-----\n", KEY_BODY).encode()
        ).decode(),
        "private-key",
    ),
    "base64 token": (base64.b64encode(GHP.encode()).decode(), "base64-secret"),
    "full-width token": ("".join(chr(ord(c) + 0xFEE0) for c in GHP), "github-token"),
    "zero-width split": (GHP[:3] + "\u200b" + GHP[3:10] + "\u200d" + GHP[10:], "github-token"),
    "soft hyphen split": (AWS_KEY_ID[:4] + "\u00ad" + AWS_KEY_ID[4:], "aws-access-key"),
    "bom split": (cat("sk_", "live", "\ufeff", "_", rnd(24)), "stripe-secret-key"),
    "openssh key body, no armour": (
        cat("b3BlbnNzaC1rZXktdjEA", "AAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAAAMwAAAAtzc2gtZW", rnd(40)),
        "private-key",
    ),
    "putty key file": (
        cat("PuTTY-User-Key-File-3: ssh-ed25519\r\nEncryption: none\r\nComment: k\r\n")
        + cat("Private-Lines: 1\r\nAAAAIGz8", rnd(36), "\r\n"),
        "private-key",
    ),
    # Every default-ignorable code point renders as nothing: tag characters (the
    # invisible "ASCII smuggling" ones), fillers, Mongolian selectors, Khmer vowels.
    **{
        f"U+{ord(ch):04X} split": (GHP[:10] + ch + GHP[10:], "github-token")
        for ch in "\U000e0041\U000e007f\u3164\uffa0\u115f\u1160\u17b4\u180b\u180f"
        "\u2065\ufff0\U0001bca0\U0001d173\U000e0100"
    },
}


@pytest.mark.parametrize("name", list(AUDIT_MISSES))
def test_audit_misses_are_caught(name: str) -> None:
    text, kind = AUDIT_MISSES[name]
    found = scan_text(text)
    assert [k for k, _ in found] == [kind], found
    (hit,) = scan_packet(base_packet(goal=f"see {text} now"))
    assert hit.kind == kind and hit.field == "goal"


@pytest.mark.parametrize(
    "text", [cat('export API_KEY="', rnd(32), '"'), cat("X-API-Key: ", rnd(32, HEX))]
)
def test_one_secret_found_by_two_rules_is_one_hit(text: str) -> None:
    # Both assignment rules (a name ending in _key, a name ending in api_key) match.
    assert [k for k, _ in scan_text(text)] == ["secret-assignment"]
    assert [h.kind for h in scan_packet(base_packet(goal=text))] == ["secret-assignment"]


@pytest.mark.parametrize("eol", ["\n", "\r\n"])
@pytest.mark.parametrize("width", [64, 76])
def test_a_secret_across_the_lines_of_wrapped_base64_is_caught(eol: str, width: int) -> None:
    # `base64` wraps at 76, PEM at 64: this token straddles the first line break,
    # so neither line decodes to it, and the password is cut across the next one.
    env = cat("X" * 42, "\nGITHUB_TOKEN=", GHP, "\n")
    b64 = base64.b64encode(env.encode()).decode()
    lines = [b64[i : i + width] for i in range(0, len(b64), width)]
    assert len(lines) > 1 and GHP not in base64.b64decode(lines[0] + "==").decode(errors="ignore")
    found = scan_text(f"the secret:\n{eol.join(lines)}{eol}done")
    assert ("base64-secret", head(lines[0])) in found, found
    # A wrapped image decodes to no text: nothing is found, each block decoded once.
    image = base64.b64encode(bytes(range(256)) * 90).decode()
    assert scan_text(eol.join(image[i : i + width] for i in range(0, len(image), width))) == []


def test_base64_private_key_is_masked() -> None:
    text = AUDIT_MISSES["base64 pem"][0]
    (hit,) = scan_packet(base_packet(goal=text))
    assert hit.match == "base64 of a private key"
    assert text.split()[1][:12] not in str(hit)


def test_normalized_match_is_shown_in_plain_characters() -> None:
    # The echo is of the normalized text: what the reader can search for.
    (hit,) = scan_packet(base_packet(goal=AUDIT_MISSES["full-width token"][0]))
    assert hit.match == head(GHP)


PLACEHOLDERS = [
    cat("whsec", "_", "a" * 31),  # the audit's false positive
    cat("ghp_", "a" * 36),
    cat("sk-", "a" * 48),
    cat("AKIA", "IOSFODNN7", "EXAMPLE"),  # AWS's documented example key id
    cat("wJalrXUtnFEMI/K7MDENG/", "bPxRfiCYEXAMPLEKEY"),  # ... and its secret key
    cat("sk_live_", "x" * 24),
    cat("AKIA", "X" * 16),
    "password=<your-password>",
    "api_key: <your-key>",
    "DB_PASSWORD=${DB_PASSWORD}",
    "DB_PASSWORD=$DB_PASSWORD",
    "password: {{ vault_db_password }}",
    "password=changeme",
    "secret: '****'",
    "token=xxxxxxxxxxxxxxxx",
    "Authorization: Bearer $TOKEN",
    "Authorization: Bearer <token>",
    "Authorization: Bearer YOUR_TOKEN_HERE",
    "Server=db;User Id=sa;Password=<password>;",
    "Server=db;User Id=sa;Password=myPassword;",
    "jdbc:postgresql://db/x?user=u&password=${PGPASSWORD}",
    "postgres://user:changeme@db/x",
    cat("https://hooks.slack.com", "/services/T00000000/B00000000/", "X" * 24),
]


@pytest.mark.parametrize("text", PLACEHOLDERS)
def test_placeholders_pass(text: str) -> None:
    assert scan_text(text) == []


def test_generic_rules_yield_to_the_specific_kind() -> None:
    # One secret, one hit, under its most telling kind.
    assert [k for k, _ in scan_text(f"GITHUB_TOKEN={GHP}")] == ["github-token"]
    assert [k for k, _ in scan_text(f"Authorization: Bearer {JWT}")] == ["jwt"]
    assert [k for k, _ in scan_text(f"aws_secret_access_key = {AWS_SECRET}")] == ["aws-secret-key"]
    line = "Server=db;User Id=sa;Password=Str0ng!Pass;"
    assert [k for k, _ in scan_text(line)] == ["connection-string"]


def test_secrets_only_leaves_out_paths_and_local_urls() -> None:
    packet = base_packet(
        goal=f"/home/alice/x and http://localhost:8080 and {GHP}",
        constraints=["arn:aws:s3:::bucket/key", SSH_RSA],
    )
    assert [h.kind for h in scan_packet(packet)] == [
        "abs-path",
        "local-url",
        "github-token",
        "aws-arn",
        "ssh-public-key",
    ]
    assert [str(h) for h in scan_packet(packet, secrets_only=True)] == [
        f"goal/github-token: {head(GHP)}"
    ]
    assert is_secret_kind("github-token") and not is_secret_kind("abs-path")


def test_normalize() -> None:
    assert normalize("plain ascii") == "plain ascii"
    assert normalize("ｇｈｐ＿") == "ghp_"
    assert normalize("a\u200bb\u200cc\u200dd\u2060e\ufeff\u00adf") == "abcdef"
    assert normalize("\ud800 lone surrogate") == "\ud800 lone surrogate"


# --------------------------------------------------------------------------- #
# The labelled corpus (tests/redact_corpus.py): figures in BENCHMARKS.md
# --------------------------------------------------------------------------- #


def test_corpus_every_secret_is_caught() -> None:
    missed = [
        (label, kind, scan_text(text))
        for label, kind, text in redact_corpus.secrets()
        if kind not in {k for k, _ in scan_text(text)}
    ]
    assert missed == []


def test_corpus_prose_has_no_secret_hits() -> None:
    flagged = [
        (source, kind, shown)
        for source, text in redact_corpus.prose()
        for kind, shown in scan_text(text)
        if is_secret_kind(kind)
    ]
    assert flagged == []


# --------------------------------------------------------------------------- #
# Credentials the pre-flight and the server's scan used to miss
# --------------------------------------------------------------------------- #

FORMATS: dict[str, list[tuple[str, str]]] = {}
for _fmt, _kind, _text in redact_corpus.formats():
    FORMATS.setdefault(_fmt, []).append((_kind, _text))


@pytest.mark.parametrize("fmt", list(FORMATS))
def test_formats_are_caught_in_every_shape(fmt: str) -> None:
    missed = [
        (kind, text, scan_text(text))
        for kind, text in FORMATS[fmt]
        if kind not in {k for k, _ in scan_text(text)}
    ]
    assert missed == []


@pytest.mark.parametrize("fmt", list(FORMATS))
def test_server_scan_refuses_every_format(fmt: str) -> None:
    # The server runs the secret class alone; every format but a public token is in it.
    for kind, text in FORMATS[fmt]:
        hits = scan_packet(base_packet(goal=f"notes: {text}"), secrets_only=True)
        if kind == "mapbox-public-token":
            # (a *_TOKEN= name holding it is still a secret-assignment)
            assert kind not in {h.kind for h in hits} and not is_secret_kind(kind)
        else:
            assert any(h.kind == kind and h.field == "goal" for h in hits), (text, hits)


def test_command_line_hits_show_the_flag_and_not_the_command() -> None:
    assert scan_text("mysql -u root -pS3cret-42 shop", masked=False) == [
        ("cli-password", "-pS3cret-42")
    ]
    assert scan_text("curl -u admin:hunter22 https://ci.example.org/x", masked=False) == [
        ("cli-password", "-u admin:hunter22")
    ]
    assert scan_text("sshpass -p 'Tr0ub4dor' ssh pi@10.0.0.1", masked=False) == [
        ("cli-password", "-p 'Tr0ub4dor'")
    ]
    assert scan_text("docker login -u ci -p Hunter22 registry.example.org", masked=False) == [
        ("cli-password", "-p Hunter22")
    ]


def test_private_key_body_under_its_header_is_reported_once() -> None:
    body = cat("MIIEvQ", "IBADANBgkqhkiG9w0BAQEFAASC", "BKcwggSjAgEAAoIBAQ", rnd(64, "Qw3/Er+T"))
    with_header = cat("-----BEGIN ", "PRIVATE KEY-----\n", body)
    assert scan_text(with_header) == [("private-key", MASK)]
    assert scan_text(f"key: {body}") == [("private-key", "base64 of a private key")]
    assert body[:12] not in repr(scan_packet(base_packet(goal=body)))


def test_lone_private_key_body_and_public_key_body() -> None:
    # SubjectPublicKeyInfo starts "MIIBIjANBgkqhkiG9w0BAQEFAAOC": a public key, not flagged.
    public = cat("MIIBIjANBgkqhkiG9w0BAQEFAAOC", "AQ8AMIIBCgKCAQEA", rnd(64, "Qw3/Er+T"))
    assert scan_text(public) == []


def test_azure_emulator_keys_pass() -> None:
    # Azurite's documented account key is public, like AWS's AKIAIOSFODNN7EXAMPLE.
    line = cat(
        "DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;AccountKey=",
        "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/",
        "K1SZFPTOtr/KBHBeksoGMGw==;BlobEndpoint=http://azurite:10000/devstoreaccount1;",
    )
    assert scan_text(line) == []


def test_corpus_reads_the_repository_only() -> None:
    sources = {source for source, _ in redact_corpus.prose()}
    assert {"README.md", "examples/example.v0.2.json", "near misses"} <= sources
    assert len(redact_corpus.prose()) > 1000


# --------------------------------------------------------------------------- #
# The shortcuts that skip searching (needles, runs) never change what is found
# --------------------------------------------------------------------------- #


def _ungated(rule: Rule) -> Rule:
    """The same rule searched over the whole text: no needle, no derived run bound."""
    import dataclasses

    windowed = rule.min_len and not rule.near
    return dataclasses.replace(rule, needles=(), min_len=0 if windowed else rule.min_len, reach=0)


def _gate_texts() -> list[str]:
    texts = [text for _, _, text in redact_corpus.secrets()]
    texts += [text for _, _, text in redact_corpus.formats()]
    texts += [text for _, text in redact_corpus.prose()[:200]]
    # A token right against characters a run does not hold, on either side, and
    # against a non-ASCII word character: where a run ends is where a window would.
    # Runs of base64 characters by the hundred, some holding tokens: where a rule
    # searching runs gives up on them and searches the whole text.
    token = "ghp_" + "aB3" * 12
    texts += [
        " ".join(["A" * 30] * 40 + [token]),
        "-".join(["sk-" + "x" * 40] * 50),
        " ".join([token] * 60),
        " ".join(["MTIzNDU2Nzg5MDEyMzQ1Njc4.GhIjKl." + "a" * 30] * 40),
    ]
    glued = []
    for text in texts[:400]:
        for before, after in (("é", "é"), (".", "."), ("x.", "~"), ("\x00", "\n")):
            glued.append(before + text + after)
    return texts + glued


def test_gated_rules_find_what_an_ungated_search_finds() -> None:
    """Every rule that skips text (needle, runs of base64, reach past a run) is
    held to the same rule searched everywhere, over every labelled secret and
    format, prose, and each glued to run-ending characters."""
    rules = redact._builtin_rules()
    gated = [r for r in rules if r.needles or (r.min_len and not r.near)]
    assert sum(1 for r in gated if r.needles) > 30
    assert sum(1 for r in gated if r.min_len) > 10
    plain = tuple(_ungated(r) if r in gated else r for r in rules)
    for text in _gate_texts():
        t = redact.normalize(text)
        assert list(redact._spans(t, rules)) == list(redact._spans(t, plain)), text


@pytest.mark.parametrize("sets", [True, False])
def test_a_rule_with_several_needles_is_searched_where_any_of_them_is(
    monkeypatch: pytest.MonkeyPatch, sets: bool
) -> None:
    """A text with one of a rule's needles is searched with it, whichever one: on a long
    text and a short one, with the literal sets (a process that scans many packets) and
    without them (its first scans: such a rule is then searched without a look for each
    needle); a text with none finds nothing."""
    monkeypatch.setattr(redact, "_sets", None)
    if sets:
        redact._build_sets()
        assert redact._sets is not None
    rules = tuple(r for r in redact._builtin_rules() if r.kind == "aws-access-key")
    (rule,) = [r for r in rules if not r.alias]
    assert len(rule.needles) > 5
    pad = "prose with no key in it at all. " * 8
    for needle in rule.needles:
        key = needle + "Z7Q3K9XW2M4P8R5T"
        for text in (key, pad + key + " " + pad):
            assert [(s, e) for s, e, _ in redact._spans(text, rules)] == [
                (text.index(key), text.index(key) + 20)
            ], text
    assert list(redact._spans(pad + "AKIQZ7Q3K9XW2M4P8R5T " + pad, rules)) == []


@pytest.fixture
def literal_sets(monkeypatch: pytest.MonkeyPatch) -> None:
    """The needle and keyword sets built, and used on texts of any length."""
    monkeypatch.setattr(redact, "_SET_MIN_LEN", 0)
    monkeypatch.setattr(redact, "_sets", None)
    monkeypatch.setattr(redact, "_scans", redact._SETS_AFTER - 1)
    redact._counted()
    assert redact._sets is not None


def test_literal_sets_rule_out_only_what_a_text_lacks(literal_sets: None) -> None:
    """One pass over the text rules out the needles and keywords it lacks: every rule
    finds what it finds searched for one needle and keyword at a time. Texts with
    lone surrogates and non-ASCII letters too (the pass reads the text's UTF-8)."""
    texts = _gate_texts()
    texts += ["\ud800" + text + "\udfff" for text in texts[:300]]
    texts += ["é password = 'hunter2hunter2' ghp_" + "aB3" * 12 + "\ud83d"]
    texts.append(" ".join(texts[:500]))  # one long text holding many needles and keywords
    rules = redact._builtin_rules()
    sets = redact._sets
    for text in texts:
        t = redact.normalize(text)
        with_sets = list(redact._spans(t, rules))
        redact._sets = None
        alone = list(redact._spans(t, rules))
        redact._sets = sets
        assert with_sets == alone, text


def test_literal_sets_leave_other_needles_and_keywords_to_a_search(literal_sets: None) -> None:
    """A rule whose needle or keyword the sets were not built with is searched as before."""
    import dataclasses
    import re

    rule = redact.Rule("custom", re.compile(r"zq9[a-z]{8}"), needles=("zq9",), secret=True)
    near = dataclasses.replace(
        rule, pattern=re.compile(r"qqkey=[a-z]{8}"), needles=(), near=("qqkey",), radius=20
    )
    text = "x " * 80 + "zq9abcdefgh qqkey=abcdefgh"
    assert [s for s, _, _ in redact._spans(text, (rule, near))] == [160, 172]


def test_many_scans_build_the_sets_one_scan_does_not() -> None:
    """A process that scans once (``ltm save``) never imports RE2 for the sets."""
    code = (
        "import sys, json; from ltm import redact; p = json.load(open(sys.argv[1])); "
        "redact.scan_packet(p); one = 're2' in sys.modules; "
        "[redact.scan_packet(p) for _ in range(redact._SETS_AFTER)]; "
        "print(one, redact._sets is not None)"
    )
    example = Path(__file__).parents[1] / "spec" / "examples" / "example.v0.2.json"
    out = subprocess.run(
        [sys.executable, "-c", code, str(example)], capture_output=True, text=True, check=True
    )
    assert out.stdout.split() == ["False", "True"]


_KEYS = [*redact._TOP_FIELDS, "name", "what", "tried", "learned", "outcome", "locked", "x-note"]
_LEAVES = st.one_of(
    st.sampled_from(["s", "ghp_" + "aB3" * 12, ""]), st.none(), st.booleans(), st.integers()
)
_VALUES = st.recursive(
    _LEAVES,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.sampled_from(_KEYS), inner, max_size=4)
    ),
    max_leaves=12,
)


@settings(max_examples=400, deadline=None)
@given(st.dictionaries(st.sampled_from(_KEYS), _VALUES, max_size=8), st.booleans())
def test_the_fast_walk_lists_what_the_full_walk_lists(packet: dict[str, Any], share: bool) -> None:
    """Where the fast walk answers (plain values under schema keys), it lists the very
    strings of the full walk, in its order; the example packet is such a packet."""
    if share and packet:  # one object under two keys: the full walk lists it once
        first = next(iter(packet))
        packet[first] = [packet[first], packet[first]]
    plain = redact._plain_texts(packet)
    if plain is not None:
        assert plain == [text for _, text in redact._collect(packet)]
    example = json.loads(
        (Path(__file__).parents[1] / "spec/examples/example.v0.2.json").read_text()
    )
    assert redact._plain_texts(example) == [text for _, text in redact._collect(example)]


def test_a_set_that_does_not_find_its_literals_is_not_used(monkeypatch: pytest.MonkeyPatch) -> None:
    """Were RE2's set to miss (it answers a failed match as no match), every rule would
    be skipped: a set is tried on its own literals first, and the scan goes on without
    it when it misses them."""
    import re2

    real = re2.Set.Match
    monkeypatch.setattr(re2.Set, "Match", lambda self, text: [])
    monkeypatch.setattr(redact, "_sets", None)
    monkeypatch.setattr(redact, "_scans", redact._SETS_AFTER - 1)
    text = "token ghp_" + "aB3" * 12 + " " + "x" * 200
    assert [kind for kind, _ in redact.scan_text(text)] == ["github-token"]
    assert redact._sets is None
    monkeypatch.setattr(re2.Set, "Match", real)
    assert [kind for kind, _ in redact.scan_text(text)] == ["github-token"]


def test_without_re2_the_scan_goes_on_without_the_sets(monkeypatch: pytest.MonkeyPatch) -> None:
    """The Lambda package ships no RE2 (user rules are the CLI's): past the scans that
    would build the sets, a scan finds what it finds with them."""
    monkeypatch.setitem(sys.modules, "re2", None)  # import re2 raises ImportError
    monkeypatch.setattr(redact, "_sets", None)
    monkeypatch.setattr(redact, "_scans", redact._SETS_AFTER - 1)
    text = "token ghp_" + "aB3" * 12 + " " + "x" * 200
    assert [kind for kind, _ in redact.scan_text(text)] == ["github-token"]
    assert redact._sets is None and redact._scans == redact._SETS_AFTER
