"""The start-up of the ``ltm`` command.

``entry`` is the console script: it hands ``ltm hook`` and a bare ``ltm mcp`` (what
machines run with fixed arguments) straight to their code, and everything else to
``main``, which builds typer with the one verb being run.
"""
