"""Pagination cursors: opaque, signed, and bound to the owner and the list they page through."""

from __future__ import annotations

import base64
from decimal import Decimal
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from punctual.domain.errors import InvalidRequest
from punctual.jobs.cursor import Cursors

KEY = {"pk": "OWNER#alice", "sk": "JOB#2026-12-01T09:00:00.000Z#j1", "n": Decimal("42")}
CURSORS = Cursors("test-secret")


def cursor_for(key: dict[str, Any] = KEY, owner: str = "alice", scope: str = "jobs") -> str:
    cursor = CURSORS.encode(key, owner=owner, scope=scope)
    assert cursor is not None
    return cursor


def refused(
    cursor: str, owner: str = "alice", scope: str = "jobs", cursors: Cursors = CURSORS
) -> InvalidRequest:
    with pytest.raises(InvalidRequest) as caught:
        cursors.decode(cursor, owner=owner, scope=scope)
    return caught.value


def test_cursor_round_trips_its_key() -> None:
    # Given a DynamoDB key (numbers come back from boto3 as Decimal)
    cursor = cursor_for()

    # When decoded by the same owner for the same list / Then the key comes back
    assert CURSORS.decode(cursor, owner="alice", scope="jobs") == {**KEY, "n": 42}


def test_cursor_is_url_safe_and_does_not_show_the_key_in_clear() -> None:
    cursor = cursor_for()
    assert set(cursor) <= set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")
    assert "alice" not in cursor


@pytest.mark.parametrize("key", [None, {}])
def test_no_key_means_no_cursor(key: dict[str, Any] | None) -> None:
    # The last page has no next cursor (null), and no cursor asks for the first page.
    assert CURSORS.encode(key, owner="alice", scope="jobs") is None
    assert CURSORS.decode(None, owner="alice", scope="jobs") is None


def test_an_empty_cursor_is_refused_not_read_as_the_first_page() -> None:
    # Given `?cursor=` sent empty (a client that lost the cursor it meant)
    # When decoded / Then it is refused like any cursor not issued here
    assert refused("").field == "cursor"


@given(position=st.integers(0, 10_000), flip=st.integers(1, 255))
def test_cursor_with_any_byte_altered_is_refused(position: int, flip: int) -> None:
    # Given a valid cursor with one byte of its content altered (and re-encoded, so it is well formed)
    raw = bytearray(base64.urlsafe_b64decode(cursor_for() + "=="))
    raw[position % len(raw)] ^= flip
    altered = base64.urlsafe_b64encode(bytes(raw)).decode().rstrip("=")

    # When decoded / Then it is refused as a bad `cursor`
    error = refused(altered)
    assert error.field == "cursor"


@pytest.mark.parametrize(
    ("owner", "scope"),
    [("mallory", "jobs"), ("alice", "executions:j1"), ("Alice", "jobs"), ("", "jobs")],
)
def test_cursor_is_refused_by_another_owner_or_for_another_list(owner: str, scope: str) -> None:
    # Given alice's cursor over her jobs / When someone else, or another list, uses it
    error = refused(cursor_for(), owner=owner, scope=scope)

    # Then it is refused, without saying whose it was or what it pointed at
    assert error.field == "cursor"
    assert "alice" not in str(error) and "OWNER" not in str(error)


def test_cursor_signed_with_another_secret_is_refused() -> None:
    # Another deployment (or a rotated secret) cannot vouch for this one's cursors.
    assert refused(cursor_for(), cursors=Cursors("other-secret")).field == "cursor"


def test_cursor_truncated_is_refused() -> None:
    assert refused(cursor_for()[:-4]).field == "cursor"


@pytest.mark.parametrize(
    "garbage",
    [
        "x",
        "not a cursor",
        "!!!!",
        "é",
        "AAAA",
        "null",
        "=" * 8,
        base64.urlsafe_b64encode(b"\x00" * 40).decode(),
    ],
)
def test_garbage_cursor_is_refused(garbage: str) -> None:
    assert refused(garbage).field == "cursor"


@given(garbage=st.text(min_size=1, max_size=200))
def test_any_text_not_issued_as_a_cursor_is_refused(garbage: str) -> None:
    # Everything but a cursor this deployment issued is InvalidRequest (a 400), never a crash (a 500).
    with pytest.raises(InvalidRequest):
        CURSORS.decode(garbage, owner="alice", scope="jobs")
