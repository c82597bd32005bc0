"""Standard Webhooks signatures (https://www.standardwebhooks.com): how Punctual signs what it sends.

A job with a signing secret signs its webhook notifications and its `http` task's requests with three
headers: `webhook-id` (the same for every attempt of one message, so receivers can de-duplicate),
`webhook-timestamp` (Unix seconds, when the attempt was sent) and `webhook-signature`: `v1,` and the
base64 HMAC-SHA256, under the secret, of `<id>.<timestamp>.<body>`. A secret is `whsec_` and the
base64 of 24 to 64 random bytes. While a secret is being rotated the previous one stays valid too, for
`PREVIOUS_SECRET_VALID`: the header then carries both signatures, space-separated, and a receiver
accepts a request that matches either.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import secrets
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta

PREFIX = "whsec_"
MIN_KEY_BYTES = 24
MAX_KEY_BYTES = 64
# How long a replaced secret keeps signing beside its successor: receivers have this long to move.
PREVIOUS_SECRET_VALID = timedelta(hours=24)
# A receiver refuses a timestamp further than this from its clock (replayed or delayed requests).
TOLERANCE = timedelta(minutes=5)

ID_HEADER = "webhook-id"
TIMESTAMP_HEADER = "webhook-timestamp"
SIGNATURE_HEADER = "webhook-signature"
HEADERS = frozenset({ID_HEADER, TIMESTAMP_HEADER, SIGNATURE_HEADER})


def key_of(secret: str) -> bytes:
    """The key a secret stands for; ValueError (saying what a secret looks like) if it is not one."""
    if not secret.startswith(PREFIX):
        raise ValueError(_SHAPE)
    try:
        key = base64.b64decode(secret[len(PREFIX) :], validate=True)
    except (binascii.Error, ValueError):
        raise ValueError(_SHAPE) from None
    if not MIN_KEY_BYTES <= len(key) <= MAX_KEY_BYTES:
        raise ValueError(f"decodes to {len(key)} bytes; {_SHAPE}")
    return key


def check_secret(secret: str) -> None:
    """A secret given to Punctual: one (`key_of`), written as base64 writes its key. Python reads
    `QUFB=` as `QUFB`, extra padding and all; a receiver's library may refuse it, or read another
    key, and every signature would then fail to verify there."""
    key = key_of(secret)
    if base64.b64encode(key).decode("ascii") != secret[len(PREFIX) :]:
        raise ValueError(
            f"is not its key's base64 as written (its padding: `=` only to a multiple of 4); {_SHAPE}"
        )


_SHAPE = (
    f"a signing secret is {PREFIX} followed by the base64 of {MIN_KEY_BYTES} to {MAX_KEY_BYTES} random "
    f"bytes (e.g. {PREFIX}$(openssl rand -base64 32), or `punctual new-secret`)"
)


def new_secret() -> str:
    return PREFIX + base64.b64encode(secrets.token_bytes(32)).decode()


@dataclass(frozen=True)
class SigningKeys:
    """A job's secrets: the current one, and while a rotation lasts the one it replaced."""

    current: str
    previous: str | None = None
    previous_until: datetime | None = None

    def active(self, now: datetime) -> tuple[bytes, ...]:
        """The keys to sign with at `now`: the current one first."""
        keys = [key_of(self.current)]
        if self.previous is not None and self.previous_until is not None and now < self.previous_until:
            keys.append(key_of(self.previous))
        return tuple(keys)

    def rotated(self, new: str, now: datetime) -> SigningKeys:
        """These keys after `new` replaces the current secret (which stays valid for a while)."""
        if new == self.current:
            return self
        return SigningKeys(current=new, previous=self.current, previous_until=now + PREVIOUS_SECRET_VALID)


def signature(key: bytes, message_id: str, timestamp: int, body: bytes) -> str:
    signed = f"{message_id}.{timestamp}.".encode() + body
    return "v1," + base64.b64encode(hmac.new(key, signed, hashlib.sha256).digest()).decode()


def headers(keys: Iterable[bytes], message_id: str, now: datetime, body: bytes) -> dict[str, str]:
    """The three headers that sign `body` as message `message_id`, sent at `now`."""
    timestamp = int(now.timestamp())
    signatures = " ".join(signature(key, message_id, timestamp, body) for key in keys)
    return {ID_HEADER: message_id, TIMESTAMP_HEADER: str(timestamp), SIGNATURE_HEADER: signatures}


class InvalidSignature(Exception):
    pass


def verify(secret: str, request_headers: Mapping[str, str], body: bytes, now: datetime) -> str:
    """What a receiver does: check a request's signature and timestamp; returns its message id.
    Raises InvalidSignature saying what is wrong."""
    lowered = {name.lower(): value for name, value in request_headers.items()}
    try:
        message_id = lowered[ID_HEADER]
        timestamp = int(lowered[TIMESTAMP_HEADER])
        given = lowered[SIGNATURE_HEADER].split()
    except (KeyError, ValueError):
        raise InvalidSignature(f"missing or malformed {', '.join(sorted(HEADERS))} headers") from None
    if abs(now.timestamp() - timestamp) > TOLERANCE.total_seconds():
        raise InvalidSignature(f"timestamp {timestamp} is more than {TOLERANCE} from now")
    expected = signature(key_of(secret), message_id, timestamp, body)
    if not any(hmac.compare_digest(expected, candidate) for candidate in given):
        raise InvalidSignature("no signature matches the secret")
    return message_id
