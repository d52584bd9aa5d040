"""``python -m ltm.cli``: the ``ltm`` command where no ``ltm`` script is on PATH."""

from ltm.cli.start.entry import main

main()
