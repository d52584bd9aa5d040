"""Which server ltm talks to, and the tokens it signs in with.

One file, ``credentials`` in the config dir (see ``ltm.cli.config``), mode
0600, written atomically. It is JSON::

    {
      "version": 1,
      "default": "https://ltm.example.org",
      "hosts": {
        "https://ltm.example.org": {
          "token": "ltm_…",
          "via": "token" | "device" | "invite",
          "saved_at": "2026-05-01T12:00:00Z",
          "user": {"id": "…", "display": "…"}      # only when the server said who we are
        }
      }
    }

``default`` is the server every verb goes to (``--local`` overrides it); with
no default, verbs use the embedded local store. ``LTM_HOST`` and
``LTM_TOKEN`` override the file for one process (CI, agents).

The reference CLI keeps only the bare token in ``credentials`` and the host in
``config.toml`` next to it; such a file is read (host from ``LTM_HOST`` or
``config.toml``) and replaced by this format on the next write.

Kept import-light: every verb reads this file before it does anything else.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ltm.cli.errors import CliError

CREDENTIALS_FILE = "credentials"
FORMAT_VERSION = 1
LOOPBACK = ("localhost", "127.0.0.1", "[::1]", "::1")


@dataclass(frozen=True, slots=True)
class Target:
    """The server a command talks to and how it signs in there."""

    host: str
    token: str | None
    source: str  # "credentials" or "LTM_HOST"; where the host came from
    user: dict[str, str] | None = None
    via: str | None = None


def path() -> Path:
    from ltm.cli.config import config_dir

    return config_dir() / CREDENTIALS_FILE


def normalize_host(raw: str) -> str:
    """``https://host[:port][/prefix]`` without a trailing slash; https when no scheme is given."""
    from urllib.parse import urlsplit

    text = raw.strip()
    if not text:
        raise CliError("the server URL is empty; give one like https://ltm.example.org")
    if "://" not in text:
        text = f"https://{text}"
    try:
        parts = urlsplit(text)
        parts.port  # noqa: B018 - raises ValueError on a bad port
    except ValueError:
        raise CliError(
            f"not a server URL: {raw!r}; give one like https://ltm.example.org"
        ) from None
    if parts.scheme.lower() not in ("http", "https") or not parts.hostname:
        raise CliError(f"not a server URL: {raw!r}; give one like https://ltm.example.org")
    if parts.query or parts.fragment or parts.username or parts.password:
        raise CliError(f"give the server URL without credentials, query or fragment: {raw!r}")
    return f"{parts.scheme.lower()}://{parts.netloc.lower()}{parts.path.rstrip('/')}"


def is_loopback(host: str) -> bool:
    from urllib.parse import urlsplit

    name = urlsplit(host).hostname or ""
    return name in LOOPBACK or name.startswith("127.")


def fingerprint(token: str) -> str:
    """The first 8 hex digits of the token's sha256: what the server stores, never the token."""
    import hashlib

    return hashlib.sha256(token.encode("utf-8", "surrogateescape")).hexdigest()[:8]


def load() -> dict[str, Any]:
    """The credentials file as a dict (empty when there is none)."""
    file = path()
    try:
        text = file.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {"version": FORMAT_VERSION, "default": None, "hosts": {}}
    except OSError as exc:
        raise CliError(f"cannot read {file}: {exc.strerror or exc}") from None
    stripped = text.strip()
    if not stripped.startswith("{"):
        return _legacy(stripped)
    try:
        data = json.loads(stripped)
    except ValueError:
        raise CliError(f"{file} is damaged (not JSON); sign in again: ltm auth HOST") from None
    if not isinstance(data, dict) or not isinstance(data.get("hosts", {}), dict):
        raise CliError(f"{file} is damaged (unexpected shape); sign in again: ltm auth HOST")
    data.setdefault("hosts", {})
    data.setdefault("default", None)
    return data


def _legacy(token: str) -> dict[str, Any]:
    """The reference's format: the bare token; its host lives in config.toml."""
    data: dict[str, Any] = {"version": FORMAT_VERSION, "default": None, "hosts": {}}
    host = os.environ.get("LTM_HOST") or _reference_host()
    if token and host:
        try:
            host = normalize_host(host)
        except CliError:
            return data
        data["default"] = host
        data["hosts"][host] = {"token": token, "via": "token"}
    return data


def _reference_host() -> str | None:
    from ltm.cli.config import config_dir

    try:
        import tomllib

        with (config_dir() / "config.toml").open("rb") as handle:
            host = tomllib.load(handle).get("host")
    except (OSError, ValueError):
        return None
    return host if isinstance(host, str) and host else None


def save(data: dict[str, Any]) -> None:
    from ltm.cli.config import write_private

    data["version"] = FORMAT_VERSION
    write_private(path(), json.dumps(data, indent=2, sort_keys=True) + "\n", mode=0o600)


def store_login(
    host: str,
    token: str,
    *,
    via: str,
    user: dict[str, str] | None = None,
    make_default: bool = True,
) -> str | None:
    """Keep ``token`` for ``host``; returns the previous default when this replaced it."""
    from datetime import UTC, datetime

    data = load()
    entry: dict[str, Any] = {
        "token": token,
        "via": via,
        "saved_at": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
    }
    if user:
        entry["user"] = {k: str(v) for k, v in user.items() if k in ("id", "display")}
    data["hosts"][host] = entry
    previous = data.get("default")
    if make_default:
        data["default"] = host
    save(data)
    return previous if make_default and previous and previous != host else None


def forget(host: str) -> bool:
    """Drop the token for ``host`` (and the default, when it pointed there)."""
    data = load()
    had = data["hosts"].pop(host, None) is not None
    if data.get("default") == host:
        data["default"] = None
        had = True
    if had:
        save(data)
    return had


def set_default(host: str | None) -> None:
    data = load()
    data["default"] = host
    save(data)


def default_host() -> str | None:
    return load().get("default") or None


def token_for(host: str) -> str | None:
    entry = load()["hosts"].get(host)
    token = entry.get("token") if isinstance(entry, dict) else None
    return token if isinstance(token, str) and token else None


def active() -> Target | None:
    """The server the verbs go to, or None for the embedded local store."""
    env_host = os.environ.get("LTM_HOST")
    env_token = os.environ.get("LTM_TOKEN") or None
    data = load()
    if env_host:
        host = normalize_host(env_host)
        source = "LTM_HOST"
    elif data.get("default"):
        host = str(data["default"])
        source = "credentials"
    else:
        return None
    entry = data["hosts"].get(host)
    entry = entry if isinstance(entry, dict) else {}
    token = env_token or entry.get("token") or None
    user = entry.get("user") if not env_token and isinstance(entry.get("user"), dict) else None
    via = "LTM_TOKEN" if env_token else entry.get("via")
    return Target(host=host, token=token, source=source, user=user, via=via)


def remember_user(host: str, user: dict[str, str]) -> None:
    """Record who the token for ``host`` belongs to, once a server has said so."""
    data = load()
    entry = data["hosts"].get(host)
    if not isinstance(entry, dict) or not user.get("id"):
        return
    entry["user"] = {k: str(v) for k, v in user.items() if k in ("id", "display")}
    save(data)
