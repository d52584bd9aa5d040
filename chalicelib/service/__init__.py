"""The rules of the ltm API, framework-free.

Each module takes a ``Store`` and a caller and either returns a result or
raises a ``ServiceError`` whose status and message are the protocol's. The
Chalice routes in ``app.py`` and the embedded local backend of the CLI are
thin callers of these functions, so every rule exists exactly once.
"""
