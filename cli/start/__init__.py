"""The start-up dispatch: the cheapest verbs answer without the argument parser.

``entry`` is the console script; it hands plain forms of the fast verbs to
``fast`` and everything else to ``main``, which builds typer for one verb.
"""
