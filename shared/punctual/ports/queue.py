"""The port for the work queue: sending packs (punctual.domain.work) and holding a message back."""

from __future__ import annotations

from typing import Protocol

from punctual.domain.work import Pack, WorkItem


class WorkQueue(Protocol):
    def send(self, items: list[tuple[WorkItem, int]], attempts: int = 4) -> list[WorkItem]:
        """Send (item, delay seconds) pairs; the items that could not be sent."""
        ...

    def send_packs(self, packs: list[tuple[Pack, int]], attempts: int = 4) -> list[Pack]:
        """Send (pack, delay seconds) pairs; the packs that could not be sent."""
        ...

    def change_visibility(self, receipt_handle: str, seconds: float) -> None: ...
