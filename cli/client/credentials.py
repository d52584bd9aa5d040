"""Which server ltm talks to, and the tokens it signs in with.

The config dir (``ltm.cli.config``) is shared with the Go reference CLI, and
the default server's sign-in is kept exactly as the reference keeps it, so a
user signed in with either CLI is signed in with both:

- ``config.toml``, key ``host``: the default server (the one every verb goes
  to; ``--local`` overrides it; none: the embedded local store);
- ``credentials``: that server's bearer token alone, then a newline, mode 0600
  (the reference's ``SaveToken``; its ``LoadToken`` trims the whitespace).

These two are the source of truth for the default server. What the reference
has no place for, tokens for other servers and how each was obtained
(``via``: token, device or invite; ``saved_at``; the ``user`` the server named;
the ``teams`` the user is known to belong to there), is kept in ``hosts.json``,
mode 0600::

    {"version": 1, "hosts": {"https://ltm.example.org": {"token": "ltm_…", "via": "token",
        "saved_at": "2026-05-01T12:00:00Z", "user": {"id": "…", "display": "…"},
        "teams": ["core"]}}}

Keys of hosts.json this build does not know (a later build's, a hand edit's) are
written back as they are. The team names make ``-t core`` reach the server the
user joined ``core`` on, even when it is not the default: ``ltm join``, ``ltm
teams create`` and ``ltm teams ls`` record them, ``ltm teams leave``/``rm`` drop
them.

An entry there for the default server counts only while its token is the one
in ``credentials``: when the reference signs in again, our details about the
old token are dropped, never shown for the new one. Switching the default
server removes ``credentials`` before ``config.toml`` names the new server, so
no moment pairs one server's token with another server.

Every change reads and writes these files under an ``flock`` on ``.credentials.lock``
(``_updating``), so two ltm processes writing at once lose neither's change.

``LTM_HOST`` and ``LTM_TOKEN`` override the files for one process (CI, agents).
A ``credentials`` file holding JSON (earlier builds of this CLI: the default
and every token in one file) is moved to this layout on first read.

Kept import-light: every verb reads these files before it does anything else.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, NamedTuple

from ltm.cli.errors import USAGE, CliError

CREDENTIALS_FILE = "credentials"
HOSTS_FILE = "hosts.json"
FORMAT_VERSION = 1
USER_KEYS = ("id", "display")
# The protocol's team names: all a server's answer may record as one here (it decides
# which server ``-t TEAM`` goes to, and is shown back to the user).
TEAM_NAME = re.compile(r"[a-z0-9][a-z0-9_-]{0,39}")
DEFAULT_PORTS = {"http": 80, "https": 443}


class Target(NamedTuple):  # NamedTuples, not dataclasses: see ltm.cli.client.backend
    """The server a command talks to and how it signs in there."""

    host: str
    token: str | None
    source: str  # "credentials", "LTM_HOST" or "team" (-t TEAM found it); where the host came from
    user: dict[str, str] | None = None
    via: str | None = None


class State(NamedTuple):
    """What the files say, merged: the reference's pair wins for the default server."""

    default: str | None  # config.toml's host, normalized
    token: str | None  # the credentials file's token (the default server's)
    hosts: dict[str, dict[str, Any]]  # never changed in place: a write makes a new dict
    bad_host: str | None = None  # config.toml's host when it is not a server URL

    def token_for(self, host: str) -> str | None:
        return self.hosts.get(host, {}).get("token")

    def hosts_with_team(self, team: str) -> list[str]:
        """The servers (signed in to) where the user is known to belong to ``team``."""
        return sorted(host for host, entry in self.hosts.items() if team in teams_of(entry))


def teams_of(entry: dict[str, Any]) -> list[str]:
    """The team names a hosts.json entry records (anything malformed counts as none)."""
    names = entry.get("teams")
    if not isinstance(names, list):
        return []
    return [name for name in names if isinstance(name, str) and name]


def path() -> Path:
    """The credentials file (the default server's token)."""
    from ltm.cli.config import config_dir

    return config_dir() / CREDENTIALS_FILE


def hosts_path() -> Path:
    from ltm.cli.config import config_dir

    return config_dir() / HOSTS_FILE


def normalize_host(raw: str) -> str:
    """``https://host[:port][/prefix]`` without a trailing slash or the scheme's default port;
    https when no scheme is given. A URL that is none is a usage error (exit 2), as any
    other bad value given on the command line, in the environment or to ``config set``."""
    from urllib.parse import urlsplit

    text = raw.strip()
    if not text:
        raise CliError(
            "the server URL is empty; give one like https://ltm.example.org", exit_code=USAGE
        )
    if "://" not in text:
        text = f"https://{text}"
    try:
        parts = urlsplit(text)
        parts.port  # noqa: B018 - raises ValueError on a bad port
    except ValueError:
        raise CliError(
            f"not a server URL: {raw!r}; give one like https://ltm.example.org", exit_code=USAGE
        ) from None
    # A URL holds no space or control character (RFC 3986 section 2): "http://a b" was
    # taken as the server "a b", and ltm then told to sign in there.
    spaced = any(c.isspace() or not c.isprintable() for c in text)
    if parts.scheme.lower() not in ("http", "https") or not parts.hostname or spaced:
        raise CliError(
            f"not a server URL: {raw!r}; give one like https://ltm.example.org", exit_code=USAGE
        )
    scheme = parts.scheme.lower()
    name = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname
    # The scheme's own port said or not is one server: one entry, one token, not two.
    port = "" if parts.port in (None, DEFAULT_PORTS[scheme]) else f":{parts.port}"
    url = f"{scheme}://{name}{port}{parts.path.rstrip('/')}"
    if parts.query or parts.fragment or parts.username or parts.password:
        # The URL as it would be taken, not as given: its password or a token in its
        # query would be printed (ltm doctor, a CI log) for anyone to read.
        raise CliError(
            f"give the server URL without credentials, query or fragment (as {url!r})",
            exit_code=USAGE,
        )
    return url


def fingerprint(token: str) -> str:
    """The first 8 hex digits of the token's sha256: what the server stores, never the token."""
    import hashlib

    return hashlib.sha256(token.encode("utf-8", "surrogateescape")).hexdigest()[:8]


# -- reading ------------------------------------------------------------------------


def load() -> State:
    """The sign-in state from the files (moving an earlier build's JSON credentials first)."""
    text = _read(path())
    if text is not None and text.lstrip().startswith("{"):
        return _migrate(text)
    token = text.strip() if text is not None else None  # the reference trims likewise
    default, bad = _reference_host()
    hosts = _read_hosts()
    if default is not None:
        entry = hosts.get(default)
        if not token:
            hosts.pop(default, None)  # no credentials: not signed in there, whatever we had
        elif not entry or entry.get("token") != token:
            hosts[default] = {"token": token}  # signed in by the reference: ours is stale
    return State(default=default, token=token or None, hosts=hosts, bad_host=bad)


def _read(file: Path) -> str | None:
    try:
        return file.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as exc:
        raise CliError(f"cannot read {file}: {getattr(exc, 'strerror', None) or exc}") from None


def _reference_host() -> tuple[str | None, str | None]:
    """config.toml's ``host``, normalized; (None, raw) when it is not a server URL."""
    from ltm.cli.config import load_reference, reference_value

    raw = reference_value(load_reference(), "host")
    if raw is None or (isinstance(raw, str) and not raw.strip()):
        return None, None
    if not isinstance(raw, str):  # host = 5 by hand: said, not taken for no server at all
        return None, str(raw)
    try:
        return normalize_host(raw), None
    except CliError:
        return None, raw


def _read_hosts() -> dict[str, dict[str, Any]]:
    file = hosts_path()
    text = _read(file)
    if text is None:
        return {}
    try:
        data = json.loads(text)
    except ValueError:
        raise CliError(f"{file} is damaged (not JSON); remove it and sign in again") from None
    hosts = data.get("hosts") if isinstance(data, dict) else None
    if not isinstance(hosts, dict):
        raise CliError(f"{file} is damaged (unexpected shape); remove it and sign in again")
    found: dict[str, dict[str, Any]] = {}
    for host, entry in hosts.items():
        if isinstance(entry, dict) and isinstance(entry.get("token"), str) and entry["token"]:
            # Keyed as every lookup spells the server: a hand edit, or a key an earlier
            # build kept with the default port, still finds its token.
            found.setdefault(as_key(str(host)), dict(entry))
    return found


def as_key(host: str) -> str:
    """``host`` spelled as every lookup spells a server (``normalize_host``), when it is a URL."""
    try:
        return normalize_host(host)
    except CliError:
        return host  # not a URL: kept as it is, so a write does not drop it


# -- writing ------------------------------------------------------------------------


_KEEP: Any = object()  # _commit's default: the default server stays as it is


@contextmanager
def _updating() -> Iterator[State]:
    """The files' state, read and written back under the config dir's lock
    (``ltm.cli.config.locked``): two processes changing them at once lose neither's change."""
    from ltm.cli.config import locked

    with locked():
        yield load()


def _commit(
    before: State,
    hosts: dict[str, dict[str, Any]],
    default: str | None = _KEEP,
    *,
    rewrite: bool = False,
) -> None:
    """Write ``hosts`` and ``default`` so that no step pairs a token with the wrong server."""
    from ltm.cli.config import remove_file, update_reference, write_private

    doc = {**_other_keys(), "version": FORMAT_VERSION, "hosts": hosts}
    write_private(hosts_path(), json.dumps(doc, indent=2, sort_keys=True) + "\n")
    unchanged = default == before.default and before.bad_host is None and not rewrite
    if default is _KEEP or unchanged:
        if before.default is not None:
            token = hosts.get(before.default, {}).get("token")
            if token != before.token:
                _write_token(token)
        return
    remove_file(path())  # first: the old server's token never meets the new host
    update_reference(host=default)
    token = hosts.get(default, {}).get("token") if default else None
    if token:
        _write_token(token)


def _other_keys() -> dict[str, Any]:
    """hosts.json's keys beside ``version`` and ``hosts`` (a later build's, a hand edit's):
    written back as they are, as config.toml's unknown keys are."""
    try:
        data = json.loads(_read(hosts_path()) or "{}")
    except (ValueError, CliError):
        return {}
    if not isinstance(data, dict):
        return {}
    return {k: v for k, v in data.items() if k not in ("version", "hosts")}


def _write_token(token: str | None) -> None:
    from ltm.cli.config import remove_file, write_private

    if token:
        write_private(path(), token + "\n")  # the reference's SaveToken, atomically
    else:
        remove_file(path())


def _check_token(token: str) -> None:
    # ASCII too: it travels in an HTTP header, and a curly quote pasted with it cannot.
    if not token or any(c.isspace() or not c.isprintable() or not c.isascii() for c in token):
        raise CliError(
            "a token is one line of printable ASCII characters without spaces or quotes;"
            " check what was pasted",
            exit_code=2,
        )


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

    _check_token(token)
    entry: dict[str, Any] = {
        "token": token,
        "via": via,
        "saved_at": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
    }
    if user:
        entry["user"] = {k: str(v) for k, v in user.items() if k in USER_KEYS}
    with _updating() as state:
        hosts = {**state.hosts, host: entry}
        previous = state.default
        _commit(state, hosts, host if make_default else _KEEP)
    return previous if make_default and previous and previous != host else None


def forget(host: str) -> bool:
    """Drop the token for ``host`` (and the default, when it pointed there)."""
    with _updating() as state:
        hosts = dict(state.hosts)
        had = hosts.pop(host, None) is not None
        if state.default == host:
            _commit(state, hosts, None)
            return True
        if had:
            _commit(state, hosts)
        return had


def set_default(host: str | None) -> None:
    with _updating() as state:
        _commit(state, state.hosts, host)


def remember_teams(
    host: str,
    names: list[str],
    *,
    token: str | None,
    complete: bool = False,
    drop: tuple[str, ...] = (),
) -> None:
    """Record the teams the user belongs to on ``host`` (signed in there only).

    ``token``: the one the server answered; the entry must still hold it (checked under
    the lock), else the answer was about another account: an ``LTM_TOKEN``, or a sign-in
    replaced while the request was out (``ltm auth`` again, as someone else).
    ``complete``: ``names`` is every team (a fresh ``GET /v1/teams``), so others
    are dropped; else they are added. ``drop``: teams the user left or deleted.
    """
    names = [name for name in names if TEAM_NAME.fullmatch(name)]
    with _updating() as state:
        entry = state.hosts.get(host)
        if not entry or not token or entry.get("token") != token:
            return
        known = [] if complete else teams_of(entry)
        wanted = sorted({*known, *names} - set(drop))
        if wanted == sorted(teams_of(entry)) and "teams" in entry:
            return  # nothing new: no write
        _commit(state, {**state.hosts, host: {**entry, "teams": wanted}})


def remember_user(host: str, user: dict[str, str], *, token: str | None) -> None:
    """Record who ``token`` for ``host`` belongs to, once a server has said so (kept only
    while the entry holds that token: see ``remember_teams``)."""
    if not user.get("id"):
        return
    named = {k: str(v) for k, v in user.items() if k in USER_KEYS}
    with _updating() as state:
        entry = state.hosts.get(host)
        if not entry or not token or entry.get("token") != token:
            return
        _commit(state, {**state.hosts, host: {**entry, "user": named}})


# -- what the verbs use -------------------------------------------------------------


def default_host() -> str | None:
    state = load()
    _refuse_bad_host(state)
    return state.default


def reaching(host: str, team: str | None) -> list[str]:
    """The options a command printed for later reaches ``host`` with: ``-t TEAM`` when the
    verb had it, else ``-H HOST`` unless that is the default (the verb ran with ``-H``,
    or found the one server signed in to while the default is the local store)."""
    if team:
        return ["-t", team]
    return [] if default_host() == host else ["-H", host]


def token_for(host: str) -> str | None:
    return load().token_for(host)


def active(team: str | None = None) -> Target | None:
    """The server the verbs go to, or None for the embedded local store.

    With ``team`` (a verb's ``-t TEAM``) and no ``LTM_HOST``/``-H``: the server
    the user is known to belong to that team on (``hosts.json``'s ``teams``):
    the default server when it is one of them, else the only one; on several
    (none of them the default) it is an error naming them.
    """
    env_host = os.environ.get("LTM_HOST")
    env_token = os.environ.get("LTM_TOKEN", "").strip() or None
    if env_token is not None:
        try:
            _check_token(env_token)  # said here, not as an encoding error of a header
        except CliError as exc:
            raise CliError(f"LTM_TOKEN: {exc.message}", exit_code=2) from None
    state = load()
    if env_host:
        host = normalize_host(env_host)
        source = "LTM_HOST"
    else:
        _refuse_bad_host(state)
        found = team_host(state, team) if team and not env_token else None
        if found is not None:
            host, source = found, "team"
        elif state.default is None:
            if env_token:
                # A token for no server: going on with the local store would drop it
                # without a word, and a CI job's packets with it.
                raise CliError(
                    "LTM_TOKEN is set but no server is: set LTM_HOST too (or -H URL),"
                    " or unset LTM_TOKEN to use the local store",
                    exit_code=2,
                )
            return None
        else:
            host = state.default
            source = "credentials"
    token = env_token or state.token_for(host)
    entry = state.hosts.get(host, {})
    ours = not env_token and token is not None and entry.get("token") == token
    user = entry.get("user") if ours and isinstance(entry.get("user"), dict) else None
    via = "LTM_TOKEN" if env_token else entry.get("via") if ours else None
    return Target(host=host, token=token, source=source, user=user, via=via)


def team_host(state: State, team: str) -> str | None:
    """Where ``-t team`` goes when it is not the default server (None: the default)."""
    hosts = state.hosts_with_team(team)
    if not hosts or state.default in hosts:
        return None
    if len(hosts) > 1:
        raise CliError(
            f"team {team} is on {len(hosts)} servers you are signed in to ({', '.join(hosts)});"
            f" pick one with -H: ltm -H {hosts[0]} … -t {team}",
            exit_code=2,
        )
    return hosts[0]


def plain_http_warning(host: str) -> str | None:
    """What to say of a server reached over plain HTTP beyond this machine (its token
    would travel unencrypted with every request), or None."""
    from ltm.loopback import loopback_url

    if host.startswith("http://") and not loopback_url(host):
        return f"warning: {host} is plain HTTP; the token travels unencrypted — prefer https://"
    return None


def _refuse_bad_host(state: State) -> None:
    if state.bad_host is not None:
        from ltm.cli.config import REFERENCE_FILE, config_dir

        raise CliError(
            f"host = {state.bad_host!r} in {config_dir() / REFERENCE_FILE} is not a server URL;"
            " fix it: ltm config set host URL"
        )


# -- earlier builds -----------------------------------------------------------------


def _migrate(text: str) -> State:
    """Move the JSON credentials of earlier builds (default + every token) to this layout."""
    file = path()
    try:
        data = json.loads(text)
    except ValueError:
        raise CliError(f"{file} is damaged (not JSON); sign in again: ltm auth HOST") from None
    if not isinstance(data, dict) or not isinstance(data.get("hosts", {}), dict):
        raise CliError(f"{file} is damaged (unexpected shape); sign in again: ltm auth HOST")
    hosts = _read_hosts()
    for host, entry in data.get("hosts", {}).items():
        if isinstance(entry, dict) and isinstance(entry.get("token"), str) and entry["token"]:
            hosts[str(host)] = dict(entry)
    default = data.get("default") if isinstance(data.get("default"), str) else None
    state = State(default=default, token=hosts.get(default or "", {}).get("token"), hosts=hosts)
    try:
        before = State(default=None, token=None, hosts={})
        _commit(before, hosts, default, rewrite=True)
    except OSError:
        pass  # a read-only config dir: go on with what the old file says; move it next time
    return state
