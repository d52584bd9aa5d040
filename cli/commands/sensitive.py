"""ltm sensitive: your own redaction patterns, on top of the built-in ones."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from ltm.cli.errors import CliError
from ltm.cli.terminal.output import info

app = typer.Typer(
    help="Manage your own redaction patterns (kept in settings.toml) and test the scanner.",
    no_args_is_help=True,
)


def _patterns() -> list[dict[str, Any]]:
    from ltm.cli.config import load_settings, sensitive_patterns

    return sensitive_patterns(load_settings())


# A pattern or a text may start with a dash (-----BEGIN, --password=): taken as it is,
# not refused as an unknown option (-h and --help still ask for help).
AS_GIVEN = {"ignore_unknown_options": True}


@app.command("add", context_settings=AS_GIVEN)
def add(
    kind: Annotated[str, typer.Argument(help="A short name, e.g. internal-host.")],
    regex: Annotated[
        str,
        typer.Argument(
            help="A regular expression in RE2 syntax (linear-time: no backreferences, "
            "look-arounds or possessive quantifiers; \\w, \\d and \\b are ASCII)."
        ),
    ],
) -> None:
    """Block packets that contain text matching REGEX, reported as KIND.

    Patterns run on RE2, which matches in linear time: no pattern can
    backtrack catastrophically and hang a save or push.
    """
    from ltm import redact
    from ltm.cli.config import sensitive_patterns, update_settings

    try:
        rule = redact.compile_user_rule(kind, regex)
    except ValueError as exc:
        raise CliError(str(exc), exit_code=2) from None

    def change(settings: dict[str, Any]) -> list[dict[str, Any]]:
        patterns = sensitive_patterns(settings)
        settings["sensitive"] = [p for p in patterns if p.get("kind") != kind] + [
            {"kind": kind, "regex": regex}
        ]
        return [p for p in patterns if p.get("kind") == kind]

    replaced = update_settings(change)
    info(f"replaced pattern {kind}" if replaced else f"added pattern {kind}")
    if _matches_ordinary_text(rule):
        info(
            f"ltm: warning: pattern {kind} matches ordinary text (in ltm example's packet):"
            " every save and push holding such text will be refused; narrow it, or remove"
            f" it: ltm sensitive rm {kind}"
        )


def _matches_ordinary_text(rule: Any) -> bool:
    """Whether ``rule`` finds something in the example packet, text with no secret in it:
    a pattern such as ``.+`` or ``[a-z]+`` would then block every save."""
    from ltm import redact
    from ltm.examples import example_bytes

    return any(kind == rule.kind for kind, _ in redact.scan_text(example_bytes().decode(), [rule]))


@app.command("ls")
def ls() -> None:
    """List your patterns."""
    from ltm.cli.terminal.output import safe

    for pattern in _patterns():  # a hand-edited file may hold a control character: escaped
        print(f"{safe(str(pattern.get('kind')))}\t{safe(str(pattern.get('regex')))}")


def _complete_kind(incomplete: str) -> list[tuple[str, str]]:
    """Tab completion: the names of the user's patterns, each with its pattern (in plain
    characters: zsh evals the descriptions, and a regex is made of the others)."""
    from ltm.cli.commands.completion import plain

    try:
        patterns = _patterns()
    except Exception:  # a damaged settings.toml: no candidates, never an error at a prompt
        return []
    return [
        (kind, plain(str(p.get("regex"))))
        for p in patterns
        if isinstance(kind := p.get("kind"), str) and kind.startswith(incomplete)
    ]


@app.command("rm")
def rm(
    kind: Annotated[str, typer.Argument(help="The pattern's name.", autocompletion=_complete_kind)],
) -> None:
    """Remove one of your patterns."""
    from ltm.cli.config import sensitive_patterns, update_settings

    def change(settings: dict[str, Any]) -> None:
        patterns = sensitive_patterns(settings)
        kept = [p for p in patterns if p.get("kind") != kind]
        if len(kept) == len(patterns):
            raise CliError(f"no pattern named {kind!r}")
        settings["sensitive"] = kept

    update_settings(change)
    info(f"removed pattern {kind}")


@app.command("test", context_settings=AS_GIVEN)
def test(
    text: Annotated[
        str | None,
        typer.Argument(
            help="The text to scan; without it, standard input (a real secret then stays"
            " out of your shell history and other users' ps)."
        ),
    ] = None,
) -> None:
    """Scan TEXT with the built-in and your patterns; exit 1 when anything matches."""
    import sys

    from ltm import redact
    from ltm.cli.client.preflight import user_rules

    if text is None:
        if sys.stdin.isatty():
            info("paste the text, then Ctrl-D")
        text = sys.stdin.read()

    hits = redact.scan_text(text, user_rules())
    for kind, match in hits:
        print(f"{kind}: {match}")
    if not hits:
        info("no match")
        return
    raise typer.Exit(1)
