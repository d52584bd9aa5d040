"""ltm whoami: which server, which user, which token (its fingerprint, never the token)."""

from __future__ import annotations

import json
from typing import Any

from ltm.cli.commands import options
from ltm.cli.terminal.output import info, safe


def whoami(as_json: options.Json = False) -> None:
    """Show the server the verbs go to, who you are there and what your token may do.

    The server is asked (its answer names the user and the token's scope), and a
    token it rejects makes this fail. Every other server you are signed in to is
    listed too, with the teams known on it (-t TEAM reaches them).
    """
    from ltm.cli.client import credentials
    from ltm.cli.config import local_db_path

    target = credentials.active()
    state = credentials.load()
    others = [
        {
            "host": host,
            "user": entry.get("user") if isinstance(entry.get("user"), dict) else None,
            "teams": credentials.teams_of(entry),
        }
        for host, entry in sorted(state.hosts.items())
        if target is None or host != target.host
    ]
    if target is None:
        report: dict[str, Any] = {"backend": "local", "store": str(local_db_path())}
        report["servers"] = others
        if as_json:
            print(json.dumps(report, indent=2))
            return
        print(f"local store  {report['store']} (the default: verbs without -t or -H go here)")
        if not others:
            print("not signed in to a server (ltm auth HOST to sign in, ltm join URL to join)")
        _others(others, lead="signed in to")
        return
    answer, problem = _ask(target)
    user = (answer or {}).get("user") if answer else target.user
    token_info = (answer or {}).get("token") or {}
    report = {
        "backend": "remote",
        "host": target.host,
        "host_from": target.source,
        "user": user,
        "signed_in_via": target.via,
        "token_fingerprint": credentials.fingerprint(target.token) if target.token else None,
        "token_label": token_info.get("label"),
        "token_scope": token_info.get("scope"),
        "servers": others,
    }
    if as_json:
        print(json.dumps(report, indent=2))
    else:
        source = {"LTM_HOST": " (from -H or LTM_HOST)"}.get(target.source, " (the default server)")
        print(f"host         {target.host}{source}")
        if user:
            print(safe(f"user         {user.get('display', '')} ({user.get('id', '')})"))
        elif target.token and problem is None:  # a rejected token names nobody, said below
            print("user         not named by this server (a reference server has no /v1/whoami)")
        if target.token:
            details = [f"sha256:{credentials.fingerprint(target.token)}…"]
            if target.via:
                details.append(f"signed in by {target.via}")
            if token_info.get("label"):
                details.append(f"label {token_info['label']}")
            if token_info.get("scope"):
                details.append(f"scope {token_info['scope']!r}")
            print(safe(f"token        {', '.join(details)}"))
        else:
            print(f"token        none — run: ltm auth {target.host}")
        _others(others)
    if problem is not None:
        raise problem


def _ask(target: Any) -> tuple[dict[str, Any] | None, Any]:
    """The server's word on the token: (answer or None, the CliError to exit with or None).

    A rejected token is an error (the sign-in no longer works); a server that
    cannot be reached is only a warning: the files still say where things are.
    """
    from ltm.cli.client import credentials
    from ltm.cli.client.remote import Rejected, RemoteBackend
    from ltm.cli.client.transport import TransportError
    from ltm.cli.errors import CliError

    if not target.token:
        return None, CliError(f"not signed in to {target.host} — run: ltm auth {target.host}")
    backend = RemoteBackend(target)
    try:
        answer = backend.identify()
    except Rejected as exc:
        return None, exc
    except CliError as exc:
        # What happened, without the advice after the dash: for a server out of reach it
        # is "check the URL with: ltm whoami", the very command that is answering.
        said = exc.message.split(" — ")[0] if isinstance(exc, TransportError) else exc.message
        info(f"ltm: warning: {said}; shown from this machine's files")
        return None, None
    finally:
        backend.close()
    user = (answer or {}).get("user")
    if isinstance(user, dict) and target.via != "LTM_TOKEN":  # our file's token: keep its name
        credentials.remember_user(
            target.host, {k: str(v) for k, v in user.items()}, token=target.token
        )
    return answer, None


def _others(others: list[dict[str, Any]], lead: str = "also signed in to") -> None:
    for other in others:
        user = other["user"] or {}
        who = f" as {user.get('display')}" if user.get("display") else ""
        teams = f"; teams: {', '.join(other['teams'])} (reach with -t)" if other["teams"] else ""
        print(safe(f"{lead} {other['host']}{who}{teams}"))
