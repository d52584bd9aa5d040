"""``ltm conformance``: the protocol's wire checks, run against any ltm server.

The protocol has no portable conformance suite of its own (the Go reference's
tests stand in for one), so a second or third implementation could only be
compared by hand. This runs, over plain HTTP with the CLI's own client
(``ltm.cli.client.remote.Http``), one check per protocol fact a client
relies on: every route of the HTTP table with its statuses and shapes, the
isolation between two users and between teams, an invite's single use under
concurrent accepts, the 32 KiB cap, the canonical form on read-back, version
routing, lenient mode being flagged, and, for the routes beyond the table,
whether the server offers them.

Each check names the section of the protocol it comes from and ends as
``pass``, ``fail`` (with what was expected and what came back), ``differs``
(the server departs from what the protocol recommends but does not require,
as the Go reference itself does where it lets a push overwrite another user's
packet: said, never a failure) or ``not offered`` (an optional feature the
server does not have). Everything the run
creates (packets, teams, publications) is deleted at the end, failures or
not; a user minted by accepting an invite without a bearer cannot be deleted
through the protocol, so its token is revoked where the server offers
``/v1/tokens``, and the run says so.
"""

from __future__ import annotations

import json
import random
import re
import threading
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, Literal
from urllib.parse import quote

from ltm.cli.client.remote import Http, Reply
from ltm.cli.errors import CliError
from ltm.ids import new_ulid

Result = Literal["pass", "fail", "differs", "not offered"]

# Sections of the protocol's description, as each check names its source.
PACKET = "The packet"
API = "The HTTP API"
SCOPES = "The HTTP API: scopes"
WEAKNESS = "The HTTP API: the reference's upsert weakness"
EXTENSIONS = "Extensions (beyond the HTTP table)"

MAX_BYTES = 32 * 1024
CONCURRENT_ACCEPTS = 8


@dataclass
class Check:
    section: str
    name: str
    result: Result
    expected: str = ""
    got: str = ""

    def line(self) -> str:
        tag = {"pass": "PASS", "fail": "FAIL", "differs": "DIFF", "not offered": "N/A "}
        text = f"{tag[self.result]}  [{self.section}] {self.name}"
        if self.result == "fail":
            text += f" — expected {self.expected}; got {self.got}"
        elif self.result == "differs":
            text += (
                " — differs from the protocol's recommendation:"
                f" expected {self.expected}; got {self.got}"
            )
        elif self.result == "not offered" and self.got:
            text += f" — not offered ({self.got})"
        elif self.result == "not offered":
            text += " — not offered"
        return text


@dataclass
class Report:
    server: str
    checks: list[Check] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def count(self, result: Result) -> int:
        return sum(1 for c in self.checks if c.result == result)

    def as_json(self) -> dict[str, Any]:
        return {
            "server": self.server,
            "passed": self.count("pass"),
            "failed": self.count("fail"),
            "differs": self.count("differs"),
            "not_offered": self.count("not offered"),
            "checks": [asdict(c) for c in self.checks],
            "notes": self.notes,
        }


def stamp(seconds_ago: int = 0) -> str:
    """A ``created_at`` of now (less ``seconds_ago``), in whole seconds and UTC: the
    run's packets are then the newest a listing shows, whatever the user already
    stored (a fixed date fell below a real user's newest 50 and read as "not listed"),
    and every server writes such a time back as it came."""
    moment = datetime.now(UTC).replace(microsecond=0) - timedelta(seconds=seconds_ago)
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def _instant(value: Any) -> datetime | None:
    try:
        return datetime.fromisoformat(str(value).replace("z", "Z"))
    except ValueError:
        return None


def packet(version: str = "0.2", **fields: Any) -> dict[str, Any]:
    """A small valid packet with a fresh id, made now; ``fields`` override or add keys.
    No optional value is empty, and no text has ``<``, ``>`` or ``&``: read back from any
    server (the reference re-encodes from a struct) it is the same JSON value."""
    data: dict[str, Any] = {
        "ltm_version": version,
        "id": new_ulid(),
        "created_at": stamp(),
        "goal": "Conformance run: check the wire protocol",
        "next_step": "Compare the answers with the protocol",
        "constraints": ["no state left behind"],
        "tags": ["conformance"],
    }
    data.update(fields)
    return data


def compact(data: dict[str, Any]) -> bytes:
    """JSON without whitespace: its length is the packet's size by every measure (the
    body as sent, the serialization a server re-makes), so the cap means one thing."""
    return json.dumps(data, separators=(",", ":")).encode()


def sized(size: int) -> dict[str, Any]:
    """A valid packet of exactly ``size`` bytes (``compact``): its constraints (at most
    32, of at most 1024 characters each) take up the room."""
    data = packet(constraints=[])
    while True:
        data["constraints"].append("")
        room = size - len(compact(data))
        if room <= 1024:
            data["constraints"][-1] = "c" * room
            break
        data["constraints"][-1] = "c" * 1024
    assert len(compact(data)) == size and len(data["constraints"]) <= 32
    return data


def _body(reply: Reply) -> Any:
    try:
        return json.loads(reply.body)
    except ValueError:
        return None


def _shape(reply: Reply) -> str:
    text = reply.body[:160].decode("utf-8", "replace").strip().replace("\n", " ")
    return f"{reply.status} {text}" if text else str(reply.status)


def _segment(value: Any) -> str:
    """A value the server gave (an invite code, a user id) as one path segment: a ``/``,
    ``?`` or space in it can neither split the request nor point it at another route."""
    return quote(str(value), safe="")


def _ids(data: Any, key: str = "packets", name: str = "id") -> list[Any]:
    """``name`` of each entry of ``data[key]`` (a listing's ids, a team list's names),
    whatever shape the server sent: anything but a list of objects lists nothing."""
    rows = data.get(key) if isinstance(data, dict) else None
    return [r.get(name) for r in rows if isinstance(r, dict)] if isinstance(rows, list) else []


def _is_error(reply: Reply, status: int, message: str | None = None) -> bool:
    data = _body(reply)
    if reply.status != status or not isinstance(data, dict):
        return False
    error = data.get("error")
    return isinstance(error, str) and (message is None or error == message)


def _absent(reply: Reply) -> bool:
    """A route the server does not have: 404/405 with anything but ltm's error body."""
    if reply.status not in (404, 405):
        return False
    data = _body(reply)
    return not (isinstance(data, dict) and isinstance(data.get("error"), str))


class Run:
    """One conformance run against ``url`` with one or two users' tokens."""

    def __init__(self, url: str, token_a: str, token_b: str | None, *, timeout: float) -> None:
        self.url = url.rstrip("/")
        self.timeout = timeout
        self.report = Report(self.url)
        self.a = token_a
        self.b = token_b
        self.http = Http(self.url, timeout=timeout)
        self.packets: list[tuple[str, str]] = []  # (token, id) to delete at the end
        self.teams: list[tuple[str, str]] = []  # (owner token, name)
        self.minted: list[str] = []  # tokens of users minted by anonymous accepts
        self.suffix = new_ulid()[-8:].lower()
        self.unreachable = False  # a request got no answer: cleaning up would only wait

    # -- plumbing -------------------------------------------------------------------------

    def call(
        self,
        method: str,
        path: str,
        *,
        token: str | None = None,
        data: Any = None,
        raw: bytes | None = None,
        query: dict[str, Any] | None = None,
    ) -> Reply:
        body = raw if raw is not None else None
        if data is not None:
            body = json.dumps(data).encode()
        return self.http.request(method, path, query=query, body=body, token=token)

    def check(
        self,
        section: str,
        name: str,
        ok: bool,
        expected: str,
        got: Reply | str,
        *,
        recommended: bool = False,
    ) -> bool:
        """Record one check; ``recommended``: the protocol recommends it but does not
        require it, so a server without it ``differs`` rather than fails."""
        shown = got if isinstance(got, str) else _shape(got)
        if ok:
            self.report.checks.append(Check(section, name, "pass"))
        else:
            missed: Result = "differs" if recommended else "fail"
            self.report.checks.append(Check(section, name, missed, expected, shown))
        return ok

    def not_offered(self, section: str, name: str, why: str = "") -> None:
        self.report.checks.append(Check(section, name, "not offered", got=why))

    def push(
        self, token: str, data: dict[str, Any], *, team: str | None = None, raw: bytes | None = None
    ) -> Reply:
        """Push ``data`` (sent as ``raw`` when given), to be deleted at the end."""
        body = json.dumps(data).encode() if raw is None else raw
        reply = self.call("POST", "/v1/packets", token=token, raw=body, query={"team": team})
        if reply.status in (200, 201):
            self.packets.append((token, str(data.get("id"))))
        return reply

    def team(self, token: str, stem: str) -> str | None:
        name = f"cf-{stem}-{self.suffix}"
        reply = self.call("POST", "/v1/teams", token=token, data={"name": name})
        if reply.status == 201:
            self.teams.append((token, name))
            return name
        return None

    # -- the run --------------------------------------------------------------------------

    def run(self) -> Report:
        try:
            if not self.health():
                return self.report
            self.authentication()
            if self.b is None:
                self.b = self.mint_second_user()
            self.packets_core()
            self.every_route_needs_a_bearer()
            self.version_routing()
            self.size_cap()
            self.lenient()
            if self.b is not None:
                self.isolation()
                self.teams_and_invites()
            self.concurrent_accepts()
            self.extensions()
        except CliError as exc:
            # No HTTP answer (a timeout, a reset, a reply past the size cap): the run stops
            # at that request, and the checks made so far are still the report.
            self.check(API, "the server answers every request", False, "an HTTP answer", str(exc))
            self.unreachable = True
        except Exception as exc:  # an answer of a shape a check could not read, not a crash
            self.check(
                API,
                "the server's answers have the protocol's shapes",
                False,
                "JSON of the shapes the HTTP table gives",
                f"a check stopped at one ({type(exc).__name__}: {exc})",
            )
        finally:
            self.cleanup()
            self.http.close()
        return self.report

    def health(self) -> bool:
        reply = self.call("GET", "/v1/healthz")
        data = _body(reply)
        return self.check(
            API,
            "GET /v1/healthz answers 200 {ok: true, version}",
            reply.status == 200
            and isinstance(data, dict)
            and data.get("ok") is True
            and isinstance(data.get("version"), str)
            and re.fullmatch(r"\d+\.\d+", data["version"]) is not None,
            '200 {"ok": true, "version": "N.N"}',
            reply,
        )

    def authentication(self) -> None:
        reply = self.call("GET", "/v1/packets")
        self.check(
            API,
            "no bearer token: 401 missing bearer token",
            _is_error(reply, 401, "missing bearer token"),
            '401 {"error": "missing bearer token"}',
            reply,
        )
        reply = self.call("GET", "/v1/packets", token="not-a-token-" + self.suffix)
        self.check(
            API,
            "unknown token: 401 invalid token",
            _is_error(reply, 401, "invalid token"),
            '401 {"error": "invalid token"}',
            reply,
        )
        reply = self.call("GET", "/v1/packets", token=self.a, query={"limit": 1})
        self.check(API, "the given token is accepted", reply.status == 200, "200", reply)

    def mint_second_user(self) -> str | None:
        """A second user from an invite accepted without a bearer, as the protocol allows."""
        name = self.team(self.a, "mint")
        if name is None:
            self.report.notes.append("no second token, and no team to mint a user with")
            return None
        invite = _body(self.call("POST", f"/v1/teams/{name}/invites", token=self.a))
        code = invite.get("code") if isinstance(invite, dict) else None
        if not isinstance(code, str):
            self.report.notes.append("no second token, and no invite to mint a user with")
            return None
        accepted = _body(self.call("POST", f"/v1/invites/{_segment(code)}/accept", data={}))
        token = accepted.get("token") if isinstance(accepted, dict) else None
        if not isinstance(token, str):
            self.report.notes.append("no second token, and the server minted no user")
            return None
        self.minted.append(token)
        self.call("POST", f"/v1/teams/{name}/leave", token=token)
        return token

    def packets_core(self) -> None:
        data = packet()
        reply = self.push(self.a, data)
        answer = _body(reply)
        self.check(
            API,
            "POST /v1/packets: 201 {id}",
            reply.status == 201 and isinstance(answer, dict) and answer.get("id") == data["id"],
            f'201 {{"id": "{data["id"]}"}}',
            reply,
        )
        got = self.call("GET", f"/v1/packets/{data['id']}", token=self.a)
        stored = _body(got)
        changed = (
            sorted(k for k in data.keys() | stored.keys() if data.get(k) != stored.get(k))
            if isinstance(stored, dict)
            else []
        )
        self.check(
            API,
            "GET /v1/packets/{id}: 200, the packet as pushed",
            got.status == 200 and isinstance(stored, dict) and not changed,
            "200 and the packet pushed, every field as sent",
            f"200 with {', '.join(changed)} not as sent" if got.status == 200 and changed else got,
        )
        # Canonical form: the same packet, keys in another order and other whitespace,
        # reads back as the very same bytes.
        shuffled = list(data.items())
        random.Random(7).shuffle(shuffled)
        again = json.dumps(dict(shuffled), indent=3).encode()
        self.call("POST", "/v1/packets", token=self.a, raw=again)
        second = self.call("GET", f"/v1/packets/{data['id']}", token=self.a)
        self.check(
            PACKET,
            "canonical form: the same packet re-encoded reads back byte for byte",
            second.status == 200 and second.body.rstrip(b"\r\n") == got.body.rstrip(b"\r\n"),
            "identical bytes",
            "different bytes" if second.status == 200 else second,
        )
        older = packet(created_at=stamp(60))
        self.push(self.a, older)
        listed = self.call("GET", "/v1/packets", token=self.a, query={"limit": 50})
        rows = (_body(listed) or {}).get("packets") if isinstance(_body(listed), dict) else None
        ids = _ids(_body(listed))
        keyed = isinstance(rows, list) and all(
            isinstance(r, dict) and {"id", "created_at", "goal"} <= set(r) for r in rows
        )
        entry = next(
            (r for r in rows or [] if isinstance(r, dict) and r.get("id") == data["id"]), {}
        )
        self.check(
            API,
            "GET /v1/packets: 200 {packets: [{id, created_at, goal}]}",
            listed.status == 200
            and keyed
            and entry.get("goal") == data["goal"]
            and _instant(entry.get("created_at")) == _instant(data["created_at"]),
            "200 with the pushed packet listed with its goal and created_at,"
            " each entry with id, created_at, goal",
            listed,
        )
        self.check(
            API,
            "GET /v1/packets: newest first (by created_at)",
            data["id"] in ids
            and older["id"] in ids
            and ids.index(data["id"]) < ids.index(older["id"]),
            f"{data['id']} (created {data['created_at']}) before {older['id']}"
            f" (created {older['created_at']})",
            "both listed, the older first"
            if data["id"] in ids and older["id"] in ids
            else "not both listed",
        )
        one = _body(self.call("GET", "/v1/packets", token=self.a, query={"limit": 1}))
        self.check(
            API,
            "GET /v1/packets?limit=1: one packet",
            len(_ids(one)) == 1,
            "1 packet",
            json.dumps(one)[:160],
        )
        gone = packet()
        self.push(self.a, gone)
        deleted = self.call("DELETE", f"/v1/packets/{gone['id']}", token=self.a)
        after = self.call("GET", f"/v1/packets/{gone['id']}", token=self.a)
        listed_after = _ids(_body(self.call("GET", "/v1/packets", token=self.a)))
        self.check(
            API,
            "DELETE /v1/packets/{id}: 204, then GET is 404 not found and it is not listed",
            deleted.status == 204
            and _is_error(after, 404, "not found")
            and gone["id"] not in listed_after,
            '204, then 404 {"error": "not found"}, and absent from the listing',
            f"{deleted.status}, then {_shape(after)}"
            + ("; still listed" if gone["id"] in listed_after else ""),
        )
        missing = self.call("GET", f"/v1/packets/{new_ulid()}", token=self.a)
        self.check(
            API,
            "GET of an absent packet: 404 not found",
            _is_error(missing, 404, "not found"),
            '404 {"error": "not found"}',
            missing,
        )
        bad = self.call("POST", "/v1/packets", token=self.a, data={**packet(), "goal": ""})
        self.check(
            PACKET,
            "an invalid packet (empty goal): 400 with the reason",
            _is_error(bad, 400),
            '400 {"error": "..."}',
            bad,
        )

    def every_route_needs_a_bearer(self) -> None:
        """Each authenticated route of the table, without a bearer: 401, and nothing done.
        A server whose middleware misses one route (a DELETE, a team route) passed the
        one unauthenticated listing the run made before."""
        kept = packet(goal="must survive requests without a bearer")
        self.push(self.a, kept)
        name = self.team(self.a, "auth")
        team = name or f"cf-none-{self.suffix}"
        routes: list[tuple[str, str, Any]] = [
            ("POST", "/v1/packets", packet()),
            ("GET", "/v1/packets", None),
            ("GET", f"/v1/packets/{kept['id']}", None),
            ("DELETE", f"/v1/packets/{kept['id']}", None),
            ("POST", "/v1/teams", {"name": f"cf-noauth-{self.suffix}"}),
            ("GET", "/v1/teams", None),
            ("DELETE", f"/v1/teams/{team}", None),
            ("GET", f"/v1/teams/{team}/members", None),
            ("DELETE", f"/v1/teams/{team}/members/{new_ulid()}", None),
            ("POST", f"/v1/teams/{team}/leave", None),
            ("POST", f"/v1/teams/{team}/invites", None),
        ]
        let_through = []
        for method, path, data in routes:
            reply = self.call(method, path, data=data)
            if not _is_error(reply, 401):
                let_through.append(f"{method} {path}: {_shape(reply)}")
        survived = self.call("GET", f"/v1/packets/{kept['id']}", token=self.a)
        if survived.status != 200:
            let_through.append(f"then the packet is gone ({_shape(survived)})")
        self.check(
            API,
            "every route of the table but accept and healthz, without a bearer: 401",
            not let_through,
            '401 {"error": "..."} from each, and nothing changed',
            "; ".join(let_through),
        )

    def version_routing(self) -> None:
        v01 = packet("0.1")
        reply = self.push(self.a, v01)
        self.check(PACKET, "a v0.1 packet is accepted", reply.status == 201, "201", reply)
        mixed = packet("0.1", success_criteria=["a v0.2 field"])
        reply = self.push(self.a, mixed)
        self.check(
            PACKET,
            "a v0.1 packet carrying a v0.2 field: 400",
            _is_error(reply, 400),
            '400 {"error": "..."}',
            reply,
        )
        future = packet("9.9")
        reply = self.push(self.a, future)
        error = (_body(reply) or {}).get("error", "") if isinstance(_body(reply), dict) else ""
        self.check(
            PACKET,
            "an unsupported ltm_version: 400 naming the supported versions",
            reply.status == 400 and "0.1" in str(error) and "0.2" in str(error),
            "400 with an error that lists 0.1 and 0.2",
            reply,
        )

    def size_cap(self) -> None:
        # At the very edge: a server capping at 32000 bytes (a decimal "32 KB"), or one
        # byte early or late, passed a check of 30 KB against 36 KB.
        fits = sized(MAX_BYTES)
        reply = self.push(self.a, fits, raw=compact(fits))
        self.check(
            PACKET,
            f"a packet of exactly {MAX_BYTES} bytes (32 KiB) is accepted",
            reply.status == 201,
            "201",
            reply,
        )
        over = sized(MAX_BYTES + 1)
        reply = self.push(self.a, over, raw=compact(over))
        self.check(
            PACKET,
            f"a packet of {MAX_BYTES + 1} bytes (over 32 KiB) is refused",
            reply.status in (400, 413) and _body(reply) is not None,
            '400 or 413 {"error": "..."}',
            reply,
        )

    def lenient(self) -> None:
        odd = packet(unknown_field="not in the schema")
        strict = self.push(self.a, odd)
        self.check(
            PACKET,
            "lenient mode: without asking, a non-conforming packet is refused",
            _is_error(strict, 400),
            '400 {"error": "..."}',
            strict,
        )
        odd = packet(unknown_field="not in the schema")
        reply = self.call("POST", "/v1/packets", token=self.a, data=odd, query={"lenient": "true"})
        if reply.status != 201:
            self.not_offered(PACKET, "lenient mode (?lenient=true)", f"answered {reply.status}")
            return
        self.packets.append((self.a, odd["id"]))
        answer = _body(reply)
        read = self.call("GET", f"/v1/packets/{odd['id']}", token=self.a)
        self.check(
            PACKET,
            "lenient mode: an accepted non-conforming packet is flagged",
            isinstance(answer, dict)
            and answer.get("conforming") is False
            and read.headers.get("x-ltm-conforming") == "false",
            '201 {"conforming": false} and X-Ltm-Conforming: false on read',
            f"{_shape(reply)}; read header {read.headers.get('x-ltm-conforming')!r}",
        )

    def isolation(self) -> None:
        assert self.b is not None
        mine = packet(goal="owned by the first user")
        self.push(self.a, mine)
        path = f"/v1/packets/{mine['id']}"
        seen = self.call("GET", path, token=self.b)
        self.check(
            SCOPES,
            "another user's personal packet: GET is 404 not found",
            _is_error(seen, 404, "not found"),
            '404 {"error": "not found"}',
            seen,
        )
        ids = _ids(_body(self.call("GET", "/v1/packets", token=self.b, query={"limit": 200})))
        self.check(
            SCOPES,
            "another user's personal packet is not listed",
            mine["id"] not in ids,
            "absent from the listing",
            "listed",
        )
        gone = self.call("DELETE", path, token=self.b)
        self.check(
            SCOPES,
            "another user's personal packet: DELETE is 404",
            gone.status == 404,
            "404",
            gone,
        )
        before = self.call("GET", path, token=self.a).body
        takeover = {**mine, "goal": "overwritten by the second user"}
        self.call("POST", "/v1/packets", token=self.b, data=takeover)
        after = self.call("GET", path, token=self.a)
        self.check(
            WEAKNESS,
            "pushing an id another user owns never changes their packet",
            after.status == 200 and after.body == before,
            "the owner's packet unchanged",
            "changed" if after.status == 200 else after,
            recommended=True,  # the reference overwrites it: a weakness, not a violation
        )
        # If the server did take the id over, it is the second user's now: delete it too.
        self.packets.append((self.b, mine["id"]))

    def teams_and_invites(self) -> None:
        assert self.b is not None
        bad = self.call("POST", "/v1/teams", token=self.a, data={"name": "Not Valid"})
        self.check(
            SCOPES, "POST /v1/teams with an invalid name: 400", _is_error(bad, 400), "400", bad
        )
        name = f"cf-team-{self.suffix}"
        created = self.call("POST", "/v1/teams", token=self.a, data={"name": name})
        team = (_body(created) or {}).get("team") if isinstance(_body(created), dict) else None
        ok = (
            created.status == 201
            and isinstance(team, dict)
            and {"id", "name", "owner_id"} <= set(team)
        )
        self.check(
            SCOPES,
            "POST /v1/teams: 201 {team: {id, name, owner_id}}",
            ok,
            "201 with the team",
            created,
        )
        if not ok or not isinstance(team, dict):  # ok says it is one
            return
        self.teams.append((self.a, name))
        taken = self.call("POST", "/v1/teams", token=self.b, data={"name": name})
        self.check(SCOPES, "a team name in use: 409", _is_error(taken, 409), "409", taken)
        listed = _body(self.call("GET", "/v1/teams", token=self.a))
        rows = listed.get("teams") if isinstance(listed, dict) else None
        entry = next((r for r in rows or [] if isinstance(r, dict) and r.get("name") == name), None)
        self.check(
            SCOPES,
            "GET /v1/teams lists it with id, name, owner_id, created_at",
            entry is not None and {"id", "name", "owner_id", "created_at"} <= set(entry),
            "the team with its four keys",
            json.dumps(entry),
        )
        invite = self.call("POST", f"/v1/teams/{name}/invites", token=self.a)
        body = _body(invite)
        code = body.get("code") if isinstance(body, dict) else None
        self.check(
            SCOPES,
            "POST /v1/teams/{name}/invites: 201 {code, url, expires_at}, url ends in the code",
            invite.status == 201
            and isinstance(code, str)
            and str(body.get("url", "")).endswith(f"/v1/invites/{code}")
            and isinstance(body.get("expires_at"), str),
            "201 with code, url, expires_at",
            invite,
        )
        accept = f"/v1/invites/{_segment(code)}/accept"
        accepted = self.call("POST", accept, token=self.b, data={})
        answer = _body(accepted)
        self.check(
            SCOPES,
            "POST /v1/invites/{code}/accept with a bearer: joined, {user, team}",
            accepted.status in (200, 201)
            and isinstance(answer, dict)
            and isinstance(answer.get("user"), dict)
            and isinstance(answer.get("team"), dict)
            and "token" not in answer,
            "201 with user and team, no token",
            accepted,
        )
        again = self.call("POST", accept, token=self.b, data={})
        self.check(SCOPES, "a used invite: 410", _is_error(again, 410), "410", again)
        members = _body(self.call("GET", f"/v1/teams/{name}/members", token=self.b))
        rows = members.get("members") if isinstance(members, dict) else None
        self.check(
            SCOPES,
            "GET /v1/teams/{name}/members: both, with user_id, display, role, joined_at",
            isinstance(rows, list)
            and len(rows) == 2
            and all(
                isinstance(r, dict) and {"user_id", "display", "role", "joined_at"} <= set(r)
                for r in rows
            ),
            "two members with the four keys",
            json.dumps(members)[:160],
        )
        owner_id = _segment(team["owner_id"])
        shared = packet(goal="a team packet")
        pushed = self.push(self.b, shared, team=name)
        read = self.call("GET", f"/v1/packets/{shared['id']}", token=self.a)
        self.check(
            SCOPES,
            "a member's team packet is readable by every member",
            pushed.status == 201 and read.status == 200,
            "201, then 200 for the other member",
            f"{pushed.status}, then {read.status}",
        )
        ids = _ids(_body(self.call("GET", "/v1/packets", token=self.a, query={"team": name})))
        own = _ids(_body(self.call("GET", "/v1/packets", token=self.b, query={"limit": 200})))
        self.check(
            SCOPES,
            "a team packet is listed in the team, not in anyone's personal scope",
            shared["id"] in ids and shared["id"] not in own,
            "in ?team= only",
            f"team listing {'has' if shared['id'] in ids else 'lacks'} it, personal"
            f" {'has' if shared['id'] in own else 'lacks'} it",
        )
        # Isolation between teams: the second user's own team is closed to the first.
        other = self.team(self.b, "other")
        if other is not None:
            results = [
                self.push(self.a, packet(), team=other),  # deleted at the end, should it land
                self.call("GET", "/v1/packets", token=self.a, query={"team": other}),
                self.call("GET", f"/v1/teams/{other}/members", token=self.a),
                self.call(
                    "GET", "/v1/packets", token=self.a, query={"team": f"cf-none-{self.suffix}"}
                ),
            ]
            closed = packet(goal="a packet of a team the first user is not in")
            self.push(self.b, closed, team=other)
            tried = [
                self.call("GET", f"/v1/packets/{closed['id']}", token=self.a),
                self.call("DELETE", f"/v1/packets/{closed['id']}", token=self.a),
            ]
            self.check(
                SCOPES,
                "a packet of a team you are not in: GET and DELETE are 404 not found",
                all(_is_error(r, 404, "not found") for r in tried),
                '404 {"error": "not found"}, twice',
                "; ".join(_shape(r) for r in tried),
            )
            self.check(
                SCOPES,
                "a team you are not in, or no such team: 404 team not found",
                all(_is_error(r, 404, "team not found") for r in results),
                '404 {"error": "team not found"} for push, list, members, and a missing team',
                "; ".join(_shape(r) for r in results),
            )
        refused = [
            self.call("DELETE", f"/v1/teams/{name}", token=self.b),
            self.call("DELETE", f"/v1/teams/{name}/members/{owner_id}", token=self.b),
        ]
        self.check(
            SCOPES,
            "a member may not delete the team or remove someone: 403",
            all(r.status == 403 for r in refused),
            "403, 403",
            ", ".join(_shape(r) for r in refused),
        )
        owner_out = [
            self.call("DELETE", f"/v1/teams/{name}/members/{owner_id}", token=self.a),
            self.call("POST", f"/v1/teams/{name}/leave", token=self.a),
        ]
        self.check(
            SCOPES,
            "the owner can neither be removed nor leave: 400",
            all(_is_error(r, 400) for r in owner_out),
            "400, 400",
            ", ".join(_shape(r) for r in owner_out),
        )
        # A member who neither pushed it nor owns the team may not delete it (404 keeps the
        # reference's rule; 403 says it as plainly); the packet stays.
        owners = packet(goal="a team packet of the team's owner")
        self.push(self.a, owners, team=name)
        by_member = self.call("DELETE", f"/v1/packets/{owners['id']}", token=self.b)
        kept = self.call("GET", f"/v1/packets/{owners['id']}", token=self.a)
        self.check(
            SCOPES,
            "a member may not delete another member's team packet: 403 or 404",
            by_member.status in (403, 404) and kept.status == 200,
            "403 or 404, and the packet still there",
            f"{_shape(by_member)}; then the owner reads {kept.status}",
        )
        removed = self.call("DELETE", f"/v1/packets/{shared['id']}", token=self.a)
        self.check(
            SCOPES,
            "the team's owner may delete a member's team packet: 204",
            removed.status == 204,
            "204",
            removed,
        )
        left = self.call("POST", f"/v1/teams/{name}/leave", token=self.b)
        after = self.call("GET", f"/v1/teams/{name}/members", token=self.b)
        theirs = _ids(_body(self.call("GET", "/v1/teams", token=self.b)), "teams", "name")
        self.check(
            SCOPES,
            "a member leaves: 204, then the team is 404 team not found to them, and unlisted",
            left.status == 204 and _is_error(after, 404, "team not found") and name not in theirs,
            '204, then 404 {"error": "team not found"}, and not in their GET /v1/teams',
            f"{left.status}, then {_shape(after)}"
            + ("; still in their GET /v1/teams" if name in theirs else ""),
        )
        deleted = self.call("DELETE", f"/v1/teams/{name}", token=self.a)
        self.check(
            SCOPES,
            "DELETE /v1/teams/{name} by its owner: 204",
            deleted.status == 204,
            "204",
            deleted,
        )
        if deleted.status == 204:
            self.teams.remove((self.a, name))

    def concurrent_accepts(self) -> None:
        name = self.team(self.a, "race")
        if name is None:
            self.not_offered(SCOPES, "invites single-use under concurrent accepts", "no team")
            return
        body = _body(self.call("POST", f"/v1/teams/{name}/invites", token=self.a))
        code = body.get("code") if isinstance(body, dict) else None
        statuses: list[int] = []
        tokens: list[str] = []
        lock = threading.Lock()
        start = threading.Barrier(CONCURRENT_ACCEPTS)

        def accept() -> None:
            client = Http(self.url, timeout=self.timeout)
            try:
                start.wait()
                path = f"/v1/invites/{_segment(code)}/accept"
                reply = client.request("POST", path, body=b"{}")
            except CliError:  # no answer: counted as neither a success nor a 410
                reply = Reply(0, {}, b"")
            finally:
                client.close()
            answer = _body(reply)
            with lock:
                statuses.append(reply.status)
                if isinstance(answer, dict) and isinstance(answer.get("token"), str):
                    tokens.append(answer["token"])

        threads = [threading.Thread(target=accept) for _ in range(CONCURRENT_ACCEPTS)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        self.minted += tokens
        wins = sum(1 for s in statuses if s in (200, 201))
        self.check(
            SCOPES,
            f"invites: of {CONCURRENT_ACCEPTS} concurrent accepts of one code exactly one wins",
            wins == 1 and statuses.count(410) == CONCURRENT_ACCEPTS - 1,
            f"1 success and {CONCURRENT_ACCEPTS - 1} x 410",
            ", ".join(str(s) for s in sorted(statuses)),
        )

    def extensions(self) -> None:
        probe = packet(goal="extension probe")
        self.push(self.a, probe)
        routes: list[tuple[str, str, str, dict[str, str] | None]] = [
            ("full-text search", "GET", "/v1/search", {"q": "conformance"}),
            ("lineage (children)", "GET", "/v1/packets/{id}/children", None),
            ("lineage (thread)", "GET", "/v1/packets/{id}/thread", None),
            ("token management", "GET", "/v1/tokens", None),
            ("OpenAPI document", "GET", "/v1/openapi.json", None),
            ("publishing", "POST", "/v1/packets/{id}/publish", None),
        ]
        for feature, method, route, query in routes:
            path = route.replace("{id}", probe["id"])
            reply = self.call(method, path, token=self.a, query=query)
            if _absent(reply):
                self.not_offered(EXTENSIONS, f"{feature}: {method} {route}")
                continue
            self.check(
                EXTENSIONS,
                f"{feature}: {method} {route} answers 2xx JSON",
                200 <= reply.status < 300 and _body(reply) is not None,
                "2xx with a JSON body",
                reply,
            )
            if feature == "publishing" and 200 <= reply.status < 300:
                self.call("DELETE", f"/v1/packets/{probe['id']}/publish", token=self.a)

    # -- leaving nothing behind -----------------------------------------------------------

    def cleanup(self) -> None:
        deletes = [(token, f"/v1/packets/{pid}") for token, pid in reversed(self.packets)]
        deletes += [(token, f"/v1/teams/{name}") for token, name in reversed(self.teams)]
        for done, (token, path) in enumerate(deletes):
            try:
                if self.unreachable:
                    raise CliError("the server stopped answering")
                self.call("DELETE", path, token=token)
            except CliError as exc:
                # One request unanswered: each of the rest would wait as long. Say what stays.
                self.unreachable = True
                left = ", ".join(p for _, p in deletes[done:])
                self.report.notes.append(f"left on the server ({exc}): {left}")
                break
        revoked_tokens = 0
        for token in self.minted:
            revoked = False
            try:
                if self.unreachable:
                    break
                listed = _body(self.call("GET", "/v1/tokens", token=token))
                rows = listed.get("tokens") if isinstance(listed, dict) else None
                current = next((r for r in rows or [] if r.get("current")), None)
                if current is not None:
                    label = _segment(current.get("label", ""))
                    revoked = self.call("DELETE", f"/v1/tokens/{label}", token=token).status == 204
            except CliError:
                self.unreachable = True
            except Exception:  # a listing of any other shape: this token stays
                revoked = False
            revoked_tokens += revoked
        if len(self.minted) == 1:  # one note for all of them: a line each only repeats
            self.report.notes.append(
                "a user minted by accepting an invite without a bearer stays on the server"
                + (
                    " (its token was revoked)"
                    if revoked_tokens
                    else " (its token could not be revoked)"
                )
            )
        elif self.minted:
            self.report.notes.append(
                f"{len(self.minted)} users minted by accepting an invite without a bearer stay on"
                f" the server ({revoked_tokens} of their {len(self.minted)} tokens revoked)"
            )


def run(url: str, token_a: str, token_b: str | None = None, *, timeout: float = 30.0) -> Report:
    """Run every check against ``url``; the report lists them in order."""
    return Run(url, token_a, token_b, timeout=timeout).run()
