"""Self-hosting: serve the Chalice app of ``app.py`` over HTTP, on SQLite.

- ``loader``: finds ``app.py`` (the repo root in a checkout, ``share/ltm`` when
  installed) and makes ``import chalicelib...`` inside it resolve to the very
  modules of the installed ``ltm`` package;
- ``wsgi``: turns a WSGI request into the API Gateway proxy event Chalice
  handles on Lambda (routing, 404/405, each route's body bound: ``ltm.limits``);
- ``http``: the HTTP server (waitress) with JSON errors, strict framing and deadlines;
- ``commands``: ``ltm server init|run|issue-token|tokens|revoke-token``.

Only ``commands`` is imported when the CLI starts, and it imports nothing
heavy at module level.
"""
