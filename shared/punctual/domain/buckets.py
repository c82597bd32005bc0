"""Where due markers are filed and in which order the scanner reads them.

A marker is filed in its minute's bucket of one shard (its execution id hashed over the shards), and
placed in that bucket by its instant, then its execution id: the scanner reads a bucket in that order,
and a `Position` says how far it got in a shard. Markers of one instant filed together (a batch) share
the shard and place of the first of them.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass
from datetime import datetime

from punctual.domain.models import DueMarker
from punctual.platform.timefmt import from_epoch_ms, to_epoch_ms

# The lowest place in a bucket: every marker's place (scheduled ms, 13 digits) is above it.
START_OF_BUCKET = "0"


def bucket_minute(instant: datetime) -> str:
    return instant.strftime("%Y%m%d%H%M")


def shard_of(execution_id: str, shard_count: int) -> int:
    return zlib.crc32(execution_id.encode()) % shard_count


def place_of(marker: DueMarker) -> str:
    """A marker's place in its bucket: its instant (ms, 13 digits), then its execution id."""
    return f"{to_epoch_ms(marker.scheduled_at):013d}#{marker.execution_id}"


def place_before(instant: datetime) -> str:
    """A place between the markers due before `instant` and those due at or after it."""
    return f"{to_epoch_ms(instant):013d}"


@dataclass(frozen=True, order=True)
class Position:
    """Where the scanner reads on in a shard: `minute`'s bucket from `after` (inclusive: a marker's
    place, or a place between instants). Ordered as the scanner reads: by minute, then place."""

    minute: datetime
    after: str = START_OF_BUCKET

    @staticmethod
    def bound(minute: datetime, instant: datetime) -> Position:
        """In `minute`'s bucket, after every marker due before `instant`."""
        return Position(minute, place_before(instant))

    @staticmethod
    def at(minute: datetime, marker: DueMarker) -> Position:
        """In `minute`'s bucket, at `marker` (read again from it: from its group's item, if it has one)."""
        return Position(minute, marker.place or place_of(marker))

    @property
    def at_start(self) -> bool:
        return self.after == START_OF_BUCKET

    def instant(self) -> datetime:
        """The instant up to which the shard has been read: its minute, or the markers' time it stopped at."""
        return self.minute if self.at_start else from_epoch_ms(int(self.after[:13]))
