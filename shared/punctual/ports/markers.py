"""Ports for due markers and for the scanner's leases and positions."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from datetime import datetime
from typing import Protocol

from punctual.domain.buckets import Position
from punctual.domain.models import DueMarker


class MarkerStore(Protocol):
    """Due markers: filed, read by bucket (or the soon partitions), deleted, set aside in quarantine."""

    def put(self, marker: DueMarker) -> None: ...

    def put_many(self, markers: Iterable[DueMarker]) -> None: ...

    def delete_many(self, markers: Iterable[DueMarker]) -> None: ...

    def filed(self, markers: Iterable[DueMarker]) -> list[DueMarker]: ...

    def in_bucket(self, shard: int, start: Position, before: datetime) -> Iterator[DueMarker]: ...

    def soon(self, shard: int, before: datetime, limit: int | None = None) -> Iterator[DueMarker]: ...

    def quarantine(self, markers: Iterable[DueMarker], reasons: dict[str, str], now: datetime) -> None: ...

    def quarantined(self, job_id: str | None = None) -> list[tuple[DueMarker, str]]: ...

    def release_quarantined(self, markers: Iterable[DueMarker]) -> None: ...


class ScannerStateStore(Protocol):
    """The scanner's leases on shards and its position in each."""

    def acquire_leases(self, shards: Sequence[int], holder: str, now: datetime, until: datetime) -> bool: ...

    def release_leases(self, shards: Sequence[int], holder: str) -> None: ...

    def positions(self, shards: Iterable[int]) -> dict[int, Position | None]: ...

    def save_positions(self, positions: dict[int, Position]) -> None: ...
