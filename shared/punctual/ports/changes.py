"""The port for change records: what a pack's worker reads at its instant to learn which of its
members' jobs changed since the pack was sent (paused, cancelled, rescheduled, edited), in one read
for the instant instead of a read per member.

A request that changes a job whose run may already be in a work message (`models.dispatched_runs`)
records the change against that run's instant before it writes the job, so a change acknowledged
before a pack's start is seen by it."""

from __future__ import annotations

from collections.abc import Collection
from datetime import datetime
from typing import Protocol


class ChangeRecords(Protocol):
    def note(self, job_id: str, instants: Collection[datetime]) -> None:
        """Record that this job changes, against each instant (before the change is written)."""
        ...

    def changed(self, instant: datetime) -> frozenset[str]:
        """The jobs recorded as changed against this instant (a strongly consistent read)."""
        ...
