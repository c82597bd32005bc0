"""The work queue's message: a pack of executions due at one instant (`Pack`, each a `WorkItem`),
its body, how executions are cut into packs, and how long a message is held before it is visible.

The format is what the scanner, the hand-off and the worker agree on; punctual.store.queue sends it."""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from functools import cached_property
from itertools import groupby

from punctual.domain.executions import execution_id_at, instant_stamp
from punctual.platform.aws_limits import SQS_MAX_DELAY_SECONDS
from punctual.platform.timefmt import from_epoch_ms, to_epoch_ms

# A pack's body stays under SQS's former 256 KiB message limit (a queue created before SQS raised it
# keeps it), and ten of them fit a Lambda invoke's 6 MB payload.
PACK_MAX_BYTES = 250_000
PACK_VERSION = 2
# One encoder for every body: json.dumps makes one a call when given separators.
_COMPACT = json.JSONEncoder(separators=(",", ":"))


@dataclass(frozen=True)
class WorkItem:
    """One execution of one job, as a work message's pack carries it (a message sent before packs
    named one of these alone: `read_body` reads it as a pack of one).

    The execution may not be stored yet (the scanner stores none on AWS: the worker records it when it
    starts), so the message carries what the worker needs to record it: the schedule version it was
    materialised under and whether it is an extra run. A message without them (sent before an upgrade,
    docs/upgrading.md) names an execution that was stored before it was sent.
    """

    job_id: str
    execution_id: str
    scheduled_at: datetime
    schedule_version: int | None = None
    manual: bool = False

    def to_body(self) -> str:
        body: dict[str, object] = {
            "job_id": self.job_id,
            "execution_id": self.execution_id,
            "scheduled_ms": to_epoch_ms(self.scheduled_at),
        }
        if self.schedule_version is not None:
            body["schedule_version"] = self.schedule_version
        if self.manual:
            body["manual"] = True
        return json.dumps(body)

    @classmethod
    def from_body(cls, body: str) -> WorkItem:
        data = json.loads(body)
        version = data.get("schedule_version")
        return cls(
            job_id=str(data["job_id"]),
            execution_id=str(data["execution_id"]),
            scheduled_at=from_epoch_ms(int(data["scheduled_ms"])),
            schedule_version=None if version is None else int(version),
            manual=bool(data.get("manual", False)),
        )


@dataclass(frozen=True)
class Pack:
    """What a message on the work queue carries: executions due at one instant, run side by side by
    the worker that receives it (punctual.execution.packs).

    `shard` is None for a pack the API's hand-off made (its markers from any shard). `guarded`: some of
    its executions may have been sent before or stored already (extra runs, markers sent again), so
    they are read before they are run.
    """

    scheduled_at: datetime
    items: tuple[WorkItem, ...]
    shard: int | None = None
    guarded: bool = False

    @cached_property
    def id(self) -> str:
        """Deterministic: the same executions make the same pack, whoever sends it and how often."""
        ids = (
            [self.items[0].execution_id]
            if len(self.items) == 1
            else sorted(i.execution_id for i in self.items)
        )
        return hashlib.sha256("\n".join(ids).encode()).hexdigest()[:20]

    def to_body(self) -> str:
        stamp = instant_stamp(self.scheduled_at)  # (every member's: they share the instant)
        return _COMPACT.encode(
            {
                "v": PACK_VERSION,
                "id": self.id,
                "at": to_epoch_ms(self.scheduled_at),
                "s": self.shard,
                "g": int(self.guarded),
                "e": [_entry(item, stamp) for item in self.items],
            }
        )


def _entry(item: WorkItem, stamp: str) -> list[object]:
    """A scheduled execution's entry needs no id: its job, instant (`stamp`) and schedule version
    make it."""
    version = item.schedule_version
    if (
        not item.manual
        and version is not None
        and item.execution_id == execution_id_at(item.job_id, stamp, version)
    ):
        return [item.job_id, version]
    return [item.job_id, version, "m" if item.manual else "", item.execution_id]


def _entry_bytes_at_most(item: WorkItem) -> int:
    """An entry's length in a body at most (its longest form), without encoding it: ids are plain
    ASCII; anything else is measured the slow way."""
    if _plain(item.job_id) and _plain(item.execution_id):
        # ["job",version,"m","execution"]: the quotes, "m", commas and brackets make 12
        return len(item.job_id) + len(item.execution_id) + len(str(item.schedule_version)) + 12
    longest = [item.job_id, item.schedule_version, "m", item.execution_id]
    return len(_COMPACT.encode(longest))


def _plain(text: str) -> bool:
    """Whether JSON writes `text` as it is, between quotes."""
    return text.isascii() and text.isprintable() and '"' not in text and "\\" not in text


def read_body(body: str) -> Pack:
    """A work message's pack; a body of one execution (sent before packs) reads as a pack of one."""
    data = json.loads(body)
    if "v" not in data:
        item = WorkItem.from_body(body)
        return Pack(item.scheduled_at, (item,), guarded=True)
    at = from_epoch_ms(int(data["at"]))
    stamp = instant_stamp(at)
    items = []
    for entry in data["e"]:
        job_id, version = str(entry[0]), None if entry[1] is None else int(entry[1])
        if len(entry) > 2:
            items.append(WorkItem(job_id, str(entry[3]), at, version, entry[2] == "m"))
        else:
            assert version is not None
            items.append(WorkItem(job_id, execution_id_at(job_id, stamp, version), at, version))
    shard = data.get("s")
    return Pack(at, tuple(items), None if shard is None else int(shard), bool(data.get("g", 0)))


def pack_items(
    items: Iterable[tuple[WorkItem, int | None]],
    *,
    guarded: Iterable[str] = (),
    max_entries: int,
    max_bytes: int = PACK_MAX_BYTES,
) -> list[Pack]:
    """Items (with their shard) as packs: one per instant, shard and guardedness, in the order given,
    cut at `max_entries` executions or `max_bytes` of body."""
    marked = set(guarded)
    keyed = [(item.scheduled_at, shard, item.execution_id in marked, item) for item, shard in items]
    packs: list[Pack] = []
    for (at, shard, is_guarded), group in groupby(
        sorted(keyed, key=lambda k: (k[0], -1 if k[1] is None else k[1], k[2])),
        key=lambda k: (k[0], k[1], k[2]),
    ):
        members = [k[3] for k in group]
        if len(members) == 1:  # (an entry alone always fits: no need to size it)
            packs.append(Pack(at, (members[0],), shard, is_guarded))
            continue
        current: list[WorkItem] = []
        size = 0
        for item in members:
            entry = _entry_bytes_at_most(item) + 1
            if current and (len(current) >= max_entries or size + entry > max_bytes - 200):
                packs.append(Pack(at, tuple(current), shard, is_guarded))
                current, size = [], 0
            current.append(item)
            size += entry
        if current:
            packs.append(Pack(at, tuple(current), shard, is_guarded))
    return packs


def delay_seconds(scheduled_at: datetime, now: datetime) -> int:
    """Whole seconds to hold a message so that it becomes visible at, or just before, its instant.

    Rounded down: the worker waits out the remaining fraction of a second, so nothing starts early and
    SQS's whole-second delays do not make it late.
    """
    seconds = math.floor((scheduled_at - now).total_seconds())
    return max(0, min(SQS_MAX_DELAY_SECONDS, seconds))
