"""A named task: reusable work an owner defines once and jobs name (punctual.jobs.named_tasks says
how it is checked and resolved)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from punctual.domain.policies import RetryPolicy


@dataclass(frozen=True)
class NamedTask:
    owner: str
    name: str
    type: str
    params: dict[str, Any]
    created_at: datetime
    updated_at: datetime
    params_schema: Any = None  # a JSON Schema (object or boolean), or None: any parameters
    retry: RetryPolicy | None = None
    timeout_seconds: int | None = None
    description: str = ""
    tags: dict[str, str] = field(default_factory=dict)
    version: int = 1
