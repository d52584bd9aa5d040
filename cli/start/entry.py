"""Console entry point: every verb through the parser, and never a traceback.

What machines call with fixed arguments at every session (``ltm hook EVENT``, a bare
``ltm mcp``, a shell's tab-completion request) is dispatched before the parser loads;
everything else goes to typer (``ltm.cli.start.main``).
"""

from __future__ import annotations

import os
import sys
from typing import NoReturn


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


def _stand_in_for_closed_streams() -> None:
    """Give a standard stream its caller closed (``ltm save - <&-``, ``ltm ls >&-``) a
    stand-in: /dev/null, read as empty, written to as nowhere.

    Python sets such a stream to None, so every ``isatty``, read and ``buffer`` write on it
    failed with an AttributeError ("unexpected error"), and a print to a closed stderr
    went to stdout instead. Opened in order, each takes its own descriptor number back
    (the lowest free one), which an editor or a server the verb starts then inherits.
    """
    for name, mode in (("stdin", "r"), ("stdout", "w"), ("stderr", "w")):
        if getattr(sys, name) is None:
            setattr(sys, name, open(os.devnull, mode, encoding="utf-8"))  # noqa: SIM115


def _reader_gone() -> NoReturn:
    """Exit 0, silently, once standard output's reader went away (``ltm ls | head -1``).

    Not an error: the reader had what it wanted, and a script under ``set -o pipefail``
    should not fail for it. What is still buffered for stdout would fail again as Python
    flushes it on the way out (a status of 120); it goes to /dev/null instead, as
    https://docs.python.org/3/library/signal.html#note-on-sigpipe does it.
    """
    from contextlib import suppress

    devnull = os.open(os.devnull, os.O_WRONLY)
    with suppress(OSError, ValueError):  # no descriptor to point elsewhere: nothing buffered
        os.dup2(devnull, sys.stdout.fileno())
    sys.exit(0)


def main(argv: list[str] | None = None) -> None:
    _skip_the_collector_at_exit()
    _stand_in_for_closed_streams()
    _utf8_stdout()
    args = sys.argv[1:] if argv is None else argv
    from ltm.cli.errors import ReaderGone

    try:
        if not _machine_entry(args):
            from ltm.cli.start.main import run

            run(args)
        sys.stdout.flush()  # a reader gone by now is found here, not in Python's shutdown
    except KeyboardInterrupt:
        print("ltm: interrupted", file=sys.stderr)
        sys.exit(130)
    except (BrokenPipeError, ReaderGone):
        _reader_gone()
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
