"""Console entry point: answer the cheapest requests fast, and never show a traceback.

``--version``, ``example``, ``ls``, ``resume``, ``show``, ``search`` and ``log`` skip
loading the argument parser (``ltm.cli.fast``: typer costs more than the whole
rest of the start-up). Everything else goes through ``ltm.cli.main``.
"""

from __future__ import annotations

import os
import sys


def _fast_path(argv: list[str]) -> bool:
    if argv[:1] in (["--version"], ["example"], ["ls"], ["resume"], ["show"], ["search"], ["log"]):
        from ltm.cli import fast

        return fast.run(argv)
    return False


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    try:
        if not _fast_path(args):
            from ltm.cli.main import run

            run(args)
    except KeyboardInterrupt:
        print("ltm: interrupted", file=sys.stderr)
        sys.exit(130)
    except BrokenPipeError:
        # The reader went away (ltm ls | head); that is not an error.
        sys.stderr.close()
        sys.exit(0)
    except Exception as exc:
        from ltm.cli.errors import CliError

        if os.environ.get("LTM_DEBUG"):
            raise
        if isinstance(exc, CliError):
            print(f"ltm: {exc.message}", file=sys.stderr)
            sys.exit(exc.exit_code)
        print(f"ltm: unexpected error: {type(exc).__name__}: {exc}", file=sys.stderr)
        print("ltm: run again with --debug for details", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
