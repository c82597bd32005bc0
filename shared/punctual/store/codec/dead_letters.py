"""Dead-letter items: an execution given up on, kept under its owner until it expires. Apart: they
have keys of their own, and are read by owner rather than with their job or execution.
"""

from __future__ import annotations

from typing import Any

from punctual.domain.executions import DeadLetter
from punctual.platform.timefmt import from_epoch_ms, parse_stored, to_epoch_ms, to_rfc3339
from punctual.store import keys
from punctual.store.codec.values import optional_int, present


def dead_letter_item(letter: DeadLetter, expires_at: int) -> dict[str, Any]:
    item = {
        **keys.dead_letter_key(letter.owner, letter.execution_id),
        "job_id": letter.job_id,
        "execution_id": letter.execution_id,
        "scheduled_ms": to_epoch_ms(letter.scheduled_at),
        "schedule_version": letter.schedule_version,
        "manual": letter.manual,
        "dead_lettered_at": to_rfc3339(letter.dead_lettered_at),
        "error": letter.error,
        "expires_at": expires_at,
    }
    return present(item)


def dead_letter_from(owner: str, item: dict[str, Any]) -> DeadLetter:
    return DeadLetter(
        owner=owner,
        job_id=str(item["job_id"]),
        execution_id=str(item["execution_id"]),
        scheduled_at=from_epoch_ms(int(item["scheduled_ms"])),
        schedule_version=optional_int(item.get("schedule_version")),
        manual=bool(item.get("manual", False)),
        dead_lettered_at=parse_stored(str(item["dead_lettered_at"])),
        error=str(item.get("error", "")),
    )
