"""Execution status changes as EventBridge events, on a bus of the stack (AWS only), grouped.

The table's stream carries every write to an execution's item; the execution_events function turns
each one that changes its status into a detail, and puts a batch's details on the stack's bus
grouped: one entry for each owner and status, so that a platform team routes them (rules, any target)
without touching jobs, and EventBridge bills about one event for a batch's changes rather than one
a change. Every writer is covered, whatever wrote the change (the worker, the dead-letter handler, an
extra run's QUEUED record), at least once: the stream retries a batch from its earliest record in an
entry that was not put (a later change put again is a duplicate: consumers de-duplicate on
`execution_id`, `status` and `attempts`).

The entry (`source` "punctual", `detail-type` "Punctual Execution Status Changes"; docs/monitoring.md):
    {"version": 2, "owner", "status", "executions": [detail, ...]}
each detail, in stream order:
    {"version": 1, "job_id", "owner", "execution_id", "scheduled_at", "status", "previous_status",
     "attempts", "manual", "retry_of", "dead_lettered", "started_at", "finished_at", "lateness_ms",
     "error", "next_attempt_at"}
`previous_status` is null when the change stored the execution (its first claim on AWS). Every
detail of an entry has the entry's owner and status, so a rule on `detail.owner` or `detail.status`
routes exactly the executions it names.

A one-time job's run that ended under its pack's lease may be stored on its job's item, in the write
that completed the job: that job item's record, where the run appears, is the run's end, as the
record storing its own item would be.

Which records write an execution, and how they read, is the store's to know: `read` (given by
wiring.py) answers, for a record, an execution item's new and old images as plain values, or the run
that appears on a job's item.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from punctual.domain.executions import FINAL_STATUSES, Execution, ExecutionStatus
from punctual.platform.observability import logger
from punctual.platform.timefmt import to_rfc3339

SOURCE = "punctual"
DETAIL_TYPE = "Punctual Execution Status Changes"
VERSION = 2
# EventBridge bills each 64 KB chunk of an event as one event ("Amazon EventBridge pricing",
# https://aws.amazon.com/eventbridge/pricing/): an entry is cut to stay within one, 64 KB read as
# 64,000 bytes, the stricter reading.
EVENT_BYTES = 64_000
# A PutEvents call takes at most 10 entries, their total size under 256 KB ("PutEvents", Amazon
# EventBridge API Reference, https://docs.aws.amazon.com/eventbridge/latest/APIReference/API_PutEvents.html).
CALL_ENTRIES = 10
CALL_BYTES = 256_000
# Which changes become events (the deployment's `execution_events`).
ALL = "all"
FINAL = "final"  # only those that reach a final status: SUCCEEDED, FAILED, CANCELLED, SKIPPED
OFF = "off"
MODES = (ALL, FINAL, OFF)
PUT_ATTEMPTS = 3
FINAL_STATUS_VALUES = frozenset(status.value for status in FINAL_STATUSES)
_ATTEMPT_ENDS = frozenset(
    status.value for status in (ExecutionStatus.SUCCEEDED, ExecutionStatus.FAILED, ExecutionStatus.RETRYING)
)
# A stream record -> what it writes of an execution: an execution item's new and old images (plain
# values; the old one empty when the write stored it), a run stored on its job's item that this write
# put there, or None (another kind of item, an execution expiring, a job's write that keeps its run).
# A batch's ends item (store/batch_ends.py) writes several runs' ends at once: a list of them.
StreamReader = Callable[
    [dict[str, Any]], tuple[dict[str, Any], dict[str, Any]] | Execution | list[Execution] | None
]


def _json_value(value: Any) -> Any:
    if isinstance(value, Decimal):
        return int(value) if value == value.to_integral_value() else float(value)
    return value


def details_of(record: dict[str, Any], read: StreamReader, mode: str = ALL) -> list[dict[str, Any]]:
    """The events' details for a stream record's changes of executions' statuses (a batch's ends
    item's write: one a run it adds)."""
    change = read(record)
    changes = change if isinstance(change, list) else [change]
    return [detail for one in changes if (detail := _change_detail(one, mode)) is not None]


def detail_of(record: dict[str, Any], read: StreamReader, mode: str = ALL) -> dict[str, Any] | None:
    """The event's detail for a stream record that changes an execution's status, or None (the
    first, for a batch's ends item's write: `details_of`)."""
    found = details_of(record, read, mode)
    return found[0] if found else None


def _change_detail(
    change: tuple[dict[str, Any], dict[str, Any]] | Execution | None, mode: str
) -> dict[str, Any] | None:
    """The detail of one execution's change as the stream reader gives it, or None."""
    if change is None:
        return None
    if isinstance(change, Execution):
        return _run_on_job(change, mode)
    new, old = change
    status, attempts = _shown(new)
    # (an attempt's outcome ends a run claimed ahead that started at its instant: it was RUNNING)
    previous = old.get("status") if status in _ATTEMPT_ENDS else _shown(old)[0]
    if status is None or status == previous or (mode == FINAL and status not in FINAL_STATUS_VALUES):
        return None
    return {
        "version": 1,
        "job_id": new.get("job_id"),
        "owner": new.get("owner"),
        "execution_id": new.get("id"),
        "scheduled_at": new.get("scheduled_at"),
        "status": status,
        "previous_status": previous,
        "attempts": attempts,
        "manual": bool(new.get("manual", False)),
        "retry_of": new.get("retry_of"),
        "dead_lettered": bool(new.get("dead_lettered", False)),
        "started_at": new.get("started_at"),
        "finished_at": new.get("finished_at"),
        "lateness_ms": _json_value(new.get("lateness_ms")),
        "error": new.get("error"),
        "next_attempt_at": new.get("next_attempt_at"),
    }


def _run_on_job(run: Execution, mode: str) -> dict[str, Any] | None:
    """The event of a run stored on its job's item, where it appears (its end: nothing of it was
    stored before), or None."""
    if mode == FINAL and run.status.value not in FINAL_STATUS_VALUES:
        return None
    return _detail(run)


def _detail(run: Execution) -> dict[str, Any]:
    def iso(value: Any) -> str | None:
        return None if value is None else to_rfc3339(value)

    return {
        "version": 1,
        "job_id": run.job_id,
        "owner": run.owner,
        "execution_id": run.id,
        "scheduled_at": iso(run.scheduled_at),
        "status": run.status.value,
        "previous_status": None,
        "attempts": run.attempts,
        "manual": run.manual,
        "retry_of": run.retry_of,
        "dead_lettered": run.dead_lettered,
        "started_at": iso(run.started_at),
        "finished_at": iso(run.finished_at),
        "lateness_ms": run.lateness_ms,
        "error": run.error,
        "next_attempt_at": iso(run.next_attempt_at),
    }


def _shown(image: dict[str, Any]) -> tuple[Any, Any]:
    """An image's status and attempts as users see them: a claim made ahead of the execution's instant
    (RUNNING, no start recorded: the outcome's write records it) is still QUEUED, the claim's
    attempt not counted (`executions.execution_as_seen`)."""
    status, attempts = image.get("status"), _json_value(image.get("attempts", 0))
    if status == ExecutionStatus.RUNNING.value and image.get("started_at") is None:
        return ExecutionStatus.QUEUED.value, attempts - 1
    return status, attempts


@dataclass(frozen=True)
class Entry:
    """One PutEvents entry: an owner's changes to one status, from `first`, the position in its batch
    of its earliest record (a batch comes in stream order), on."""

    first: int
    request: dict[str, Any]
    size: int


def entry_size(source: str, detail_type: str, detail: str, bus: str) -> int:
    """An entry's size as EventBridge measures it ("Calculating Amazon EventBridge PutEvents event
    entry size", https://docs.aws.amazon.com/eventbridge/latest/userguide/eb-putevent-size.html):
    the UTF-8 bytes of Source, DetailType and Detail (Time and Resources, which count there, are never
    set). The bus's name, which that rule leaves out, is counted too: a margin, never an excess."""
    return sum(len(text.encode()) for text in (source, detail_type, detail, bus))


def entries(changes: Sequence[tuple[int, dict[str, Any]]], bus: str) -> list[Entry]:
    """The entries for a batch's `changes` (each its record's position and its detail): grouped by
    owner and status, each group's details in stream order, cut so that each entry is one billed
    event. Ordered by their earliest record, so that a failure leaves the fewest records to retry."""
    groups: dict[tuple[Any, Any], list[tuple[int, dict[str, Any]]]] = {}
    for position, detail in changes:
        groups.setdefault((detail["owner"], detail["status"]), []).append((position, detail))
    found = [entry for (owner, status), group in groups.items() for entry in _cut(owner, status, group, bus)]
    return sorted(found, key=lambda entry: entry.first)


def _compact(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"))


def detail_bytes(detail: dict[str, Any]) -> int:
    """The bytes a detail adds to its entry: its JSON and the comma before it."""
    return len(_compact(detail).encode()) + 1


def _cut(owner: Any, status: Any, group: list[tuple[int, dict[str, Any]]], bus: str) -> Iterator[Entry]:
    """A group's entries, each as many of its details as stay within EVENT_BYTES (a detail alone over
    it, which no execution's reaches, still goes, alone)."""
    head = f'{{"version":{VERSION},"owner":{_compact(owner)},"status":{_compact(status)},"executions":['
    tail = "]}"
    empty = entry_size(SOURCE, DETAIL_TYPE, head + tail, bus)
    parts: list[str] = []
    first, size = 0, empty
    for position, detail in group:
        part = _compact(detail)
        added = len(part.encode()) + (1 if parts else 0)  # and its comma
        if parts and size + added > EVENT_BYTES:
            yield _entry(first, head + ",".join(parts) + tail, size, bus)
            parts, size, added = [], empty, added - 1
        if not parts:
            first = position
        parts.append(part)
        size += added
    if parts:
        yield _entry(first, head + ",".join(parts) + tail, size, bus)


def _entry(first: int, detail: str, size: int, bus: str) -> Entry:
    request = {"Source": SOURCE, "DetailType": DETAIL_TYPE, "Detail": detail, "EventBusName": bus}
    return Entry(first, request, size)


def _calls(pending: list[Entry]) -> Iterator[list[Entry]]:
    """`pending` in PutEvents calls, in order: at most CALL_ENTRIES entries, under CALL_BYTES, a call."""
    call: list[Entry] = []
    for entry in pending:
        if call and (len(call) == CALL_ENTRIES or sum(e.size for e in call) + entry.size >= CALL_BYTES):
            yield call
            call = []
        call.append(entry)
    if call:
        yield call


def publish(
    records: Sequence[dict[str, Any]], read: StreamReader, events: Any, bus: str, mode: str = ALL
) -> dict[str, Any]:
    """Put these stream records' status changes on `bus`, grouped (`entries`). Returns the batch
    response of a stream event source: on a failure, the sequence number of the earliest record among
    the entries not put (refused, or not yet tried), from which the stream retries."""
    changes = []
    for position, record in enumerate(records):
        changes += [(position, detail) for detail in details_of(record, read, mode)]
    pending = entries(changes, bus)
    done = 0
    for call in _calls(pending):
        refused = _put(events, call)
        done += len(call)
        if refused:
            first = min(entry.first for entry in [*refused, *pending[done:]])
            failed = str((records[first].get("dynamodb") or {}).get("SequenceNumber", ""))
            logger.warning(
                "execution events not put; the stream retries from there", extra={"sequence": failed}
            )
            return {"batchItemFailures": [{"itemIdentifier": failed}]}
    return {"batchItemFailures": []}


def _put(events: Any, call: list[Entry]) -> list[Entry]:
    """Put a call's entries, retrying those refused; those still refused."""
    left = call
    for attempt in range(PUT_ATTEMPTS):
        try:
            answer = events.put_events(Entries=[entry.request for entry in left])
        except (ClientError, BotoCoreError) as exc:
            logger.warning("PutEvents failed", extra={"error": str(exc)})
            answer = {"FailedEntryCount": len(left), "Entries": [{"ErrorCode": "Failed"}] * len(left)}
        if not answer.get("FailedEntryCount"):
            return []
        results = answer.get("Entries") or []
        left = [entry for entry, result in zip(left, results, strict=False) if result.get("ErrorCode")]
        if not left:
            return []
        time.sleep(0.1 * 2**attempt)
    return left
