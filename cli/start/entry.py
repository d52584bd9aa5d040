"""Console entry point: every verb through the parser, and never a traceback.

What machines call with fixed arguments at every session (``ltm hook EVENT``, a bare
``ltm mcp``, a shell's tab-completion request) is dispatched before the parser loads;
everything else goes to typer (``ltm.cli.start.main``).
"""

from __future__ import annotations

import os
import sys


def _machine_entry(argv: list[str]) -> bool:
    if os.environ.get("_LTM_COMPLETE"):
        # A shell asks for tab completions (ltm completion): the parser answers; no verb runs.
        from ltm.cli.commands.completion import respond

        respond(argv)
        return True
    if argv == ["mcp"]:
        # An MCP client starts this at every session: skip typer, the SDK costs enough.
        from ltm.cli.agents.mcp import warm

        if warm.enabled():
            status = warm.hand_over()  # served by a warm process that imported the SDK
            if status is not None:
                sys.exit(status)
        from ltm.cli.agents.mcp.server import serve

        serve()
        return True
    if argv[:1] == ["hook"]:
        # Agent harnesses run this at every session start: no typer, and it never fails.
        from ltm.cli.agents.hook import main

        main(argv[1:])
        return True
    return False


def _skip_the_collector_at_exit() -> None:
    """Once the command is done, leave every object out of the garbage collector's passes.

    A command's process ends with it, and Python's shutdown runs the collector several
    times over every object, all of which die with the process anyway: a good share of
    a short command's time (BENCHMARKS.md, CLI start-up). Frozen
    objects (``gc.freeze``) are still freed as modules are torn down; only garbage in
    reference cycles is left to the process's end, with finalizers that Python does not
    promise to run at exit anyway (https://docs.python.org/3/reference/datamodel.html#object.__del__).
    Registered first, it runs after every other exit handler (``atexit`` runs them last
    in, first out): theirs still see a collector that works.
    """
    global _exit_registered
    if not _exit_registered:
        import atexit
        import gc

        atexit.register(gc.freeze)
        _exit_registered = True


_exit_registered = False


def _utf8_stdout() -> None:
    """Write stdout in UTF-8 when it is not a terminal.

    Packets are UTF-8, and so is what reads ltm's output there: an agent harness (a hook's
    answer), an agent's shell tool, a file, the next program of a pipe. On Windows a
    pipe's encoding is the ANSI code page (cp1252), which cannot write an arrow, a check
    mark or CJK text: ``ltm ls`` and the hooks failed on such a packet. A terminal keeps
    its own encoding (Windows' console writes any text already).
    """
    stdout = sys.stdout
    encoding = (getattr(stdout, "encoding", None) or "").lower().replace("-", "")
    if encoding != "utf8" and hasattr(stdout, "reconfigure") and not stdout.isatty():
        stdout.reconfigure(encoding="utf-8")


def main(argv: list[str] | None = None) -> None:
    _skip_the_collector_at_exit()
    _utf8_stdout()
    args = sys.argv[1:] if argv is None else argv
    try:
        if not _machine_entry(args):
            from ltm.cli.start.main import run

            run(args)
    except KeyboardInterrupt:
        print("ltm: interrupted", file=sys.stderr)
        sys.exit(130)
    except BrokenPipeError:
        # The reader went away (ltm ls | head); that is not an error.
        sys.stderr.close()
        sys.exit(0)
    except Exception as exc:
        from ltm.errors import Failure

        if os.environ.get("LTM_DEBUG"):
            raise
        from ltm.cli.terminal.output import safe

        # Error lines quote packet text and server replies: no terminal control gets through.
        if isinstance(exc, Failure):  # CliError, and the shared rules' failures
            print(f"ltm: {safe(exc.message, multiline=True)}", file=sys.stderr)
            sys.exit(exc.exit_code)
        if isinstance(exc, ModuleNotFoundError):
            from ltm.cli.start.extras import extra_for, hint

            extra = extra_for(exc.name)
            if extra is not None:  # a path no verb declared: still say what to install
                print(f"ltm: this needs the {extra} extra; install it with: {hint(extra)}",
                      file=sys.stderr)  # fmt: skip
                sys.exit(1)
        detail = safe(f"{type(exc).__name__}: {exc}", multiline=True)
        print(f"ltm: unexpected error: {detail}", file=sys.stderr)
        print("ltm: run again with --debug for details", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
