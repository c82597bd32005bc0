"""The worker's configuration, from the deployment's settings (wiring.py): what its tasks may reach,
how much of a result is kept, how early a message waits in the worker for its instant, and how many
of a pack's members start at once.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import timedelta

from punctual.platform.config import FIRE_THREADS
from punctual.tasks import TaskPolicy

# A message that becomes visible this close to its instant waits in the worker; earlier, it goes back.
# (Beyond the head start a deployment gives its messages: WorkerConfig.lone_early_wait, max_early_wait.)
MAX_EARLY_WAIT = timedelta(seconds=5)


@dataclass(frozen=True)
class WorkerConfig:
    task_policy: TaskPolicy = field(default_factory=TaskPolicy)
    result_max_bytes: int = 4096
    # Settings.early_visibility_seconds: every message is visible at least this early (the local
    # stack's), and waits in the worker for its instant.
    early_visibility_seconds: int = 0
    # Settings.lead_max_seconds: the most a crowded instant's packs are sent ahead on purpose, to be
    # taken and prepared before it. Only a pack taken under one lease waits that long: a lone message
    # or a retry held so long would bill its invocation for the wait, and has nothing to prepare.
    lead_max_seconds: int = 0
    # Settings.fire_threads: a pack's members started at once.
    fire_threads: int = FIRE_THREADS

    @property
    def lone_early_wait(self) -> timedelta:
        """How early a lone message (or a pack's member on its own), or a retry, waits in the worker."""
        return MAX_EARLY_WAIT + timedelta(seconds=self.early_visibility_seconds)

    @property
    def max_early_wait(self) -> timedelta:
        """How early a pack taken under one lease waits: the most the worker holds any message."""
        lead = max(self.early_visibility_seconds, self.lead_max_seconds)
        return MAX_EARLY_WAIT + timedelta(seconds=lead)
