"""Concurrency against a real server: one invite, many takers; many pushers, nothing lost."""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest
from serverkit import SERVER_STORES, Server, make_packet, running_server

TAKERS = 20


@pytest.fixture(scope="module", params=SERVER_STORES)
def server(
    tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest
) -> Iterator[Server]:
    directory = tmp_path_factory.mktemp("concurrency")
    with running_server(directory, "--threads", "8", store=request.param) as srv:
        yield srv


def _race(server: Server, code: str, tokens: list[str | None]) -> list[httpx.Response]:
    """Fire one accept per token at the same instant, each on its own connection."""
    clients = [server.client(token) for token in tokens]
    for client in clients:  # connect first, so the race is between requests, not handshakes
        assert client.get("/v1/healthz").status_code == 200
    barrier = threading.Barrier(len(clients))

    def take(client: httpx.Client) -> httpx.Response:
        barrier.wait()
        return client.post(f"/v1/invites/{code}/accept", json={"display": "racer"})

    with ThreadPoolExecutor(len(clients)) as pool:
        responses = list(pool.map(take, clients))
    for client in clients:
        client.close()
    return responses


def _users(server: Server) -> int:
    if server.store != "sqlite":  # every user in these tests has exactly one token
        return len(server.open_store().list_tokens())
    return _count(server, "SELECT count(*) FROM users")


def _count(server: Server, sql: str) -> int:
    db = sqlite3.connect(server.db)
    try:
        return int(db.execute(sql).fetchone()[0])
    finally:
        db.close()


@pytest.mark.parametrize("with_bearer", [False, True], ids=["new-users", "existing-users"])
def test_twenty_concurrent_accepts_one_wins(server: Server, with_bearer: bool) -> None:
    owner = server.client(server.issue("owner")[1])
    team = f"race-{int(with_bearer)}"
    assert owner.post("/v1/teams", json={"name": team}).status_code == 201
    code = owner.post(f"/v1/teams/{team}/invites").json()["code"]
    tokens: list[str | None] = (
        [server.issue(f"racer{i}")[1] for i in range(TAKERS)] if with_bearer else [None] * TAKERS
    )
    users_before = _users(server)

    responses = _race(server, code, tokens)

    statuses = sorted(r.status_code for r in responses)
    assert statuses == [201] + [410] * (TAKERS - 1), [r.text for r in responses]
    for r in responses:
        if r.status_code == 410:
            assert r.json() == {"error": "invite expired or already consumed"}
    winner = next(r.json() for r in responses if r.status_code == 201)
    members = owner.get(f"/v1/teams/{team}/members").json()["members"]
    assert [m["user_id"] for m in members][1:] == [winner["user"]["id"]]
    # Losers leave nothing behind: exactly one new user when accepting without a token.
    assert _users(server) == users_before + (0 if with_bearer else 1)


def test_a_burst_of_concurrent_pushes_loses_nothing(server: Server) -> None:
    users = [server.client(server.issue(f"pusher{i}")[1]) for i in range(5)]
    assert users[0].post("/v1/teams", json={"name": "burst"}).status_code == 201
    per_user = 80
    jobs = []
    for index, client in enumerate(users):
        for n in range(per_user):
            team = "burst" if index == 0 and n % 4 == 0 else None
            jobs.append((index, client, make_packet(goal=f"user {index} packet {n}"), team))

    def send(job: tuple[int, httpx.Client, dict[str, object], str | None]) -> tuple[int, str]:
        index, client, data, team = job
        params = {"team": team} if team else {}
        r = client.post("/v1/packets", json=data, params=params)
        assert r.status_code == 201, r.text
        return index, str(data["id"])

    with ThreadPoolExecutor(16) as pool:
        pushed = list(pool.map(send, jobs))
    assert len(pushed) == len(users) * per_user

    team_ids = {str(d["id"]) for i, _, d, t in jobs if t}
    for index, client in enumerate(users):
        personal = {p["id"] for p in client.get("/v1/packets?limit=1000").json()["packets"]}
        mine = {pid for i, pid in pushed if i == index} - team_ids
        assert personal == mine
    in_team = {p["id"] for p in users[0].get("/v1/packets?team=burst&limit=1000").json()["packets"]}
    assert in_team == team_ids
    for _, client, data, _ in jobs[::7]:
        assert client.get(f"/v1/packets/{data['id']}").json()["goal"] == data["goal"]
