"""A labelled corpus for the redaction pre-flight: real-looking secrets, and prose.

``secrets()`` holds true secrets of every secret kind, written the ways they
leak into session notes (assignments, headers, connection strings, base64,
full-width or zero-width-split), the misses of an earlier audit among
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
        # an earlier audit's misses
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
        if p.name not in ("redact.py", "redact_rules.py")  # the scanner's own patterns and markers
    )
    for path in code:
        rel = path.relative_to(ROOT).as_posix()
        out += [(rel, p) for p in _paragraphs(path.read_text(encoding="utf-8"))]
    for path in sorted(EXAMPLES.glob("*.json")):
        packet = json.loads(path.read_text(encoding="utf-8"))
        out += [(f"examples/{path.name}", s) for s in _strings(packet)]
    out += [("near misses", s) for s in NEAR_MISSES + FORMAT_NEAR_MISSES]
    return out


# --------------------------------------------------------------------------- #
# Formats a security review found missing, and the others gitleaks and detect-secrets know
# that coding agents meet: each in the shapes it leaks in (an .env line, JSON,
# YAML, a shell export, code, prose, quoted and not). Keys are random, from a
# seeded generator, with their prefixes glued on at run time.
# --------------------------------------------------------------------------- #

LOWER_DIGITS = _LOWER + _DIGITS
B64URL = ALNUM + "_-"


def shapes(name: str, token: str) -> list[str]:
    """The ways a token with an environment name leaks into notes."""
    low = name.lower()
    return [
        f"{name}={token}",
        f'{name}="{token}"',
        f"export {name}='{token}'",
        f'{{"{low}": "{token}"}}',
        f"{low}: {token}",
        f'client = Client(api_key="{token}")',
        f"rotated {token} after the incident, see the runbook",
        f"`{token}`",
    ]


def _tokens(k: Keys) -> list[tuple[str, str, str, str]]:
    """(format, kind, environment name, token) for the prefixed formats."""
    twilio_sid = cat("AC", k(32, HEX))
    return [
        (
            "sendgrid",
            "sendgrid-key",
            "SENDGRID_API_KEY",
            cat("SG", ".", k(22, B64URL), ".", k(43, B64URL)),
        ),
        ("twilio api key", "twilio-key", "TWILIO_API_KEY", cat("SK", k(32, HEX))),
        ("twilio account sid", "twilio-key", "TWILIO_ACCOUNT_SID", twilio_sid),
        (
            "shopify access token",
            "shopify-token",
            "SHOPIFY_ACCESS_TOKEN",
            cat("shpat", "_", k(32, HEX)),
        ),
        (
            "shopify shared secret",
            "shopify-token",
            "SHOPIFY_API_SECRET",
            cat("shpss", "_", k(32, HEX)),
        ),
        (
            "digitalocean pat",
            "digitalocean-token",
            "DIGITALOCEAN_TOKEN",
            cat("dop", "_v1_", k(64, HEX)),
        ),
        ("vault service token", "vault-token", "VAULT_TOKEN", cat("hvs", ".", k(91, B64URL))),
        ("vault batch token", "vault-token", "VAULT_TOKEN", cat("hvb", ".", k(140, B64URL))),
        ("databricks", "databricks-token", "DATABRICKS_TOKEN", cat("dapi", k(32, HEX))),
        (
            "atlassian api token",
            "atlassian-token",
            "JIRA_API_TOKEN",
            cat("ATATT3", "xFfGF0", k(180, B64URL), "=", k(8, HEX.upper())),
        ),
        (
            "bitbucket app password",
            "atlassian-token",
            "BITBUCKET_APP_PASSWORD",
            cat("ATBB", k(28), k(8, HEX.upper())),
        ),
        ("linear", "linear-key", "LINEAR_API_KEY", cat("lin", "_api_", k(40))),
        ("notion", "notion-token", "NOTION_TOKEN", cat("ntn", "_", k(11, _DIGITS), k(35))),
        ("notion legacy", "notion-token", "NOTION_API_KEY", cat("secret", "_", k(43))),
        (
            "mapbox secret",
            "mapbox-token",
            "MAPBOX_ACCESS_TOKEN",
            cat("sk", ".eyJ1Ijoi", k(40, B64URL), ".", k(22, B64URL)),
        ),
        (
            "mapbox public",
            "mapbox-public-token",
            "MAPBOX_PUBLIC_TOKEN",
            cat("pk", ".eyJ1Ijoi", k(50, B64URL), ".", k(22, B64URL)),
        ),
        ("mailgun legacy", "mailgun-key", "MAILGUN_API_KEY", cat("key", "-", k(32, LOWER_DIGITS))),
        (
            "mailgun",
            "mailgun-key",
            "MAILGUN_API_KEY",
            cat(k(32, HEX), "-", k(8, HEX), "-", k(8, HEX)),
        ),
        ("groq", "groq-key", "GROQ_API_KEY", cat("gsk", "_", k(52))),
        (
            "telegram bot",
            "telegram-bot-token",
            "TELEGRAM_BOT_TOKEN",
            cat(k(10, _DIGITS), ":", "AA", k(33, B64URL)),
        ),
        (
            "discord bot",
            "discord-token",
            "DISCORD_BOT_TOKEN",
            cat(b64(k(19, _DIGITS)).rstrip("="), ".", k(6, B64URL), ".", k(38, B64URL)),
        ),
        ("sentry user token", "sentry-token", "SENTRY_AUTH_TOKEN", cat("sntryu", "_", k(64, HEX))),
        # https://developers.cloudflare.com/fundamentals/api/get-started/token-formats
        (
            "cloudflare user token",
            "cloudflare-token",
            "CLOUDFLARE_API_TOKEN",
            cat("cfut", "_", k(48)),
        ),
        (
            "cloudflare account token",
            "cloudflare-token",
            "CF_ACCOUNT_TOKEN",
            cat("cfat", "_", k(47)),
        ),
        ("cloudflare global key", "cloudflare-key", "CLOUDFLARE_API_KEY", cat("cfk", "_", k(48))),
        (
            "age key",
            "age-secret-key",
            "SOPS_AGE_KEY",
            cat("AGE-SECRET-", "KEY-1", k(58, "QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L")),
        ),
        (
            "azure ad client secret",
            "azure-ad-secret",
            "AZURE_CLIENT_SECRET",
            cat(k(3), k(1, _DIGITS), "Q~", k(34, ALNUM + "_~.")),
        ),
        (
            "terraform cloud",
            "terraform-token",
            "TFE_TOKEN",
            cat(k(14, LOWER_DIGITS), ".atlas", "v1.", k(67, B64URL)),
        ),
        (
            "grafana service account",
            "grafana-token",
            "GRAFANA_TOKEN",
            cat("glsa", "_", k(32), "_", k(8, HEX)),
        ),
        (
            "new relic",
            "newrelic-key",
            "NEW_RELIC_API_KEY",
            cat("NRAK", "-", k(27, _UPPER + _DIGITS)),
        ),
        (
            "postman",
            "postman-key",
            "POSTMAN_API_KEY",
            cat("PMAK", "-", k(24, HEX), "-", k(34, HEX)),
        ),
        ("pulumi", "pulumi-token", "PULUMI_ACCESS_TOKEN", cat("pul", "-", k(40, HEX))),
        ("doppler", "doppler-token", "DOPPLER_TOKEN", cat("dp", ".st.", k(43))),
        (
            "planetscale",
            "planetscale-token",
            "PLANETSCALE_TOKEN",
            cat("pscale", "_tkn_", k(43, B64URL)),
        ),
        ("supabase", "supabase-token", "SUPABASE_ACCESS_TOKEN", cat("sbp", "_", k(40, HEX))),
        ("tailscale", "tailscale-key", "TS_AUTHKEY", cat("tskey", "-auth-", k(12), "-", k(32))),
        ("rubygems", "rubygems-token", "GEM_HOST_API_KEY", cat("rubygems", "_", k(48, HEX))),
        ("heroku", "heroku-key", "HEROKU_API_KEY", cat("HRKU", "-AA", k(58, B64URL))),
        ("fly.io", "flyio-token", "FLY_API_TOKEN", cat("fo1", "_", k(43, B64URL))),
        (
            "dynatrace",
            "dynatrace-token",
            "DT_API_TOKEN",
            cat("dt0c01", ".", k(24, _UPPER + _DIGITS), ".", k(64)),
        ),
        ("perplexity", "perplexity-key", "PERPLEXITY_API_KEY", cat("pplx", "-", k(48))),
        ("square", "square-token", "SQUARE_ACCESS_TOKEN", cat("EAAA", k(60, B64URL))),
        (
            "sendinblue",
            "sendinblue-key",
            "BREVO_API_KEY",
            cat("xkeysib", "-", k(64, HEX), "-", k(16)),
        ),
        ("artifactory", "artifactory-token", "ARTIFACTORY_API_KEY", cat("AKCp", k(69))),
        ("alibaba", "alibaba-key", "ALIBABA_ACCESS_KEY_ID", cat("LTAI", k(20))),
        ("prefect", "prefect-key", "PREFECT_API_KEY", cat("pnu", "_", k(36))),
        (
            "sourcegraph",
            "sourcegraph-token",
            "SRC_ACCESS_TOKEN",
            cat("sgp", "_", k(16, HEX), "_", k(40, HEX)),
        ),
        ("openshift", "openshift-token", "OC_TOKEN", cat("sha256", "~", k(43, B64URL))),
        ("gitlab runner", "gitlab-token", "RUNNER_TOKEN", cat("glrt", "-", k(20, B64URL))),
        ("replicate", "replicate-token", "REPLICATE_API_TOKEN", cat("r8", "_", k(37))),
        (
            "langsmith",
            "langsmith-key",
            "LANGSMITH_API_KEY",
            cat("lsv2", "_pt_", k(32, HEX), "_", k(10, HEX)),
        ),
        ("tavily", "tavily-key", "TAVILY_API_KEY", cat("tvly", "-", k(32))),
        (
            "1password service account",
            "1password-token",
            "OP_SERVICE_ACCOUNT_TOKEN",
            cat("ops", "_eyJ", k(300, B64)),
        ),
        (
            "mailchimp",
            "mailchimp-key",
            "MAILCHIMP_API_KEY",
            cat(k(32, HEX), "-us", k(2, "123456789")),
        ),
        ("easypost", "easypost-key", "EASYPOST_API_KEY", cat("EZAK", k(54))),
        ("nuget", "nuget-key", "NUGET_API_KEY", cat("oy2", k(43, LOWER_DIGITS))),
        (
            "cloudflare origin ca",
            "cloudflare-origin-key",
            "CF_ORIGIN_CA_KEY",
            cat("v1.0", "-", k(24, HEX), "-", k(146, HEX)),
        ),
        ("facebook", "facebook-token", "FB_ACCESS_TOKEN", cat("EAAC", k(150))),
        ("shippo", "shippo-token", "SHIPPO_API_KEY", cat("shippo", "_live_", k(40, HEX))),
        ("readme", "readme-key", "README_API_KEY", cat("rdme", "_", k(70, LOWER_DIGITS))),
        ("clojars", "clojars-token", "CLOJARS_TOKEN", cat("CLOJARS", "_", k(60, LOWER_DIGITS))),
        ("duffel", "duffel-token", "DUFFEL_TOKEN", cat("duffel", "_test_", k(43, B64URL))),
        ("frame.io", "frameio-token", "FRAMEIO_TOKEN", cat("fio", "-u-", k(64, B64URL))),
        ("scalingo", "scalingo-token", "SCALINGO_TOKEN", cat("tk", "-us-", k(48, B64URL))),
        ("infracost", "infracost-key", "INFRACOST_API_KEY", cat("ico", "-", k(32))),
        ("octopus deploy", "octopus-key", "OCTOPUS_KEY", cat("API", "-", k(26, _UPPER + _DIGITS))),
        ("adobe", "adobe-secret", "ADOBE_CLIENT_SECRET", cat("p8e", "-", k(32))),
    ]


def formats(seed: int = 22) -> list[tuple[str, str, str]]:
    """(format, kind expected among the hits, text): several shapes per format."""
    k = Keys(seed)
    out: list[tuple[str, str, str]] = []
    for fmt, kind, name, token in _tokens(k):
        out += [(fmt, kind, text) for text in shapes(name, token)]
    # Cloudflare API tokens before the prefixed format: 40 characters, next to the name.
    cloudflare = cat(k(20, B64URL), k(10, _UPPER), k(10, _DIGITS))
    out += [
        ("cloudflare legacy token", "cloudflare-token", text)
        for text in (
            f"CLOUDFLARE_API_TOKEN={cloudflare}",
            f'{{"cloudflare_api_token": "{cloudflare}"}}',
            f"cf_api_token: {cloudflare}",
            f"the Cloudflare API token {cloudflare} was rotated",
        )
    ]
    # A token in a URL's query, percent-encoded (scanned decoded too).
    ghp = cat("ghp", "_", k(36))
    out += [
        ("url-encoded github token", "github-token", text)
        for text in (
            f"https://ci.example.test/callback?access={ghp.replace('_', '%5F')}&state=1",
            "q=" + "".join(f"%{ord(c):02X}" for c in ghp),
            f"curl 'https://api.example.test/x?t=%67%68%70%5F{ghp[4:]}'",
        )
    ]
    # Vault's service tokens before 1.10: "s." and 24 characters, next to "vault".
    legacy = cat("s", ".", k(24))
    out += [
        ("vault legacy token", "vault-token", text)
        for text in (
            f"VAULT_TOKEN={legacy}",
            f"vault login {legacy}",
            f'{{"vault_token": "{legacy}"}}',
            f"export VAULT_ADDR=https://vault.acme.io VAULT_TOKEN='{legacy}'",
        )
    ]
    # Azure storage: connection strings, a lone account key, SAS URLs and tokens.
    account_key = cat(k(86, B64), "==")
    sas_sig = cat(k(40, ALNUM), "%2B", k(2), "%2F", k(1), "%3D")
    out += [
        ("azure storage key", "azure-storage-key", text)
        for text in (
            cat(
                "DefaultEndpointsProtocol=https;AccountName=acmeprod;AccountKey=",
                account_key,
                ";EndpointSuffix=core.windows.net",
            ),
            cat(
                'AZURE_STORAGE_CONNECTION_STRING="DefaultEndpointsProtocol=https;AccountName=acme;AccountKey=',
                account_key,
                '"',
            ),
            cat(
                '{"ConnectionStrings": {"Blob": "AccountName=acme;AccountKey=', account_key, ';"}}'
            ),
            cat("AZURE_STORAGE_KEY=", account_key),
            cat("azure storage: key ", account_key),
            cat("az storage blob upload --account-name acme --account-key ", account_key),
            cat(
                "Endpoint=sb://acme.servicebus.windows.net/;SharedAccessKeyName=RootManageSharedAccessKey;SharedAccessKey=",
                k(43, B64),
                "=",
            ),
            cat("the storage account key is ", account_key),
        )
    ]
    out += [
        ("azure sas", "azure-sas", text)
        for text in (
            cat(
                "https://acme.blob.core.windows.net/backups/db.bak?sv=2022-11-02&ss=b&srt=sco&sp=rwdlac&se=2026-01-01T00:00:00Z&st=2025-01-01T00:00:00Z&spr=https&sig=",
                sas_sig,
            ),
            cat(
                "BlobEndpoint=https://acme.blob.core.windows.net/;SharedAccessSignature=sv=2022-11-02&ss=b&srt=co&sp=rl&se=2026-01-01&sig=",
                sas_sig,
            ),
            cat(
                'AZURE_SAS_TOKEN="?sv=2021-06-08&ss=bfqt&srt=sco&sp=rwdlacupiytfx&se=2025-12-31T23:59:59Z&sig=',
                sas_sig,
                '"',
            ),
            cat(
                "SharedAccessSignature sr=acme.servicebus.windows.net&sig=",
                sas_sig,
                "&se=1767225600&skn=RootManageSharedAccessKey",
            ),
            cat(
                "azcopy copy ./dist 'https://acme.blob.core.windows.net/web?sp=racwdl&st=2025-01-01&se=2026-01-01&sv=2022-11-02&sr=c&sig=",
                sas_sig,
                "' --recursive",
            ),
        )
    ]
    # Google service-account key material (JSON key file, its pieces).
    der = cat("MIIEvQ", "IBADANBgkqhkiG9w0BAQEFAASC", "BKcwggSjAgEAAoIBAQ", k(120, B64))
    pem_json = cat("-----BEGIN PRIVATE ", "KEY-----\\n", der, "\\n-----END PRIVATE KEY-----\\n")
    key_id = k(40, HEX)
    out += [
        ("gcp service account", kind, text)
        for kind, text in (
            (
                "private-key",
                cat(
                    '{"type": "service_account", "project_id": "acme-prod", "private_key_id": "',
                    key_id,
                    '", "private_key": "',
                    pem_json,
                    '"}',
                ),
            ),
            ("gcp-service-account", cat('"private_key_id": "', key_id, '",')),
            ("gcp-service-account", cat("private_key_id: ", key_id)),
            ("private-key", cat('"private_key": "', pem_json, '"')),
            ("private-key", cat("GOOGLE_PRIVATE_KEY=", der)),
            ("private-key", cat("the key body ", der, " was in the log")),
            (
                "private-key",
                cat(
                    "GOOGLE_CREDENTIALS=",
                    b64(cat('{"type": "service_account", "private_key": "', pem_json, '"}')),
                ),
            ),
        )
    ]
    # Webhooks and DSNs.
    slack_hook = cat(
        "https://hooks.slack.com",
        "/services/T",
        k(8, _UPPER + _DIGITS),
        "/B",
        k(10, _UPPER + _DIGITS),
        "/",
        k(24),
    )
    discord_hook = cat("https://discord.com", "/api/webhooks/", k(19, _DIGITS), "/", k(68, B64URL))
    sentry_dsn = cat(
        "https://",
        k(32, HEX),
        ":",
        k(32, HEX),
        "@o",
        k(6, _DIGITS),
        ".ingest.sentry.io/",
        k(7, _DIGITS),
    )
    sentry_public_dsn = cat(
        "https://", k(32, HEX), "@o", k(6, _DIGITS), ".ingest.us.sentry.io/", k(7, _DIGITS)
    )
    teams_hook = cat(
        "https://acme.webhook.office.com",
        "/webhookb2/",
        k(8, HEX),
        "-",
        k(4, HEX),
        "-",
        k(4, HEX),
        "-",
        k(4, HEX),
        "-",
        k(12, HEX),
        "@",
        k(8, HEX),
        "-",
        k(4, HEX),
        "-",
        k(4, HEX),
        "-",
        k(4, HEX),
        "-",
        k(12, HEX),
        "/IncomingWebhook/",
        k(32, HEX),
        "/",
        k(8, HEX),
        "-",
        k(4, HEX),
        "-",
        k(4, HEX),
        "-",
        k(4, HEX),
        "-",
        k(12, HEX),
    )
    for fmt, kind, url, name in (
        ("slack webhook", "slack-webhook", slack_hook, "SLACK_WEBHOOK_URL"),
        ("discord webhook", "discord-webhook", discord_hook, "DISCORD_WEBHOOK"),
        ("sentry dsn with secret", "url-credentials", sentry_dsn, "SENTRY_DSN"),
        ("sentry dsn", "sentry-dsn", sentry_public_dsn, "SENTRY_DSN"),
        ("teams webhook", "teams-webhook", teams_hook, "TEAMS_WEBHOOK_URL"),
    ):
        out += [
            (fmt, kind, text)
            for text in (
                f"{name}={url}",
                f'{{"{name.lower()}": "{url}"}}',
                '{"url": "' + url.replace("/", "\\/") + '"}',
                f"curl -X POST -H 'Content-type: application/json' -d '{{}}' {url}",
                f"posted to {url} from CI",
            )
        ]
    # Docker config.json auths.
    docker_auth = b64(cat("deploy:", k(12), "!", k(3, _DIGITS)))
    out += [
        ("docker config.json", "docker-auth", text)
        for text in (
            cat('{"auths": {"https://index.docker.io/v1/": {"auth": "', docker_auth, '"}}}'),
            cat(
                '{\n  "auths": {\n    "ghcr.io": {\n      "auth": "',
                docker_auth,
                '"\n    }\n  }\n}',
            ),
            cat('"auth":"', docker_auth, '"'),
            cat('{\\"auths\\":{\\"registry.acme.io\\":{\\"auth\\":\\"', docker_auth, '\\"}}}'),
            cat('{"auths": {"acr.azurecr.io": {"identitytoken": "', k(80, B64URL), '"}}}'),
        )
    ]
    out.append(
        (
            "docker config.json",
            "base64-secret",
            cat(
                ".dockerconfigjson: ",
                b64(cat('{"auths":{"ghcr.io":{"auth":"', docker_auth, '"}}}')),
            ),
        )
    )
    # .netrc lines.
    netrc_pw = cat(k(10), k(2, _DIGITS), "#")
    out += [
        (".netrc", "netrc-password", text)
        for text in (
            cat("machine api.github.com login octocat password ", netrc_pw),
            cat("machine ftp.acme.io\n  login deploy\n  password ", netrc_pw, "\n"),
            cat("default login anonymous password ", netrc_pw),
            cat("echo 'machine git.acme.io login ci password ", netrc_pw, "' >> ~/.netrc"),
            cat("~/.netrc has: machine pypi.acme.io login __token__ password ", k(24)),
        )
    ]
    # Passwords on command lines.
    pw = cat(k(8), k(2, _DIGITS), "!")
    out += [
        ("mysql -p", "cli-password", text)
        for text in (
            cat("mysql -u root -p", pw, " shop"),
            cat("mysql -h db.internal -uapp -p'", pw, "' -e 'select 1'"),
            cat("mysqldump --user=backup --password=", k(12), " --all-databases > dump.sql"),
            cat("docker exec -it db mysql -uroot -p", k(12), " app"),
            cat("mariadb -u app -p", pw),
        )
    ]
    out += [
        ("curl -u", "cli-password", text)
        for text in (
            cat("curl -u admin:", pw, " https://ci.acme.io/api/json"),
            cat('curl --user "deploy:', pw, '" -X POST https://nexus.acme.io/upload'),
            cat("curl -sSu ci:", k(16), " https://registry.acme.io/v2/_catalog"),
            cat("curl -fsSL \\\n  -u bot:", pw, " \\\n  https://api.acme.io/v1/export"),
        )
    ]
    out += [
        ("sshpass -p", "cli-password", text)
        for text in (
            cat("sshpass -p '", pw, "' ssh pi@10.0.0.12"),
            cat("sshpass -p ", pw, " scp build.tar deploy@web1:/srv"),
            cat("sshpass -p", k(10), " ssh -o StrictHostKeyChecking=no admin@bastion"),
            cat("sshpass -p raspberry", " ssh pi@raspberrypi.local"),
        )
    ]
    out += [
        ("docker login -p", "cli-password", text)
        for text in (
            cat("docker login -u ci -p ", pw, " registry.acme.io"),
            cat("docker login --username deploy --password ", pw),
            cat("docker login -u AWS -p ", k(40), " 123456789012.dkr.ecr.us-east-1.amazonaws.com"),
            cat("podman login quay.io -u bot --password=", pw),
            cat("helm registry login ghcr.io -u bot -p ", pw),
            cat("oc login -u developer -p ", pw, " https://api.crc.testing:6443"),
        )
    ]
    out += [
        ("other command lines", "cli-password", text)
        for text in (
            cat("redis-cli -h cache -a ", pw, " ping"),
            cat("mongosh mongodb://db:27017 -u admin -p ", pw),
            cat("sqlcmd -S db -U sa -P '", pw, "' -Q 'SELECT 1'"),
            cat("ldapsearch -x -D cn=admin,dc=acme -w ", pw, " -b dc=acme"),
            cat("htpasswd -bc .htpasswd admin ", pw),
            cat(
                "openssl pkcs12 -export -in cert.pem -inkey key.pem -out cert.p12 -passout pass:",
                pw,
            ),
            cat("keytool -importcert -keystore truststore.jks -storepass ", pw, " -file ca.crt"),
            cat("./deploy.sh --db-password ", pw, " --env prod"),
            cat("terraform apply -var db_host=db --admin-password=", pw),
            cat("wget --user=ci --password=", pw, " https://ci.acme.io/artifact.zip"),
        )
    ]
    return out


# Close to the new formats, and still not secrets: identifiers, hashes,
# placeholders, documentation's examples.
FORMAT_NEAR_MISSES = [
    "UUID 123e4567-e89b-12d3-a456-426614174000 is the request id",
    "git show 4b825dc642cb6eb9a060e54bf8d69288fbee4904",
    "base64 of the notes: UmVmYWN0b3JlZCB0aGUgc3RvcmU7IHRlc3RzIHBhc3Mu",
    "SENDGRID_API_KEY=SG.xxxxxxxxxxxxxxxxxxxxxx.xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx",
    "SHOPIFY_ACCESS_TOKEN=shpat_<token>",
    "VAULT_TOKEN=YOUR_VAULT_TOKEN_HERE",
    "DefaultEndpointsProtocol=https;AccountName=devstoreaccount1;AccountKey=<account-key>",
    "UseDevelopmentStorage=true",
    cat(
        "Azurite's AccountKey=Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/",
        "K1SZFPTOtr/KBHBeksoGMGw== is public",
    ),
    "https://acme.blob.core.windows.net/c/x?sv=2022-11-02&sp=r&sig=<signature>",
    '"integrity": "sha512-'
    + "Q" * 0
    + "9xYzAbCdEfGhIjKlMnOpQrStUvWxYz0123456789aBcDeFgHiJkLmNoPqRsTuVwXyZ0123456789aBcDeFgHiJkL=="
    + '"',
    'the "auth": "oauth2" field selects the flow',
    '"auth": "' + "dG9rZW4=" + '"',
    "machine learning: the login page asks for a password reset",
    "the .netrc format: machine <host> login <user> password <password>",
    "mysql -u root -p prompts for the password",
    "mysql -u root -p$MYSQL_ROOT_PASSWORD app",
    'mysql -uroot -p"${MYSQL_PASSWORD}" shop',
    "curl -u $USER:$TOKEN https://api.example.com",
    "curl -u user: https://example.com prompts for the password",
    "curl -u '<user>:<password>' https://example.com",
    "sshpass -p takes the password as an argument, which other users can read",
    'sshpass -p "$SSH_PASS" ssh host',
    "echo $CR_PAT | docker login ghcr.io -u USERNAME --password-stdin",
    "docker login -u user -p <password> registry",
    "docker run -p 8080:80 nginx",
    "docker build --secret id=npmrc,src=$HOME/.npmrc .",
    "docker build --secret id=... to pass a file",
    "aws s3api get-object --bucket b --key reports/2024.csv out.csv",
    "--password-file /run/secrets/db_password",
    "the --token flag reads from stdin when given -",
    "kubectl create secret generic db --from-literal=password=$(openssl rand -hex 16)",
    "primary_key = 'id_7f3a9c2e1b4d5f60'",
    "cache_key = f'user:{user_id}:profile'",
    "bot 12345678: the build number and 35 characters of ordinary words follow",
    "timestamp 20240101:T12:00:00 in the log",
    "ratio 1200000:1 and the sequence 98765432:ABC",
    "discord.com/developers/applications is where bots are made",
    "hooks.slack.com/services/T00000000/B00000000/XXXXXXXXXXXXXXXXXXXXXXXX",
    "the Twilio account SID starts with AC and is 34 characters",
    "key-value stores and key-based sharding",
    "sk.eyJ is the start of a Mapbox secret token",
    "MIIBIjANBgkqhkiG9w0BAQEFAAOCAQ8AMIIBCgKCAQEA is how a public key starts",
    "ssh-keygen -t ed25519 -C deploy@acme",
    "Set LINEAR_API_KEY in the environment; never commit it.",
    "NOTION_TOKEN=secret_xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx",
    "lin_api_ prefixes Linear keys; dapi prefixes Databricks tokens",
    "The DSN https://examplePublicKey@o0.ingest.sentry.io/0 is public by design",
    "commit 3f786850e387550fdab836ed7e6dc881de23001b moved DNS to Cloudflare",
    "CLOUDFLARE_API_TOKEN=your-cloudflare-api-token-goes-here-0000",
    "the Cloudflare zone id is 023e105f4ecef8ad9ca31a8372d0c353",
    "cfut_ and cfat_ start Cloudflare's tokens, cfk_ its global keys",
    "coverage went from 80%25 to 100%25; see https://example.test/a%20b?q=%7Bx%7D",
    "--api-key $OPENAI_API_KEY",
    "openssl req -new -key key.pem -passin env:KEY_PASS",
    "keytool -list -keystore ks.jks -storepass:env STOREPASS",
    'psql "host=db user=app password=$PGPASSWORD"',
]


def format_prose() -> list[tuple[str, str]]:
    return [("format near misses", s) for s in FORMAT_NEAR_MISSES]
