"""A stand-in for the Go reference server (``dennisdevulder/ltm``), for ``ltm conformance``.

There is no Go toolchain in the test environment, so the reference cannot run here.
This answers as its handlers do, read from its source: ``internal/api/api.go``
(routes, statuses, error texts; non-members and missing teams alike are 404 ``team
not found``; an accepted invite is 201), ``internal/store/store.go`` (a push of a
known id overwrites its body whoever owns it; listings are ``ORDER BY created_at
DESC`` on the stored text; ``limit`` outside 1-500 is 50; deletes are soft) and
``internal/packet/packet.go`` (the body is at most 32768 bytes as sent; the packet
re-encoded from Go's struct, empty optional values dropped, two-space indent). Every
answer is Go's ``json.Encoder`` with ``SetIndent("", "  ")``; a path no route
matches is ``net/http``'s plain-text 404.

What it leaves out: Go's own time format (the tests send whole-second UTC times,
which Go writes back unchanged) and its ``\\u003c``-style escapes (the tests send
none of ``<``, ``>``, ``&``).

``faults`` injects one protocol bug at a time, for the checks that exist to catch it.
"""

from __future__ import annotations

import json
import secrets
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

from clikit import Seen, Stub, stub_server

from ltm.ids import new_ulid
from ltm.packet import _TOP_ORDER, PacketError, check

Reply = tuple[int, dict[str, str], bytes]

MAX_PACKET_BYTES = 32 * 1024
TEAM_NAME = r"[a-z0-9][a-z0-9_-]{0,39}"
# Go's Packet struct declares its fields in the schema's order: it re-encodes in it.
GO_ORDER = _TOP_ORDER
REQUIRED = {"ltm_version", "id", "created_at", "goal", "next_step"}
NOT_FOUND: Reply = (404, {"Content-Type": "text/plain; charset=utf-8"}, b"404 page not found\n")

# The faults a test can inject (one protocol bug each).
OLDEST_FIRST = "listings oldest first"
DROPS_CONSTRAINTS = "read-back drops constraints"
CAP_32000 = "caps a body at 32000 bytes"
NO_AUTH_ON_DELETE = "DELETE /v1/packets/{id} without a bearer"
TEAM_PACKETS_OPEN = "any user reads a team packet"
LISTS_DELETED = "listings keep deleted packets"
LEAVER_STILL_LISTS = "GET /v1/teams keeps a team its caller left"
ROWS_NOT_OBJECTS = "listing rows are not objects"
ODD_CODES = "invite codes with a space and a slash"
MEMBERS_DELETE_ANY = "any member deletes any team packet"
TEAMS_HANG = "GET /v1/teams never answers"
TEAMS_HUGE = "GET /v1/teams answers 9 MiB"


def _go(status: int, data: Any) -> Reply:
    body = json.dumps(data, indent=2, ensure_ascii=False).encode() + b"\n"
    return status, {"Content-Type": "application/json"}, body


def _err(status: int, message: str) -> Reply:
    return _go(status, {"error": message})


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _encode(data: dict[str, Any]) -> bytes:
    """Go's ``Packet.Encode``: struct order, empty optional values omitted."""
    out = {
        key: data[key]
        for key in GO_ORDER
        if key in data and (key in REQUIRED or data[key] not in ("", [], {}, None, False))
    }
    return json.dumps(out, indent=2, ensure_ascii=False).encode()


@dataclass
class Row:
    owner: str
    team: str | None
    created_at: str
    goal: str
    body: bytes
    deleted: bool = False


@dataclass
class Team:
    id: str
    name: str
    owner: str
    created_at: str
    members: dict[str, tuple[str, str]] = field(default_factory=dict)  # uid: (role, joined_at)


@dataclass
class Reference:
    faults: frozenset[str] = frozenset()
    lock: threading.Lock = field(default_factory=threading.Lock)
    tokens: dict[str, str] = field(default_factory=dict)  # token: user id
    users: dict[str, str] = field(default_factory=dict)  # user id: display
    packets: dict[str, Row] = field(default_factory=dict)
    teams: dict[str, Team] = field(default_factory=dict)  # by name
    invites: dict[str, tuple[str, datetime, bool]] = field(default_factory=dict)
    released: threading.Event = field(default_factory=threading.Event)  # ends a hang
    left: dict[str, list[Team]] = field(default_factory=dict)  # LEAVER_STILL_LISTS's memory

    def issue(self, display: str) -> str:
        uid, token = new_ulid(), secrets.token_urlsafe(32)
        self.users[uid] = display
        self.tokens[token] = uid
        return token

    def seed(self, token: str, count: int, created_at: str) -> None:
        """``count`` personal packets of the token's user, stored as a push stores them."""
        for n in range(count):
            packet_id = new_ulid()
            data = {"ltm_version": "0.2", "id": packet_id, "created_at": created_at}
            data |= {"goal": f"seeded {n}", "next_step": "none"}
            owner = self.tokens[token]
            self.packets[packet_id] = Row(owner, None, created_at, data["goal"], _encode(data))

    def __call__(self, seen: Seen) -> Reply:
        if seen.method == "GET" and seen.path == "/v1/teams":
            if TEAMS_HANG in self.faults:
                self.released.wait()
                return NOT_FOUND
            if TEAMS_HUGE in self.faults:
                return 200, {"Content-Type": "application/json"}, b" " * (9 << 20)
        with self.lock:  # the reference's SQLite serializes writers; so does this
            return self._route(seen)

    # -- routing, as Go 1.22's ServeMux patterns in Handler() -----------------------------

    def _route(self, seen: Seen) -> Reply:
        parts = urlsplit(seen.path)
        query = {k: v[0] for k, v in parse_qs(parts.query).items()}
        path = [unquote(p) for p in parts.path.strip("/").split("/")]  # as Go's PathValue
        method = seen.method
        if method == "GET" and path == ["v1", "healthz"]:
            return _go(200, {"ok": True, "version": "0.2"})
        if (
            method == "POST"
            and len(path) == 4
            and path[:2] + path[3:] == ["v1", "invites", "accept"]
        ):
            return self._accept(seen, path[2])
        routes = {
            ("POST", ("v1", "packets")): lambda uid: self._push(seen, uid, query),
            ("GET", ("v1", "packets")): lambda uid: self._list(uid, query),
            ("POST", ("v1", "teams")): lambda uid: self._create_team(seen, uid),
            ("GET", ("v1", "teams")): lambda uid: self._teams(uid),
        }
        key = (method, tuple(path))
        handler = routes.get(key)
        if handler is None and len(path) == 3 and path[:2] == ["v1", "packets"]:
            bare = "authorization" not in seen.headers
            if method == "DELETE" and bare and NO_AUTH_ON_DELETE in self.faults:
                return self._delete_packet(path[2], None)
            handler = {
                "GET": lambda uid: self._get_packet(path[2], uid),
                "DELETE": lambda uid: self._delete_packet(path[2], uid),
            }.get(method)
        if handler is None and len(path) >= 3 and path[:2] == ["v1", "teams"]:
            handler = self._team_route(method, path[2], path[3:])
        if handler is None:
            return NOT_FOUND
        uid = self._user(seen)
        if isinstance(uid, tuple):
            return uid
        return handler(uid)

    def _team_route(self, method: str, name: str, rest: list[str]) -> Any:
        """A team route's handler, given the caller; each runs only for a member
        (``teamForCaller``): a non-member and a missing team are one 404."""
        table: dict[tuple[str, tuple[str, ...]], Any] = {
            ("DELETE", ()): self._delete_team,
            ("GET", ("members",)): self._members,
            ("POST", ("leave",)): self._leave,
            ("POST", ("invites",)): self._invite,
        }
        handler = table.get((method, tuple(rest)))
        if method == "DELETE" and len(rest) == 2 and rest[0] == "members":
            handler = lambda team, uid: self._remove(team, rest[1], uid)  # noqa: E731
        if handler is None:
            return None

        def member_only(uid: str) -> Reply:
            team = self._member(name, uid)
            return _err(404, "team not found") if team is None else handler(team, uid)

        return member_only

    def _user(self, seen: Seen) -> str | Reply:
        header = seen.headers.get("authorization", "")
        if not header.startswith("Bearer "):
            return _err(401, "missing bearer token")
        uid = self.tokens.get(header[len("Bearer ") :])
        return uid if uid is not None else _err(401, "invalid token")

    def _member(self, name: str, uid: str) -> Team | None:
        """``teamForCaller``: the team only when the caller is in it."""
        team = self.teams.get(name)
        return team if team is not None and uid in team.members else None

    def _scope(self, query: dict[str, str], uid: str) -> tuple[str | None, Reply | None]:
        """``?team=``: the team's id for a member, a 404 for anyone else; else personal."""
        if not query.get("team"):
            return None, None
        team = self._member(query["team"], uid)
        return (None, _err(404, "team not found")) if team is None else (team.id, None)

    # -- packets ----------------------------------------------------------------------------

    def _push(self, seen: Seen, uid: str, query: dict[str, str]) -> Reply:
        team_id, refused = self._scope(query, uid)
        if refused is not None:
            return refused
        raw = seen.body[: MAX_PACKET_BYTES + 1024]
        cap = 32000 if CAP_32000 in self.faults else MAX_PACKET_BYTES
        if len(raw) > cap:
            return _err(400, f"packet is {len(raw)} bytes, max is {cap}")
        try:
            data = json.loads(raw)
        except ValueError as exc:
            return _err(400, f"invalid json: {exc}")
        if not isinstance(data, dict):
            return _err(400, "packet must be a JSON object")
        version = data.get("ltm_version")
        if version not in ("0.1", "0.2"):
            return _err(400, f'unsupported ltm_version "{version}" (supported: 0.1, 0.2)')
        try:
            check(data)
        except PacketError as exc:
            return _err(400, f"schema violation: {exc}")
        known = self.packets.get(data["id"])
        body = _encode(data)
        if known is not None:  # ON CONFLICT(id) DO UPDATE SET body, deleted_at=NULL
            known.body, known.deleted = body, False
        else:
            self.packets[data["id"]] = Row(uid, team_id, data["created_at"], data["goal"], body)
        return _go(201, {"id": data["id"]})

    def _list(self, uid: str, query: dict[str, str]) -> Reply:
        try:
            limit = int(query.get("limit", "50"))
        except ValueError:
            limit = 50
        if limit <= 0 or limit > 500:
            limit = 50
        team_id, refused = self._scope(query, uid)
        if refused is not None:
            return refused
        rows = [
            (pid, row)
            for pid, row in self.packets.items()
            if (not row.deleted or LISTS_DELETED in self.faults)
            and row.team == team_id
            and (team_id is not None or row.owner == uid)
        ]
        rows.sort(key=lambda item: item[1].created_at, reverse=OLDEST_FIRST not in self.faults)
        if ROWS_NOT_OBJECTS in self.faults:
            return _go(200, {"packets": [pid for pid, _ in rows[:limit]]})
        return _go(
            200,
            {
                "packets": [
                    {"id": pid, "created_at": row.created_at, "goal": row.goal}
                    for pid, row in rows[:limit]
                ]
            },
        )

    def _readable(self, row: Row, uid: str) -> bool:
        if row.team is None:
            return row.owner == uid
        if TEAM_PACKETS_OPEN in self.faults:
            return True
        return any(t.id == row.team and uid in t.members for t in self.teams.values())

    def _get_packet(self, packet_id: str, uid: str) -> Reply:
        row = self.packets.get(packet_id)
        if row is None or row.deleted or not self._readable(row, uid):
            return _err(404, "not found")
        body = row.body
        if DROPS_CONSTRAINTS in self.faults:
            data = json.loads(body)
            data.pop("constraints", None)
            body = json.dumps(data, indent=2).encode()
        return 200, {"Content-Type": "application/json"}, body

    def _delete_packet(self, packet_id: str, uid: str | None) -> Reply:
        row = self.packets.get(packet_id)
        if row is None or row.deleted:
            return _err(404, "not found")
        team = next((t for t in self.teams.values() if t.id == row.team), None)
        allowed = uid is None or row.owner == uid or (team is not None and team.owner == uid)
        if MEMBERS_DELETE_ANY in self.faults and team is not None and uid in team.members:
            allowed = True
        if not allowed:
            return _err(404, "not found")
        row.deleted = True
        return 204, {}, b""

    # -- teams and invites ------------------------------------------------------------------

    def _create_team(self, seen: Seen, uid: str) -> Reply:
        import re

        try:
            name = str(json.loads(seen.body).get("name", "")).strip()
        except (ValueError, AttributeError) as exc:
            return _err(400, f"invalid body: {exc}")
        if not re.fullmatch(TEAM_NAME, name):
            return _err(400, "team name must match ^[a-z0-9][a-z0-9_-]{0,39}$")
        if name in self.teams:
            return _err(409, "team name already taken")
        now = _now()
        team = Team(new_ulid(), name, uid, now, {uid: ("owner", now)})
        self.teams[name] = team
        return _go(201, {"team": {"id": team.id, "name": name, "owner_id": uid}})

    def _teams(self, uid: str) -> Reply:
        mine = [t for t in self.teams.values() if uid in t.members] + self.left.get(uid, [])
        rows = [
            {"id": t.id, "name": t.name, "owner_id": t.owner, "created_at": t.created_at}
            for t in mine
        ]
        return _go(200, {"teams": rows})

    def _delete_team(self, team: Team, uid: str) -> Reply:
        if team.owner != uid:
            return _err(403, "only the team owner can delete a team")
        for row in self.packets.values():
            if row.team == team.id:
                row.deleted, row.team = True, None
        del self.teams[team.name]
        return 204, {}, b""

    def _members(self, team: Team, uid: str) -> Reply:
        rows = [
            {"user_id": m, "display": self.users[m], "role": role, "joined_at": joined}
            for m, (role, joined) in team.members.items()
        ]
        return _go(200, {"members": rows})

    def _remove(self, team: Team, target: str, uid: str) -> Reply:
        if team.owner != uid:
            return _err(403, "only the team owner can remove members")
        if target == team.owner:
            return _err(400, "owner cannot be removed; transfer ownership or delete the team")
        if team.members.pop(target, None) is None:
            return _err(404, "not a member")
        return 204, {}, b""

    def _leave(self, team: Team, uid: str) -> Reply:
        if team.owner == uid:
            return _err(400, "owner cannot leave; transfer ownership or delete the team")
        del team.members[uid]
        if LEAVER_STILL_LISTS in self.faults:
            self.left.setdefault(uid, []).append(team)
        return 204, {}, b""

    def _invite(self, team: Team, uid: str) -> Reply:
        code = ("odd code/" if ODD_CODES in self.faults else "") + secrets.token_hex(24)
        expires = datetime.now(UTC) + timedelta(days=7)
        self.invites[code] = (team.name, expires, False)
        return _go(
            201,
            {
                "code": code,
                "url": f"http://reference.invalid/v1/invites/{code}",
                "expires_at": expires.strftime("%Y-%m-%dT%H:%M:%SZ"),
            },
        )

    def _accept(self, seen: Seen, code: str) -> Reply:
        header = seen.headers.get("authorization", "")
        uid = self.tokens.get(header[len("Bearer ") :]) if header.startswith("Bearer ") else None
        invite = self.invites.get(code)
        if invite is None or invite[2] or invite[1] <= datetime.now(UTC):
            return _err(410, "invite expired or already consumed")
        name = invite[0]
        self.invites[code] = (name, invite[1], True)
        token = None
        if uid is None:
            token = self.issue("")
            uid = self.tokens[token]
            self.users[uid] = "invited-" + uid[-6:]
        team = self.teams[name]
        team.members.setdefault(uid, ("member", _now()))
        answer: dict[str, Any] = {
            "user": {"id": uid, "display": self.users[uid]},
            "team": {"id": team.id, "name": name},
        }
        if token is not None:
            answer["token"] = token
        return _go(201, answer)


@contextmanager
def running_reference(*faults: str) -> Iterator[tuple[Stub, Reference, str]]:
    """The stand-in on loopback, with its first user's token."""
    reference = Reference(frozenset(faults))
    token = reference.issue("root")
    try:
        with stub_server(reference) as stub:
            yield stub, reference, token
    finally:
        reference.released.set()
