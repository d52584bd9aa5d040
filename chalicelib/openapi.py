"""The OpenAPI 3.1 description of the ltm HTTP API, served at ``GET /v1/openapi.json``.

Written by hand next to the routes in ``app.py`` and held to them by the
property-based test (``tests/test_server_schemathesis.py``): every route, every
status it can answer, every body shape. The packet schemas come from the
packet models (which the conformance tests hold to the published JSON
Schemas), so the two cannot drift apart.
"""

from __future__ import annotations

import json
from functools import cache
from typing import Any

from . import __version__, limits
from .packet import MAX_PACKET_BYTES, MODELS
from .service.packets import DEFAULT_LIMIT, MAX_BATCH, MAX_LIMIT
from .service.search import DEFAULT_LIMIT as SEARCH_DEFAULT
from .service.search import MAX_LIMIT as SEARCH_MAX
from .service.search import MODES as SEARCH_MODES
from .service.share import MAX_LISTED as SHARED_MAX
from .service.teams import TEAM_NAME_PATTERN

_SEARCH_MODE = (
    "`lexical` (the default: every word required), `semantic` (by meaning alone, the"
    " score a cosine) or `hybrid` (words first, then meaning; docs/search.md). Meaning"
    " needs the server's `ltm[semantic]` extra."
)
_REF = "#/components/schemas/{model}"


def _ref(name: str) -> dict[str, str]:
    return {"$ref": _REF.format(model=name)}


def _error(description: str) -> dict[str, Any]:
    return {
        "description": description,
        "content": {"application/json": {"schema": _ref("Error")}},
    }


def _ok(
    description: str, schema: dict[str, Any], *, links: dict[str, Any] | None = None
) -> dict[str, Any]:
    out: dict[str, Any] = {
        "description": description,
        "content": {"application/json": {"schema": schema}},
    }
    if links:
        out["links"] = links
    return out


_UNAUTHORIZED = {
    **_error(
        "`missing bearer token` or `invalid token`, with the RFC 6750 challenge"
        ' `WWW-Authenticate: Bearer` (`Bearer error="invalid_token"` for a token that is'
        " not valid)."
    ),
    "headers": {"WWW-Authenticate": {"schema": {"type": "string"}}},
}
_TOO_LARGE = _error(f"The request body is over {MAX_PACKET_BYTES} bytes; it was not read.")
_MEDIA = _error("The body's Content-Type is not `application/json`.")
_NO_CONTENT = {"description": "Done; no body."}


def _obj(properties: dict[str, Any], required: list[str] | None = None) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": properties,
        "required": list(properties) if required is None else required,
    }


_STRING = {"type": "string"}
_TIME = {"type": "string", "format": "date-time"}


# A listing entry of the extension routes: the reference's three keys and the parent.
_LINKED: dict[str, Any] = {
    "id": _STRING,
    "created_at": _STRING,
    "goal": _STRING,
    "parent_id": {
        "type": ["string", "null"],
        "description": "The previous packet of its work thread, if any.",
    },
}


def _packet_schemas() -> dict[str, Any]:
    """Component schemas for packets, generated from the packet models."""
    from pydantic.json_schema import models_json_schema

    refs, top = models_json_schema(
        [(model, "validation") for model in MODELS.values()], ref_template=_REF
    )
    schemas: dict[str, Any] = dict(top.get("$defs", {}))
    schemas["LenientPacket"] = {
        "description": (
            "Accepted only with `lenient=true`: any JSON object with a usable `id`. It is"
            " stored as sent (canonical key order) and flagged as non-conforming."
        ),
        "type": "object",
        "required": ["id"],
        "properties": {"id": {"type": "string", "minLength": 10, "maxLength": 64}},
    }
    schemas["Packet"] = {
        "description": (
            "A Core Memory Packet, v0.1 or v0.2 (the published JSON Schemas). "
            f"At most {MAX_PACKET_BYTES} bytes serialized."
        ),
        "oneOf": [refs[(model, "validation")] for model in MODELS.values()],
    }
    return schemas


def _schemas() -> dict[str, Any]:
    schemas = _packet_schemas()
    schemas.update(
        {
            "Error": _obj({"error": {**_STRING, "description": "What went wrong."}}),
            "Health": _obj(
                {
                    "ok": {"const": True},
                    "version": {**_STRING, "const": "0.2"},
                    "repairs_owed": {
                        "type": "array",
                        "items": {"enum": ["index", "usage"]},
                        "description": "On DynamoDB, present only when the table's derived"
                        " data waits for these repairs after an upgrade"
                        " (python -m ltm.store.dynamo_repair).",
                    },
                },
                required=["ok", "version"],
            ),
            "PushResult": _obj(
                {
                    "id": _STRING,
                    "conforming": {
                        "const": False,
                        "description": "Present (false) only for a packet accepted in lenient"
                        " mode that does not conform to its schema.",
                    },
                },
                required=["id"],
            ),
            "PacketMeta": _obj({"id": _STRING, "created_at": _STRING, "goal": _STRING}),
            "PacketList": _obj(
                {
                    "packets": {"type": "array", "items": _ref("PacketMeta")},
                    "next_page_token": {
                        **_STRING,
                        "description": "Extension: present when more packets follow; pass it"
                        " back as `page_token` (with the same filters) for the next page.",
                    },
                    **{
                        name: {
                            **_STRING,
                            "description": f"Present when the listing was filtered with"
                            f" `?{name}=`: the filter this server applied, as given (an"
                            " extension of this server; a server without it, the"
                            " reference, lists every packet and echoes none).",
                        }
                        for name in ("project", "tag", "since", "until", "author")
                    },
                },
                required=["packets"],
            ),
            "LinkedPacket": _obj(_LINKED),
            "Children": _obj({"packets": {"type": "array", "items": _ref("LinkedPacket")}}),
            "Thread": _obj(
                {
                    "packets": {
                        "type": "array",
                        "items": _obj({**_LINKED, "next_step": _STRING}),
                        "description": "Root first; the last is the packet asked for.",
                    },
                    "complete": {
                        "type": "boolean",
                        "description": "False when the walk stopped before the root (the"
                        " thread is shown from there on): an earlier packet is gone or not"
                        " visible to the caller, the parent_id links loop, or the thread is"
                        " longer than the 1,000 packets one walk reads.",
                    },
                }
            ),
            "SearchResults": _obj(
                {
                    "results": {
                        "type": "array",
                        "description": "Best first.",
                        "items": _obj(
                            {
                                **_LINKED,
                                "team": {
                                    "type": ["string", "null"],
                                    "description": "The team's name; null: personal.",
                                },
                                "score": {
                                    "type": "number",
                                    "description": "Higher is better; compare within one answer"
                                    " (by meaning alone: the cosine, though the nearest"
                                    " few are ordered by their words too).",
                                },
                                "field": {
                                    **_STRING,
                                    "description": "The packet field the snippet comes from.",
                                },
                                "snippet": {
                                    **_STRING,
                                    "description": "A short excerpt of that field, one line"
                                    " (untrusted packet text: escape it where shown).",
                                },
                                "highlights": {
                                    "type": "array",
                                    "description": "[start, end) character ranges of the"
                                    " snippet that matched.",
                                    "items": {
                                        "type": "array",
                                        "items": {"type": "integer", "minimum": 0},
                                        "minItems": 2,
                                        "maxItems": 2,
                                    },
                                },
                                "matched": {
                                    "type": "string",
                                    "enum": ["words", "meaning"],
                                    "description": "words: the packet holds every word of"
                                    " the query; meaning: found by meaning alone, a"
                                    " neighbour that may not be about the query.",
                                },
                            }
                        ),
                    }
                }
            ),
            "StoredPacket": {
                "type": "object",
                "description": "The packet exactly as stored (canonical bytes). It conforms to"
                " `Packet` unless it was pushed in lenient mode, which the"
                " `X-Ltm-Conforming: false` header then says.",
            },
            "Batch": _obj(
                {
                    "packets": {
                        "type": "array",
                        "minItems": 1,
                        "maxItems": MAX_BATCH,
                        "description": "Each item is the JSON text of one packet: the body a"
                        " single `POST /v1/packets` would send.",
                        "items": _STRING,
                    }
                }
            ),
            "BatchResults": _obj(
                {
                    "results": {
                        "type": "array",
                        "description": "One per packet of the batch, in its order.",
                        "items": _obj(
                            {
                                "id": {
                                    "type": ["string", "null"],
                                    "description": "The packet's id; null when it was refused"
                                    " before a usable id was read from it.",
                                },
                                "status": {
                                    "enum": [201, 400, 404, 409, 413, 507],
                                    "description": "What `POST /v1/packets` answers for this"
                                    " packet alone.",
                                },
                                "error": {**_STRING, "description": "Why, when not 201."},
                                "conforming": {
                                    "const": False,
                                    "description": "As in `PushResult`.",
                                },
                            },
                            required=["id", "status"],
                        ),
                    }
                }
            ),
            "BatchRead": _obj(
                {
                    "packets": {
                        "type": "array",
                        "description": "One per `id` asked for, in its order.",
                        "items": _obj(
                            {
                                "id": _STRING,
                                "status": {
                                    "enum": [200, 404],
                                    "description": "What `GET /v1/packets/{id}` answers.",
                                },
                                "body": {
                                    **_STRING,
                                    "description": "With 200: the packet's bytes exactly as"
                                    " `GET /v1/packets/{id}` sends them, as a string.",
                                },
                                "created_by": {
                                    **_STRING,
                                    "description": "With 200: as `X-Ltm-Created-By`.",
                                },
                                "conforming": {
                                    "const": False,
                                    "description": "As `X-Ltm-Conforming: false`.",
                                },
                            },
                            required=["id", "status"],
                        ),
                    }
                }
            ),
            "NewTeam": _obj({"name": {**_STRING, "pattern": TEAM_NAME_PATTERN}}),
            "TeamCreated": _obj(
                {"team": _obj({"id": _STRING, "name": _STRING, "owner_id": _STRING})}
            ),
            "Team": _obj(
                {"id": _STRING, "name": _STRING, "owner_id": _STRING, "created_at": _TIME}
            ),
            "TeamList": _obj({"teams": {"type": "array", "items": _ref("Team")}}),
            "Member": _obj(
                {
                    "user_id": _STRING,
                    "display": _STRING,
                    "role": {"enum": ["owner", "member"]},
                    "joined_at": _TIME,
                }
            ),
            "MemberList": _obj({"members": {"type": "array", "items": _ref("Member")}}),
            "Invite": _obj(
                {
                    "code": {**_STRING, "description": "Single use; valid for 7 days."},
                    "url": {**_STRING, "description": "Ends in `/v1/invites/{code}`."},
                    "expires_at": _TIME,
                }
            ),
            "AcceptInvite": {
                "type": "object",
                "properties": {
                    "display": {
                        "type": ["string", "null"],
                        "maxLength": 64,
                        "description": "The new user's display name (ignored with a bearer);"
                        " absent, null or blank: `invited-` and the last six characters"
                        " of the new user's id, as the reference names them.",
                    }
                },
            },
            "Accepted": _obj(
                {
                    "user": _obj({"id": _STRING, "display": _STRING}),
                    "team": _obj({"id": _STRING, "name": _STRING}),
                    "token": {
                        **_STRING,
                        "description": "Only when the caller sent no bearer token: the new"
                        " user's token. Shown once.",
                    },
                },
                required=["user", "team"],
            ),
        }
    )
    return schemas


def _path_param(name: str, description: str) -> dict[str, Any]:
    return {
        "name": name,
        "in": "path",
        "required": True,
        "description": description,
        "schema": {"type": "string", "minLength": 1},
    }


_TEAM_QUERY = {
    "name": "team",
    "in": "query",
    "required": False,
    "description": "A team the caller belongs to; absent: the caller's personal scope.",
    "schema": {"type": "string", "minLength": 1},
}
_NAME = _path_param("name", "The team's name.")
_LIMIT_QUERY = {
    "name": "limit",
    "in": "query",
    "required": False,
    "schema": {"type": "integer", "minimum": 1, "maximum": MAX_LIMIT, "default": DEFAULT_LIMIT},
}
_TIME_BOUND = {
    "type": "string",
    "minLength": 1,
    "description": "A date (2026-04-01), an RFC 3339 time, or an age (30m, 12h, 3d, 2w ago).",
}
# Extensions of the reference listing; a server without them ignores them.
_LIST_FILTERS = [
    {
        "name": "page_token",
        "in": "query",
        "required": False,
        "description": "The `next_page_token` of the previous page.",
        "schema": {"type": "string", "minLength": 1},
    },
    {
        "name": "tag",
        "in": "query",
        "required": False,
        "description": "Only packets carrying this tag.",
        "schema": {"type": "string", "pattern": "^[a-z0-9][a-z0-9-]{0,31}$"},
    },
    {
        "name": "since",
        "in": "query",
        "required": False,
        "description": "Created at or after.",
        "schema": _TIME_BOUND,
    },
    {
        "name": "until",
        "in": "query",
        "required": False,
        "description": "Created before.",
        "schema": _TIME_BOUND,
    },
    {
        "name": "author",
        "in": "query",
        "required": False,
        "description": "Who pushed it: a user id, a member's display name, or `me`.",
        "schema": {"type": "string", "minLength": 1},
    },
]
_BEARER: list[dict[str, list[str]]] = [{"bearer": []}]


def _json_body(schema: dict[str, Any], *, required: bool = True) -> dict[str, Any]:
    return {"required": required, "content": {"application/json": {"schema": schema}}}


def _paths() -> dict[str, Any]:
    return {
        "/v1/healthz": {
            "get": {
                "operationId": "healthz",
                "summary": "Liveness and protocol version.",
                "security": [],
                "responses": {"200": _ok("Up.", _ref("Health"))},
            }
        },
        "/v1/openapi.json": {
            "get": {
                "operationId": "openapi",
                "summary": "This document.",
                "security": [],
                "responses": {"200": _ok("The OpenAPI document.", {"type": "object"})},
            }
        },
        "/v1/packets": {
            "post": {
                "operationId": "pushPacket",
                "summary": "Store a packet in the caller's personal scope or in a team.",
                "description": (
                    "The packet is schema-checked, scanned for secrets (see 400) and"
                    " stored in canonical form. Pushing"
                    " again an id the caller owns in the same scope replaces it"
                    " (idempotent, 201 again); pushing the caller's own personal packet"
                    " into a team they belong to moves it there. Any other id that"
                    " exists (another user's, or the caller's in a team) is refused with"
                    " 409 `packet id already exists` and the existing packet is left"
                    " untouched. Ids must match `^[A-Za-z0-9][A-Za-z0-9._:-]{9,63}$`."
                ),
                "parameters": [
                    _TEAM_QUERY,
                    {
                        "name": "lenient",
                        "in": "query",
                        "required": False,
                        "description": "Accept a packet that does not conform (it is flagged).",
                        "schema": {"type": "boolean"},
                    },
                    {
                        "name": "X-LTM-Allow-Unredacted",
                        "in": "header",
                        "required": False,
                        "description": (
                            "`1`: the user's explicit override of the server's redaction"
                            " scan (an extension; `ltm push --allow-unredacted` sends it)."
                        ),
                        "schema": {"type": "string"},
                    },
                ],
                "requestBody": _json_body({"anyOf": [_ref("Packet"), _ref("LenientPacket")]}),
                "responses": {
                    "201": _ok(
                        "Stored.",
                        _ref("PushResult"),
                        links={
                            "GetPacket": {
                                "operationId": "getPacket",
                                "parameters": {"id": "$response.body#/id"},
                            },
                            "DeletePacket": {
                                "operationId": "deletePacket",
                                "parameters": {"id": "$response.body#/id"},
                            },
                        },
                    ),
                    "400": _error(
                        "Malformed JSON, an invalid packet (the reason says why), a bad"
                        " query value, or a packet with a secret in it (key, token,"
                        " private key, credential): the server's redaction scan lists each"
                        " `field/kind`, unless `X-LTM-Allow-Unredacted: 1` is sent or the"
                        " operator set `LTM_SERVER_SCAN=off`."
                    ),
                    "401": _UNAUTHORIZED,
                    "404": _error("`team not found`: no such team, or the caller is not in it."),
                    "409": _error("`packet id already exists`: the id is someone else's."),
                    "413": _TOO_LARGE,
                    "415": _MEDIA,
                    "507": _error(
                        "`storage limit reached: ...`: the push would take the caller past"
                        " the operator's per-user bound (`LTM_MAX_PACKETS_PER_USER`, default"
                        " 100,000 packets; `LTM_MAX_BYTES_PER_USER`, default 1 GiB), counting"
                        " their personal packets and those they authored in teams. A"
                        " replacement that does not grow what they own still goes through."
                        " Nothing was stored."
                    ),
                },
            },
            "get": {
                "operationId": "listPackets",
                "summary": "The newest packets of one scope.",
                "parameters": [
                    _TEAM_QUERY,
                    {
                        "name": "project",
                        "in": "query",
                        "required": False,
                        "description": "Only the packets whose `project.name` is exactly this"
                        " (an extension of this server; the reference ignores it).",
                        "schema": {"type": "string", "minLength": 1, "maxLength": 128},
                    },
                    {
                        "name": "limit",
                        "in": "query",
                        "required": False,
                        "schema": {
                            "type": "integer",
                            "minimum": 1,
                            "maximum": MAX_LIMIT,
                            "default": DEFAULT_LIMIT,
                        },
                    },
                    *_LIST_FILTERS,
                ],
                "responses": {
                    "200": _ok("Newest first.", _ref("PacketList")),
                    "400": _error("A bad query value (an unknown `page_token` included)."),
                    "401": _UNAUTHORIZED,
                    "404": _error("`team not found`."),
                },
            },
        },
        "/v1/packets/batch": {
            "post": {
                "operationId": "pushBatch",
                "summary": "Extension: push up to 100 packets in one request.",
                "description": (
                    "Not in the reference protocol (`ltm import` falls back to single pushes"
                    " where it is absent). Each packet is judged exactly as its own"
                    " `POST /v1/packets` would be (schema, id rules, the server's scan, the"
                    " scope rules, the per-user bound) and answered in `results` with that"
                    " status and error; one refused packet never stops the others. What"
                    " belongs to the request (the token, its scope, `team`, the body's"
                    f" shape and its {limits.MAX_BATCH_BODY}-byte bound) refuses the whole"
                    f" batch. The reply's `{limits.BATCH_BYTES_HEADER}` says how big a batch"
                    " body the server takes: a client sends its first batch within"
                    f" {limits.MAX_BODY} bytes, which every version of this route takes, and"
                    " the rest as big as that says."
                ),
                "parameters": [
                    _TEAM_QUERY,
                    {
                        "name": "lenient",
                        "in": "query",
                        "required": False,
                        "description": "As on `POST /v1/packets`, for every packet.",
                        "schema": {"type": "boolean"},
                    },
                    {
                        "name": "X-LTM-Allow-Unredacted",
                        "in": "header",
                        "required": False,
                        "description": "As on `POST /v1/packets`, for every packet.",
                        "schema": {"type": "string"},
                    },
                ],
                "requestBody": _json_body(_ref("Batch")),
                "responses": {
                    "200": {
                        **_ok("Each packet's answer, in order.", _ref("BatchResults")),
                        "headers": {
                            limits.BATCH_BYTES_HEADER: {
                                "description": "The most bytes a batch body may carry here.",
                                "schema": {"type": "integer"},
                            }
                        },
                    },
                    "400": _error(
                        'Malformed JSON, not `{"packets": [TEXT, ...]}` with 1 to'
                        f" {MAX_BATCH} texts, or a bad query value."
                    ),
                    "401": _UNAUTHORIZED,
                    "404": _error("`team not found`: no such team, or the caller is not in it."),
                    "413": _error(
                        f"The request body is over {limits.MAX_BATCH_BODY} bytes; it was not read."
                    ),
                    "415": _MEDIA,
                },
            },
            "get": {
                "operationId": "getBatch",
                "summary": "Extension: up to 100 packets in one read.",
                "description": (
                    "Not in the reference protocol. Each id is answered as"
                    " `GET /v1/packets/{id}` would answer it: 200 with the packet, or 404"
                    " when it is absent or not the caller's to read."
                ),
                "parameters": [
                    {
                        "name": "id",
                        "in": "query",
                        "required": True,
                        "description": "A packet id; repeat it for each packet.",
                        "schema": {
                            "type": "array",
                            "items": _STRING,
                            "minItems": 1,
                            "maxItems": MAX_BATCH,
                        },
                        "style": "form",
                        "explode": True,
                    }
                ],
                "responses": {
                    "200": _ok("Each id's answer, in order.", _ref("BatchRead")),
                    "400": _error(f"No `id`, or more than {MAX_BATCH}."),
                    "401": _UNAUTHORIZED,
                },
            },
        },
        "/v1/search": {
            "get": {
                "operationId": "searchPackets",
                "summary": "Extension: full-text search over the packets the caller can read.",
                "description": (
                    'Not in the reference protocol. Words are all required; `"a phrase"`,'
                    " `pref*` (2+ characters), `tag:NAME` and `project:NAME` narrow it."
                    " Searches the personal scope, one team (`team`) or every scope of the"
                    " caller (`scope=all`); nothing outside them is read."
                ),
                "parameters": [
                    {
                        "name": "q",
                        "in": "query",
                        "required": True,
                        "description": "The query.",
                        "schema": {"type": "string", "minLength": 1, "maxLength": 512},
                    },
                    _TEAM_QUERY,
                    {
                        "name": "scope",
                        "in": "query",
                        "required": False,
                        "description": "`all`: the personal scope and every team of the caller.",
                        "schema": {"enum": ["all"]},
                    },
                    {
                        "name": "limit",
                        "in": "query",
                        "required": False,
                        "schema": {
                            "type": "integer",
                            "minimum": 1,
                            "maximum": SEARCH_MAX,
                            "default": SEARCH_DEFAULT,
                        },
                    },
                    {
                        "name": "mode",
                        "in": "query",
                        "required": False,
                        "description": _SEARCH_MODE,
                        "schema": {"enum": list(SEARCH_MODES)},
                    },
                ],
                "responses": {
                    "200": _ok("Best first.", _ref("SearchResults")),
                    "400": _error(
                        "A missing or unusable query, a bad query value, or a mode by"
                        " meaning on a server without the semantic extra."
                    ),
                    "401": _UNAUTHORIZED,
                    "404": _error("`team not found`."),
                },
            },
            "post": {
                "operationId": "searchPacketsInBody",
                "summary": "Extension: the same search, its fields in a JSON body.",
                "description": (
                    "Not in the reference protocol. As `GET /v1/search`, with the query in"
                    " the body, which access logs and proxies do not keep (prompt recall"
                    " sends its words so)."
                ),
                "requestBody": _json_body(
                    _obj(
                        {
                            "q": {"type": "string", "minLength": 1, "maxLength": 512},
                            "team": {"type": "string", "minLength": 1},
                            "scope": {"enum": ["all"]},
                            "limit": {
                                "type": "integer",
                                "minimum": 1,
                                "maximum": SEARCH_MAX,
                                "default": SEARCH_DEFAULT,
                            },
                            "mode": {"enum": list(SEARCH_MODES), "description": _SEARCH_MODE},
                        },
                        ["q"],
                    )
                ),
                "responses": {
                    "200": _ok("Best first.", _ref("SearchResults")),
                    "400": _error("Malformed JSON, a missing or unusable query, or a bad field."),
                    "401": _UNAUTHORIZED,
                    "404": _error("`team not found`."),
                    "413": _error(f"The request body is over {limits.MAX_BODY} bytes."),
                    "415": _MEDIA,
                },
            },
        },
        "/v1/packets/{id}/children": {
            "parameters": [_path_param("id", "The packet's id.")],
            "get": {
                "operationId": "packetChildren",
                "summary": "Extension: the packets that continue this one (`parent_id`).",
                "description": "Oldest first; only children the caller can read are listed.",
                "parameters": [_LIMIT_QUERY],
                "responses": {
                    "200": _ok("Oldest first.", _ref("Children")),
                    "400": _error("A bad query value."),
                    "401": _UNAUTHORIZED,
                    "404": _error("`not found`: absent, or not visible to the caller."),
                },
            },
        },
        "/v1/packets/{id}/thread": {
            "parameters": [_path_param("id", "The packet's id.")],
            "get": {
                "operationId": "packetThread",
                "summary": "Extension: the work thread ending at this packet, root first.",
                "responses": {
                    "200": _ok("Root first.", _ref("Thread")),
                    "401": _UNAUTHORIZED,
                    "404": _error("`not found`: absent, or not visible to the caller."),
                },
            },
        },
        "/v1/packets/{id}": {
            "parameters": [_path_param("id", "The packet's id.")],
            "get": {
                "operationId": "getPacket",
                "summary": "One packet, byte for byte as stored.",
                "responses": {
                    "200": {
                        "description": "The packet.",
                        "headers": {
                            "X-Ltm-Conforming": {
                                "description": "`false` for a packet stored in lenient mode"
                                " that does not conform; absent otherwise.",
                                "schema": {"const": "false"},
                            },
                            "X-Ltm-Created-By": {
                                "description": "Extension: the id of the user who stored the"
                                " packet (in a team, its author).",
                                "schema": {"type": "string"},
                            },
                            "X-LTM-Published-At": {
                                "description": "When the packet was published (RFC 3339, UTC);"
                                " sent only while it is published, and only to a caller who"
                                " may publish it.",
                                "schema": {"type": "string", "format": "date-time"},
                            },
                            "X-LTM-Public-URL": {
                                "description": "The packet's public URL, under the same"
                                " conditions as `X-LTM-Published-At`.",
                                "schema": {"type": "string", "format": "uri"},
                            },
                        },
                        "content": {"application/json": {"schema": _ref("StoredPacket")}},
                    },
                    "401": _UNAUTHORIZED,
                    "404": _error("`not found`: absent, or not visible to the caller."),
                },
            },
            "delete": {
                "operationId": "deletePacket",
                "summary": "Delete a packet.",
                "description": "Personal packets: their owner. Team packets: the member who"
                " pushed it, or the team's owner. Anyone else gets 404.",
                "responses": {
                    "204": _NO_CONTENT,
                    "401": _UNAUTHORIZED,
                    "404": _error("`not found`."),
                },
            },
        },
        "/v1/teams": {
            "post": {
                "operationId": "createTeam",
                "summary": "Create a team owned by the caller.",
                "requestBody": _json_body(_ref("NewTeam")),
                "responses": {
                    "201": _ok(
                        "Created.",
                        _ref("TeamCreated"),
                        links={
                            op: {
                                "operationId": op,
                                "parameters": {"name": "$response.body#/team/name"},
                            }
                            for op in ("listMembers", "createInvite", "leaveTeam", "deleteTeam")
                        },
                    ),
                    "400": _error(
                        "Malformed JSON, or `team name must match ^[a-z0-9][a-z0-9_-]{0,39}$`."
                    ),
                    "401": _UNAUTHORIZED,
                    "409": _error("`team name already taken`."),
                    "413": _TOO_LARGE,
                    "415": _MEDIA,
                },
            },
            "get": {
                "operationId": "listTeams",
                "summary": "The caller's teams.",
                "responses": {"200": _ok("Oldest first.", _ref("TeamList")), "401": _UNAUTHORIZED},
            },
        },
        "/v1/teams/{name}": {
            "parameters": [_NAME],
            "delete": {
                "operationId": "deleteTeam",
                "summary": "Delete a team with its members, invites and packets (owner only).",
                "responses": {
                    "204": _NO_CONTENT,
                    "401": _UNAUTHORIZED,
                    "403": _error("`only the team owner can delete a team`."),
                    "404": _error("`team not found`."),
                },
            },
        },
        "/v1/teams/{name}/members": {
            "parameters": [_NAME],
            "get": {
                "operationId": "listMembers",
                "summary": "The team's members, the owner first.",
                "responses": {
                    "200": _ok("Members.", _ref("MemberList")),
                    "401": _UNAUTHORIZED,
                    "404": _error("`team not found`."),
                },
            },
        },
        "/v1/teams/{name}/members/{user_id}": {
            "parameters": [_NAME, _path_param("user_id", "The member's user id.")],
            "delete": {
                "operationId": "removeMember",
                "summary": "Remove a member (owner only).",
                "responses": {
                    "204": _NO_CONTENT,
                    "400": _error(
                        "`owner cannot be removed; transfer ownership or delete the team`."
                    ),
                    "401": _UNAUTHORIZED,
                    "403": _error("`only the team owner can remove members`."),
                    "404": _error("`team not found` or `not a member`."),
                },
            },
        },
        "/v1/teams/{name}/leave": {
            "parameters": [_NAME],
            "post": {
                "operationId": "leaveTeam",
                "summary": "Leave a team (not the owner).",
                "responses": {
                    "204": _NO_CONTENT,
                    "400": _error("`owner cannot leave; transfer ownership or delete the team`."),
                    "401": _UNAUTHORIZED,
                    "404": _error("`team not found`."),
                    "413": _TOO_LARGE,
                },
            },
        },
        "/v1/teams/{name}/invites": {
            "parameters": [_NAME],
            "post": {
                "operationId": "createInvite",
                "summary": "A single-use invite code, valid 7 days (any member).",
                "description": "The URL's base is the server's external URL when configured,"
                " else X-Forwarded-Proto/X-Forwarded-Host, else the Host header.",
                "responses": {
                    "201": _ok(
                        "Created.",
                        _ref("Invite"),
                        links={
                            "AcceptInvite": {
                                "operationId": "acceptInvite",
                                "parameters": {"code": "$response.body#/code"},
                            }
                        },
                    ),
                    "401": _UNAUTHORIZED,
                    "404": _error("`team not found`."),
                    "413": _TOO_LARGE,
                },
            },
        },
        "/v1/invites/{code}/accept": {
            "parameters": [_path_param("code", "The invite code.")],
            "post": {
                "operationId": "acceptInvite",
                "summary": "Join the invite's team.",
                "description": "With a bearer token the caller joins; without one a new user"
                " is created and their token returned once. Of concurrent accepts of one"
                " code exactly one succeeds.",
                "security": [{}, {"bearer": []}],
                "requestBody": _json_body(_ref("AcceptInvite"), required=False),
                "responses": {
                    "201": _ok("Joined.", _ref("Accepted")),
                    "400": _error("Malformed JSON or an invalid display name."),
                    "401": _error(
                        "`missing bearer token` or `invalid token` (an Authorization"
                        " header was sent but holds no valid token)."
                    ),
                    "409": _error("A freshly minted id collided; try again."),
                    "410": _error(
                        "`invite expired or already consumed`: unknown, expired or used."
                    ),
                    "413": _TOO_LARGE,
                    "415": _MEDIA,
                },
            },
        },
    }


@cache
def document() -> dict[str, Any]:
    """The OpenAPI 3.1 document (built once)."""
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "ltm",
            "version": __version__,
            "summary": "Core Memory Packets for AI coding agents: the ltm protocol's HTTP API.",
            "description": (
                'Every error is `{"error": message}`. Authenticated routes take'
                " `Authorization: Bearer <token>`. Unknown paths answer 404 and known paths"
                " with another method 405, both with an `error` body (self-hosted; on API"
                " Gateway those never reach the app and API Gateway answers itself)."
                " Self-hosted, the HTTP server itself may also answer any request with 400"
                " (malformed HTTP) or 413 (a body over its route's bound, 32 KiB unless the"
                " route says otherwise; headers over 64 KiB)."
            ),
            "license": {"name": "Apache-2.0", "identifier": "Apache-2.0"},
        },
        "jsonSchemaDialect": "https://json-schema.org/draft/2020-12/schema",
        "security": _BEARER,
        "paths": _with_scopes(
            {
                **_paths(),
                **publish_paths(),
                **account_paths(),
                **share_paths(),
                **device_paths(),
                **web_paths(),
                **mcp_paths(),
            }
        ),
        "components": {
            "schemas": {**_schemas(), **device_schemas(), **share_schemas()},
            "securitySchemes": {
                "bearer": {"type": "http", "scheme": "bearer", "description": "An ltm token."}
            },
        },
    }


# The scope each bearer route needs (``need`` in ``chalicelib.service``); any other is "write".
# OpenAPI 3.1 lets a non-OAuth security requirement list roles: the token's scopes here.
_READS = {
    ("/v1/whoami", "get"),
    ("/v1/packets", "get"),
    ("/v1/packets/{id}", "get"),
    ("/v1/packets/batch", "get"),
    ("/v1/packets/{id}/children", "get"),
    ("/v1/packets/{id}/thread", "get"),
    ("/v1/search", "get"),
    ("/v1/search", "post"),  # the same search, its fields in the body
    ("/v1/teams", "get"),
    ("/v1/teams/{name}/members", "get"),
    ("/v1/packets/{id}/shares", "get"),
    ("/v1/shared", "get"),
}
_FULL = {
    ("/v1/device/approve", "get"),  # it names the device a code would sign in as the caller
    ("/v1/device/approve", "post"),
    ("/v1/tokens", "get"),
    ("/v1/tokens/{label}", "delete"),
    # Publishing answers a URL that reads the packet: a write-only token must not get one.
    ("/v1/packets/{id}/publish", "post"),
    ("/v1/packets/{id}/publish", "delete"),
    ("/v1/web/sign-in-key", "post"),  # a web session may delete
    # An invite reads the team's packets, a share the packet, through another account.
    ("/v1/teams/{name}/invites", "post"),
    ("/v1/packets/{id}/shares", "post"),
}


def _with_scopes(paths: dict[str, Any]) -> dict[str, Any]:
    """Each bearer operation's scope, and its 403 ``insufficient scope`` (RFC 6750 §3.1)."""
    for path, item in paths.items():
        for method, operation in item.items():
            if method == "parameters" or operation.get("security") == []:
                continue
            if path == "/mcp":
                # Any token of this server, or an OAuth one for this /mcp: each tool asks
                # its own scope and answers a lack of it as a tool error, not with a 403.
                operation["security"] = [{"bearer": []}]
                continue
            need = "read" if (path, method) in _READS else "write"
            if (path, method) in _FULL:
                need = "read write"
            scopes = need.split()
            security = operation.get("security", _BEARER)
            operation["security"] = [{"bearer": scopes} if r else r for r in security]
            responses = operation["responses"]
            refused = (
                f"`insufficient scope`: the token was not granted `{need}`; the answer carries"
                f' `WWW-Authenticate: Bearer error="insufficient_scope", scope="{need}"`.'
            )
            if "403" in responses:
                refused += " Or: " + responses["403"]["description"]
            responses["403"] = {
                **_error(refused),
                "headers": {"WWW-Authenticate": {"schema": {"type": "string"}}},
            }
    return paths


@cache
def document_json() -> str:
    return json.dumps(document(), separators=(",", ":"))


# -- the device flow (RFC 8628) and the caller's tokens --------------------------------------

_FORM = "application/x-www-form-urlencoded"
_HTML = {"text/html": {"schema": {"type": "string"}}}
_NO_STORE = {
    "Cache-Control": {"description": "Always `no-store`.", "schema": {"const": "no-store"}}
}


def _oauth_error(description: str) -> dict[str, Any]:
    return {
        "description": description,
        "content": {"application/json": {"schema": _ref("OAuthError")}},
    }


def _page(description: str) -> dict[str, Any]:
    return {"description": description, "content": _HTML}


def _form_body(properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        schema["required"] = required
    return {"required": True, "content": {_FORM: {"schema": schema}}}


def device_schemas() -> dict[str, Any]:
    """Component schemas of the device flow and token routes (and publishing's answer)."""
    return {
        "Published": _obj({"id": _STRING, "public_url": {"type": "string", "format": "uri"}}),
        "OAuthError": {
            "type": "object",
            "description": "RFC 6749 §5.2.",
            "properties": {
                "error": {
                    **_STRING,
                    "description": "`invalid_request`, `invalid_client`, `invalid_grant`,"
                    " `invalid_scope`, `unsupported_grant_type`, `authorization_pending`,"
                    " `slow_down`, `access_denied`, `expired_token`,"
                    " `temporarily_unavailable` or `server_error`.",
                },
                "error_description": _STRING,
            },
            "required": ["error"],
        },
        "DeviceAuthorization": _obj(
            {
                "device_code": {**_STRING, "description": "The device's secret (256 bits)."},
                "user_code": {
                    **_STRING,
                    "pattern": "^[BCDFGHJKLMNPQRSTVWXZ]{4}-[BCDFGHJKLMNPQRSTVWXZ]{4}$",
                },
                "verification_uri": {**_STRING, "description": "`{server}/device`."},
                "verification_uri_complete": {
                    **_STRING,
                    "description": "`{server}/device?code={user_code}`.",
                },
                "expires_in": {"type": "integer", "minimum": 1},
                "interval": {"type": "integer", "minimum": 1},
            }
        ),
        "DeviceToken": _obj(
            {
                "access_token": {
                    **_STRING,
                    "description": "An ltm bearer token (no refresh): valid until revoked, or"
                    " until `expires_in` runs out where the operator set a lifetime"
                    " (`LTM_DEVICE_TOKEN_DAYS`); signing in again gives a new one.",
                },
                "token_type": {"const": "Bearer"},
                "scope": _STRING,
                "expires_in": {
                    "type": "integer",
                    "minimum": 1,
                    "description": "Seconds the token works; absent when it lasts until revoked.",
                },
            },
            ["access_token", "token_type", "scope"],
        ),
        "DeviceDecision": {
            "type": "object",
            "properties": {
                "user_code": {
                    **_STRING,
                    "description": "As shown, `XXXX-XXXX` (case, dashes and spaces do not matter).",
                },
                "approve": {"type": "boolean", "default": True},
            },
            "required": ["user_code"],
        },
        "DeviceDecided": _obj(
            {
                "status": {"enum": ["pending", "approved", "denied"]},
                "device": _obj(
                    {
                        "client_id": _STRING,
                        "name": {**_STRING, "description": "What the device said it is."},
                        "requested_at": _TIME,
                        "from": {**_STRING, "description": "The address it asked from."},
                        "scope": {**_STRING, "description": "What the device's token may do."},
                    }
                ),
            }
        ),
        "OwnToken": _obj(
            {
                "label": _STRING,
                "created_at": _TIME,
                "last_used_at": {"type": ["string", "null"], "format": "date-time"},
                "expires_at": {
                    "type": ["string", "null"],
                    "format": "date-time",
                    "description": "When it stops working; null: when revoked.",
                },
                "current": {
                    "type": "boolean",
                    "description": "The token this request was made with.",
                },
                "scope": {
                    **_STRING,
                    "description": "`read`, `write` or `read write` (space-separated).",
                },
            }
        ),
        "OwnTokenList": _obj({"tokens": {"type": "array", "items": _ref("OwnToken")}}),
        "Whoami": _obj(
            {
                "user": _obj({"id": _STRING, "display": _STRING}),
                "scope": {**_STRING, "description": "`read`, `write` or `read write`."},
                "token": _obj(
                    {
                        "label": _STRING,
                        "scope": {
                            **_STRING,
                            "description": "`read`, `write` or `read write` (space-separated).",
                        },
                        "created_at": _TIME,
                    }
                ),
            },
            ["user", "scope"],
        ),
    }


def device_paths() -> dict[str, Any]:
    """The device flow (no bearer: ``/oauth/*`` and the ``/device`` pages) and token routes."""
    oauth_400 = _oauth_error(
        "An RFC 6749/8628 error: a missing, repeated or malformed parameter, an unknown"
        " client, grant or scope, or (token endpoint) `authorization_pending`, `slow_down`,"
        " `access_denied`, `expired_token`."
    )
    oauth_401 = _oauth_error(
        "`invalid_client` when the request carried an Authorization header (RFC 6749 §5.2)."
    )
    return {
        "/oauth/authorize_device": {
            "post": {
                "operationId": "authorizeDevice",
                "summary": "Start a device sign-in (RFC 8628 §3.1).",
                "security": [],
                "requestBody": _form_body(
                    {
                        "client_id": {"enum": ["ltm-cli"]},
                        "scope": {"description": "Space-separated; `read write` by default."},
                        "device_name": {"description": "Optional: what to call this device."},
                    },
                    ["client_id"],
                ),
                "responses": {
                    "200": _ok("A new device code and user code.", _ref("DeviceAuthorization")),
                    "400": oauth_400,
                    "401": oauth_401,
                    "429": _oauth_error("`slow_down`: too many sign-ins from this address."),
                    "503": _oauth_error("`temporarily_unavailable`."),
                },
            }
        },
        "/oauth/token": {
            "post": {
                "operationId": "deviceToken",
                "summary": "Poll for the token of a device sign-in (RFC 8628 §3.4).",
                "security": [],
                "requestBody": _form_body(
                    {
                        "grant_type": {"enum": ["urn:ietf:params:oauth:grant-type:device_code"]},
                        "device_code": {"description": "From `/oauth/authorize_device`."},
                        "client_id": {"enum": ["ltm-cli"]},
                    },
                    ["grant_type", "device_code", "client_id"],
                ),
                "responses": {
                    "200": {
                        **_ok("Approved: the device's token (once).", _ref("DeviceToken")),
                        "headers": _NO_STORE,
                    },
                    "400": oauth_400,
                    "401": oauth_401,
                    "503": _oauth_error("`temporarily_unavailable`."),
                },
            }
        },
        "/device": {
            "get": {
                "operationId": "devicePage",
                "summary": "The verification page (HTML): enter the code.",
                "security": [],
                "parameters": [
                    {
                        "name": "code",
                        "in": "query",
                        "required": False,
                        "description": "The user code, to fill in (`verification_uri_complete`).",
                        "schema": {},
                    }
                ],
                "responses": {"200": _page("The form.")},
            },
            "post": {
                "operationId": "deviceEnterCode",
                "summary": "Submit the code (and, self-hosted, an existing token) (HTML).",
                "security": [],
                "requestBody": _form_body(
                    {
                        "csrf": {"description": "The form's CSRF token."},
                        "code": {"description": "The user code."},
                        "token": {"description": "Self-hosted: one of the person's tokens."},
                    },
                    ["csrf"],
                ),
                "responses": {
                    "200": _page("Which device asks, with approve and deny buttons."),
                    "303": _page("With Cognito: on to the managed sign-in."),
                    "400": _page("A malformed form or a missing token."),
                    "401": _page("The token was not accepted."),
                    "403": _page(
                        "No session cookie, a wrong CSRF token, or a token without the full"
                        " scope (`read write`), which approving a device needs."
                    ),
                    "404": _page("A wrong or expired code."),
                    "409": _page("The code was already approved or denied."),
                    "429": _page(
                        "Too many wrong codes charged to this person, code or (before a"
                        " Cognito sign-in) address, or from everyone; wait. Past the address"
                        " limit alone, a Cognito server signs the person in first (303)."
                    ),
                },
            },
        },
        "/device/callback": {
            "get": {
                "operationId": "deviceCallback",
                "summary": "Back from Cognito's managed sign-in (HTML).",
                "security": [],
                "parameters": [
                    {"name": name, "in": "query", "required": False, "schema": {}}
                    for name in ("code", "state", "error")
                ],
                "responses": {
                    "200": _page("Which device asks, with approve and deny buttons."),
                    "400": _page("A bad or expired state, or a cancelled sign-in."),
                    "404": _page(
                        "This server does not sign in through Cognito, or (a code looked up"
                        " after the sign-in) a wrong or expired code."
                    ),
                    "409": _page("Already approved or denied."),
                    "410": _page("The code expired."),
                    "429": _page("Too many wrong codes charged to this person; wait."),
                    "502": _page("Cognito refused the code or sent an invalid ID token."),
                },
            }
        },
        "/device/decide": {
            "post": {
                "operationId": "deviceDecide",
                "summary": "Approve or deny the device (HTML).",
                "security": [],
                "requestBody": _form_body(
                    {
                        "csrf": {"description": "The form's CSRF token."},
                        "ticket": {"description": "The signed sign-in ticket of the page."},
                        "action": {"enum": ["approve", "deny"]},
                    },
                    ["csrf"],
                ),
                "responses": {
                    "200": _page("Approved or denied."),
                    "400": _page("A malformed form, a bad ticket or no action."),
                    "403": _page("No session cookie or a wrong CSRF token."),
                    "409": _page("Already approved or denied."),
                    "410": _page("The code expired."),
                },
            }
        },
        "/v1/device/approve": {
            "get": {
                "operationId": "pendingDevice",
                "summary": "The device sign-in a code names, without deciding it (`ltm approve`"
                " shows it and asks before approving).",
                "description": "RFC 8628 section 5.4: a code can be sent by someone who started"
                " the sign-in on their own machine, so the device is shown before it is approved."
                " `status` is `pending`. Needs a token with the full scope; wrong codes count"
                " toward the same limits as a decision's.",
                "parameters": [
                    {
                        "name": "user_code",
                        "in": "query",
                        "required": True,
                        "description": "As shown, `XXXX-XXXX`.",
                        "schema": {"type": "string"},
                    }
                ],
                "responses": {
                    "200": _ok("The waiting sign-in.", _ref("DeviceDecided")),
                    "400": _error("`user_code` given more than once."),
                    "401": _UNAUTHORIZED,
                    "404": _error("A wrong or expired code."),
                    "409": _error("The code was already approved or denied."),
                    "429": _error("Too many wrong codes; wait."),
                },
            },
            "post": {
                "operationId": "approveDevice",
                "summary": "Approve (or deny) a device sign-in as the caller (`ltm approve`).",
                "description": "The device polling `/oauth/token` then receives a new token of"
                " the caller's with the scope the device asked for, labelled after the device."
                " Needs a token with the full scope. Wrong codes are rate-limited per caller"
                " and globally.",
                "requestBody": _json_body(_ref("DeviceDecision")),
                "responses": {
                    "200": _ok("Decided.", _ref("DeviceDecided")),
                    "400": _error("Malformed JSON or `approve` not a boolean."),
                    "401": _UNAUTHORIZED,
                    "404": _error("A wrong or expired code."),
                    "409": _error("The code was already approved or denied."),
                    "413": _TOO_LARGE,
                    "415": _MEDIA,
                    "429": _error("Too many wrong codes; wait."),
                },
            },
        },
        "/v1/whoami": {
            "get": {
                "operationId": "whoami",
                "summary": "Who the token belongs to, and what it may do (an extension).",
                "description": "A reference server has no such route (404): `ltm whoami` then"
                " checks the token with a listing instead.",
                "responses": {"200": _ok("The caller.", _ref("Whoami")), "401": _UNAUTHORIZED},
            },
            "patch": {
                "operationId": "renameMe",
                "summary": "Change the caller's display name (an extension).",
                "description": "Display names are unique per server without regard to case:"
                " another user's name, in any case, is 409.",
                "requestBody": {
                    "required": True,
                    "content": {
                        "application/json": {
                            "schema": _obj({"display": {"type": "string", "maxLength": 64}})
                        }
                    },
                },
                "responses": {
                    "200": _ok(
                        "The caller, renamed.",
                        _obj({"user": _obj({"id": _STRING, "display": _STRING})}),
                    ),
                    "400": _error("`display: ...` (empty, too long, control characters)."),
                    "401": _UNAUTHORIZED,
                    "403": _error("`insufficient scope`: a read-only token."),
                    "409": _error("`display: 'Sam' is taken on this server ...`."),
                    "415": _MEDIA,
                },
            },
        },
        "/v1/tokens": {
            "get": {
                "operationId": "listOwnTokens",
                "summary": "The caller's tokens (never the secrets), oldest first.",
                "responses": {"200": _ok("Tokens.", _ref("OwnTokenList")), "401": _UNAUTHORIZED},
            }
        },
        "/v1/tokens/{label}": {
            "parameters": [_path_param("label", "The token's label.")],
            "delete": {
                "operationId": "revokeOwnToken",
                "summary": "Revoke one of the caller's tokens; it stops working at once.",
                "responses": {
                    "204": _NO_CONTENT,
                    "401": _UNAUTHORIZED,
                    "404": _error("`token not found` (or not the caller's)."),
                },
            },
        },
    }


# -- publishing and the web view -----------------------------------------------------------


def publish_paths() -> dict[str, Any]:
    """Publishing, as the reference CLI calls it (``ltm publish`` / ``ltm unpublish``)."""
    not_found = _error(
        "`not found`: no such packet, or the caller may not publish it (only its owner;"
        " in a team, its creator or the team's owner)."
    )
    return {
        "/v1/packets/{id}/publish": {
            "parameters": [_path_param("id", "The packet id.")],
            "post": {
                "operationId": "publishPacket",
                "summary": "Publish a packet at a public, read-only URL (no sign-in to read it).",
                "description": "The URL ends in a random 192-bit secret, never the packet id."
                " Publishing a published packet answers its existing URL (200). Needs a token"
                " with `read write`: the URL reads the packet, so `write` alone is not enough.",
                "responses": {
                    "200": _ok("Already published.", _ref("Published")),
                    "201": _ok("Published now.", _ref("Published")),
                    "401": _UNAUTHORIZED,
                    "404": not_found,
                },
            },
            "delete": {
                "operationId": "unpublishPacket",
                "summary": "Unpublish: the public URL answers 404 from now on.",
                "responses": {"204": _NO_CONTENT, "401": _UNAUTHORIZED, "404": not_found},
            },
        },
    }


def account_paths() -> dict[str, Any]:
    """An extension for clients: a browser sign-in from the CLI (``ltm open``)."""
    return {
        "/v1/web/sign-in-key": {
            "post": {
                "operationId": "webSignInKey",
                "summary": "A short-lived, single-use key that signs a browser in (`ltm open`).",
                "description": "The client posts `key` to `url` from the browser (a form, never"
                " a URL). The session it starts lasts while the token that asked for it does.",
                "responses": {
                    "201": _ok(
                        "The key.",
                        _obj(
                            {
                                "url": {"type": "string", "format": "uri"},
                                "key": _STRING,
                                "expires_in": {"type": "integer"},
                            },
                            ["url", "key", "expires_in"],
                        ),
                    ),
                    "401": _UNAUTHORIZED,
                },
            }
        },
    }


# -- sharing one packet with one user (an extension: a reference server has no such routes) --


def share_schemas() -> dict[str, Any]:
    person = {
        "type": ["object", "null"],
        "properties": {"id": _STRING, "display": _STRING},
        "required": ["id", "display"],
    }
    return {
        "SharePerson": person,
        "Share": _obj(
            {
                "packet_id": _STRING,
                "user": {**_ref("SharePerson"), "description": "Who may read the packet."},
                "shared_by": {
                    **_ref("SharePerson"),
                    "description": "Who shared it (null when that user is gone).",
                },
                "created_at": _TIME,
            }
        ),
        "SharedPacket": _obj(
            {
                "id": _STRING,
                "created_at": _STRING,
                "goal": _STRING,
                "project": {"type": ["string", "null"]},
                "shared_by": _ref("SharePerson"),
                "shared_at": _TIME,
            }
        ),
    }


def share_paths() -> dict[str, Any]:
    """Sharing one packet with one user, read-only (``chalicelib.service.share``)."""
    packet_id = _path_param("id", "The packet id.")
    not_found = _error(
        "`not found`: no such packet, or the caller cannot read it in its own scope (a"
        " recipient cannot share it again)."
    )
    return {
        "/v1/packets/{id}/shares": {
            "parameters": [packet_id],
            "post": {
                "operationId": "sharePacket",
                "summary": "Let one more user read this one packet (never change or delete it).",
                "description": "Whoever reads the packet in its own scope may share it. The"
                " user is named by their id, or by the display name of someone the caller"
                " shares a team with; anyone else is `user not found`, as for nobody at all."
                " Sharing again answers the existing share (200).",
                "requestBody": _json_body(
                    _obj({"user": {**_STRING, "description": "A display name or a user id."}})
                ),
                "responses": {
                    "200": _ok("Already shared with that user.", _obj({"share": _ref("Share")})),
                    "201": _ok("Shared now.", _obj({"share": _ref("Share")})),
                    "400": _error(
                        "No user given, the caller themself, an ambiguous name, or (a team's"
                        " packet) one of its members, who read it already."
                    ),
                    "401": _UNAUTHORIZED,
                    "404": _error("`user not found`, or " + not_found["description"]),
                    "413": _TOO_LARGE,
                    "415": _MEDIA,
                },
            },
            "get": {
                "operationId": "listPacketShares",
                "summary": "Whom the packet is shared with: every share for its owner (or its"
                " team's owner), the caller's own shares for anyone else who reads it.",
                "responses": {
                    "200": _ok("The shares, oldest first.", _obj({"shares": _array("Share")})),
                    "401": _UNAUTHORIZED,
                    "404": not_found,
                },
            },
        },
        "/v1/packets/{id}/shares/{user}": {
            "parameters": [
                packet_id,
                _path_param("user", "The recipient's user id or display name."),
            ],
            "delete": {
                "operationId": "unsharePacket",
                "summary": "End a share at once: by its sharer, the packet's owner (or its"
                " team's owner), or the recipient.",
                "responses": {
                    "204": _NO_CONTENT,
                    "400": _error("The name fits more than one recipient; give the id."),
                    "401": _UNAUTHORIZED,
                    "404": _error("`share not found`, or " + not_found["description"]),
                },
            },
        },
        "/v1/shared": {
            "get": {
                "operationId": "listSharedWithMe",
                "summary": "The packets others shared with the caller, the newest share first."
                " Read each with `GET /v1/packets/{id}`.",
                "parameters": [
                    {
                        "name": "limit",
                        "in": "query",
                        "required": False,
                        "schema": {"type": "integer", "minimum": 1, "maximum": SHARED_MAX},
                    }
                ],
                "responses": {
                    "200": _ok("The packets.", _obj({"packets": _array("SharedPacket")})),
                    "400": _error("A bad limit."),
                    "401": _UNAUTHORIZED,
                },
            }
        },
    }


def _array(model: str) -> dict[str, Any]:
    return {"type": "array", "items": _ref(model)}


def mcp_paths() -> dict[str, Any]:
    """Remote MCP (``chalicelib.mcp``): ``/mcp`` and the OAuth 2.1 endpoints in front of it.

    The official MCP SDK answers them (Streamable HTTP, stateless; its OAuth
    handlers), so their bodies are the MCP specification's and RFCs' (6749,
    7009, 7591, 8414, 9728), described here by reference rather than re-stated.
    """
    anything: dict[str, Any] = {"content": {"application/json": {"schema": {}}}}
    oauth = _oauth_error("An OAuth error (`invalid_request`, `invalid_grant`, ...).")

    def answers(**statuses: str) -> dict[str, Any]:
        return {code: {"description": text, **anything} for code, text in statuses.items()}

    def document(operation: str, summary: str) -> dict[str, Any]:
        read = {
            "operationId": operation,
            "summary": summary,
            "security": [],
            "responses": answers(**{"200": "The metadata document."}),
        }
        return {
            "get": read,
            "options": {**read, "operationId": operation + "Preflight", "summary": "CORS."},
        }

    def endpoint(operation: str, summary: str, method: str, **statuses: str) -> dict[str, Any]:
        done = {
            "operationId": operation,
            "summary": summary,
            "security": [],
            "requestBody": {"content": {_FORM: {"schema": {"type": "object"}}}},
            "responses": {**answers(**statuses), "400": oauth, "401": oauth},
        }
        return {
            method: done,
            "options": {
                "operationId": operation + "Preflight",
                "summary": "CORS.",
                "security": [],
                "responses": answers(**{"200": "CORS preflight."}),
            },
        }

    refused = {"405": {"description": "Stateless: no event stream and no session to end."}}
    return {
        "/mcp": {
            "post": {
                "operationId": "mcp",
                "summary": "MCP over Streamable HTTP, stateless: one JSON-RPC message, one JSON"
                " answer (the MCP specification's transports page). A bearer token: an ltm"
                " token, or an OAuth token issued for this `/mcp`.",
                "requestBody": {"content": {"application/json": {"schema": {}}}},
                "responses": {
                    **answers(
                        **{
                            "200": "The JSON-RPC answer.",
                            "202": "A notification, taken.",
                            "400": "Not a JSON-RPC message.",
                            "404": "Not found.",
                            "406": "The Accept header takes no JSON.",
                            "413": "Too large.",
                            "415": "Not JSON.",
                        }
                    ),
                    "401": {
                        **_UNAUTHORIZED,
                        "description": "No valid token: `WWW-Authenticate` names the protected"
                        " resource metadata (RFC 9728).",
                    },
                    "403": {
                        "description": "The request's `Origin` is not this server's own (the"
                        " transport's DNS rebinding rule).",
                        **anything,
                    },
                },
            },
            "options": {
                "operationId": "mcpOptions",
                "summary": "The methods `/mcp` answers, in `Allow` (as a 405 names them); 403"
                " for a foreign `Origin`.",
                "responses": {"204": {"description": "No content; `Allow: OPTIONS, POST`."}},
            },
            "get": {"operationId": "mcpStream", "summary": "No stream.", "responses": refused},
            "delete": {"operationId": "mcpEnd", "summary": "No session.", "responses": refused},
            "put": {"operationId": "mcpPut", "summary": "Not MCP's.", "responses": refused},
            "patch": {"operationId": "mcpPatch", "summary": "Not MCP's.", "responses": refused},
        },
        "/.well-known/oauth-protected-resource/mcp": document(
            "protectedResource", "`/mcp`'s protected resource metadata (RFC 9728)."
        ),
        "/.well-known/oauth-protected-resource": document(
            "protectedResourceRoot", "The same document, at the root path (RFC 9728 §3)."
        ),
        "/.well-known/oauth-authorization-server": document(
            "authorizationServer", "The authorization server's metadata (RFC 8414)."
        ),
        "/.well-known/openid-configuration": document(
            "authorizationServerOidc",
            "The same metadata where clients look for an issuer with a path (a stage).",
        ),
        "/authorize": {
            method: {
                "operationId": "authorize" + method.title(),
                "summary": "Start an authorization (code + PKCE S256): on to sign-in and consent.",
                "security": [],
                "responses": {
                    "302": {"description": "To the consent page, or back with an error."},
                    "400": oauth,
                },
            }
            for method in ("get", "post")
        },
        "/token": endpoint(
            "token",
            "Exchange a code (with its PKCE verifier) or a refresh token (rotated).",
            "post",
            **{"200": "The tokens."},
        ),
        "/register": endpoint(
            "register", "Dynamic client registration (RFC 7591).", "post", **{"201": "Registered."}
        ),
        "/revoke": endpoint("revoke", "Revoke a token (RFC 7009).", "post", **{"200": "Revoked."}),
    }


def web_paths() -> dict[str, Any]:
    """The web view's pages (HTML, a browser session, never a bearer) and public pages."""
    to_sign_in = _page("Not signed in: on to `/web/signin?next=...`.")
    missing = _page("Not found, or not visible to the signed-in user.")

    # A loopback server's signed-in pages have a name of their own (*.localhost): asked at
    # another address, nothing is read and no cookie is set.
    misdirected = _page("Asked at another address than the pages' own: nothing is read.")

    def page(operation: str, summary: str, **responses: dict[str, Any]) -> dict[str, Any]:
        return {
            "operationId": operation,
            "summary": summary,
            "security": [],
            "responses": {
                "200": _page(summary),
                "303": to_sign_in,
                "421": misdirected,
                **responses,
            },
        }

    query = [
        {"name": name, "in": "query", "required": False, "schema": {"type": "string"}}
        for name in ("team", "tag", "project", "after", "done")
    ]
    # Not required: a signed-out request is sent to sign in (303) before its body is read.
    form = {
        **_form_body({"csrf": {"description": "The form's CSRF token (signed in: needed)."}}, []),
        "required": False,
    }
    return {
        "/": {"get": page("home", "On to `/web`.")},
        "/web": {
            "get": {
                **page(
                    "webPackets",
                    "The signed-in user's packets, or a team's, newest first.",
                    **{"400": _page("A bad filter or position."), "404": missing},
                ),
                "parameters": query,
            }
        },
        "/web/packets/{id}": {
            "parameters": [_path_param("id", "The packet id.")],
            "get": page(
                "webPacket", "One packet, in the resume block's order.", **{"404": missing}
            ),
        },
        "/web/packets/{id}/delete": {
            "parameters": [_path_param("id", "The packet id.")],
            "get": page(
                "webConfirmDelete",
                "Asks before deleting.",
                **{"403": _page("Not the creator or the team's owner."), "404": missing},
            ),
            "post": {
                **page(
                    "webDelete",
                    "Deletes, then on to the list (303).",
                    **{"403": _page("A wrong CSRF token, or not allowed."), "404": missing},
                ),
                "requestBody": form,
            },
        },
        "/web/teams/{name}": {
            "parameters": [_path_param("name", "The team's name.")],
            "get": page(
                "webTeam", "A team's members; pending invites for its owner.", **{"404": missing}
            ),
        },
        "/web/authorize": {
            "get": {
                **page(
                    "webConsent",
                    "An MCP client's consent page: who asks, where the answer goes.",
                    **{"410": _page("The sign-in ended (unknown, answered, or late).")},
                ),
                "parameters": [
                    {"name": "request", "in": "query", "required": False, "schema": _STRING}
                ],
            },
            "post": {
                "operationId": "webConsentAnswer",
                "summary": "Allow or deny: back to the client with a code or `access_denied`.",
                "security": [],
                # Not required: a signed-out request is sent to sign in (303) before it is read.
                "requestBody": {
                    **_form_body(
                        {
                            "request": {"description": "The authorization request."},
                            "csrf": {"description": "The form's CSRF token."},
                            "answer": {"description": "`allow`, else a denial."},
                        },
                        [],  # judged after the session: a signed-out form goes to sign in
                    ),
                    "required": False,
                },
                "responses": {
                    "303": _page("Back to the client, or on to sign in."),
                    "403": _page("A wrong CSRF token or another site's form."),
                    "410": _page("The sign-in ended."),
                    "421": _page("Asked at another address than the pages' own."),
                },
            },
        },
        "/web/signin": {
            "get": {
                **page("webSignInPage", "The sign-in page."),
                "parameters": [
                    {"name": "next", "in": "query", "required": False, "schema": {"type": "string"}}
                ],
            },
            "post": {
                "operationId": "webSignIn",
                "summary": "Sign in: a token (self-hosted), or on to Cognito.",
                "security": [],
                "requestBody": _form_body(
                    {
                        "csrf": {"description": "The form's CSRF token."},
                        "next": {"description": "Which page to go to afterwards."},
                        "token": {"description": "Self-hosted: one of the person's tokens."},
                    },
                    ["csrf"],
                ),
                "responses": {
                    "303": _page("Signed in (a session cookie), or on to Cognito."),
                    "400": _page("No token."),
                    "401": _page("The token was not accepted."),
                    "403": _page("No session cookie or a wrong CSRF token."),
                    "429": _page("Too many wrong tokens; wait."),
                },
            },
        },
        "/web/signin/code": {
            "post": {
                "operationId": "webSignInCode",
                "summary": "Sign in by a code approved from a signed-in CLI (`ltm approve CODE`):"
                " `step=new` shows a code, `step=check` continues once it is approved.",
                "security": [],
                "requestBody": _form_body(
                    {
                        "csrf": {"description": "The form's CSRF token."},
                        "next": {"description": "Which page to go to afterwards."},
                        "step": {"description": "`new` (a code) or `check` (continue)."},
                        "ticket": {"description": "`check`: the signed ticket of the code."},
                    },
                    ["csrf"],
                ),
                "responses": {
                    "200": _page("The code to approve (again, while it is not approved)."),
                    "303": _page("Approved: signed in (a session cookie), on to `next`."),
                    "400": _page("The ticket expired or belongs to another browser."),
                    "403": _page("No session cookie, a wrong CSRF token, or the code was denied."),
                    "410": _page("The code was used already or expired."),
                    "429": _page("Too many codes asked for from this address; wait."),
                },
            }
        },
        "/web/signout": {
            "post": {
                "operationId": "webSignOut",
                "summary": "Sign out: every session of this user ends.",
                "security": [],
                "requestBody": form,
                "responses": {
                    "303": _page("Signed out; on to the sign-in page."),
                    "403": _page("A wrong CSRF token."),
                },
            }
        },
        "/web/ui": {
            "get": {
                "operationId": "webLocalKey",
                "summary": "`ltm ui` only: its one-time key becomes a session cookie.",
                "security": [],
                "parameters": [
                    {"name": "key", "in": "query", "required": False, "schema": {"type": "string"}}
                ],
                "responses": {
                    "303": _page("On to `/web`, signed in."),
                    "403": _page("A wrong or used key."),
                    "404": _page("Not `ltm ui`."),
                },
            },
            "post": {
                "operationId": "webLocalKeyForm",
                "summary": "`ltm ui` only: the key posted by its private forwarding page.",
                "security": [],
                "requestBody": _form_body({"key": _STRING}, ["key"]),
                "responses": {
                    "200": _page("Signed in; the page refreshes to `/web`."),
                    "403": _page("A wrong or used key."),
                    "404": _page("Not `ltm ui`."),
                },
            },
        },
        "/web/key": {
            "post": {
                "operationId": "webSignInWithKey",
                "summary": "A key from `POST /v1/web/sign-in-key` becomes a session (once),"
                " after the browser's person has seen whose account it opens.",
                "description": "With `key` (what `ltm open`'s page posts): the key is checked,"
                " not used, and kept in a cookie for two minutes; on to `GET /web/key`. With"
                " `confirm` and `csrf` (that page's answer, from this origin): the key is"
                " used and the session starts.",
                "security": [],
                "requestBody": _form_body(
                    {"key": _STRING, "next": _STRING, "confirm": _STRING, "csrf": _STRING}, []
                ),
                "responses": {
                    "303": _page(
                        "With `key`: on to `GET /web/key`. With `confirm`: on to `next`"
                        " (one of this app's pages), signed in."
                    ),
                    "403": _page(
                        "A wrong, used or expired key, its token revoked, or an answer"
                        " from another site."
                    ),
                    "404": _page("`ltm ui` (it has no accounts)."),
                },
            },
            "get": {
                "operationId": "webSignInWithKeyQuestion",
                "summary": "Signed in as the key's user already: the key is used and on to"
                " `next`. Else the question, naming the account the key opens.",
                "security": [],
                "responses": {
                    "200": _page("Sign in as this account? (a form that posts `confirm`)"),
                    "303": _page("On to `next`, signed in."),
                    "403": _page("No key kept, or it expired, was used or its token revoked."),
                    "404": _page("`ltm ui` (it has no accounts)."),
                },
            },
        },
        "/web/static/{name}": {
            "parameters": [_path_param("name", "`app.js` or `app.css`.")],
            "get": {
                "operationId": "webStatic",
                "summary": "The web view's script and style sheet.",
                "security": [],
                "responses": {
                    "200": {
                        "description": "The file.",
                        "content": {"text/javascript": {"schema": {}}, "text/css": {"schema": {}}},
                    },
                    "404": missing,
                },
            },
        },
        "/p/{secret}": {
            "parameters": [_path_param("secret", "The public URL's secret.")],
            "get": {
                "operationId": "publicPacket",
                "summary": "A published packet, read-only, for anyone with the link.",
                "security": [],
                "responses": {
                    "200": _page("The packet."),
                    "404": _page("Not published (any more), or never was."),
                },
            },
        },
    }
