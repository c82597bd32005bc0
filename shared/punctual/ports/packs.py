"""The port for packs' leases: one worker runs a pack taken under its lease."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Protocol


@dataclass(frozen=True)
class Taken:
    """A pack's lease, taken. `first`: no one had taken the pack before, so none of its members has
    started; otherwise (a redelivery, or a lease taken over) some may have run or ended."""

    first: bool
    # Taken over from a holder that noted its members' start (`PackLeases.mark_started`): one that
    # starts again is no late first start.
    started_before: bool = False


class PackHeld(Exception):
    """Another worker holds the pack's lease, until `lease_until` (None: not known)."""

    def __init__(self, lease_until: datetime | None) -> None:
        super().__init__(f"pack held until {lease_until}")
        self.lease_until = lease_until


class PackLeases(Protocol):
    def take(self, pack_id: str, holder: str, lease_until: datetime, now: datetime) -> Taken:
        """The pack's lease for `holder` until `lease_until`; PackHeld while another holds it."""
        ...

    def release(self, pack_id: str, holder: str) -> None: ...

    def mark_started(self, pack_id: str, holder: str) -> None:
        """Note on the lease, while `holder` holds it, that the pack's members started."""
        ...
