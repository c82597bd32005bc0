"""The port for storage: one repository per aggregate over one table, as the stages reach them."""

from __future__ import annotations

from datetime import timedelta
from typing import Protocol

from punctual.ports.changes import ChangeRecords
from punctual.ports.executions import DeadLetterStore, DeliveryStore, ExecutionStore
from punctual.ports.jobs import BatchEndStore, IdempotencyStore, JobStore, TaskStore
from punctual.ports.markers import MarkerStore, ScannerStateStore


class Store(Protocol):
    """Read-only members, so that an adapter may hold a subtype of each repository's port."""

    @property
    def jobs(self) -> JobStore: ...

    @property
    def executions(self) -> ExecutionStore: ...

    @property
    def deliveries(self) -> DeliveryStore: ...

    @property
    def markers(self) -> MarkerStore: ...

    @property
    def scanner(self) -> ScannerStateStore: ...

    @property
    def idempotency(self) -> IdempotencyStore: ...

    @property
    def dead_letters(self) -> DeadLetterStore: ...

    @property
    def tasks(self) -> TaskStore: ...

    @property
    def changes(self) -> ChangeRecords: ...

    @property
    def batch_ends(self) -> BatchEndStore: ...

    @property
    def shard_count(self) -> int:
        """The shards due markers are spread over."""
        ...

    @property
    def retention(self) -> timedelta:
        """How long a finished execution's history is kept."""
        ...
