"""Due-marker items, and those set aside in quarantine: what the scanner reads from a bucket, and
what it moves out of the buckets. Apart: markers have keys and an expiry of their own, and carry no
job or execution beyond what the scanner needs to send one.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

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
