"""Device grants, rate-limit counters and server secrets for the DynamoDB store.

A mixin of ``DynamoStore`` (kept in its own module so the device flow's items
sit apart from the packet, team and invite items). Items, in the same table::

    item               pk / sk                       notes
    device grant       DEVICE#<codehash> / DEVICE    status, interval, next poll, approver
    user-code claim    USERCODE#<hash> / USERCODE    -> the grant's device code hash
    counter            COUNTER#<key> / COUNTER       count, expires_epoch
    secret             SECRET#<name> / SECRET        value (binary)

No index is involved: every operation is a GetItem, a conditional
UpdateItem/PutItem or one TransactWriteItems.

- Expiry: grants, claims and counters carry ``expires_epoch`` (a number, so
  conditions can compare it) and ``ttl_epoch`` for DynamoDB TTL, set a grace
  period after expiry (TTL deletion is lazy and may take days); the code
  compares ``expires_epoch`` itself and never relies on TTL.
- Creating a grant is one transaction: the grant (new) and its user-code
  claim (new, or replacing the claim of an expired grant), so two live grants
  never share a user code.
- Polling is one conditional UpdateItem (``next_poll <= now``: in time), and a
  second one when that fails (too fast: ``interval_s`` grows, ``next_poll``
  moves out). ``next_poll`` is epoch seconds with microseconds, so DynamoDB
  does the arithmetic (``:now + interval_s``) atomically.
- Deciding and redeeming are conditional on ``status``; redeeming marks the
  grant ``used`` and writes the token items in one transaction, so a device
  gets exactly one token.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from . import Conflict, DeviceGrant, Gone, NotFound, Token

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

Item = dict[str, dict[str, Any]]

GRANT_TTL_GRACE = timedelta(days=1)
COUNTER_TTL_GRACE = timedelta(hours=1)
COUNTER_ATTEMPTS = 6
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def _epoch(value: datetime) -> str:
    """Exact epoch seconds with microseconds, as a DynamoDB number string."""
    delta = value.astimezone(UTC) - _EPOCH
    return f"{delta.days * 86_400 + delta.seconds}.{delta.microseconds:06d}"


def _from_epoch(value: str) -> datetime:
    number = Decimal(value)
    whole = int(number)
    micro = int((number - whole) * 1_000_000)
    return _EPOCH + timedelta(seconds=whole, microseconds=micro)


def _n(value: str | int) -> dict[str, str]:
    return {"N": str(value)}


def _ttl(value: datetime) -> dict[str, str]:
    return _n(int(value.timestamp()))


def _grant_key(device_code_hash: str) -> Item:
    return _d._key(f"DEVICE#{device_code_hash}", "DEVICE")


def _claim_key(user_code_hash: str) -> Item:
    return _d._key(f"USERCODE#{user_code_hash}", "USERCODE")


def _grant_item(grant: DeviceGrant) -> Item:
    s = _d._s
    item: Item = {
        **_grant_key(grant.device_code_hash),
        "device_code_hash": s(grant.device_code_hash),
        "user_code_hash": s(grant.user_code_hash),
        "client_id": s(grant.client_id),
        "scope": s(grant.scope),
        "device_name": s(grant.device_name),
        "client_ip": s(grant.client_ip),
        "created_at": s(_d._ts(grant.created_at)),
        "expires_at": s(_d._ts(grant.expires_at)),
        "expires_epoch": _n(_epoch(grant.expires_at)),
        "interval_s": _n(grant.interval),
        "next_poll": _n(_epoch(grant.next_poll_at)),
        "grant_status": s(grant.status),
        _d.TTL_ATTRIBUTE: _ttl(grant.expires_at + GRANT_TTL_GRACE),
    }
    if grant.user_id is not None:
        item["user_id"] = s(grant.user_id)
    if grant.decided_at is not None:
        item["decided_at"] = s(_d._ts(grant.decided_at))
    if grant.approved_with is not None:
        item["approved_with"] = s(grant.approved_with)
    return item


def _grant(item: Mapping[str, Mapping[str, Any]]) -> DeviceGrant:
    get, req = _d._get, _d._req
    decided = get(item, "decided_at")
    return DeviceGrant(
        device_code_hash=req(item, "device_code_hash"),
        user_code_hash=req(item, "user_code_hash"),
        client_id=req(item, "client_id"),
        scope=get(item, "scope") or "",
        device_name=get(item, "device_name") or "",
        client_ip=get(item, "client_ip") or "",
        created_at=_d._dt(req(item, "created_at")),
        expires_at=_d._dt(req(item, "expires_at")),
        interval=int(item["interval_s"]["N"]),
        next_poll_at=_from_epoch(item["next_poll"]["N"]),
        status=req(item, "grant_status"),  # type: ignore[arg-type]
        user_id=get(item, "user_id"),
        decided_at=_d._dt(decided) if decided else None,
        approved_with=get(item, "approved_with"),
    )


class DeviceGrantsMixin:
    """The device-flow part of the ``Store`` contract, for ``DynamoStore``."""

    table: str
    _client: DynamoDBClient
    _exc: Any

    if TYPE_CHECKING:

        def _get_item(self, key: Item) -> Item | None: ...

        def _transact(self, actions: list[dict[str, Any]]) -> None: ...

        def get_user(self, user_id: str) -> Any: ...

    # -- grants ------------------------------------------------------------------

    def create_device_grant(self, grant: DeviceGrant, now: datetime) -> None:
        claim: Item = {
            **_claim_key(grant.user_code_hash),
            "device_code_hash": _d._s(grant.device_code_hash),
            "expires_epoch": _n(_epoch(grant.expires_at)),
            _d.TTL_ATTRIBUTE: _ttl(grant.expires_at + GRANT_TTL_GRACE),
        }
        actions = [
            _d._put_new(_grant_item(grant)),
            {
                "Put": {
                    "Item": claim,
                    # Free, or held by a grant that has expired.
                    "ConditionExpression": "attribute_not_exists(#pk) OR #ex <= :now",
                    "ExpressionAttributeNames": {"#pk": "pk", "#ex": "expires_epoch"},
                    "ExpressionAttributeValues": {":now": _n(_epoch(now))},
                }
            },
        ]
        for attempt in range(_d.TRANSACTION_ATTEMPTS):
            try:
                self._transact(actions)
                return
            except _d._Cancelled as cancelled:
                if not cancelled.conflict:
                    raise Conflict("device code or user code already in use") from None
                _d._backoff(attempt)
        raise Conflict("device grant could not be created (concurrent writes); try again")

    def get_device_grant(self, device_code_hash: str) -> DeviceGrant | None:
        item = self._get_item(_grant_key(device_code_hash))
        return _grant(item) if item else None

    def get_device_grant_by_user_code(
        self, user_code_hash: str, now: datetime
    ) -> DeviceGrant | None:
        claim = self._get_item(_claim_key(user_code_hash))
        if claim is None or _from_epoch(claim["expires_epoch"]["N"]) <= now:
            return None
        grant = self.get_device_grant(_d._req(claim, "device_code_hash"))
        if grant is None or grant.user_code_hash != user_code_hash or grant.expires_at <= now:
            return None
        return grant

    def poll_device_grant(
        self,
        device_code_hash: str,
        now: datetime,
        *,
        slow_down_step: int,
        leeway: timedelta = timedelta(0),
    ) -> tuple[DeviceGrant, bool] | None:
        names = {"#pk": "pk", "#np": "next_poll", "#iv": "interval_s"}
        try:
            resp = self._client.update_item(
                TableName=self.table,
                Key=_grant_key(device_code_hash),
                UpdateExpression="SET #np = :now + #iv",
                ConditionExpression="attribute_exists(#pk) AND #np <= :cutoff",
                ExpressionAttributeNames=names,
                ExpressionAttributeValues={
                    ":now": _n(_epoch(now)),
                    ":cutoff": _n(_epoch(now + leeway)),
                },
                ReturnValues="ALL_NEW",
            )
            return _grant(resp["Attributes"]), False
        except self._exc.ConditionalCheckFailedException:
            pass
        try:
            # Too fast (or absent). #np comes first so that it reads the interval
            # before the increment, whichever order the actions are applied in.
            resp = self._client.update_item(
                TableName=self.table,
                Key=_grant_key(device_code_hash),
                UpdateExpression="SET #np = :later + #iv, #iv = #iv + :step",
                ConditionExpression="attribute_exists(#pk)",
                ExpressionAttributeNames=names,
                ExpressionAttributeValues={
                    ":later": _n(_epoch(now + timedelta(seconds=slow_down_step))),
                    ":step": _n(slow_down_step),
                },
                ReturnValues="ALL_NEW",
            )
        except self._exc.ConditionalCheckFailedException:
            return None
        return _grant(resp["Attributes"]), True

    def decide_device_grant(
        self,
        user_code_hash: str,
        now: datetime,
        *,
        approve: bool,
        user_id: str,
        approved_with: str | None = None,
    ) -> DeviceGrant:
        grant = self.get_device_grant_by_user_code(user_code_hash, now)
        if grant is None:
            raise NotFound("no such device code, or it expired")
        status = "approved" if approve else "denied"
        # A grant is decided once, so there is never an earlier approved_with to remove.
        with_token = ", approved_with = :with" if approved_with is not None else ""
        extra = {":with": _d._s(approved_with)} if approved_with is not None else {}
        try:
            resp = self._client.update_item(
                TableName=self.table,
                Key=_grant_key(grant.device_code_hash),
                UpdateExpression="SET #st = :status, #uid = :uid, #at = :at" + with_token,
                ConditionExpression="#st = :pending AND #ex > :now AND #uc = :uc",
                ExpressionAttributeNames={
                    "#st": "grant_status",
                    "#uid": "user_id",
                    "#at": "decided_at",
                    "#ex": "expires_epoch",
                    "#uc": "user_code_hash",
                },
                ExpressionAttributeValues={
                    ":status": _d._s(status),
                    ":uid": _d._s(user_id),
                    ":at": _d._s(_d._ts(now)),
                    ":pending": _d._s("pending"),
                    ":now": _n(_epoch(now)),
                    ":uc": _d._s(user_code_hash),
                    **extra,
                },
                ReturnValues="ALL_NEW",
            )
        except self._exc.ConditionalCheckFailedException:
            if self.get_device_grant_by_user_code(user_code_hash, now) is None:
                raise NotFound("no such device code, or it expired") from None
            raise Gone("this device code was already decided") from None
        return _grant(resp["Attributes"])

    def redeem_device_grant(
        self, device_code_hash: str, now: datetime, token: Token
    ) -> DeviceGrant:
        grant = self.get_device_grant(device_code_hash)
        if grant is None:
            raise NotFound("no such device code")
        if grant.status != "approved" or grant.expires_at <= now or grant.user_id != token.user_id:
            raise Gone("this device code is not approved, already used, or expired")
        user = self.get_user(token.user_id)
        if user is None:
            raise Gone("the user who approved this device no longer exists")
        actions: list[dict[str, Any]] = [
            {
                "Update": {
                    "Key": _grant_key(device_code_hash),
                    "UpdateExpression": "SET #st = :used",
                    "ConditionExpression": "#st = :approved AND #ex > :now AND #uid = :uid",
                    "ExpressionAttributeNames": {
                        "#st": "grant_status",
                        "#ex": "expires_epoch",
                        "#uid": "user_id",
                    },
                    "ExpressionAttributeValues": {
                        ":used": _d._s("used"),
                        ":approved": _d._s("approved"),
                        ":now": _n(_epoch(now)),
                        ":uid": _d._s(token.user_id),
                    },
                }
            },
            *(_d._put_new(item) for item in _d._token_items(token, user)),
        ]
        for attempt in range(_d.TRANSACTION_ATTEMPTS):
            try:
                self._transact(actions)
                return grant._replace(status="used")
            except _d._Cancelled as cancelled:
                if cancelled.failed(0):
                    raise Gone(
                        "this device code is not approved, already used, or expired"
                    ) from None
                if not cancelled.conflict:
                    raise Conflict(f"token label {token.label!r} or hash is taken") from None
                _d._backoff(attempt)
        # Every try lost a race or was throttled, and none found the grant used (a lost
        # race would have on its next try): it is still approved, for the next poll.
        raise Conflict("the device token could not be handed out for the moment; try again")

    # -- counters ------------------------------------------------------------------

    def add_to_counter(self, key: str, now: datetime, expires_at: datetime) -> int:
        item_key = _d._key(f"COUNTER#{key}", "COUNTER")
        names = {"#pk": "pk", "#c": "count", "#ex": "expires_epoch"}
        for attempt in range(COUNTER_ATTEMPTS):
            try:
                resp = self._client.update_item(
                    TableName=self.table,
                    Key=item_key,
                    UpdateExpression="ADD #c :one",
                    ConditionExpression="attribute_exists(#pk) AND #ex > :now",
                    ExpressionAttributeNames=names,
                    ExpressionAttributeValues={":one": _n(1), ":now": _n(_epoch(now))},
                    ReturnValues="UPDATED_NEW",
                )
                return int(resp["Attributes"]["count"]["N"])
            except self._exc.ConditionalCheckFailedException:
                pass
            try:  # absent or expired: start again at 1, unless someone else just did
                self._client.put_item(
                    TableName=self.table,
                    Item={
                        **item_key,
                        "count": _n(1),
                        "expires_epoch": _n(_epoch(expires_at)),
                        _d.TTL_ATTRIBUTE: _ttl(expires_at + COUNTER_TTL_GRACE),
                    },
                    ConditionExpression="attribute_not_exists(#pk) OR #ex <= :now",
                    ExpressionAttributeNames={"#pk": "pk", "#ex": "expires_epoch"},
                    ExpressionAttributeValues={":now": _n(_epoch(now))},
                )
                return 1
            except self._exc.ConditionalCheckFailedException:
                _d._backoff(attempt)
        raise RuntimeError(f"counter {key!r} could not be updated (concurrent writes)")

    def read_counter(self, key: str, now: datetime) -> int:
        item = self._get_item(_d._key(f"COUNTER#{key}", "COUNTER"))
        if item is None or _from_epoch(item["expires_epoch"]["N"]) <= now:
            return 0
        return int(item["count"]["N"])

    # -- secrets -------------------------------------------------------------------

    def ensure_secret(self, name: str, candidate: bytes) -> bytes:
        key = _d._key(f"SECRET#{name}", "SECRET")
        try:
            self._client.put_item(
                TableName=self.table,
                Item={
                    **key,
                    "value": {"B": candidate},
                    "created_at": _d._s(_d._ts(datetime.now(UTC))),
                },
                ConditionExpression="attribute_not_exists(#pk)",
                ExpressionAttributeNames={"#pk": "pk"},
            )
            return candidate
        except self._exc.ConditionalCheckFailedException:
            item = self._get_item(key)
            assert item is not None
            return bytes(item["value"]["B"])


# The item helpers live in the store's module, which imports this one for the
# mixin: imported last, so either module may be imported first.
from . import dynamo as _d  # noqa: E402
