"""Opaque pagination cursors: signed, and bound to the owner and the list they page through.

An altered cursor fails its signature; a cursor issued to another owner, or for another list, fails
its binding. Either answers 400 and reveals nothing.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import re
from collections.abc import Callable
from decimal import Decimal
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from punctual.domain.errors import InvalidRequest, RetryableStoreError

_URLSAFE_BASE64 = re.compile(r"[A-Za-z0-9_-]+")


class Cursors:
    def __init__(self, secret: str | Callable[[], str]) -> None:
        """`secret`: the signing secret, or how to read it (once, when a cursor is first made or read:
        only a list request pays for it)."""
        self._secret = secret
        self._derived: bytes | None = None

    @property
    def _key(self) -> bytes:
        # (two threads may both read it the first time: the same value, no harm)
        if self._derived is None:
            secret = self._secret if isinstance(self._secret, str) else self._read(self._secret)
            self._derived = hashlib.sha256(secret.encode()).digest()
        return self._derived

    @staticmethod
    def _read(secret: Callable[[], str]) -> str:
        try:
            return secret()
        except (ClientError, BotoCoreError) as exc:
            # (503: a later request reads it again)
            raise RetryableStoreError(f"the cursor secret could not be read: {exc}") from exc

    def encode(self, key: dict[str, Any] | None, *, owner: str, scope: str) -> str | None:
        if not key:
            return None
        payload = json.dumps(
            {"k": key, "o": owner, "s": scope}, default=_plain, separators=(",", ":")
        ).encode()
        signature = hmac.new(self._key, payload, hashlib.sha256).digest()[:16]
        return base64.urlsafe_b64encode(signature + payload).decode().rstrip("=")

    def decode(self, cursor: str | None, *, owner: str, scope: str) -> dict[str, Any] | None:
        """The position a cursor names; None (the first page) only for no cursor at all. An empty
        `?cursor=` is refused (400): a client that sends one has lost
        the cursor it meant, and reading the first page again would repeat what it has seen."""
        if cursor is None:
            return None
        if not cursor:
            raise InvalidRequest("cursor: empty: leave `cursor` out for the first page", field="cursor")
        try:
            if not _URLSAFE_BASE64.fullmatch(cursor):  # (the decoder would skip other characters)
                raise ValueError("not a cursor")
            raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
            signature, payload = raw[:16], raw[16:]
            expected = hmac.new(self._key, payload, hashlib.sha256).digest()[:16]
            if not hmac.compare_digest(signature, expected):
                raise ValueError("bad signature")
            data = json.loads(payload)
            if data["o"] != owner or data["s"] != scope or not isinstance(data["k"], dict):
                raise ValueError("cursor belongs elsewhere")
            return dict(data["k"])
        except (ValueError, KeyError, TypeError) as exc:
            raise InvalidRequest(
                "cursor: not a cursor of this list: altered, another's, for other filters, or signed with "
                "an earlier secret; leave `cursor` out for the first page",
                field="cursor",
            ) from exc


def _plain(value: Any) -> Any:
    if isinstance(value, Decimal):
        return int(value) if value == value.to_integral_value() else float(value)
    raise TypeError(f"cannot encode {type(value).__name__}")
