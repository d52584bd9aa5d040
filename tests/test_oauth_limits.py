"""What anonymous requests to the OAuth endpoints make the server keep, and for how long:
rate limits per address and for everyone on /register and /authorize, caps on what a
registration and a pending request hold, registrations that expire unused, expired rows
dropped on write."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import anyio
import pytest
from serverkit import Server, running_server
from test_remote_mcp import authorize_url, pkce

from ltm.store import Store

pytest.importorskip("mcp.server.auth")

T0 = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    with running_server(tmp_path_factory.mktemp("oauth-limits")) as srv:
        yield srv


def client_doc(**extra: Any) -> dict[str, Any]:
    return {
        "client_name": "limits",
        "redirect_uris": ["http://127.0.0.1:40001/cb"],
        "token_endpoint_auth_method": "none",
        **extra,
    }


def test_registrations_are_capped_in_size(server: Server) -> None:
    with server.client() as http:
        many = [f"http://127.0.0.1:40001/cb{n}" for n in range(11)]
        refused = [
            http.post("/register", json=client_doc(redirect_uris=many)),
            http.post("/register", json=client_doc(client_name="n" * 201)),
            http.post("/register", json=client_doc(contacts=["x" * 1000] * 20)),
        ]
        for answer in refused:
            assert answer.status_code == 400, answer.text
        assert http.post("/register", json=client_doc()).status_code == 201


def test_a_pending_request_holds_no_huge_state(server: Server) -> None:
    with server.client() as http:
        made = http.post("/register", json=client_doc()).json()
        _, challenge = pkce()
        url = authorize_url(server, made["client_id"], "http://127.0.0.1:40001/cb", challenge)
        answer = http.get(url.replace("state=s1", "state=" + "s" * 60_000))
        assert answer.status_code in (302, 400)
        assert "/web/authorize?request=" not in answer.headers.get("location", "")
        assert "error=invalid_request" in answer.headers.get("location", "invalid_request")


def test_one_address_registers_a_bounded_number_of_clients(server: Server) -> None:
    """Last in this module: it spends the loopback address's registrations."""
    from ltm.mcp.oauth import DOOR_LIMITS

    with server.client() as http:
        answers = [
            http.post("/register", json=client_doc()).status_code
            for _ in range(DOOR_LIMITS["/register"].per_address + 1)
        ]
        assert answers[-1] == 429 and 201 in answers
        last = http.post("/register", json=client_doc())
        assert last.status_code == 429 and int(last.headers["retry-after"]) > 0


# -- the rules, on every store ------------------------------------------------------------


def test_everyones_registrations_are_bounded_together(store: Store) -> None:
    from ltm.mcp.oauth import DoorLimit, admit

    limits = {"/register": DoorLimit(per_address=3, everyone=5, window=timedelta(hours=1))}
    assert [admit(store, "/register", f"198.51.100.{n}", T0, limits) for n in range(5)] == [
        None
    ] * 5
    assert admit(store, "/register", "198.51.100.99", T0, limits) is not None
    # Refused requests write nothing: a flood past the limit costs reads only.
    for _ in range(10):
        assert admit(store, "/register", "198.51.100.98", T0, limits) is not None
    index = int(T0.timestamp()) // 3600
    assert store.read_counter(f"oauth-register:all:{index}", T0) == 5
    assert store.read_counter(f"oauth-register:addr:198.51.100.98:{index}", T0) == 0
    # The next window starts afresh.
    assert admit(store, "/register", "198.51.100.99", T0 + timedelta(hours=1), limits) is None
    # One address by itself (an IPv6 client by its /64).
    for n in range(3):
        assert admit(store, "/register", f"2001:db8::{n}", T0 + timedelta(hours=2), limits) is None
    wait = admit(store, "/register", "2001:db8::ff", T0 + timedelta(hours=2), limits)
    assert wait == 3600


def test_a_registration_nobody_signs_in_with_expires(store: Store, monkeypatch: Any) -> None:
    from mcp.shared.auth import OAuthClientInformationFull

    from ltm.mcp import oauth
    from ltm.service.users import new_user

    monkeypatch.setattr(oauth, "_now", lambda: T0)
    provider = oauth.StoreProvider(
        store, issuer="https://ltm.example", resource="https://ltm.example/mcp", consent_url="x"
    )
    info = OAuthClientInformationFull.model_validate({**client_doc(), "client_id": "c-unused"})
    anyio.run(provider.register_client, info)
    assert store.get_oauth_item("client", "c-unused", T0) is not None
    gone_at = T0 + oauth.UNUSED_CLIENT_TTL
    assert store.get_oauth_item("client", "c-unused", gone_at) is None
    raw = getattr(store, "_client", None)
    if raw is not None:  # DynamoDB: the item carries the TTL attribute that removes it
        item = raw.get_item(
            TableName=store.table,  # type: ignore[attr-defined]
            Key={"pk": {"S": "OAUTH#client#c-unused"}, "sk": {"S": "OAUTH"}},
        )["Item"]
        assert int(item["ttl_epoch"]["N"]) <= (gone_at + timedelta(days=2)).timestamp()
    # A sign-in keeps a client as long as the refresh token it issued.
    info = OAuthClientInformationFull.model_validate({**client_doc(), "client_id": "c-used"})
    anyio.run(provider.register_client, info)
    user = new_user("limits")
    store.create_user(user)
    provider._issue(info, user.id, ["read"], "mcp:limits:0001")
    assert store.get_oauth_item("client", "c-used", gone_at) is not None
    assert store.get_oauth_item("client", "c-used", T0 + oauth.REFRESH_TTL) is None


def test_expired_oauth_rows_and_counters_go_on_write(tmp_path: Any) -> None:
    from ltm.store.sqlite import SqliteStore

    store = SqliteStore(tmp_path / "s.db")
    try:
        for n in range(50):
            store.put_oauth_item("request", f"r{n}", {"state": "x"}, T0 + timedelta(minutes=1))
            store.add_to_counter(f"k{n}", T0, T0 + timedelta(minutes=1))
        later = T0 + timedelta(minutes=2)
        store.put_oauth_item(
            "request", "fresh", {"state": "y"}, later + timedelta(minutes=1), now=later
        )
        store.add_to_counter("fresh", later, later + timedelta(minutes=1))
        db = store._conn()
        assert db.execute("SELECT count(*) FROM oauth_items").fetchone()[0] == 1
        assert db.execute("SELECT count(*) FROM counters").fetchone()[0] == 1
        assert json.loads(db.execute("SELECT doc FROM oauth_items").fetchone()[0]) == {"state": "y"}
    finally:
        store.close()


def test_a_cors_preflight_is_not_counted(tmp_path: Any) -> None:
    from ltm.mcp.asgi import serve
    from ltm.mcp.http import build_app
    from ltm.mcp.oauth import DOOR_LIMITS
    from ltm.store.sqlite import SqliteStore

    store = SqliteStore(tmp_path / "s.db")
    try:
        app = build_app(store, "https://ltm.example")

        def ask(method: str, body: bytes = b"") -> int:
            return serve(
                app,
                method=method,
                path="/register",
                query="",
                headers={"host": "ltm.example", "content-type": "application/json"},
                body=body,
                client=("198.51.100.3", 0),
            ).status

        for _ in range(DOOR_LIMITS["/register"].per_address + 5):
            ask("OPTIONS")
        assert ask("POST", json.dumps(client_doc()).encode()) == 201
    finally:
        store.close()
