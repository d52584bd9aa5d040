"""Packet ids travel in URL paths and terminals: a safe charset, refused with a 400 naming the
character, on the server for every store.

An id outside ``^[A-Za-z0-9][A-Za-z0-9._:-]{9,63}$`` is refused on push (strict and
lenient alike); as a path parameter it is simply absent (404 ``not found``, no store
read): the reference CLI prints the error it gets either way, and ours sends a
prefix to ``DELETE /v1/packets/{ref}`` first and resolves it on 404, so a 400 there
would break ``ltm rm PREFIX``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import httpkit
import pytest
from serverkit import SERVER_STORES, Server, make_packet, running_server

from ltm.ids import check_packet_id
from ltm.service import packets
from ltm.service.errors import BadRequest, NotFound
from ltm.service.users import now
from ltm.store import User
from ltm.store.sqlite import SqliteStore

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize(
    "good",
    [
        "01JS5LTMEXAMPLEPACKET00001A",  # the published example
        "01JDMX1V7TBNK6ZQG3F8C2W4YE",  # the reference's benchmark packet
        "a" * 64,
        "0123456789",
        "proj.v2_final:draft-1",
    ],
)
def test_safe_ids_pass(good: str) -> None:
    check_packet_id(good)


def test_every_id_we_ship_passes() -> None:
    for path in (ROOT / "chalicelib").rglob("*.json"):
        data = json.loads(path.read_text())
        if isinstance(data, dict) and "id" in data and "ltm_version" in data:
            check_packet_id(data["id"])


@pytest.mark.parametrize(
    ("bad", "named"),
    [
        ("team/../../etc", "'/' (U+002F)"),
        ("0123456789\r\nX-Injected: 1", "'\\r' (U+000D)"),
        ("0123456789\n", "U+000A"),
        ("01234\u202e56789abc", "'\\u202e' (U+202E)"),
        ("0123456789 space", "' ' (U+0020)"),
        ("café-0123456789", "'é' (U+00E9)"),
        ("0123456789\u200b", "'\\u200b' (U+200B)"),
        ("0123456789?a=b", "'?' (U+003F)"),
    ],
)
def test_unsafe_ids_name_the_character(bad: str, named: str) -> None:
    with pytest.raises(ValueError) as info:
        check_packet_id(bad)
    message = str(info.value)
    assert named in message and "letters, digits and . _ : -" in message
    # The message itself is safe to print: no control or bidi character in it.
    assert all(ch.isprintable() for ch in message)
    assert "\u202e" not in message and "\u200b" not in message


@pytest.mark.parametrize(
    ("bad", "why"),
    [("short", "10 to 64"), ("a" * 65, "10 to 64"), (".0123456789", "start with a letter")],
)
def test_length_and_first_character(bad: str, why: str) -> None:
    with pytest.raises(ValueError, match=why):
        check_packet_id(bad)


@pytest.mark.parametrize("lenient", [False, True])
def test_the_service_refuses_before_storing(tmp_path: Path, lenient: bool) -> None:
    store = SqliteStore(tmp_path / "ltm.db")
    me = User("u1", "me", now())
    try:
        with pytest.raises(BadRequest, match=re.escape("'/' (U+002F)")):
            packets.push(store, me, make_packet(id="abc/defghij"), lenient=lenient)
        assert packets.list_(store, me) == []
        with pytest.raises(NotFound):
            packets.get(store, me, "abc/defghij")
    finally:
        store.close()


@pytest.fixture(scope="module", params=SERVER_STORES)
def server(
    tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest
) -> Iterator[Server]:
    with running_server(tmp_path_factory.mktemp("ids"), store=request.param) as srv:
        yield srv


def test_the_server_answers_400_naming_the_character(server: Server) -> None:
    client = server.client(server.root_token)
    for bad, named in (
        ("abc/defghijk", "U+002F"),
        ("0123456789\u202eabc", "U+202E"),
        ("0123456789\r\nabc", "U+000D"),
    ):
        for query in ("", "?lenient=true"):
            r = client.post(f"/v1/packets{query}", json=make_packet(id=bad))
            assert r.status_code == 400 and named in r.json()["error"], r.text
    listed = client.get("/v1/packets?limit=1000").json()["packets"]
    assert all("/" not in p["id"] and "\r" not in p["id"] for p in listed)


def test_ids_outside_the_charset_are_absent_in_paths(server: Server) -> None:
    client = server.client(server.root_token)
    good = make_packet()
    assert client.post("/v1/packets", json=good).status_code == 201
    for path in ("bad%20id%20here", "0123456789%E2%80%AEabc", "short"):
        assert client.get(f"/v1/packets/{path}").json() == {"error": "not found"}
        assert client.delete(f"/v1/packets/{path}").status_code == 404
    assert client.get(f"/v1/packets/{good['id']}").status_code == 200
    r = httpkit.get(server.url + f"/v1/packets/{good['id']}")
    assert r.status_code == 401  # the token is still checked first
