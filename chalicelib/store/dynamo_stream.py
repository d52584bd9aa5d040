"""The table's stream consumer: what a packet change derives, the shares of a deleted
packet, and the resumable jobs (a deleted team's fan-out, a departed member's clean-up:
``dynamo_fanout.py``).

Deployed as a Lambda on the table's stream (``app.py``: ``on_dynamodb_record``;
``.chalice/merge-template.json`` adds what Chalice's decorator cannot say: the
filter to packet records and the jobs' marks, partial batch responses, a bisecting
retry with a limit, and the SQS queue the records that still fail end in). Each record
carries the item's old and new images (``NEW_AND_OLD_IMAGES``), so a handler
computes the difference itself, reads nothing first, and can run twice.

Records of one item arrive in order; a failed record is reported back
(``batchItemFailures``, https://docs.aws.amazon.com/lambda/latest/dg/
services-ddb-batchfailurereporting.html) with everything after it in the
batch left undone, so the retry starts from it and the order holds.
"""

from __future__ import annotations

import base64
import logging
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .dynamo import DynamoStore

logger = logging.getLogger("ltm.stream")

Image = dict[str, dict[str, Any]]


def _image(raw: Mapping[str, Any] | None) -> Image | None:
    """A stream image as the SDK gives table items (a Lambda event carries binary as base64)."""
    if raw is None:
        return None
    image: Image = dict(raw)
    body = image.get("body")
    if body is not None and isinstance(body.get("B"), str):
        image["body"] = {"B": base64.b64decode(body["B"])}
    return image


def apply_record(store: DynamoStore, record: Mapping[str, Any]) -> None:
    """Apply one stream record (Lambda's event shape, or GetRecords')."""
    change = record["dynamodb"]
    keys = change["Keys"]
    pk, sk = keys["pk"]["S"], keys["sk"]["S"]
    if sk == "PKT" and pk.startswith("PKT#"):
        old, new = _image(change.get("OldImage")), _image(change.get("NewImage"))
        store.apply_packet_change(old, new)
        if new is None:
            # A delete ends its shares after its transaction: a request cut short there
            # left them, and a share outliving its packet would share the same id pushed
            # again. (One pushed again and shared before this ran loses that share too.)
            store._end_shares(old)
            if old is not None:
                store.forget_in_team(old)
        else:
            # A team packet pushed the instant before its team's deletion is found here,
            # whichever came first (``dynamo_fanout.py`` says how).
            store.keep_in_team(old, new)
        return
    step = _step_moved(change)
    if step is None or not pk.startswith("TEAM#"):
        return
    if sk == "GONE":  # a team's deletion: its tombstone's creation, then each hand-over
        store.team_delete_step(pk.removeprefix("TEAM#"), step)
    elif sk.startswith("LEFT#"):  # a member's departure: likewise, from its mark
        store.departure_step(pk.removeprefix("TEAM#"), sk.removeprefix("LEFT#"), step)


def _step_moved(change: Mapping[str, Any]) -> int | None:
    """The step a job's mark (``dynamo_fanout.py``) was moved to by this record: its
    creation, or a hand-over to the next step; None for any other change (its
    marking as done, or a page's progress kept on the mark)."""
    new, old = change.get("NewImage"), change.get("OldImage")
    if not new or "done" in new or "step" not in new:
        return None
    if old and "done" not in old and old.get("step") == new["step"]:
        return None
    return int(new["step"]["N"])


def handle(store: DynamoStore, records: Iterable[Mapping[str, Any]]) -> list[dict[str, str]]:
    """Apply the records in order; the first that fails is reported, the rest left for the retry."""
    for record in records:
        try:
            apply_record(store, record)
        except Exception:
            sequence = str(record.get("dynamodb", {}).get("SequenceNumber", ""))
            logger.exception("stream record %s failed; retried from it", sequence)
            return [{"itemIdentifier": sequence}]
    return []
