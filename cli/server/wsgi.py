"""A WSGI application that serves a Chalice app the way API Gateway does.

Each request becomes the API Gateway REST proxy event that Chalice handles on
Lambda (resource path, path parameters, multi-value query, headers, body), so
the self-hosted server runs exactly the code that Lambda runs. What API
Gateway would answer by itself is answered here, as JSON errors:

- an unknown path: 404 ``{"error": "not found"}``;
- a known path with another method: 405 ``{"error": "method not allowed"}``
  with ``Allow`` (HEAD is served as GET without the body);
- a body over its route's bound (``chalicelib.limits``): 413 (the server
  refuses it from the head already; this holds behind any WSGI server);
- a path that is not UTF-8 after percent-decoding: 404.

Nothing here raises to the server: an unexpected error is logged and becomes
a 500 JSON error (the tests hold the app to never producing one).
"""

from __future__ import annotations

import base64
import json
import logging
import re
import time
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from http import HTTPStatus
from typing import Any
from urllib.parse import parse_qs, unquote_to_bytes

from ltm import limits

STAGE = "local"

StartResponse = Callable[..., Any]


@dataclass(frozen=True, slots=True)
class _Route:
    template: str
    segments: tuple[str | None, ...]  # None where a path parameter goes
    params: tuple[tuple[int, str], ...]  # (segment index, name)
    methods: frozenset[str]


def _compile(template: str, methods: Iterable[str]) -> _Route:
    segments: list[str | None] = []
    params: list[tuple[int, str]] = []
    for index, part in enumerate(template.split("/")):
        if part.startswith("{") and part.endswith("}"):
            segments.append(None)
            params.append((index, part[1:-1]))
        else:
            segments.append(part)
    return _Route(template, tuple(segments), tuple(params), frozenset(methods))


class _Refusal(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


class _Context:
    """The few attributes of a Lambda context anything might read."""

    function_name = "ltm-local"
    memory_limit_in_mb = 0
    invoked_function_arn = ""

    def __init__(self, request_id: str) -> None:
        self.aws_request_id = request_id

    @staticmethod
    def get_remaining_time_in_millis() -> int:
        return 30_000


def _reason(status: int) -> str:
    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return "Unknown"


class ChaliceWSGI:
    """Serve ``chalice_app`` (a ``chalice.Chalice``) as a WSGI application."""

    def __init__(
        self,
        chalice_app: Any,
        *,
        logger: logging.Logger | Any | None = None,
    ) -> None:
        self.app = chalice_app
        self.log = logger or logging.getLogger("ltm.server")
        self._static: dict[str, _Route] = {}
        self._by_length: dict[int, list[_Route]] = {}
        for template, entries in chalice_app.routes.items():
            route = _compile(template, entries.keys())
            if not route.params:
                self._static[template] = route
            else:
                self._by_length.setdefault(len(route.segments), []).append(route)
        for routes in self._by_length.values():
            # Literal segments win over parameters, as on API Gateway.
            routes.sort(key=lambda r: -sum(s is not None for s in r.segments))

    # -- routing ---------------------------------------------------------------

    def match(self, path: str) -> tuple[_Route, dict[str, str]] | None:
        route = self._static.get(path)
        if route is not None:
            return route, {}
        parts = path.split("/")
        for route in self._by_length.get(len(parts), ()):
            if all(s is None or s == p for s, p in zip(route.segments, parts, strict=True)):
                values = {name: parts[index] for index, name in route.params}
                if all(values.values()):
                    return route, values
        return None

    # -- WSGI ------------------------------------------------------------------

    def __call__(self, environ: dict[str, Any], start_response: StartResponse) -> list[bytes]:
        started = time.perf_counter()
        request_id = uuid.uuid4().hex
        method = environ.get("REQUEST_METHOD", "GET").upper()
        try:
            status, headers, body = self._handle(environ, method, request_id, started)
        except Exception:
            self.log.exception("unhandled error in the HTTP adapter")
            status, headers, body = self._error(500, "internal server error", request_id)
        start_response(f"{status} {_reason(status)}", headers)
        # No HEAD answer has a body, the adapter's own errors included (RFC 9110 §9.3.2):
        # waitress sends what it is given, and a kept-alive client would read it as the
        # start of its next answer.
        return [b"" if method == "HEAD" else body]

    def _handle(
        self, environ: dict[str, Any], method: str, request_id: str, started: float
    ) -> tuple[int, list[tuple[str, str]], bytes]:
        raw_path = _path(environ)
        try:
            path = raw_path.encode("latin-1").decode("utf-8")
        except (UnicodeEncodeError, UnicodeDecodeError):
            return self._refuse(404, "not found", method, "-", request_id, started)
        matched = self.match(path)
        if matched is None:
            return self._refuse(404, "not found", method, path, request_id, started)
        route, path_params = matched
        head = method == "HEAD"
        call_method = "GET" if head and "GET" in route.methods else method
        if call_method not in route.methods:
            allow = sorted(route.methods | ({"HEAD"} if "GET" in route.methods else set()))
            status, headers, body = self._refuse(
                405, "method not allowed", method, route.template, request_id, started
            )
            headers.append(("Allow", ", ".join(allow)))
            return status, headers, body

        try:
            raw_body = self._read_body(environ, limits.body_limit(call_method, route.template))
        except _Refusal as refusal:
            where = route.template if refusal.status == 413 else path
            return self._refuse(refusal.status, refusal.message, method, where, request_id, started)

        event = self._event(environ, call_method, path, route, path_params, raw_body, request_id)
        response = self.app(event, _Context(request_id))
        status = int(response["statusCode"])
        headers = [(k, str(v)) for k, v in (response.get("headers") or {}).items()]
        for name, values in (response.get("multiValueHeaders") or {}).items():
            headers.extend((name, str(v)) for v in values)
        body = response.get("body") or b""
        if response.get("isBase64Encoded"):
            body = base64.b64decode(body)
        elif isinstance(body, str):
            body = body.encode("utf-8")
        if status in (204, 304) or head:
            if status not in (204, 304):
                headers.append(("Content-Length", str(len(body))))
            body = b""
        else:
            headers.append(("Content-Length", str(len(body))))
        return status, headers, body

    def _read_body(self, environ: dict[str, Any], limit: int) -> bytes:
        """The request body, never read past ``limit`` (``_Refusal`` 400/413 otherwise).

        The server has the body whole by now (waitress reads it before a worker
        runs the app, a chunked one too: then CONTENT_LENGTH is what it decoded).
        """
        length_header = environ.get("CONTENT_LENGTH")
        if not length_header:
            return b""
        try:
            length = int(length_header)
        except ValueError:
            length = -1
        if length < 0:
            raise _Refusal(400, "invalid Content-Length")
        if length > limit:
            raise _Refusal(413, limits.too_large(limit))
        if not length:
            return b""
        body: bytes = environ["wsgi.input"].read(length)
        if len(body) != length:  # never serve part of a body
            raise _Refusal(400, "request body shorter than its Content-Length")
        return body

    def _event(
        self,
        environ: dict[str, Any],
        method: str,
        path: str,
        route: _Route,
        path_params: dict[str, str],
        raw_body: bytes,
        request_id: str,
    ) -> dict[str, Any]:
        headers: dict[str, str] = {}
        for key, value in environ.items():
            if key.startswith("HTTP_"):
                headers[key[5:].replace("_", "-").lower()] = _text(value)
        if environ.get("CONTENT_TYPE"):
            headers["content-type"] = _text(environ["CONTENT_TYPE"])
        if raw_body:
            headers["content-length"] = str(len(raw_body))
        host = headers.get("host") or f"{environ.get('SERVER_NAME', 'localhost')}:" + str(
            environ.get("SERVER_PORT", "")
        )
        headers.setdefault("host", host)
        query = environ.get("QUERY_STRING", "")
        multi = parse_qs(_text(query), keep_blank_values=True, errors="replace") if query else None
        body: str | None = None
        is_b64 = False
        if raw_body:
            try:
                body = raw_body.decode("utf-8")
            except UnicodeDecodeError:
                body, is_b64 = base64.b64encode(raw_body).decode("ascii"), True
        return {
            "resource": route.template,
            "path": path,
            "httpMethod": method,
            "headers": headers,
            "multiValueHeaders": None,
            "queryStringParameters": {k: v[-1] for k, v in multi.items()} if multi else None,
            "multiValueQueryStringParameters": multi or None,
            "pathParameters": path_params or None,
            "stageVariables": None,
            "requestContext": {
                "resourcePath": route.template,
                "httpMethod": method,
                "path": path,
                "requestId": request_id,
                "stage": STAGE,
                "domainName": host,
                "identity": {"sourceIp": environ.get("REMOTE_ADDR", "")},
            },
            "body": body,
            "isBase64Encoded": is_b64,
        }

    # -- errors the adapter answers itself --------------------------------------------

    def _error(
        self, status: int, message: str, request_id: str
    ) -> tuple[int, list[tuple[str, str]], bytes]:
        body = json.dumps({"error": message}, separators=(",", ":")).encode()
        headers = [
            ("Content-Type", "application/json"),
            ("Cache-Control", "no-store"),
            ("X-Request-Id", request_id),
            ("Content-Length", str(len(body))),
        ]
        return status, headers, body

    def _refuse(
        self, status: int, message: str, method: str, path: str, request_id: str, started: float
    ) -> tuple[int, list[tuple[str, str]], bytes]:
        from ltm.logs import loggable_path

        self.log.info(
            "request",
            extra={
                "access": {
                    "method": method,
                    "path": loggable_path(path[:256]),
                    "status": status,
                    "latency_ms": round((time.perf_counter() - started) * 1000, 3),
                    "request_id": request_id,
                }
            },
        )
        return self._error(status, message, request_id)


def _text(value: str) -> str:
    """WSGI strings carry bytes as latin-1; headers and queries are UTF-8 on the wire."""
    try:
        return value.encode("latin-1").decode("utf-8")
    except (UnicodeEncodeError, UnicodeDecodeError):
        return value


_ENCODED_SLASH = re.compile("%2f", re.IGNORECASE)


def _path(environ: dict[str, Any]) -> str:
    """PATH_INFO, except that an encoded slash (``%2F``) stays in its segment as it came, as
    API Gateway keeps a path parameter whole: waitress decodes it into a separator, and
    ``/p/..%2Fetc`` would then miss its route (and the headers that route's answers carry)."""
    raw = environ.get("REQUEST_URI", "").split("?", 1)[0]
    if not raw.startswith("/") or not _ENCODED_SLASH.search(raw):
        return str(environ.get("PATH_INFO", "")) or "/"
    parts = _ENCODED_SLASH.split(raw)
    return "%2F".join(unquote_to_bytes(part).decode("latin-1") for part in parts)
