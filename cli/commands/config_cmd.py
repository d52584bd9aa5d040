"""ltm config: read and change settings (the default server, the network timeout, ...)."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from ltm.cli.errors import CliError
from ltm.cli.terminal.output import info

app = typer.Typer(
    help="Read and change settings: host (the default server), timeout (seconds),"
    " browser (open one for ltm auth: true/false); user, output, lenient, editor are"
    " kept for the reference CLI, which shares config.toml.",
    no_args_is_help=True,
)

KEYS = {
    "host": "the server every verb goes to (empty: the local store)",
    "timeout": "seconds to wait for the server (default 10)",
    "browser": "open a browser for ltm auth's sign-in page (true/false, default true)",
    "user": "the reference CLI's user setting (LTM_USER overrides it)",
    "output": "the reference CLI's output format (LTM_OUTPUT overrides it)",
    "lenient": "the reference CLI's lenient setting (true/false)",
    "editor": "the reference CLI's editor for ltm config edit",
}
REFERENCE_KEYS = ("user", "output", "lenient", "editor")  # in config.toml, as the reference has
ENV = {"host": "LTM_HOST", "timeout": "LTM_TIMEOUT", "user": "LTM_USER", "output": "LTM_OUTPUT"}
BOOLEAN = {"true": True, "1": True, "yes": True, "on": True}
BOOLEAN |= {"false": False, "0": False, "no": False, "off": False}


def _complete_key(incomplete: str) -> list[tuple[str, str]]:
    """Tab completion: the setting names, each with what it is."""
    return [(name, about) for name, about in KEYS.items() if name.startswith(incomplete)]


Key = Annotated[
    str,
    typer.Argument(metavar="KEY", help=f"One of: {', '.join(KEYS)}.", autocompletion=_complete_key),
]


def _key(key: str) -> str:
    name = key.strip().lower()
    if name not in KEYS:
        raise CliError(f"unknown setting {key!r}; known: {', '.join(KEYS)}", exit_code=2)
    return name


def _read(name: str) -> Any:
    """The value in effect: the environment variable first, as the reference's ``Resolve``."""
    import os

    if os.environ.get(ENV.get(name, "")):
        value = os.environ[ENV[name]]
        if name == "host":
            from ltm.cli.client.credentials import normalize_host

            return normalize_host(value)
        return value
    if name == "host":
        from ltm.cli.client.credentials import default_host

        return default_host()
    if name in REFERENCE_KEYS:
        from ltm.cli.config import load_reference, reference_value

        return reference_value(load_reference(), name)
    from ltm.cli.config import load_settings

    return load_settings().get(name)


@app.command("get")
def get(
    key: Annotated[str | None, typer.Argument(metavar="KEY", autocompletion=_complete_key)] = None,
) -> None:
    """Print one setting (exit 1 when it is not set), or every setting without KEY."""
    if key is None:
        for name in KEYS:
            value = _read(name)
            print(f"{name}={'' if value is None else _show(value)}")
        return
    value = _read(_key(key))
    if value is None:
        raise typer.Exit(1)
    print(_show(value))


@app.command("list")
def list_() -> None:
    """Print every setting (as get without KEY; the reference CLI's name for it)."""
    get(None)


@app.command("path")
def path() -> None:
    """Print the path of config.toml, the file the reference CLI shares (settings.toml,
    this CLI's own, is beside it)."""
    from ltm.cli.config import REFERENCE_FILE, config_dir

    print(config_dir() / REFERENCE_FILE)


@app.command("set", context_settings={"ignore_unknown_options": True})  # timeout -1: said
def set_(
    key: Key,
    value: Annotated[str, typer.Argument(metavar="VALUE")],
) -> None:
    """Change one setting."""
    name = _key(key)
    if name == "host":
        from ltm.cli.client import credentials

        if not value.strip():
            credentials.set_default(None)
            info("no default server; verbs use the local store")
            return
        host = credentials.normalize_host(value)
        credentials.set_default(host)
        signed_in = credentials.token_for(host) is not None
        info(f"default server: {host}" + ("" if signed_in else f" (sign in: ltm auth {host})"))
        if warning := credentials.plain_http_warning(host):
            info(warning)
        _say_overridden(name)
        return
    parsed: Any
    if name == "timeout":
        from ltm.cli.config import timeout_seconds

        try:
            parsed = timeout_seconds(value)
            if parsed.is_integer():
                parsed = int(parsed)  # kept as typed in settings.toml: 30, not 30.0
        except ValueError as exc:
            raise CliError(str(exc), exit_code=2) from None
    elif name in ("browser", "lenient"):
        if value.strip().lower() not in BOOLEAN:
            raise CliError(f"{name} must be true or false, got {value!r}", exit_code=2)
        parsed = BOOLEAN[value.strip().lower()]
    else:
        parsed = value or None  # the reference's empty string is an unset key
    _write(name, parsed)
    info(f"{name}={_show(parsed)}" if parsed is not None else f"{name} unset")
    _say_overridden(name)


@app.command("unset")
def unset(key: Key) -> None:
    """Go back to the default for one setting."""
    name = _key(key)
    if name == "host":
        from ltm.cli.client.credentials import set_default

        set_default(None)
        info("no default server; verbs use the local store")
    else:
        _write(name, None)
        info(f"{name} unset")
    _say_overridden(name)


def _say_overridden(name: str) -> None:
    """A setting changed while its environment variable is set: said, as ltm config get and
    every verb go on taking the variable's value in this environment."""
    import os

    variable = ENV.get(name, "")
    if os.environ.get(variable):
        info(f"note: {variable}={os.environ[variable]} overrides it in this environment")


def _write(name: str, value: Any) -> None:
    if name in REFERENCE_KEYS:
        from ltm.cli.config import update_reference

        update_reference(**{name: value})
        return
    from ltm.cli.config import update_settings

    def change(settings: dict[str, Any]) -> None:
        if value is None:
            settings.pop(name, None)
        else:
            settings[name] = value

    update_settings(change)


def _show(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)
