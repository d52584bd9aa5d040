"""ltm whoami: which server, which user, which token (its fingerprint, never the token)."""

from __future__ import annotations

import json

from ltm.cli.commands import options


def whoami(as_json: options.Json = False) -> None:
    """Show the server the verbs go to, the user if known, and the token's fingerprint."""
    from ltm.cli.client import credentials
    from ltm.cli.config import local_db_path

    target = credentials.active()
    if target is None:
        report: dict[str, object] = {"backend": "local", "store": str(local_db_path())}
    else:
        report = {
            "backend": "remote",
            "host": target.host,
            "host_from": target.source,
            "user": target.user,
            "signed_in_via": target.via,
            "token_fingerprint": credentials.fingerprint(target.token) if target.token else None,
        }
    if as_json:
        print(json.dumps(report, indent=2))
        return
    if target is None:
        print(f"local store  {report['store']}")
        print("not signed in to a server (ltm auth HOST to sign in)")
        return
    print(
        f"host         {target.host}" + (" (from LTM_HOST)" if target.source == "LTM_HOST" else "")
    )
    user = target.user or {}
    if user:
        from ltm.cli.terminal.output import safe

        print(safe(f"user         {user.get('display', '')} ({user.get('id', '')})"))
    else:
        print("user         unknown (the server does not say for a pasted token)")
    if target.token:
        via = f", via {target.via}" if target.via else ""
        print(f"token        sha256:{credentials.fingerprint(target.token)}…{via}")
    else:
        print(f"token        none — run: ltm auth {target.host}")
