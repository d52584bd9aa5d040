"""How many DynamoDB requests each packet request costs, and that none is a Scan.

The count is taken at the service layer, the code every route runs: the token
check (``tokens.authenticate``) plus the operation (``packets.push/get/list_/
delete``). botocore's ``before-call`` event fires once per API call the client
makes (retries are not extra calls here), so the tally is exactly what
DynamoDB bills as requests.

Budget: at most 2 per request in personal scope (the token check included).
Team scope adds the membership check: 3 each. The token's last-used time is
written at most once per ``TOKEN_TOUCH_INTERVAL``; the counts are for a token
touched recently, as on every request but the first in five minutes.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from dynamo_moto import in_process

from ltm.service import packets, teams, tokens
from ltm.service.errors import NotFound
from ltm.store.dynamo import DynamoStore

EXAMPLE = json.loads((Path(__file__).parents[1] / "chalicelib" / "example.json").read_text())


class Calls:
    """Counts the client's API calls by operation name."""

    def __init__(self) -> None:
        self.ops: list[str] = []

    def __call__(self, model: Any, **_: Any) -> None:
        self.ops.append(model.name)

    def take(self) -> list[str]:
        ops, self.ops = self.ops, []
        return ops


@pytest.fixture
def counted() -> Iterator[tuple[DynamoStore, Calls]]:
    with in_process("ltm-calls") as client:
        calls = Calls()
        client.meta.events.register("before-call.dynamodb", calls)
        yield DynamoStore("ltm-calls", client=client), calls


def packet(n: int) -> dict[str, Any]:
    p = copy.deepcopy(EXAMPLE)
    p["id"] = f"01JCALLCOUNT{n:014d}"
    p["created_at"] = f"2026-04-22T00:00:{n % 60:02d}Z"
    return p


def signed_in(store: DynamoStore, name: str) -> str:
    """A user with a token that has been used just now (so no last-used write is due)."""
    _, secret = tokens.issue(store, name)
    tokens.authenticate(store, f"Bearer {secret}")
    return f"Bearer {secret}"


def test_personal_scope_costs_at_most_two_calls(counted: tuple[DynamoStore, Calls]) -> None:
    store, calls = counted
    alice = signed_in(store, "alice")
    bob = signed_in(store, "bob")
    calls.take()

    def request(header: str, op: Any, *args: Any, **kwargs: Any) -> list[str]:
        calls.take()
        caller = tokens.authenticate(store, header)
        op(store, caller, *args, **kwargs)
        return calls.take()

    assert request(alice, packets.push, packet(1)) == ["GetItem", "PutItem"]
    assert request(alice, packets.push, packet(1)) == ["GetItem", "PutItem"]  # re-push
    assert request(alice, packets.get, packet(1)["id"]) == ["GetItem", "GetItem"]
    assert request(alice, packets.list_) == ["GetItem", "Query"]
    assert request(alice, packets.list_, limit=1) == ["GetItem", "Query"]
    # Refusals cost no more than successes.
    with pytest.raises(NotFound):
        request(bob, packets.get, packet(1)["id"])
    assert calls.take() == ["GetItem", "GetItem"]
    with pytest.raises(NotFound):
        request(bob, packets.delete, packet(1)["id"])
    assert calls.take() == ["GetItem", "DeleteItem"]
    assert request(alice, packets.delete, packet(1)["id"]) == ["GetItem", "DeleteItem"]
    with pytest.raises(NotFound):
        request(alice, packets.delete, packet(1)["id"])
    assert calls.take() == ["GetItem", "DeleteItem"]


def test_team_scope_costs_three_calls(counted: tuple[DynamoStore, Calls]) -> None:
    store, calls = counted
    alice = signed_in(store, "alice")
    bob = signed_in(store, "bob")
    alice_user = tokens.authenticate(store, alice)
    bob_user = tokens.authenticate(store, bob)
    team = teams.create(store, alice_user, "core")
    store.add_member(team.id, bob_user.id)
    calls.take()

    def request(header: str, op: Any, *args: Any, **kwargs: Any) -> list[str]:
        calls.take()
        caller = tokens.authenticate(store, header)
        op(store, caller, *args, **kwargs)
        return calls.take()

    # token, team + membership (one BatchGetItem), the operation
    assert request(bob, packets.push, packet(2), team="core") == [
        "GetItem",
        "BatchGetItem",
        "PutItem",
    ]
    assert request(alice, packets.list_, team="core") == ["GetItem", "BatchGetItem", "Query"]
    # token, packet, the reader's membership in the packet's team
    assert request(alice, packets.get, packet(2)["id"]) == ["GetItem", "GetItem", "GetItem"]
    # token, the conditional personal delete (fails, returns the item), then one
    # transaction: ConditionCheck on the membership + conditional Delete
    assert request(bob, packets.delete, packet(2)["id"]) == [
        "GetItem",
        "DeleteItem",
        "TransactWriteItems",
    ]
    assert store.get_packet(packet(2)["id"]) is None


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
    alice = tokens.authenticate(store, signed_in(store, "alice"))
    team = teams.create(store, alice, "core")
    packets.push(store, alice, packet(3), team="core")
    packets.push(store, alice, packet(4))
    teams.list_(store, alice)
    teams.members(store, alice, "core")
    made = invites.create(store, alice, "core", base_url="https://example.test")
    invites.accept(store, None, made.code, display="dave")
    tokens.list_(store, user_id=alice.id)
    tokens.list_(store)
    packets.resolve(store, alice, "01JCALL")
    teams.delete(store, alice, team.name)
    ops = calls.take()
    assert ops and "Scan" not in ops
