"""Optional parts of ltm (pip extras): say which one a verb needs, in one line, up front.

A plain ``pip install ltm`` gives the CLI and the MCP shim. Running a server
needs ``ltm[server]`` (waitress serves HTTP, chalice routes, powertools logs,
PyJWT with cryptography checks Cognito sign-ins). A verb that needs an extra
calls :func:`require` before it does anything, so nothing is half done (no
database created by ``server init`` for a server that cannot run) and the user
reads one line saying what to install, not a ModuleNotFoundError.
"""

from __future__ import annotations

from ltm.cli.errors import CliError

# extra -> the top-level modules it provides (import names, not distribution names)
EXTRAS: dict[str, tuple[str, ...]] = {
    "server": ("waitress", "chalice", "aws_lambda_powertools", "jwt", "cryptography"),
    "aws": ("boto3", "botocore"),
}


def missing(extra: str) -> list[str]:
    """The modules of ``extra`` that cannot be imported here (found, not imported: cheap)."""
    from importlib.util import find_spec

    absent = []
    for module in EXTRAS[extra]:
        try:
            found = find_spec(module) is not None
        except (ImportError, ValueError):  # a broken install, or a module set to None
            found = False
        if not found:
            absent.append(module)
    return absent


def hint(extra: str) -> str:
    return f"pip install 'ltm[{extra}]'"


def require(extra: str, what: str) -> None:
    """Raise a one-line ``CliError`` naming the extra when any of its modules is missing."""
    absent = missing(extra)
    if absent:
        raise CliError(
            f"{what} needs the {extra} extra (missing: {', '.join(absent)}); install it with:"
            f" {hint(extra)}"
        )


def extra_for(module: str | None) -> str | None:
    """The extra that provides ``module`` (a dotted name is taken by its top level)."""
    top = (module or "").split(".", 1)[0]
    return next((extra for extra, modules in EXTRAS.items() if top in modules), None)
