"""How many DynamoDB requests each packet request costs, and that none is a Scan.

The count is taken at the service layer, exactly as a route calls it: the
parsed bearer header (``tokens.credential``, no read) handed to ``packets.
push/get/list_/delete``, which check the token together with their first
read. botocore's ``before-call`` event fires once per API call the client
makes (retries are not extra calls here), so the tally is exactly what
DynamoDB bills as requests.

Budget: at most 2 per request, the token check included, in personal and in
team scope, refusals included; a write adds the read of the packet it replaces
(its revision and size) before its one transaction; the search index is the
stream consumer's (``dynamo_stream.py``), never the request's. The token's
last-used time is written at most once per ``TOUCH_INTERVAL``; the counts are
for a token used recently, as on every request but the first in five minutes
(that one adds one UpdateItem).
"""

from __future__ import annotations

import contextlib
import copy
import json
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from dynamo_moto import in_process

from ltm.service import packets, teams, tokens
from ltm.service.errors import ServiceError
from ltm.store import Team, Token, User
from ltm.store.dynamo import DynamoStore

EXAMPLE = json.loads((Path(__file__).parents[1] / "chalicelib" / "example.json").read_text())


# A push reads the packet under its id (the revision a replacement is conditioned on,
# the size its usage changes by), then writes it with its owner's usage and its pending
# search entry in one transaction; a refusal (another owner's id) stops after the read.
# The search postings are written by the stream consumer, not here.
INDEX: list[str] = []
NEW = ["GetItem", "TransactWriteItems"]
REPLACED = ["GetItem", "TransactWriteItems"]
REFUSED = ["GetItem"]


class Calls:
    """Counts the client's API calls by operation name."""

    def __init__(self, store: DynamoStore) -> None:
        self.store = store
        self.ops: list[str] = []

    def __call__(self, model: Any, **_: Any) -> None:
        self.ops.append(model.name)

    def take(self) -> list[str]:
        ops, self.ops = self.ops, []
        return ops


@pytest.fixture
def counted() -> Iterator[tuple[DynamoStore, Calls]]:
    with in_process("ltm-calls") as client:
        store = DynamoStore("ltm-calls", client=client)
        calls = Calls(store)
        client.meta.events.register("before-call.dynamodb", calls)
        yield store, calls


def packet(n: int) -> dict[str, Any]:
    p = copy.deepcopy(EXAMPLE)
    p["id"] = f"01JCALLCOUNT{n:014d}"
    p["created_at"] = f"2026-04-22T00:00:{n % 60:02d}Z"
    return p


def signed_in(store: DynamoStore, name: str) -> tuple[User, str]:
    """A user and their bearer header, used just now (so no last-used write is due)."""
    user, secret = tokens.issue(store, name)
    tokens.authenticate(store, f"Bearer {secret}")
    return user, f"Bearer {secret}"


def core_team(store: DynamoStore, owner: User, member: User) -> Team:
    """The team "core", made by ``owner``, with ``member`` in it."""
    teams.create(store, owner, "core")
    team = store.get_team("core")
    assert team is not None
    store.add_member(team.id, member.id)
    return team


def costs(calls: Calls, header: str, op: Any, *args: Any, **kwargs: Any) -> list[str]:
    """The calls one request makes, as a route makes them (refusals included)."""
    calls.take()
    with contextlib.suppress(ServiceError):
        op(calls.store, tokens.credential(header), *args, **kwargs)
    return calls.take()


def test_personal_scope_costs_two_calls_and_the_usage_counter(
    counted: tuple[DynamoStore, Calls],
) -> None:
    store, calls = counted
    _, alice = signed_in(store, "alice")
    _, bob = signed_in(store, "bob")
    p1 = packet(1)

    assert costs(calls, alice, packets.push, p1) == ["GetItem", *NEW, *INDEX]
    assert costs(calls, alice, packets.push, p1) == ["GetItem", *REPLACED]  # re-push
    assert costs(calls, bob, packets.push, p1) == ["GetItem", *REFUSED]  # refused: 409
    # token + packet in one batch; the packet is personal, so nothing more to check
    assert costs(calls, alice, packets.get, p1["id"]) == ["BatchGetItem"]
    # refused: 404, after one read more: was it shared with the reader?
    assert costs(calls, bob, packets.get, p1["id"]) == ["BatchGetItem", "GetItem"]
    assert costs(calls, alice, packets.list_) == ["GetItem", "Query"]
    assert costs(calls, alice, packets.list_, limit=1) == ["GetItem", "Query"]
    assert costs(calls, bob, packets.delete, p1["id"]) == ["BatchGetItem"]  # refused: 404
    assert store.get_packet(p1["id"]) is not None
    # the revision read, then one transaction: the delete and alice's usage
    deleted = ["BatchGetItem", "GetItem", "TransactWriteItems"]
    assert costs(calls, alice, packets.delete, p1["id"]) == deleted
    assert store.get_packet(p1["id"]) is None
    assert costs(calls, alice, packets.delete, p1["id"]) == ["BatchGetItem"]  # gone: 404
    assert costs(calls, alice, packets.get, p1["id"]) == ["BatchGetItem"]


def test_team_scope_costs_two_calls_and_the_usage_counter(
    counted: tuple[DynamoStore, Calls],
) -> None:
    store, calls = counted
    alice_user, alice = signed_in(store, "alice")
    bob_user, bob = signed_in(store, "bob")
    _, carol = signed_in(store, "carol")  # not in the team
    core_team(store, alice_user, bob_user)
    p2, p3 = packet(2), packet(3)

    # token + team + the caller's membership (one BatchGetItem, the token names its
    # user), then the write
    assert costs(calls, bob, packets.push, p2, team="core") == ["BatchGetItem", *NEW, *INDEX]
    assert costs(calls, alice, packets.push, p3, team="core") == ["BatchGetItem", *NEW, *INDEX]
    assert costs(calls, carol, packets.push, packet(4), team="core") == ["BatchGetItem"]  # 404
    assert costs(calls, alice, packets.list_, team="core") == ["BatchGetItem", "Query"]
    assert costs(calls, carol, packets.list_, team="core") == ["BatchGetItem"]  # 404
    # token + packet, then the reader's membership in the packet's team
    assert costs(calls, alice, packets.get, p2["id"]) == ["BatchGetItem", "GetItem"]
    # 404: not a member, and not shared with her
    assert costs(calls, carol, packets.get, p2["id"]) == ["BatchGetItem", "GetItem", "GetItem"]
    # token + packet, the revision, then one transaction: the membership (and role), the
    # delete and the author's usage
    refused = ["BatchGetItem", "GetItem", "TransactWriteItems"]
    assert costs(calls, bob, packets.delete, p3["id"]) == refused
    assert store.get_packet(p3["id"]) is not None  # bob neither created it nor owns the team
    assert costs(calls, bob, packets.delete, p2["id"]) == refused
    assert store.get_packet(p2["id"]) is None  # his own
    assert costs(calls, alice, packets.delete, p3["id"]) == refused
    assert store.get_packet(p3["id"]) is None  # the team owner's right


def test_moving_a_packet_into_a_team_costs_a_transaction_and_the_usage_counter(
    counted: tuple[DynamoStore, Calls],
) -> None:
    """``push`` then ``push -t core``: the packet is read with the token and the team, so
    the move (a transaction that checks the membership) is known before the write."""
    store, calls = counted
    alice_user, alice = signed_in(store, "alice")
    bob_user, bob = signed_in(store, "bob")
    team = core_team(store, alice_user, bob_user)
    p7 = packet(7)
    assert costs(calls, alice, packets.push, p7) == ["GetItem", *NEW, *INDEX]
    assert costs(calls, bob, packets.push, p7, team="core") == ["BatchGetItem", *REFUSED]  # 409
    # the move: one transaction that checks the membership, as any write of the packet
    assert costs(calls, alice, packets.push, p7, team="core") == ["BatchGetItem", *REPLACED]
    moved = store.get_packet(p7["id"])
    assert moved is not None and moved.meta.team_id == team.id
    assert costs(calls, alice, packets.push, p7, team="core") == ["BatchGetItem", *REPLACED]
    assert costs(calls, alice, packets.push, p7) == ["GetItem", *REFUSED]  # 409: not out again


def test_a_token_without_the_user_id_costs_one_read_more_in_team_scope(
    counted: tuple[DynamoStore, Calls],
) -> None:
    """Tokens minted before the user id went into them: still right, one call dearer."""
    store, calls = counted
    alice_user, _ = signed_in(store, "alice")
    teams.create(store, alice_user, "core")
    plain = tokens.mint()
    store.add_token(Token("old-laptop", alice_user.id, tokens.hash_token(plain), tokens.now()))
    header = f"Bearer {plain}"
    tokens.authenticate(store, header)
    assert costs(calls, header, packets.push, packet(5), team="core") == [
        "BatchGetItem",
        "BatchGetItem",
        *NEW,
        *INDEX,
    ]
    assert costs(calls, header, packets.push, packet(6)) == ["GetItem", *NEW, *INDEX]
    assert [m.id for m in packets.list_(store, alice_user, team="core")] == [packet(5)["id"]]


def test_first_use_in_a_while_adds_one_write(counted: tuple[DynamoStore, Calls]) -> None:
    store, calls = counted
    _, secret = tokens.issue(store, "carol")
    calls.take()
    tokens.authenticate(store, f"Bearer {secret}")
    assert calls.take() == ["GetItem", "UpdateItem"]  # last-used recorded
    tokens.authenticate(store, f"Bearer {secret}")
    assert calls.take() == ["GetItem"]
    later = tokens.now() + tokens.TOUCH_INTERVAL + timedelta(seconds=1)
    tokens.authenticate(store, f"Bearer {secret}", later)
    assert calls.take() == ["GetItem", "UpdateItem"]


def test_no_request_path_scans(counted: tuple[DynamoStore, Calls]) -> None:
    """Every service operation, teams and invites included: never a Scan."""
    from ltm.service import invites

    store, calls = counted
    alice_user, alice_header = signed_in(store, "alice")
    alice = tokens.credential(alice_header)
    team = teams.create(store, alice, "core")
    packets.push(store, alice, packet(3), team="core")
    packets.push(store, alice, packet(4))
    teams.list_(store, alice)
    teams.members(store, alice, "core")
    made = invites.create(store, alice, "core", base_url="https://example.test")
    dave = invites.accept(store, None, made.code, display="dave")
    assert dave.token is not None
    invites.create(store, tokens.credential(f"Bearer {dave.token}"), "core", base_url="https://x")
    teams.kick(store, alice, "core", dave.user.id)  # and his invites with him
    again = invites.create(store, alice, "core", base_url="https://example.test")
    erin = invites.accept(store, None, again.code, display="erin")
    assert erin.token is not None
    teams.leave(store, tokens.credential(f"Bearer {erin.token}"), "core")
    tokens.list_(store, user_id=alice_user.id)
    tokens.list_(store)
    packets.resolve(store, alice, "01JCALL")
    teams.delete(store, alice, team.name)
    ops = calls.take()
    assert ops and "Scan" not in ops


def test_ids_and_names_too_long_to_exist_are_never_sent(
    counted: tuple[DynamoStore, Calls],
) -> None:
    """DynamoDB refuses keys over 2 KB (moto does not): such requests read only the token."""
    store, calls = counted
    _, alice = signed_in(store, "alice")
    long_id, long_team = "A" * 3000, "a" * 3000
    assert costs(calls, alice, packets.get, long_id) == ["GetItem"]
    assert costs(calls, alice, packets.delete, long_id) == ["GetItem"]
    assert costs(calls, alice, packets.list_, team=long_team) == ["GetItem"]
    assert costs(calls, alice, teams.members, long_team) == ["GetItem"]
    with pytest.raises(ServiceError) as refused:
        packets.get(store, tokens.credential(alice), long_id)
    assert (refused.value.status, refused.value.message) == (404, "not found")
    with pytest.raises(ServiceError) as refused:
        packets.list_(store, tokens.credential(alice), team=long_team)
    assert (refused.value.status, refused.value.message) == (404, "team not found")
    with pytest.raises(ServiceError) as refused:
        packets.get(store, tokens.credential("Bearer ltm_" + "0" * 64), long_id)
    assert refused.value.status == 401


def test_the_server_side_secret_scan_costs_no_call(counted: tuple[DynamoStore, Calls]) -> None:
    # The scan is CPU only, on the packet already in hand: a clean push costs what
    # it cost before, and a refused one stops after the token check.
    store, calls = counted
    _, alice = signed_in(store, "alice")
    clean, leaky = packet(10), packet(11)
    leaky["goal"] = "use " + "ghp_" + "aB3dE5gH7j" * 3 + "aB3dE5"
    assert costs(calls, alice, packets.push, clean, scan=True) == ["GetItem", *NEW, *INDEX]
    assert costs(calls, alice, packets.push, leaky, scan=True) == ["GetItem"]  # refused: 400
    assert store.get_packet(leaky["id"]) is None
    forced = costs(calls, alice, packets.push, leaky, scan=False)
    assert forced == ["GetItem", *NEW]


def test_reading_a_packet_one_may_publish_reads_the_packet_once(
    counted: tuple[DynamoStore, Calls],
) -> None:
    """``GET /v1/packets/{id}`` for its manager: the packet read with the token carries
    its public hash, so the publication costs only its own item (a team packet's, its
    publisher's membership too), and nothing unpublished."""
    from ltm.service import publish

    store, calls = counted
    alice_user, alice = signed_in(store, "alice")
    bob_user, bob = signed_in(store, "bob")
    core_team(store, alice_user, bob_user)
    mine, ours = packet(20), packet(21)
    packets.push(store, alice_user, mine)
    packets.push(store, bob_user, ours, team="core")

    assert costs(calls, alice, publish.read, mine["id"]) == ["BatchGetItem"]
    made, _ = publish.publish(store, alice_user, mine["id"])
    # token + packet, then the publication's own item
    assert costs(calls, alice, publish.read, mine["id"]) == ["BatchGetItem", "GetItem"]
    assert publish.read(store, tokens.credential(alice), mine["id"])[1] == made
    assert costs(calls, alice, publish.publication, mine["id"]) == ["BatchGetItem", "GetItem"]
    publish.unpublish(store, alice_user, mine["id"])
    assert costs(calls, alice, publish.read, mine["id"]) == ["BatchGetItem"]
    assert publish.read(store, tokens.credential(alice), mine["id"])[1] is None

    # a team packet: token + packet, the membership, then the publication's item and its
    # publisher's membership (a former member's publication is dead from their departure
    # on, before its clean-up ends it)
    assert costs(calls, alice, publish.read, ours["id"]) == ["BatchGetItem", "GetItem"]
    publish.publish(store, bob_user, ours["id"])
    published = ["BatchGetItem", "GetItem", "GetItem", "GetItem"]
    assert costs(calls, alice, publish.read, ours["id"]) == published  # the team's owner
    assert costs(calls, bob, publish.read, ours["id"]) == published  # its author


def test_removing_a_user_id_too_long_to_exist_asks_nothing_more(
    counted: tuple[DynamoStore, Calls],
) -> None:
    """``DELETE /v1/teams/{name}/members/{user_id}`` with a pasted wall of text: 404 ``not a
    member``, as on SQLite, after the owner's own read; DynamoDB would refuse the key (500)."""
    store, calls = counted
    alice_user, alice = signed_in(store, "alice")
    teams.create(store, alice_user, "core")
    long_id = "A" * 3000
    assert costs(calls, alice, teams.kick, "core", long_id) == ["BatchGetItem"]
    with pytest.raises(ServiceError) as refused:
        teams.kick(store, tokens.credential(alice), "core", long_id)
    assert (refused.value.status, refused.value.message) == (404, "not a member")
