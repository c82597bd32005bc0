"""Ids drawn from blocks of system randomness (punctual.platform.randomness)."""

from __future__ import annotations

import os
import uuid

import pytest

from punctual.platform import randomness


def test_ids_have_the_shapes_of_their_standard_counterparts_and_never_repeat() -> None:
    tokens = {randomness.token_hex(10) for _ in range(5000)}
    assert len(tokens) == 5000
    assert all(len(t) == 20 and int(t, 16) >= 0 for t in tokens)
    ids = [randomness.uuid4() for _ in range(1000)]
    assert len(set(ids)) == 1000
    assert all(i.version == 4 and i.variant == uuid.RFC_4122 for i in ids)
    assert len(randomness.token_bytes(7)) == 7


def test_a_draw_larger_than_a_block_is_read_on_its_own() -> None:
    big = randomness.token_bytes(randomness.BLOCK_BYTES + 1)
    assert len(big) == randomness.BLOCK_BYTES + 1


def test_draws_across_a_block_boundary_do_not_overlap() -> None:
    seen = [randomness.token_bytes(1000) for _ in range(3 * randomness.BLOCK_BYTES // 1000 + 2)]
    assert len(set(seen)) == len(seen)


def test_blocks_come_from_the_system_generator(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[int] = []

    def urandom(count: int) -> bytes:
        calls.append(count)
        return bytes(range(256)) * (count // 256) + bytes(count % 256)

    monkeypatch.setattr(randomness.os, "urandom", urandom)
    pool = randomness._Pool()
    first = [pool.take(16) for _ in range(randomness.BLOCK_BYTES // 16)]
    assert calls == [randomness.BLOCK_BYTES]  # one read served them all
    assert first[1] == bytes(range(16, 32))
    pool.take(16)
    assert calls == [randomness.BLOCK_BYTES] * 2


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_forked_child_does_not_hand_out_its_parents_next_ids() -> None:
    randomness.token_hex(4)  # a block is in use
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child
        os.write(write, randomness.token_hex(16).encode())
        os._exit(0)
    os.close(write)
    os.waitpid(pid, 0)
    child = os.read(read, 64).decode()
    os.close(read)
    assert len(child) == 32 and child != randomness.token_hex(16)
