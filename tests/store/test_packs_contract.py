"""The packs' leases (store/packs.py): one worker at a time holds a pack, on moto and on the fake."""

from __future__ import annotations

from datetime import timedelta

import pytest

from punctual.domain.errors import LostRace
from punctual.ports.packs import PackHeld
from punctual.store import Store
from punctual.store.packs import PackRepository
from tests.store.builders import NOW

LEASE = NOW + timedelta(minutes=1)


def test_a_pack_is_held_by_one_worker_until_its_lease_runs_out(store: Store) -> None:
    packs = PackRepository(store.table)
    # Given a pack taken for the first time
    assert packs.take("a1b2", "one", LEASE, NOW).first
    # Then another worker is held off until its lease runs out, and told until when
    with pytest.raises(PackHeld) as held:
        packs.take("a1b2", "two", LEASE + timedelta(minutes=1), NOW + timedelta(seconds=30))
    assert held.value.lease_until in (LEASE, None)
    # and takes it over once it has, as a pack taken before (some of its members may have run)
    later = LEASE + timedelta(seconds=1)
    assert not packs.take("a1b2", "two", later + timedelta(minutes=1), later).first
    # while another pack is free
    assert packs.take("c3d4", "one", LEASE, NOW).first


def test_a_lease_given_back_is_taken_at_once_but_only_by_its_holder(store: Store) -> None:
    packs = PackRepository(store.table)
    packs.take("e5f6", "one", LEASE, NOW)
    # Given another worker's attempt to give it back: refused
    with pytest.raises(LostRace):
        packs.release("e5f6", "two")
    # When its holder gives it back
    packs.release("e5f6", "one")
    # Then another takes it at once, as a pack taken before
    assert not packs.take("e5f6", "two", LEASE, NOW).first
