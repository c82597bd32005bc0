"""The index keys of a job item that are not fields of its own, and the tag entries beside it: its
named task's (by_task), its flag (by_flag), its name as stored (by_name), and one small item a tag,
which `?tag=` lists read. What a list reads by them: store/list_sources.py.
"""

from __future__ import annotations

from typing import Any

from punctual.domain.executions import ExecutionStatus
from punctual.domain.models import Job, JobStatus, TaskRef, TaskSpec
from punctual.store import keys


def task_ref_of(owner: str, task: TaskSpec | TaskRef, status: JobStatus) -> str | None:
    """A job's by_task key: only while it keeps its named task in use (ACTIVE or PAUSED)."""
    if isinstance(task, TaskRef) and status in (JobStatus.ACTIVE, JobStatus.PAUSED):
        return keys.task_ref(owner, task.name)
    return None


# A job's by_flag key (`flag`): its status while PAUSED or CANCELLED, FAILED while its latest outcome
# is, both when both hold (`PAUSED#FAILED`); none otherwise, so that a plain job writes no entry. A
# list of one status or of failed jobs reads each flag value that includes it (`flags_of_status`,
# `flags_of_outcome`).
FLAG_FAILED = ExecutionStatus.FAILED.value
_FLAGGED_STATUSES = (JobStatus.PAUSED, JobStatus.CANCELLED)


def flag_of(status: JobStatus, outcome: ExecutionStatus | None) -> str | None:
    parts = [status.value] if status in _FLAGGED_STATUSES else []
    if outcome is ExecutionStatus.FAILED:
        parts.append(FLAG_FAILED)
    return "#".join(parts) or None


def flags_of_status(status: JobStatus) -> tuple[str, ...] | None:
    """The flag values a job in `status` may carry; None for a status that carries none."""
    if status not in _FLAGGED_STATUSES:
        return None
    return (status.value, f"{status.value}#{FLAG_FAILED}")


def flags_of_outcome(outcome: ExecutionStatus) -> tuple[str, ...] | None:
    """The flag values a job whose latest outcome is `outcome` may carry; None for one that carries none."""
    if outcome is not ExecutionStatus.FAILED:
        return None
    return (FLAG_FAILED, *(f"{status.value}#{FLAG_FAILED}" for status in _FLAGGED_STATUSES))


def stored_flag(item: dict[str, Any]) -> str | None:
    """The flag a stored job item should carry, from its status and outcome as stored."""
    outcome = item.get("outcome")
    try:
        return flag_of(JobStatus(item["status"]), ExecutionStatus(outcome) if outcome else None)
    except (KeyError, ValueError):
        return item.get("flag")  # (a newer version's status or outcome: left as it wrote it)


def stored_name(job_id: str, name: str) -> str | None:
    """A job's name as stored, which keys by_name: only one given (the default, its id, is not stored:
    a job without a name of its own has no by_name entry)."""
    return name if name and name != job_id else None


def index_keys(job: Job, changes: dict[str, Any]) -> dict[str, Any]:
    """The index keys that `changes` (domain field values) move on the job and that are not fields
    of its own: its named task's (by_task), which its status and its task decide; its flag (by_flag),
    its status and outcome (as read: `JobRepository` settles it against the item written); and its
    name (by_name), stored only when given."""
    moved: dict[str, Any] = {}
    if "task" in changes or "status" in changes:
        moved["task_ref"] = task_ref_of(
            job.owner, changes.get("task", job.task), changes.get("status", job.status)
        )
    if "status" in changes:
        moved["flag"] = flag_of(changes["status"], None if job.outcome is None else job.outcome.status)
    if "name" in changes:
        moved["name"] = stored_name(job.id, changes["name"])
    return moved


def tag_entries(job: Job, tags: dict[str, str] | None = None) -> list[dict[str, Any]]:
    """The tag entries of a job (of `tags`, if given): one small item a tag, which `?tag=` lists read.
    They may outlive the tag (a job's item is the truth: lists check it and drop stale entries)."""
    return [
        keys.tag_key(job.owner, key, value, job.created_at, job.id)
        for key, value in (job.tags if tags is None else tags).items()
    ]


def tag_changes(job: Job, tags: dict[str, str] | None) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The tag entries to write and to delete when a job's tags become `tags`: every one given is
    written (again: a job tagged before tag entries existed gains them so), those dropped deleted."""
    new = dict(tags or {})
    dropped = {k: v for k, v in job.tags.items() if new.get(k) != v}
    return tag_entries(job, new), tag_entries(job, dropped)
