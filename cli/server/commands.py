"""``ltm server``: run a self-hosted ltm server on one small box, on SQLite.

This module is imported whenever the CLI starts, so it imports only typer and
the standard library at module level; the store, chalice and waitress are
imported inside the commands that need them.
"""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

import typer

if TYPE_CHECKING:
    import socket
    from datetime import datetime

    from ltm.store import Store

ROOT_DISPLAY = "root"  # the first user's default display name; its id is a ULID, as every user's
ROOT_LABEL = "root"
DEFAULT_ADDR = "127.0.0.1:8080"
# One process runs Python on one core: more threads than this only contend for it (each
# SQLite call hands the GIL over): reads fall as threads are added (bench/bench_server.py
# --threads N). More than the client metadata fetches that may run
# at once (``ltm.mcp.cimd.PER_PROCESS``), so that slow ones never hold every worker; pushes
# that arrive together still share a commit (one fsync).
DEFAULT_THREADS = 4

app = typer.Typer(
    name="server",
    help="Run a self-hosted ltm server (SQLite): init, run, and manage its tokens.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _needs_the_server_extra(verb: str) -> None:
    """Every ``ltm server`` verb needs ltm[server]: each says so before doing anything.

    (Not a group callback: that would run before ``--help`` too, and reading the
    help needs no server.)
    """
    from ltm.cli.start.extras import require

    require("server", f"ltm server {verb}")


DbOption = Annotated[
    Path | None,
    typer.Option(
        "--db",
        metavar="FILE",
        help="The server's database file (default: server.db in ltm's data directory).",
        envvar="LTM_SERVER_DB",
        show_default=False,
    ),
]


def _say(message: str) -> None:
    """Commentary goes to stderr; stdout carries only what a script should capture."""
    print(message, file=sys.stderr)


def _fail(message: str, code: int = 1) -> typer.Exit:
    _say(f"ltm: {message}")
    return typer.Exit(code)


def _no_token_in(value: str, what: str) -> None:
    """Refuse ``value`` when it holds a token itself, without repeating it.

    An operator with a leaked token in hand pastes it where a label or a user
    belongs; the "no such label" error would print the secret again, into a
    terminal's scrollback or a log of the session.
    """
    from ltm.service.tokens import TOKEN_RE

    found = TOKEN_RE.search(value)
    if found is None:
        return
    owner = found.group(1)  # the user id a token minted for a ULID user carries (not secret)
    raise _fail(
        f"{what} holds a token itself (not repeated here): `ltm server tokens` lists the"
        " labels to revoke by"
        + (
            f"; `ltm server revoke-token --user {owner}` ends every token of its user"
            if owner
            else ""
        )
    )


Verb = TypeVar("Verb", bound=Callable[..., None])


def _database_errors(verb: Verb) -> Verb:
    """A database this user cannot write (or whose folder it cannot write in) is one
    line naming the file and the user, not an "unexpected error".

    Every verb writes: ``run`` before it listens, the token verbs as they work, and
    SQLite makes its ``-wal`` and ``-shm`` files beside the database on opening it. A
    server started as another user than the one who made the database, or on one
    restored read-only, is the usual cause.
    """

    @functools.wraps(verb)
    def checked(*args: Any, **kw: Any) -> None:
        try:
            verb(*args, **kw)
        except Exception as exc:
            import sqlite3

            text = str(exc)
            if not isinstance(exc, sqlite3.OperationalError) or not (
                "readonly" in text or "unable to open" in text
            ):
                raise
            path = _db_path(kw.get("db"))
            import getpass

            raise _fail(
                f"cannot write {path} as {getpass.getuser()} ({text}): the server writes its"
                " database and makes its -wal, -shm and .writelock files beside it; check"
                " the owner and mode of those files and of their folder"
            ) from None

    return checked  # type: ignore[return-value]


def _db_path(db: Path | None) -> Path:
    """The database, absolute: a relative ``--db`` or ``LTM_DATA_DIR`` names another file
    from another folder, so every line names the one meant (and init's next command
    carries it)."""
    if db is not None:
        return db.absolute()
    from ltm.cli.config import data_dir

    return (data_dir() / "server.db").absolute()


def _no_database(path: Path) -> typer.Exit:
    return _fail(
        f"no server database at {path}; create it first with `ltm server init --db {_quoted(path)}`"
    )


def _quoted(path: Path) -> str:
    """``path`` as a shell reads it back (a folder with a space in its name)."""
    import shlex

    return shlex.quote(str(path))


def _default_fixed() -> bool:
    """Whether ``ltm server run`` without ``--db`` finds the same database from any folder."""
    from ltm.cli.config import data_dir

    return data_dir().is_absolute()


def _open_existing(db: Path | None) -> tuple[Path, Store]:
    path = _db_path(db)
    if not path.exists():  # a folder there is named as one when it is opened
        raise _no_database(path)
    from ltm.cli.errors import opening
    from ltm.store.sqlite import SqliteStore

    with opening("the server database", path):
        return path, SqliteStore(path)


def parse_addr(addr: str) -> tuple[str, int]:
    """``HOST:PORT`` (``[::1]:PORT`` for IPv6); port 0 picks a free port."""
    host, sep, port = addr.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise _fail(f"--addr must be HOST:PORT, got {addr!r}")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    return host, int(port)


def _check_url(url: str) -> str:
    """``--external-url``, checked: every invite link, public link and OAuth address the
    server hands out starts with it, so one it cannot be is refused at the start, not found
    out in a link that leads nowhere.
    """
    import re
    from urllib.parse import urlsplit

    shape = f"--external-url must be an http(s) URL like https://ltm.example.org: {url!r}"
    try:
        parts = urlsplit(url)
        port = parts.port  # a port out of range, or not a number, raises here
    except ValueError:
        raise _fail(shape) from None
    if "@" in parts.netloc:  # not echoed: what precedes the @ may be a password
        raise _fail(
            "--external-url must not hold a user name or password: every link the server"
            " hands out would carry it"
        )
    host = parts.hostname or ""
    if (
        parts.scheme not in ("http", "https")
        or not (re.fullmatch(r"[a-z0-9.-]+", host) or (":" in host and _ipv6(host)))
        or port == 0
        or "?" in url
        or "#" in url
        or any(char.isspace() or not char.isprintable() for char in url)
    ):
        raise _fail(shape)
    # In lower case: the pages test ``base_url.startswith("https://")`` to mark their
    # cookies Secure (and __Host-), and compare the host with a request's Host.
    return f"{parts.scheme}://{parts.netloc.lower()}{parts.path.rstrip('/')}"


def _ipv6(host: str) -> bool:
    import ipaddress

    try:
        ipaddress.IPv6Address(host)
    except ValueError:
        return False
    return True


@app.command()
@_database_errors
def init(
    db: DbOption = None,
    name: Annotated[
        str,
        typer.Option(
            "--name",
            metavar="NAME",
            help="The first user's display name (its id is minted, a ULID).",
        ),
    ] = ROOT_DISPLAY,
) -> None:
    """Create the database and print the root token (once: the token alone on stdout).

    A lost root token is replaced from the server's box: `ltm server issue-token root`
    (or the first user's id) prints a new one; revoke the lost one with
    `ltm server revoke-token root`.
    """
    _needs_the_server_extra("init")
    path = _db_path(db)
    from ltm.cli.errors import opening
    from ltm.service import tokens
    from ltm.service.errors import BadRequest, Conflict, ServiceError
    from ltm.service.users import check_display
    from ltm.store.sqlite import SqliteStore

    try:
        display = check_display(name)
    except BadRequest as exc:
        raise _fail(f"--name: {exc.message.removeprefix('display: ')}", code=2) from None

    fresh = not path.exists()
    with opening("the server database", path):
        store = SqliteStore(path)
    try:
        if fresh:
            for suffix in ("", "-wal", "-shm"):
                target = Path(f"{path}{suffix}")
                if target.exists():
                    target.chmod(0o600)
        _ensure_device_secret(store)
        # Initialized: it has a user, the first one init made (whose root token may be
        # revoked since: a root minted then would be a new, empty user). (Opening the store
        # above gave a first user stored under the id "root" by an older init its ULID.)
        if store.has_users():
            rooted = any(token.label == ROOT_LABEL for token in store.list_tokens())
            _say(
                f"{path} is already initialized; its root token was shown when it was created."
                " Another token: `ltm server issue-token NAME` "
                + (
                    "(a lost root token: `ltm server issue-token root`)."
                    if rooted
                    else "(the root token is revoked: name the first user by their id)."
                )
            )
            return
        try:
            _user, secret = tokens.issue(store, display, label=ROOT_LABEL)
        except Conflict:
            raise _fail(f"{path} already has a root user or token; not minting another") from None
        except ServiceError as exc:  # a display name the server refuses
            raise _fail(exc.message, code=2) from None
    finally:
        store.close()
    print(secret)
    _say(
        f"Initialized {path}.\n"
        "Above is the root token. It is shown this once and stored only as a hash: keep it"
        " safe.\nStart the server with `ltm server run"
        + (f" --db {_quoted(path)}" if db is not None or not _default_fixed() else "")
        + "`, then sign in with `ltm auth http://HOST:PORT --with-token`"
        " (it asks for the token without echoing it)."
    )


@app.command()
@_database_errors
def run(
    db: DbOption = None,
    addr: Annotated[
        str,
        typer.Option(
            "--addr",
            metavar="HOST:PORT",
            help="Where to listen, HOST:PORT (port 0: any free port).",
        ),
    ] = DEFAULT_ADDR,
    external_url: Annotated[
        str | None,
        typer.Option(
            "--external-url",
            metavar="URL",
            help="The URL clients reach this server at (for invite links), e.g. when behind"
            " a proxy (default: X-Forwarded-Proto/X-Forwarded-Host, else the Host header).",
            envvar="LTM_EXTERNAL_URL",
        ),
    ] = None,
    threads: Annotated[
        int,
        typer.Option("--threads", metavar="N", min=1, max=256, help="Worker threads."),
    ] = DEFAULT_THREADS,
    # Worker processes, of the server before waitress: taken and said to be unused, so
    # that a service file written for it still starts the server after an upgrade.
    workers: Annotated[int | None, typer.Option("--workers", hidden=True)] = None,
    sqlite_sync: Annotated[
        str,
        typer.Option(
            "--sqlite-sync",
            metavar="full|normal",
            help="full: a push is on disk before its 201 (survives a power loss). normal:"
            " faster; survives a crash of the server, but a power loss or kernel crash can"
            " lose the last pushes.",
            envvar="LTM_SQLITE_SYNC",
        ),
    ] = "full",
) -> None:
    """Serve the ltm API with a multi-threaded HTTP server until SIGTERM or Ctrl-C."""
    _needs_the_server_extra("run")
    path = _db_path(db)
    if not path.exists():  # a folder there is named as one when it is opened
        raise _no_database(path)
    from ltm.store.sqlite import SYNC_ENV, sync_level

    try:
        level = sync_level(sqlite_sync)
    except ValueError:
        raise _fail(f"--sqlite-sync must be full or normal, got {sqlite_sync!r}") from None
    os.environ[SYNC_ENV] = level.lower()  # every process's store reads it
    from ltm.logs import log_level
    from ltm.store.select import quota

    try:
        quota()  # the per-user storage bound: a bad setting stops the start, in one line
        log_level()  # as does a log level that is none
    except ValueError as exc:
        raise _fail(str(exc)) from None
    host, port = parse_addr(addr)
    os.environ["LTM_STORE"] = "sqlite"
    os.environ["LTM_DB"] = str(path)
    if external_url:
        external_url = _check_url(external_url)
        os.environ["LTM_EXTERNAL_URL"] = external_url
    else:
        os.environ.pop("LTM_EXTERNAL_URL", None)

    from .http import bind, bind_for_browsers, serve
    from .loader import load_app
    from .wsgi import ChaliceWSGI

    module = load_app()
    # waitress's own warnings (a stop's requests still running or dropped, an error in
    # serving one) as JSON lines beside the app's: without a handler of their own they
    # went to stderr as bare text, amid lines a log collector parses as JSON.
    import logging

    waitress_log = logging.getLogger("waitress")
    waitress_log.addHandler(module.logger.registered_handler)
    waitress_log.propagate = False
    from ltm.cli.errors import opening

    with opening("the server database", path):
        store = module.get_store()  # open (and migrate) now: fail before listening
    _fill_vectors(store)
    try:
        web_name = None if external_url else web_name_for(host, store)
    except ValueError as exc:  # a bad LTM_DEVICE_SECRET
        raise _fail(str(exc)) from None
    wsgi = ChaliceWSGI(module.app, logger=module.logger)
    held: list[socket.socket] = []
    try:
        if web_name is None:
            sock = bind(host, port)
        else:  # its pages at a *.localhost name: the other loopback address held too
            sock, held = bind_for_browsers(host, port)
    except OSError as exc:
        raise _fail(f"cannot listen on {addr}: {exc.strerror or exc}") from None
    bound_host, bound_port = sock.getsockname()[:2]
    shown = f"[{bound_host}]" if ":" in bound_host else bound_host
    pages = serve_web_at(web_name, f"{shown}:{bound_port}")
    _say(
        f"ltm server: listening on http://{shown}:{bound_port}"
        f" ({path}, {threads} threads, sqlite sync {level.lower()})"
        + (f", web view at {pages}" if pages else "")
    )
    from ltm.loopback import exposure_warnings

    for warning in exposure_warnings(bound_host, external_url):
        _say(f"ltm server: warning: {warning}")
    if workers is not None:
        _say(
            "ltm server: warning: --workers is no longer used: one process serves, with"
            " --threads worker threads (docs/server.md); drop it from the command"
        )
    sys.stderr.flush()
    try:
        status = serve(wsgi, sock, threads=threads, on_stop=module.close_store)
    finally:
        for other in held:
            other.close()
    _say("ltm server: stopped")
    if status:
        raise typer.Exit(status)


def _fill_vectors(store: Any) -> None:
    """Give the packets pushed before the semantic extra was installed (or with another
    model) their vectors, in the background: a search by meaning reads only the packets
    that have one, and a client's ``ltm search`` leaves the filling to the server. A
    server gains the extra, or a new model, only by a restart, so once at the start is
    enough; searches meanwhile find the packets filled so far."""
    import threading

    from ltm import semantic

    if not semantic.enabled() or not (missing := store.vectors_missing()):
        return

    def fill() -> None:
        try:
            done = store.fill_vectors()
        except Exception as exc:  # a model that cannot be read, a store closing: said, no more
            _say(f"ltm server: search by meaning lacks some packets: {exc}")
        else:
            _say(f"ltm server: {done} packets have their vectors for search by meaning")

    _say(f"ltm server: working out what {missing} packets mean, in the background")
    threading.Thread(target=fill, name="ltm-fill-vectors", daemon=True).start()


@app.command("issue-token")
@_database_errors
def issue_token(
    name: Annotated[
        str,
        typer.Argument(
            help="The user: a display name or user id. A new user when nobody has that name."
        ),
    ],
    label: Annotated[
        str | None,
        typer.Option(
            "--label",
            help='The token\'s label (default: made from the name, "Jo Smith" Jo-Smith,'
            " numbered if taken).",
        ),
    ] = None,
    new_user: Annotated[
        bool,
        typer.Option(
            "--new-user",
            help="Always a new user, never another token for one who exists (a name taken"
            " in any case is refused: names are unique per server).",
        ),
    ] = False,
    read_only: Annotated[
        bool,
        typer.Option(
            "--read-only",
            help="A token that only reads (ls, show, pull, search): never saves, pushes or"
            " deletes; for a dashboard or a CI job that only reads.",
        ),
    ] = False,
    db: DbOption = None,
) -> None:
    """Print a token for a user, alone on stdout: a new user, or another token for one
    that exists (another device, or a lost token: `ltm server issue-token root`)."""
    _needs_the_server_extra("issue-token")
    from ltm.service import tokens
    from ltm.service.errors import ServiceError
    from ltm.store import FULL_SCOPE

    _path, store = _open_existing(db)
    try:
        scope = "read" if read_only else FULL_SCOPE
        issued = tokens.issue_for(store, name, label=label, new_user=new_user, scope=scope)
    except ServiceError as exc:
        raise _fail(exc.message) from None
    finally:
        store.close()
    print(issued.secret)
    who = "the new user" if issued.created else "the existing user"
    _say(
        f"Issued {'read-only ' if read_only else ''}token {issued.label!r} for {who}"
        f" {issued.user.display!r} (id {issued.user.id})."
    )
    if not issued.created:
        _say(
            "Their other tokens keep working; `ltm server revoke-token LABEL` ends one"
            " (`ltm server tokens` lists them). Another person needs a name of their own."
        )


@app.command("tokens")
@_database_errors
def list_tokens(
    db: DbOption = None,
    as_json: Annotated[bool, typer.Option("--json", help="One JSON array on stdout.")] = False,
) -> None:
    """List tokens: label, user, created, last used, expiry, scope (never the token itself)."""
    _needs_the_server_extra("tokens")
    import json

    _path, store = _open_existing(db)
    try:
        rows: list[dict[str, Any]] = []  # as --json prints them
        for token in store.list_tokens():
            user = store.get_user(token.user_id)
            rows.append(
                {
                    "label": token.label,
                    "user_id": token.user_id,
                    "user": user.display if user else "",
                    "created_at": _stamp(token.created_at),
                    "last_used_at": _stamp(token.last_used_at) if token.last_used_at else None,
                    # What it may do, and until when: a device's sign-in may be read-only
                    # or have a lifetime, an agent's (OAuth) token has one.
                    "scope": token.scope,
                    "expires_at": _stamp(token.expires_at) if token.expires_at else None,
                }
            )
    finally:
        store.close()
    if as_json:
        print(json.dumps(rows, indent=2))
        return
    if not rows:
        _say("no tokens")
        return
    table = [("LABEL", "USER", "USER ID", "CREATED", "LAST USED", "EXPIRES", "SCOPE")] + [
        (
            r["label"],
            r["user"],
            r["user_id"],
            r["created_at"],
            r["last_used_at"] or "never",
            r["expires_at"] or "never",
            r["scope"],
        )
        for r in rows
    ]
    widths = [max(len(row[i]) for row in table) for i in range(len(table[0]))]
    for row in table:
        cells = (cell.ljust(width) for cell, width in zip(row, widths, strict=True))
        print("  ".join(cells).rstrip())


@app.command("revoke-token")
@_database_errors
def revoke_token(
    label: Annotated[
        str | None, typer.Argument(help="The label of the token to revoke.", show_default=False)
    ] = None,
    user: Annotated[
        str | None,
        typer.Option(
            "--user",
            metavar="NAME",
            help="Revoke every token of this user (a display name or id) instead.",
            show_default=False,
        ),
    ] = None,
    db: DbOption = None,
) -> None:
    """Revoke a token by its label, or every token of a user; each stops working at once."""
    _needs_the_server_extra("revoke-token")
    if (label is None) == (user is None):
        raise _fail("give a token's LABEL or --user NAME (one of them)")
    _no_token_in(label or user or "", "LABEL" if user is None else "--user")
    from ltm.service import tokens
    from ltm.service.errors import ServiceError

    path, store = _open_existing(db)
    try:
        if user is None:
            owner = next((t.user_id for t in store.list_tokens() if t.label == label), None)
            if owner is None or not store.revoke_token(label or ""):
                raise _fail(f"no token labelled {label!r} in {path}")
            said = f"Revoked token {label!r}." + _left_without(store, owner)
        else:
            try:
                found = tokens.find_user(store, user)
            except ServiceError as exc:
                raise _fail(exc.message) from None
            if found is None:
                raise _fail(
                    f"no user {user!r} holding a token in {path} (`ltm server tokens` lists"
                    " them; one whose every token is revoked is named by id)"
                )
            labels = tokens.revoke_all(store, found.id)
            said = (
                f"Revoked {len(labels)} token(s) of {found.display!r}: {', '.join(labels)}."
                + _left_without(store, found.id)
                if labels
                else f"{found.display!r} has no token left to revoke."
            )
    finally:
        store.close()
    _say(said)


def _left_without(store: Store, user_id: str) -> str:
    """What to say once a revoke leaves a user no token: from then on only their id names
    them (a name alone would give a newcomer their packets), and no verb lists them, so
    the id is said here; the first user is no longer "root" either."""
    if store.list_tokens(user_id=user_id):
        return ""
    user = store.get_user(user_id)
    who = repr(user.display) if user else "their user"
    return (
        f"\n{who} (id {user_id}) now holds no token; to give them one again:"
        f" `ltm server issue-token {user_id}`."
    )


def web_name_for(host: str, store: Store) -> str | None:
    """The host name of the web pages of a server listening on ``host``, or None.

    On a loopback address a browser would keep the web session cookie for
    127.0.0.1 (or localhost), and cookies do not separate ports: a page another
    local user serves on another port would receive it. So the pages get a
    ``*.localhost`` name of their own (``ltm.web.view.web_host_name``), to which
    the cookie then belongs alone; the API keeps answering on the address itself
    for CLIs and agents. Elsewhere (a public address, or an ``--external-url``),
    the operator's name serves both.
    """
    from ltm.web.device import signing_key
    from ltm.web.view import loopback_name, web_host_name

    if not loopback_name(f"[{host}]" if ":" in host else host):
        return None
    return web_host_name(signing_key(store))


def serve_web_at(name: str | None, address: str) -> str | None:
    """Tell the web view (every worker reads the environment) its own Host; its URL.

    ``address``: ``host:port`` the server listens at, where the API (and public
    links) stay.
    """
    from ltm.web.view import API_HOST_ENV, WEB_HOST_ENV

    if name is None:
        os.environ.pop(WEB_HOST_ENV, None)
        os.environ.pop(API_HOST_ENV, None)
        return None
    port = address.rpartition(":")[2]
    os.environ[WEB_HOST_ENV] = f"{name}:{port}"
    os.environ[API_HOST_ENV] = address
    return f"http://{name}:{port}/web"


def _ensure_device_secret(store: Store) -> None:
    """The random key that signs the device-flow pages (CSRF, sign-in state): made once, kept."""
    import secrets

    from ltm.web.device import SECRET_NAME

    store.ensure_secret(SECRET_NAME, secrets.token_bytes(32))


def _stamp(value: datetime) -> str:
    return value.strftime("%Y-%m-%dT%H:%M:%SZ")


if __name__ == "__main__":
    app()
