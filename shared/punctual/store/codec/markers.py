"""Due-marker items, and those set aside in quarantine: what the scanner reads from a bucket, and
what it moves out of the buckets. Apart: markers have keys and an expiry of their own, and carry no
job or execution beyond what the scanner needs to send one.

A group item holds the markers of one instant that one request filed together (a batch of jobs):
one write, and one item in the scanner's read, for up to a hundred executions. It sits where its first
marker (by execution id) would, in that marker's shard, and names each member by its job and schedule
version, which make its execution id (`execution_id_at`).
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from punctual.domain.buckets import place_of, shard_of
from punctual.domain.executions import execution_id_at, instant_stamp
from punctual.domain.models import DueMarker
from punctual.platform.timefmt import from_epoch_ms, to_epoch_ms, to_rfc3339
from punctual.store import keys

# Markers in minute buckets are read once and never deleted by the scanner: they expire, this long
# after their instant (a scanner stopped for longer would find them gone; its alarms fire long before).
# Soon markers do not expire: the scanner deletes each once it is sent.
MARKER_TTL = timedelta(days=30)


def marker_item(marker: DueMarker, shard_count: int) -> dict[str, Any]:
    return {
        **keys.marker_key(marker, shard_count),
        "job_id": marker.job_id,
        "execution_id": marker.execution_id,
        "scheduled_ms": to_epoch_ms(marker.scheduled_at),
        "schedule_version": marker.schedule_version,
        "manual": marker.manual,
        **({} if marker.soon else {"expires_at": int((marker.scheduled_at + MARKER_TTL).timestamp())}),
        **(
            {"handoff_until_ms": to_epoch_ms(marker.handoff_until)}
            if marker.handoff_until is not None
            else {}
        ),
        **({"filed_ms": to_epoch_ms(marker.filed_at)} if marker.filed_at is not None else {}),
    }


def groupable(marker: DueMarker) -> bool:
    """Whether a marker may share an item with others of its instant: one for a minute's bucket, of a
    scheduled occurrence (its execution id made from its job), filed without a claim and not yet read
    back (whose place is its own)."""
    return (
        not marker.soon
        and not marker.manual
        and marker.handoff_until is None
        and marker.shard is None
        and marker.place is None
    )


def group_item(markers: list[DueMarker], shard_count: int) -> dict[str, Any]:
    """One item for markers of one instant filed together (each `groupable`), keyed as the first of them
    by execution id would be."""
    members = sorted(markers, key=lambda m: m.execution_id)
    first = members[0]
    assert all(groupable(m) and m.scheduled_at == first.scheduled_at for m in members)
    return {
        "pk": keys.bucket_pk(first.scheduled_at, shard_of(first.execution_id, shard_count)),
        "sk": place_of(first),
        "scheduled_ms": to_epoch_ms(first.scheduled_at),
        "members": ",".join(f"{m.job_id}:{m.schedule_version}" for m in members),
        "count": len(members),
        "expires_at": int((first.scheduled_at + MARKER_TTL).timestamp()),
        **({"filed_ms": to_epoch_ms(first.filed_at)} if first.filed_at is not None else {}),
    }


def markers_from(item: dict[str, Any]) -> list[DueMarker]:
    """The markers an item holds: one, or a group's."""
    if "members" not in item:
        return [marker_from(item)]
    shard, soon = keys.marker_place(str(item["pk"]))
    at = from_epoch_ms(int(item["scheduled_ms"]))
    stamp = instant_stamp(at)
    filed = item.get("filed_ms")
    filed_at = None if filed is None else from_epoch_ms(int(filed))
    place = str(item["sk"])
    markers = []
    for member in str(item["members"]).split(","):
        job_id, version = member.rsplit(":", 1)
        markers.append(
            DueMarker(
                job_id=job_id,
                execution_id=execution_id_at(job_id, stamp, int(version)),
                scheduled_at=at,
                schedule_version=int(version),
                shard=shard,
                soon=soon,
                filed_at=filed_at,
                place=place,
            )
        )
    return markers


def marker_from(item: dict[str, Any]) -> DueMarker:
    handoff = item.get("handoff_until_ms")
    filed = item.get("filed_ms")
    shard, soon = keys.marker_place(str(item["pk"]))
    return DueMarker(
        job_id=str(item["job_id"]),
        execution_id=str(item["execution_id"]),
        scheduled_at=from_epoch_ms(int(item["scheduled_ms"])),
        schedule_version=int(item["schedule_version"]),
        manual=bool(item.get("manual", False)),
        shard=shard,
        handoff_until=None if handoff is None else from_epoch_ms(int(handoff)),
        soon=soon,
        filed_at=None if filed is None else from_epoch_ms(int(filed)),
    )


def quarantine_item(marker: DueMarker, reason: str, now: datetime, shard_count: int) -> dict[str, Any]:
    """A marker set aside: kept until released, so without the marker's expiry."""
    item = {k: v for k, v in marker_item(marker, shard_count).items() if k != "expires_at"}
    return {**item, **keys.quarantine_key(marker), "reason": reason, "quarantined_at": to_rfc3339(now)}


def quarantined_from(item: dict[str, Any]) -> tuple[DueMarker, str]:
    marker = DueMarker(
        job_id=str(item["job_id"]),
        execution_id=str(item["execution_id"]),
        scheduled_at=from_epoch_ms(int(item["scheduled_ms"])),
        schedule_version=int(item["schedule_version"]),
        manual=bool(item.get("manual", False)),
    )
    return marker, str(item.get("reason", ""))
