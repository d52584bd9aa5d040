"""Console entry point: answer the cheapest requests fast, and never show a traceback.

``--version``, ``example``, ``save``, ``ls``, ``resume``, ``show``, ``search``, ``log``,
``export``, ``import``, ``hook`` and plain ``mcp`` skip loading the argument parser
(``ltm.cli.start.fast``: typer costs more than the whole rest of the start-up), and so
does the top-level help (``ltm.cli.start.help``). Everything else goes through
``ltm.cli.start.main``.
"""

from __future__ import annotations

import os
import sys

HOST_FLAGS = ("-H", "--host")
# What ltm.cli.start.fast answers when the rest of the command line is a plain form of it.
FAST_VERBS = (
    "--version",
    "example",
    "save",
    "ls",
    "resume",
    "show",
    "search",
    "log",
    "export",
    "import",
)


def take_host(argv: list[str]) -> list[str]:
    """``argv`` without ``-H/--host URL``, which becomes ``LTM_HOST`` for this process.

    Every verb that talks to a server honours ``LTM_HOST``, so one option serves
    them all: ``ltm -H https://team.example ls -t core`` uses that server (and its
    token from hosts.json) for this command, and leaves the default where it is.
    Accepted anywhere before a ``--``.
    """
    out: list[str] = []
    i = 0
    while i < len(argv):
        arg = argv[i]
        if arg == "--":
            out += argv[i:]
            break
        if arg in HOST_FLAGS:
            if i + 1 >= len(argv) or not argv[i + 1] or argv[i + 1].startswith("-"):
                from ltm.cli.errors import CliError

                raise CliError(f"{arg} needs a server URL: ltm {arg} URL VERB …", exit_code=2)
            os.environ["LTM_HOST"] = argv[i + 1]
            i += 2
        elif arg.startswith("--host="):
            os.environ["LTM_HOST"] = arg.removeprefix("--host=")
            i += 1
        else:
            out.append(arg)
            i += 1
    return out


def _fast_path(argv: list[str]) -> bool:
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
    if argv in ([], ["--help"], ["-h"]):
        from ltm.cli.start.help import answer

        return answer(argv)
    if argv[:1] and argv[0] in FAST_VERBS:
        from ltm.cli.start import fast

        return fast.run(argv)
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


def main(argv: list[str] | None = None) -> None:
    _skip_the_collector_at_exit()
    args = sys.argv[1:] if argv is None else argv
    try:
        if any(a in HOST_FLAGS or a.startswith("--host=") for a in args):
            args = take_host(args)
        if not _fast_path(args):
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
