"""What the benchmarks share: a representative job, JSON output, quiet logs."""

from __future__ import annotations

import argparse
import json
import logging
import os
import platform
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from typing import Any, TextIO

from punctual.domain.models import Job, JobStatus, TaskSpec
from punctual.domain.policies import RetryPolicy
from punctual.domain.schedules import AtSchedule
from punctual.platform.observability import logger

# An IAM principal, as the API records a caller (docs/api.md: the caller's IAM principal ARN is its owner).
OWNER = "arn:aws:iam::123456789012:role/punctual-client"

# A webhook as users schedule them: a URL, a header and a small JSON body.
WEBHOOK: dict[str, Any] = {
    "type": "http",
    "params": {
        "url": "https://hooks.example.com/punctual/reminders",
        "method": "POST",
        "headers": {"X-Tenant": "acme"},
        "body": {"reminder_id": "rem_8f14e45fceea167a", "channel": "email", "template": "invoice-due"},
    },
}


def webhook_job(job_id: str, at: datetime, created_at: datetime) -> Job:
    """A one-time webhook job as the API stores it."""
    return Job(
        id=job_id,
        owner=OWNER,
        name=f"invoice reminder {job_id[-6:]}",
        status=JobStatus.ACTIVE,
        task=TaskSpec.model_validate(WEBHOOK),
        schedule=AtSchedule(type="at", at=at),
        retry=RetryPolicy(),
        timeout_seconds=60,
        created_at=created_at,
        updated_at=created_at,
        next_run_at=at,
    )


@contextmanager
def logs_to(stream: TextIO) -> Iterator[None]:
    """Send Punctual's Powertools logs to `stream` for a while (stdout is for the benchmark's JSON)."""
    handlers = [h for h in logger.handlers if isinstance(h, logging.StreamHandler)]
    previous = [h.setStream(stream) for h in handlers]
    try:
        yield
    finally:
        for handler, old in zip(handlers, previous, strict=True):
            if old is not None:
                handler.setStream(old)


def environment() -> dict[str, Any]:
    return {
        "python": platform.python_version(),
        "machine": platform.machine(),
        "processor": platform.processor() or platform.machine(),
        "cpus": os.cpu_count(),
    }


def emit(result: dict[str, Any]) -> None:
    json.dump(result, sys.stdout, indent=2)
    sys.stdout.write("\n")


def int_within(text: str, low: int, high: int, flag: str) -> int:
    """An option's whole number, refused by argparse outside `low`..`high`."""
    value = int(text)
    if not low <= value <= high:
        raise argparse.ArgumentTypeError(f"{flag} is between {low} and {high}, not {value}")
    return value
