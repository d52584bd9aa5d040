"""The ltm HTTP API: one Chalice app, on Lambda and behind ``ltm server run``.

Routes are thin: read the request, call ``chalicelib.service``, shape the JSON.
Every rule (scopes, roles, tokens, invites) lives in the service modules, and
every refusal is a ``ServiceError`` that becomes ``{"error": message}`` with
its status. Paths, bodies, statuses and error strings follow the protocol's
HTTP table, so the Go reference CLI works against this server unchanged.

The store comes from the environment (``LTM_STORE``, ``LTM_DB``; see
``chalicelib.store.select``), opened once per process. Self-hosted, ``ltm
server run`` sets those and serves this app through a WSGI adapter, which
also answers what never reaches a route here: unknown paths (404), wrong
methods (405) and bodies over their route's bound (413, before reading them;
``chalicelib.limits``). On API
Gateway, unknown paths and methods are answered by API Gateway itself.
"""

from __future__ import annotations

import json
import os
import re
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from functools import wraps
from typing import Any

from chalice import Chalice, Response

from chalicelib import limits, stage_settings
from chalicelib.logs import loggable_path, make_logger
from chalicelib.search import next_step_of
from chalicelib.service import invites, packets, publish, teams, tokens
from chalicelib.service import search as searching
from chalicelib.service.access import Credential
from chalicelib.service.errors import BadRequest, PayloadTooLarge, ServiceError
from chalicelib.store import (
    BUSY_MESSAGE,
    FULL_SCOPE,
    DeviceGrant,
    Member,
    PacketMeta,
    Store,
    Team,
    User,
)
from chalicelib.store import unavailable as store_unavailable
from chalicelib.store.select import open_store

PROTOCOL_VERSION = "0.2"
JSON_HEADERS = {"Content-Type": "application/json", "Cache-Control": "no-store"}
# Seconds a client is asked to wait when the database is busy (a 503): DynamoDB's
# throttling lifts within a second or two as capacity adapts.
BUSY_RETRY_AFTER = 1

stage_settings.apply()  # before anything reads the stage's variables

logger = make_logger()


class _ThreadSafeChalice(Chalice):
    """Chalice keeps the current request on the app object; keep it per thread.

    On Lambda one process serves one request at a time, but ``ltm server run``
    serves many at once from a thread pool, and a shared ``current_request``
    would hand one thread's request to another's view.
    """

    _per_thread = threading.local()

    @property
    def current_request(self) -> Any:
        return getattr(self._per_thread, "request", None)

    @current_request.setter
    def current_request(self, value: Any) -> None:
        self._per_thread.request = value

    @property
    def lambda_context(self) -> Any:
        return getattr(self._per_thread, "context", None)

    @lambda_context.setter
    def lambda_context(self, value: Any) -> None:
        self._per_thread.context = value


# configure_logs=False: Chalice would claim the "ltm" logger (stdout, ERROR level) that
# the powertools Logger above writes the access log through.
app = _ThreadSafeChalice(app_name="ltm", configure_logs=False)
# Every body in and out is JSON text: no binary media types (and no per-request checks for them).
app.api.binary_types = []


class UnsupportedMediaType(ServiceError):
    """415: an HTTP matter (the service layer takes bytes), so it lives here."""

    status = 415


# -- the store ------------------------------------------------------------

_store: Store | None = None
_store_lock = threading.Lock()


def get_store() -> Store:
    """The process's store, opened on first use from the environment."""
    global _store
    if _store is None:
        with _store_lock:
            if _store is None:
                _store = open_store()
                _say_repairs_owed(_store)
    return _store


def _say_repairs_owed(store: Store) -> None:
    """A line in the log, at a process's (a Lambda container's) start, when the table
    needs a repair after an upgrade: an operator who skipped it sees nothing else go
    wrong, only searches that miss older packets and counters that are off."""
    if owed := store.repairs_owed():
        from chalicelib.store.dynamo import repairs_owed_line

        logger.warning(repairs_owed_line(owed), extra={"repairs_owed": owed})


def close_store() -> None:
    global _store
    with _store_lock:
        if _store is not None:
            _store.close()
            _store = None


# -- request and response helpers --------------------------------------------


def _json(body: Any, status: int = 200) -> Response:
    return Response(body=body, status_code=status, headers=dict(JSON_HEADERS))


def _error(status: int, message: str) -> Response:
    return _json({"error": message}, status)


def _unhandled(exc: Exception) -> Response:
    """The answer to an error no rule foresaw: 503 with Retry-After when the database
    only cannot serve the request for the moment (DynamoDB throttled it past the SDK's
    retries, or is out of reach; SQLite's disk is full: not the caller's fault, and a
    client keeps a push it got a 503 for), else 500; logged with its traceback either way."""
    if store_unavailable(exc):
        logger.warning("the database is busy", exc_info=True)
        response = _error(503, BUSY_MESSAGE)
        response.headers["Retry-After"] = str(BUSY_RETRY_AFTER)
        return response
    logger.exception("unhandled error")
    return _error(500, "internal server error")


def _no_content() -> Response:
    return Response(body="", status_code=204, headers={"Cache-Control": "no-store"})


def _ts(value: datetime) -> str:
    """RFC 3339 UTC with a Z, as the reference writes times."""
    return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _caller(request: Any) -> Credential:
    """The request's bearer token, parsed (401 when missing), not yet looked up.

    The service checks it together with the request's first store read, so
    the token costs no round trip of its own. Hence the order of refusals: a
    malformed request (no token, bad query, wrong content type) is refused
    before any read; an unknown token (401) before anything in the body.
    """
    return tokens.credential(request.headers.get("authorization"))


def _query(request: Any, name: str) -> str | None:
    params = request.query_params
    if params is None:
        return None
    try:
        values = params.getlist(name)
    except KeyError:  # Chalice's MultiDict raises for an absent key
        return None
    if not values:
        return None
    if len(values) > 1:
        raise BadRequest(f"{name}: give it at most once")
    return values[0]


_LIMIT_RE = re.compile(r"[0-9]{1,9}")


def _limit(
    request: Any, default: int = packets.DEFAULT_LIMIT, most: int = packets.MAX_LIMIT
) -> int:
    """``?limit=``: digits only (the service checks the range and says it)."""
    raw = _query(request, "limit")
    if raw is None:
        return default
    if not _LIMIT_RE.fullmatch(raw):
        raise BadRequest(f"limit must be an integer between 1 and {most}")
    return int(raw)


def _team(request: Any) -> str | None:
    team = _query(request, "team")
    if team == "":
        raise BadRequest("team must not be empty")
    return team


def _flag(request: Any, name: str) -> bool:
    raw = _query(request, name)
    if raw is None:
        return False
    if raw in ("true", "false"):
        return raw == "true"
    raise BadRequest(f"{name} must be true or false")


def _body(request: Any, limit: int = limits.MAX_BODY) -> bytes:
    """The raw JSON body: 415 for a non-JSON content type, 413 past ``limit`` (the route's
    bound in ``chalicelib.limits``; 32 KiB unless it says otherwise)."""
    content_type = request.headers.get("content-type")
    if content_type is not None:
        media = content_type.split(";", 1)[0].strip().lower()
        if media != "application/json" and not media.endswith("+json"):
            raise UnsupportedMediaType("content type must be application/json")
    raw = request.raw_body or b""
    if isinstance(raw, str):
        raw = raw.encode()
    if len(raw) > limit:
        raise PayloadTooLarge(limits.too_large(limit))
    return raw


def _json_object(request: Any, *, required: bool) -> dict[str, Any]:
    raw = _body(request)
    if not raw.strip():
        if required:
            raise BadRequest("body: a JSON object is required")
        return {}
    try:
        data = json.loads(raw)
    except json.JSONDecodeError as exc:  # where, as the packet route says it
        raise BadRequest(
            f"malformed JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})"
        ) from None
    except (ValueError, RecursionError):
        raise BadRequest("malformed JSON") from None
    if not isinstance(data, dict):
        raise BadRequest("body: must be a JSON object")
    return data


_HOST_RE = re.compile(r"[A-Za-z0-9.\-]+(:[0-9]{1,5})?|\[[0-9A-Fa-f:.]+\](:[0-9]{1,5})?")


def _first(value: str | None) -> str | None:
    """The first hop of a possibly comma-separated forwarded header."""
    if not value:
        return None
    return value.split(",", 1)[0].strip() or None


def base_url(request: Any) -> str:
    """Where this API is reached from outside, for invite URLs.

    ``LTM_EXTERNAL_URL`` (``--external-url``) when set; else the
    ``X-Forwarded-Proto``/``X-Forwarded-Host`` a reverse proxy adds; else the
    request's own Host. On API Gateway's default domain the stage is part of
    the path and is added back.
    """
    configured = os.environ.get("LTM_EXTERNAL_URL")
    if configured:
        return configured.rstrip("/")
    headers = request.headers
    host = _first(headers.get("x-forwarded-host")) or _first(headers.get("host"))
    if not host or not _HOST_RE.fullmatch(host):
        host = "localhost"
    proto = (_first(headers.get("x-forwarded-proto")) or "http").lower()
    if proto not in ("http", "https"):
        proto = "http"
    prefix = ""
    context = request.context or {}
    stage = context.get("stage")
    if host.endswith(".amazonaws.com") and stage and re.fullmatch(r"[A-Za-z0-9_-]+", stage):
        prefix = f"/{stage}"
    return f"{proto}://{host}{prefix}"


def _team_json(team: Team, *, created: bool = False) -> dict[str, Any]:
    out: dict[str, Any] = {"id": team.id, "name": team.name, "owner_id": team.owner_id}
    if not created:
        out["created_at"] = _ts(team.created_at)
    return out


def _meta_json(meta: PacketMeta) -> dict[str, Any]:
    return {"id": meta.id, "created_at": meta.created_at, "goal": meta.goal}


def _lineage_json(meta: PacketMeta) -> dict[str, Any]:
    """A listing entry of our extension routes: the reference's three keys + the parent."""
    return {**_meta_json(meta), "parent_id": meta.parent_id}


def _member_json(member: Member) -> dict[str, Any]:
    return {
        "user_id": member.user_id,
        "display": member.display,
        "role": member.role,
        "joined_at": _ts(member.joined_at),
    }


def route(path: str, method: str) -> Callable[[Callable[..., Response]], Callable[..., Response]]:
    """Register a view that takes the request first and may raise ``ServiceError``."""

    def register(view: Callable[..., Response]) -> Callable[..., Response]:
        @wraps(view)
        def handler(**params: str) -> Response:
            try:
                return view(app.current_request, **params)
            except ServiceError as exc:
                response = _error(exc.status, exc.message)
                response.headers.update(exc.headers)  # e.g. WWW-Authenticate (RFC 6750 §3.1)
                return response
            except Exception as exc:
                return _unhandled(exc)

        # Content types are checked by _body, so the error is ours and JSON.
        app.route(path, methods=[method], content_types=["*/*"])(handler)
        return view

    return register


@app.middleware("http")
def _access_log(event: Any, get_response: Callable[[Any], Response]) -> Response:
    """One structured line per request; never a header, a token, a body or a secret in a path."""
    started = time.perf_counter()
    response = get_response(event)
    context = event.context or {}
    request_id = context.get("requestId", "")
    access = {
        "method": event.method,
        "path": loggable_path(context.get("path") or event.path),
        "status": response.status_code,
        "latency_ms": round((time.perf_counter() - started) * 1000, 3),
        "request_id": request_id,
    }
    logger.info("request", extra={"access": access})
    if request_id:
        response.headers["X-Request-Id"] = request_id
    return response


# -- routes -------------------------------------------------------------------


@route("/v1/healthz", "GET")
def healthz(request: Any) -> Response:
    health: dict[str, Any] = {"ok": True, "version": PROTOCOL_VERSION}
    # Only where it is asked for: a self-hosted server's health opens no database.
    # While repairs are owed it reads the record again, so it shows their end at once.
    owed = get_store().repairs_owed(again=True) if os.environ.get("LTM_STORE") == "dynamodb" else []
    if owed:
        health["repairs_owed"] = owed
    return _json(health)


@route("/v1/openapi.json", "GET")
def openapi_json(request: Any) -> Response:
    # Its models (pydantic) cost most of a cold start: imported for this route alone.
    from chalicelib import openapi

    return Response(
        body=openapi.document_json(),
        status_code=200,
        headers={"Content-Type": "application/json", "Cache-Control": "max-age=300"},
    )


@route("/v1/packets", "POST")
def push_packet(request: Any) -> Response:
    caller = _caller(request)
    team, lenient = _team(request), _flag(request, "lenient")
    scan = packets.scan_wanted(request.headers.get(packets.OVERRIDE_HEADER))
    result = packets.push(
        get_store(), caller, _body(request), team=team, lenient=lenient, scan=scan
    )
    body: dict[str, Any] = {"id": result.id}
    if not result.conforming:
        body["conforming"] = False
    return _json(body, 201)


@route("/v1/packets/batch", "POST")
def push_batch(request: Any) -> Response:
    """Extension: many pushes in one request, each answered as its own push would be."""
    caller = _caller(request)
    team, lenient = _team(request), _flag(request, "lenient")
    scan = packets.scan_wanted(request.headers.get(packets.OVERRIDE_HEADER))
    results = packets.push_batch(
        get_store(),
        caller,
        _body(request, limits.MAX_BATCH_BODY),
        team=team,
        lenient=lenient,
        scan=scan,
    )
    out = []
    for result in results:
        item: dict[str, Any] = {"id": result.id, "status": result.status}
        if result.error is not None:
            item["error"] = result.error
        elif not result.conforming:
            item["conforming"] = False
        out.append(item)
    reply = _json({"results": out})
    reply.headers[limits.BATCH_BYTES_HEADER] = str(limits.MAX_BATCH_BODY)  # how big the next may be
    return reply


@route("/v1/packets/batch", "GET")
def get_batch(request: Any) -> Response:
    """Extension: many packets in one read, each as ``GET /v1/packets/{id}`` answers it."""
    caller = _caller(request)
    params = request.query_params
    ids = list(params.getlist("id")) if params is not None and "id" in params else []
    found = packets.get_many(get_store(), caller, ids)
    out = []
    for packet_id, held in zip(ids, found, strict=True):
        if held is None:
            out.append({"id": packet_id, "status": 404})
            continue
        # The body as a string: its bytes exactly as stored, which GET /v1/packets/{id} sends.
        item: dict[str, Any] = {
            "id": packet_id,
            "status": 200,
            "created_by": held.meta.owner_id,
            "body": held.body.decode("utf-8"),
        }
        if not held.conforming:
            item["conforming"] = False
        out.append(item)
    return _json({"packets": out})


LISTING_FILTERS = ("project", "tag", "since", "until", "author")


@route("/v1/packets", "GET")
def list_packets(request: Any) -> Response:
    caller = _caller(request)
    filters = {name: _query(request, name) for name in LISTING_FILTERS}
    found = packets.page(
        get_store(),
        caller,
        team=_team(request),
        limit=_limit(request),
        page_token=_query(request, "page_token"),
        project=filters["project"],
        tag=filters["tag"],
        since=filters["since"],
        until=filters["until"],
        author=filters["author"],
    )
    body: dict[str, Any] = {"packets": [_meta_json(meta) for meta in found.items]}
    # An extension: each filter applied is echoed, which tells a client this server applied
    # it (a server without them, the reference, lists every packet and echoes none).
    body.update((name, value) for name, value in filters.items() if value is not None)
    if found.cursor:  # an extension: the reference lists one page and has no such key
        body["next_page_token"] = found.cursor
    return _json(body)


@route("/v1/search", "GET")
def search_packets(request: Any) -> Response:
    q = _query(request, "q")
    if q is None:
        raise BadRequest("q: the search query is required")
    return _search(
        request,
        q,
        team=_team(request),
        all_scopes=_scope_all(request),
        limit=_limit(request, searching.DEFAULT_LIMIT, searching.MAX_LIMIT),
        mode=_query(request, "mode"),
    )


@route("/v1/search", "POST")
def search_packets_in_body(request: Any) -> Response:
    """The same search with its fields in a JSON body, which access logs and proxies do
    not keep (a query string they do): what prompt recall sends."""
    caller = _caller(request)  # the credential before the body is read
    fields = _json_object(request, required=True)
    q = fields.get("q")
    if not isinstance(q, str):
        raise BadRequest("q: the search query is required")
    limit = fields.get("limit", searching.DEFAULT_LIMIT)
    if isinstance(limit, bool) or not isinstance(limit, int):
        raise BadRequest(f"limit must be an integer between 1 and {searching.MAX_LIMIT}")
    text: dict[str, str | None] = {}
    for name in ("team", "scope", "mode"):
        value = fields.get(name)
        if name in fields and not isinstance(value, str):  # null too: absent is the default
            raise BadRequest(f"{name}: a string")
        text[name] = value
    if text["team"] == "":
        raise BadRequest("team must not be empty")
    if text["scope"] not in (None, "all"):
        raise BadRequest("scope: the only value is all")
    return _search(
        request,
        q,
        team=text["team"],
        all_scopes=text["scope"] == "all",
        limit=limit,
        mode=text["mode"],
        caller=caller,
    )


def _search(
    request: Any,
    q: str,
    *,
    team: str | None,
    all_scopes: bool,
    limit: int,
    mode: str | None,
    caller: Any = None,
) -> Response:
    found = searching.search(
        get_store(),
        caller if caller is not None else _caller(request),
        q,
        team=team,
        all_scopes=all_scopes,
        limit=limit,
        mode=mode,
    )
    return _json(
        {
            "results": [
                {**_lineage_json(hit.meta), **hit.where(), "score": round(hit.score, 6)}
                for hit in found
            ]
        }
    )


def _scope_all(request: Any) -> bool:
    scope = _query(request, "scope")
    if scope not in (None, "all"):
        raise BadRequest("scope: the only value is all")
    return scope == "all"


@route("/v1/packets/{id}/children", "GET")
def packet_children(request: Any, id: str) -> Response:
    found = packets.children(get_store(), _caller(request), id, limit=_limit(request))
    return _json({"packets": [_lineage_json(meta) for meta in found]})


@route("/v1/packets/{id}/thread", "GET")
def packet_thread(request: Any, id: str) -> Response:
    found = packets.thread(get_store(), _caller(request), id)
    return _json(
        {
            "packets": [
                {**_lineage_json(p.meta), "next_step": next_step_of(p.body)} for p in found.packets
            ],
            "complete": found.complete,
        }
    )


@route("/v1/packets/{id}", "GET")
def get_packet(request: Any, id: str) -> Response:
    found, published = publish.read(get_store(), _caller(request), id)
    # Who stored it (a team's packets have several authors; ltm export keeps it): a header,
    # so the body stays the packet's bytes exactly.
    headers: dict[str, str | list[str]] = {**JSON_HEADERS, "X-Ltm-Created-By": found.meta.owner_id}
    if not found.conforming:
        headers["X-Ltm-Conforming"] = "false"
    if published is not None:
        # The reference's two headers, read by its CLI's `show` (internal/cli/show.go in
        # dennisdevulder/ltm); sent only to whoever may publish the packet (publish.read).
        headers["X-LTM-Published-At"] = _ts(published.created_at)
        headers["X-LTM-Public-URL"] = publish.public_url(base_url(request), published.secret)
    return Response(body=found.body.decode("utf-8"), status_code=200, headers=headers)


@route("/v1/packets/{id}", "DELETE")
def delete_packet(request: Any, id: str) -> Response:
    packets.delete(get_store(), _caller(request), id)
    return _no_content()


@route("/v1/packets/{id}/publish", "POST")
def publish_packet(request: Any, id: str) -> Response:
    """The reference CLI's ``ltm publish`` (internal/cli/publish.go in dennisdevulder/ltm):
    no body; any 2xx with ``{"id", "public_url"}``. 201 when published now, 200 when it was."""
    from chalicelib.service import publish

    found, created = publish.publish(get_store(), _caller(request), id)
    url = publish.public_url(base_url(request), found.secret)
    return _json({"id": id, "public_url": url}, 201 if created else 200)


@route("/v1/packets/{id}/publish", "DELETE")
def unpublish_packet(request: Any, id: str) -> Response:
    """The reference CLI's ``ltm unpublish``: any 2xx; the public URL is dead at once."""
    from chalicelib.service import publish

    publish.unpublish(get_store(), _caller(request), id)
    return _no_content()


# -- sharing one packet with one user (extension routes; rules in chalicelib.service.share) --


def _person(user: User | None) -> dict[str, str] | None:
    return None if user is None else {"id": user.id, "display": user.display}


def _share_json(shared: Any) -> dict[str, Any]:
    return {
        "packet_id": shared.share.packet_id,
        "user": _person(shared.user),
        "shared_by": _person(shared.by),
        "created_at": _ts(shared.share.created_at),
    }


@route("/v1/packets/{id}/shares", "POST")
def share_packet(request: Any, id: str) -> Response:
    from chalicelib.service import share

    caller = _caller(request)
    body = _json_object(request, required=True)
    shared, created = share.share(get_store(), caller, id, body.get("user"))
    return _json({"share": _share_json(shared)}, 201 if created else 200)


@route("/v1/packets/{id}/shares", "GET")
def list_packet_shares(request: Any, id: str) -> Response:
    from chalicelib.service import share

    found = share.shares(get_store(), _caller(request), id)
    return _json({"shares": [_share_json(shared) for shared in found]})


@route("/v1/packets/{id}/shares/{user}", "DELETE")
def unshare_packet(request: Any, id: str, user: str) -> Response:
    from chalicelib.service import share

    share.unshare(get_store(), _caller(request), id, user)
    return _no_content()


@route("/v1/shared", "GET")
def list_shared(request: Any) -> Response:
    from chalicelib.service import share

    caller = _caller(request)  # a stranger is told 401 before anything about the query
    limit = _limit(request, share.MAX_LISTED, share.MAX_LISTED)
    found = share.shared_with_me(get_store(), caller, limit=limit)
    return _json(
        {
            "packets": [
                {
                    **_meta_json(got.meta),
                    "project": got.meta.project,
                    "shared_by": _person(got.by),
                    "shared_at": _ts(got.share.created_at),
                }
                for got in found
            ]
        }
    )


@route("/v1/teams", "POST")
def create_team(request: Any) -> Response:
    caller = _caller(request)
    body = _json_object(request, required=True)
    team = teams.create(get_store(), caller, body.get("name"))
    return _json({"team": _team_json(team, created=True)}, 201)


@route("/v1/teams", "GET")
def list_teams(request: Any) -> Response:
    found = teams.list_(get_store(), _caller(request))
    return _json({"teams": [_team_json(team) for team in found]})


@route("/v1/teams/{name}", "DELETE")
def delete_team(request: Any, name: str) -> Response:
    teams.delete(get_store(), _caller(request), name)
    return _no_content()


@route("/v1/teams/{name}/members", "GET")
def list_members(request: Any, name: str) -> Response:
    found = teams.members(get_store(), _caller(request), name)
    return _json({"members": [_member_json(member) for member in found]})


@route("/v1/teams/{name}/members/{user_id}", "DELETE")
def remove_member(request: Any, name: str, user_id: str) -> Response:
    teams.kick(get_store(), _caller(request), name, user_id)
    return _no_content()


@route("/v1/teams/{name}/leave", "POST")
def leave_team(request: Any, name: str) -> Response:
    teams.leave(get_store(), _caller(request), name)
    return _no_content()


@route("/v1/teams/{name}/invites", "POST")
def create_invite(request: Any, name: str) -> Response:
    caller = _caller(request)
    created = invites.create(get_store(), caller, name, base_url=base_url(request))
    return _json(
        {"code": created.code, "url": created.url, "expires_at": _ts(created.expires_at)}, 201
    )


@route("/v1/invites/{code}/accept", "POST")
def accept_invite(request: Any, code: str) -> Response:
    authorization = request.headers.get("authorization")
    caller = _caller(request) if authorization and authorization.strip() else None
    body = _json_object(request, required=False)
    accepted = invites.accept(get_store(), caller, code, display=body.get("display"))
    out: dict[str, Any] = {
        "user": {"id": accepted.user.id, "display": accepted.user.display},
        "team": {"id": accepted.team.id, "name": accepted.team.name},
    }
    if accepted.token is not None:
        out["token"] = accepted.token
    return _json(out, 201)


# -- signing in from a browser: the device flow (RFC 8628) ------------------------------
# The rules live in chalicelib.service.device, the OAuth endpoints and the verification
# page in chalicelib.web.device; both are imported on first use, so a cold start that
# only serves packets does not pay for them.

_device_web: Any = None
_device_lock = threading.Lock()


def _device() -> Any:
    """The process's ``DeviceWeb`` (settings, signing key and Cognito from the environment)."""
    global _device_web
    store = get_store()
    if _device_web is None or _device_web.store is not store:
        from chalicelib.web.device import DeviceWeb

        with _device_lock:
            if _device_web is None or _device_web.store is not store:
                made = DeviceWeb.from_env(store)
                # Web view sign-ins return through the device callback (one redirect URI).
                made.web_sign_in = _web_signed_in
                _device_web = made
    return _device_web


def _client_ip(request: Any) -> str:
    identity = (request.context or {}).get("identity") or {}
    return str(identity.get("sourceIp") or "")


def _web_request(request: Any) -> Any:
    from chalicelib.web.device import WebRequest

    raw = request.raw_body or b""
    query: dict[str, list[str]] = {}
    if request.query_params is not None:
        for name in request.query_params:
            query[name] = list(request.query_params.getlist(name))
    return WebRequest(
        method=request.method,
        headers={name.lower(): value for name, value in request.headers.items()},
        query=query,
        body=raw.encode() if isinstance(raw, str) else raw,
        client_ip=_client_ip(request),
        base_url=base_url(request),
    )


def _page_failed() -> Response:
    """A page's answer to an unexpected error (logged by the caller): plain text, no details."""
    return Response(
        body="internal server error\n",
        status_code=500,
        headers={"Content-Type": "text/plain; charset=utf-8", "Cache-Control": "no-store"},
    )


def _busy(oauth: bool) -> Response:
    """503 with Retry-After for a busy database: an OAuth error (JSON) or plain text."""
    retry = {"Retry-After": str(BUSY_RETRY_AFTER)}
    if oauth:
        body = {"error": "temporarily_unavailable", "error_description": BUSY_MESSAGE}
        return Response(body=body, status_code=503, headers={**JSON_HEADERS, **retry})
    return Response(
        body=BUSY_MESSAGE + "\n",
        status_code=503,
        headers={"Content-Type": "text/plain; charset=utf-8", "Cache-Control": "no-store", **retry},
    )


def _view_failed(exc: Exception, *, oauth: bool) -> Response:
    """A page's or an OAuth endpoint's answer to an error no rule foresaw, as ``_unhandled``
    for the API: 503 with Retry-After when the database only cannot serve it for the moment
    (a device polls again after it; a 500 ended a sign-in perhaps just approved), else 500."""
    if store_unavailable(exc):
        logger.warning("the database is busy", exc_info=True)
        return _busy(oauth)
    logger.exception("unhandled error")
    if oauth:
        return _json({"error": "server_error", "error_description": "internal error"}, 500)
    return _page_failed()


def web_route(path: str, methods: list[str], handler: str, *, oauth: bool) -> None:
    """Register a device-flow view: ``DeviceWeb.<handler>`` answers it (JSON or HTML)."""

    def view(**_params: str) -> Response:
        try:
            result = getattr(_device(), handler)(_web_request(app.current_request))
        except Exception as exc:
            return _view_failed(exc, oauth=oauth)
        return Response(body=result.body, status_code=result.status, headers=result.headers)

    view.__name__ = f"device_{handler}"
    app.route(path, methods=methods, content_types=["*/*"])(view)


web_route("/oauth/authorize_device", ["POST"], "authorize_device", oauth=True)
web_route("/oauth/token", ["POST"], "token", oauth=True)
web_route("/device", ["GET", "POST"], "page", oauth=False)
web_route("/device/callback", ["GET"], "callback", oauth=False)
web_route("/device/decide", ["POST"], "decide", oauth=False)


# -- the web view (pages for people) and published packets --------------------------------
# Rendering lives in chalicelib.web.view, imported on the first page asked for.

_web_view: Any = None


def _web() -> Any:
    """The process's ``WebView``, over the process's ``DeviceWeb`` (its signer and sign-in)."""
    global _web_view
    device_web = _device()
    if _web_view is None or _web_view.device is not device_web:
        from chalicelib.web.view import WebView

        with _device_lock:
            if _web_view is None or _web_view.device is not device_web:
                _web_view = WebView.from_env(device_web)
    return _web_view


def _web_signed_in(request: Any, user: User, next_path: str) -> Any:
    return _web().answer("signed_in_by_cognito", request, user=user, next_path=next_path)


def page_route(path: str, methods: list[str], handler: str) -> None:
    """Register a web view page: ``WebView.<handler>`` answers it (HTML)."""

    def view(**params: str) -> Response:
        try:
            result = _web().answer(handler, _web_request(app.current_request), **params)
        except Exception as exc:
            return _view_failed(exc, oauth=False)
        return Response(body=result.body, status_code=result.status, headers=result.headers)

    view.__name__ = f"web_{handler}"
    app.route(path, methods=methods, content_types=["*/*"])(view)


page_route("/", ["GET"], "home")
page_route("/web", ["GET"], "packets")
page_route("/web/packets/{id}", ["GET"], "packet")
page_route("/web/packets/{id}/delete", ["GET", "POST"], "delete")
page_route("/web/teams/{name}", ["GET"], "team")
page_route("/web/signin", ["GET", "POST"], "sign_in")
page_route("/web/signin/code", ["POST"], "sign_in_code")
page_route("/web/signout", ["POST"], "sign_out")
page_route("/web/ui", ["GET", "POST"], "ui")
page_route("/web/key", ["GET", "POST"], "key_sign_in")
page_route("/web/static/{name}", ["GET"], "static")
page_route("/p/{secret}", ["GET"], "public")


def _device_answer(grant: DeviceGrant) -> Response:
    """A grant as both approval routes answer it: its status and what the device said."""
    return _json(
        {
            "status": grant.status,
            "device": {
                "client_id": grant.client_id,
                "name": grant.device_name,
                "requested_at": _ts(grant.created_at),
                "from": grant.client_ip,
                "scope": grant.scope,
            },
        }
    )


@route("/v1/device/approve", "GET")
def pending_device(request: Any) -> Response:
    """The waiting sign-in a code names, undecided: ``ltm approve`` shows it before asking."""
    from chalicelib.service import device

    grant = device.pending(
        get_store(), _device().settings, _caller(request), _query(request, "user_code")
    )
    return _device_answer(grant)


@route("/v1/device/approve", "POST")
def approve_device(request: Any) -> Response:
    from chalicelib.service import device

    caller = _caller(request)
    user = device.approver(get_store(), caller)  # 401/403 before the body
    body = _json_object(request, required=True)
    grant = device.decide(
        get_store(),
        _device().settings,
        user,
        body.get("user_code"),
        approve=body.get("approve", True),
        approved_with=caller.token_hash,
    )
    return _device_answer(grant)


@route("/v1/whoami", "GET")
def whoami(request: Any) -> Response:
    """An extension: who the token belongs to and what it may do (``ltm whoami``)."""
    user, token = tokens.whoami(get_store(), _caller(request))
    answer: dict[str, Any] = {
        "user": {"id": user.id, "display": user.display},
        # What the token may do (`ltm auth` and `ltm whoami` show it); the embedded store's
        # trusted user has no token and may do everything.
        "scope": token.scope if token is not None else FULL_SCOPE,
    }
    if token is not None:
        answer["token"] = {
            "label": token.label,
            "scope": token.scope,
            "created_at": _ts(token.created_at),
        }
    return _json(answer)


@route("/v1/whoami", "PATCH")
def rename_me(request: Any) -> Response:
    """An extension: change the caller's display name (``ltm profile --display``); 409 when
    another user of this server goes by it in any case."""
    from chalicelib.service import users

    body = _json_object(request, required=True)
    user = users.rename(get_store(), _caller(request), body.get("display"))
    return _json({"user": {"id": user.id, "display": user.display}})


@route("/v1/web/sign-in-key", "POST")
def web_sign_in_key(request: Any) -> Response:
    """An extension: a short-lived, single-use key that signs a browser in to the web view."""
    made = _web().sign_in_key(_caller(request), base_url(request))
    return _json(made, 201)


@route("/v1/tokens", "GET")
def list_own_tokens(request: Any) -> Response:
    caller = _caller(request)
    return _json(
        {
            "tokens": [
                {
                    "label": token.label,
                    "created_at": _ts(token.created_at),
                    "last_used_at": _ts(token.last_used_at) if token.last_used_at else None,
                    "expires_at": _ts(token.expires_at) if token.expires_at else None,
                    "current": token.token_hash == caller.token_hash,
                    "scope": token.scope,
                }
                for token in tokens.list_own(get_store(), caller)
            ]
        }
    )


@route("/v1/tokens/{label}", "DELETE")
def revoke_own_token(request: Any, label: str) -> Response:
    tokens.revoke_own(get_store(), _caller(request), label)
    return _no_content()


# -- remote MCP: /mcp (Streamable HTTP, stateless) and the OAuth endpoints in front of it --
# chalicelib.mcp runs the official SDK's ASGI apps for one request at a time; it loads
# the SDK (and Starlette) on the first of these requests, so the other routes never pay.

_mcp_apps: dict[tuple[int, str], Any] = {}


def _mcp_app(request: Any) -> Any:
    from chalicelib.loopback import listening_on_loopback
    from chalicelib.mcp.http import build_app

    store, base = get_store(), base_url(request)
    key = (id(store), base)
    found = _mcp_apps.get(key)
    if found is None:
        with _device_lock:
            found = _mcp_apps.get(key)
            if found is None:
                if len(_mcp_apps) >= 16:  # one per Host the server is reached by: bounded
                    _mcp_apps.clear()
                # The consent page at the API's own address: on loopback, the pages'
                # name is never told to an anonymous /authorize (WebView.authorize).
                found = _mcp_apps[key] = build_app(store, base, on_loopback=listening_on_loopback())
    return found


def mcp_route(path: str, methods: list[str]) -> None:
    """Register a path the MCP/OAuth ASGI app answers (the same path inside the app)."""

    def view(**_params: str) -> Response:
        from urllib.parse import urlencode

        from chalicelib.mcp.asgi import BadHeader, serve

        request = app.current_request
        raw = request.raw_body or b""
        limit = limits.body_limit(request.method, path)
        if len(raw) > limit:
            return _error(413, limits.too_large(limit))
        query: list[tuple[str, str]] = []
        if request.query_params is not None:
            for name in request.query_params:
                query += [(name, value) for value in request.query_params.getlist(name)]
        try:
            answer = serve(
                _mcp_app(request),
                method=request.method,
                path=path,
                query=urlencode(query),
                headers={k.lower(): v for k, v in request.headers.items()},
                body=raw.encode() if isinstance(raw, str) else raw,
                scheme=base_url(request).split(":", 1)[0],
                client=(_client_ip(request), 0),
            )
        except BadHeader as exc:  # a client's fault, not the server's: no traceback logged
            return _error(400, str(exc))
        except Exception as exc:
            return _unhandled(exc)
        headers: dict[str, str | list[str]] = {}
        for name, value in answer.headers:  # a repeated header (Vary) is one, comma-joined
            if name.lower() in ("content-length", "transfer-encoding"):
                continue  # the body is whole: the server in front frames it
            headers[name] = f"{headers[name]}, {value}" if name in headers else value
        # JSON or HTML, UTF-8: a str body, as API Gateway takes text (bytes are for binary types)
        text = answer.body.decode("utf-8", "replace")
        return Response(body=text, status_code=answer.status, headers=headers)

    view.__name__ = "mcp_" + (
        path.strip("/").replace("/", "_").replace(".", "_").replace("-", "_") or "root"
    )
    app.route(path, methods=methods, content_types=["*/*"])(view)


# Every method, though /mcp answers POST and OPTIONS alone: it refuses the rest itself,
# with the 405 and the Allow the MCP transport names, where a router's 405 would list
# the methods registered here (GET and DELETE among them, refused in turn).
mcp_route("/mcp", ["GET", "POST", "DELETE", "OPTIONS", "PUT", "PATCH"])
mcp_route("/.well-known/oauth-protected-resource/mcp", ["GET", "OPTIONS"])
mcp_route("/.well-known/oauth-protected-resource", ["GET", "OPTIONS"])
mcp_route("/.well-known/oauth-authorization-server", ["GET", "OPTIONS"])
mcp_route("/.well-known/openid-configuration", ["GET", "OPTIONS"])
mcp_route("/authorize", ["GET", "POST"])
mcp_route("/token", ["POST", "OPTIONS"])
mcp_route("/register", ["POST", "OPTIONS"])
mcp_route("/revoke", ["POST", "OPTIONS"])
page_route("/web/authorize", ["GET", "POST"], "authorize")


# -- observability on Lambda: EMF metrics (pushes, pulls, auth failures), optional X-Ray --
from chalicelib import observe  # noqa: E402 - after the routes; see chalicelib/observe.py

observe.install(app)


# -- the table's stream: the search index, derived after the write -------------

# The stream's ARN is known once the table exists (infra/ltm.yaml's TableStreamArn
# output); ``chalice package`` with .chalice/merge-template.json sets the mapping's
# stream from the stack parameter of that name, whatever stands here.
_STREAM_ARN = os.environ.get(
    "LTM_DYNAMODB_STREAM_ARN",
    "arn:aws:dynamodb:us-east-1:000000000000:table/ltm/stream/1970-01-01T00:00:00.000",
)


@app.on_dynamodb_record(
    stream_arn=_STREAM_ARN, batch_size=100, starting_position="TRIM_HORIZON", name="index"
)
def index_changes(event: Any) -> dict[str, Any]:
    """Apply packet changes to the search index; report the first failure for a retry."""
    from chalicelib.store.dynamo import DynamoStore
    from chalicelib.store.dynamo_stream import handle

    store = get_store()
    assert isinstance(store, DynamoStore), "the stream consumer runs on the DynamoDB store"
    return {"batchItemFailures": handle(store, event.to_dict().get("Records", []))}
