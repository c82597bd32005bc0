"""DynamoDB and SQS access: the adapter that implements the ports (punctual.ports), and the only
package that knows key formats, attribute names, expressions and the work queue's calls. Only the
composition root (punctual/wiring.py) imports it; the stages reach it through the ports.

One table, several aggregates, one repository each:
- keys.py        every key and its parts
- codec/         items <-> domain objects, one module per kind of item (list_keys.py: a job's
                 index keys and tag entries)
- lifecycle.py   the execution and job transitions, as data, and the conditions they turn into
- table.py       the calls: errors mapped to domain errors, batches, transactions, cursors
- jobs.py        jobs (job_flags.py: settling a job's flag; job_views.py: lists, jobs with their
                 last executions; list_sources.py: the access paths lists read)
- executions.py  executions' status changes (execution_reads.py: their reads)
- deliveries.py  notification deliveries, kept on their execution
- markers.py     due markers and quarantine
- scanner_state.py  the scanner's leases and positions
- idempotency.py idempotency keys
- dead_letters.py   dead letters
- tasks.py       named tasks
- changes.py     change records: jobs changed after their run at an instant was sent
`Store` holds one of each over one table (packs.py, the packs' leases, and queue.py, the work
queue, are built apart). Jobs carry owner_pk/owner_sk so that an owner's jobs list
newest first from the by_owner index without a scan; a batch's unnamed jobs have one list entry
there for them all instead (jobs.py). A list by status reads that index too and
filters the jobs it reads: an index keyed by status would cost two more index writes on every status
change (a one-time job's completion).
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from punctual.platform.clock import Clock
from punctual.platform.concurrency import PartitionPacer
from punctual.store.batch_ends import BatchEndRepository
from punctual.store.changes import ChangeRepository
from punctual.store.dead_letters import DeadLetterRepository
from punctual.store.deliveries import DeliveryRepository
from punctual.store.executions import ExecutionRepository
from punctual.store.idempotency import IdempotencyKeys
from punctual.store.jobs import JobRepository
from punctual.store.markers import MarkerRepository
from punctual.store.scanner_state import ScannerState
from punctual.store.table import Table
from punctual.store.tasks import TaskRepository


class Store:
    """The repositories of the one Punctual table."""

    def __init__(
        self,
        dynamodb: Any,
        client: Any,
        table_name: str,
        *,
        shard_count: int,
        retention_days: int,
        clock: Clock | None = None,
    ) -> None:
        """`dynamodb` is a boto3 resource; `client` a plain DynamoDB client (table.py says why)."""
        self.table = Table(
            dynamodb, client, table_name, shard_count=shard_count, retention_days=retention_days, clock=clock
        )
        self.jobs = JobRepository(self.table)
        self.executions = ExecutionRepository(self.table)
        self.deliveries = DeliveryRepository(self.table)
        self.markers = MarkerRepository(self.table)
        self.scanner = ScannerState(self.table)
        self.idempotency = IdempotencyKeys(self.table)
        self.dead_letters = DeadLetterRepository(self.table)
        self.tasks = TaskRepository(self.table)
        self.changes = ChangeRepository(self.table)
        self.batch_ends = BatchEndRepository(self.table)
        self.clients = (dynamodb.meta.client, client)  # every client it calls (to watch or count calls)

    @property
    def shard_count(self) -> int:
        return self.table.shard_count

    @property
    def retention(self) -> timedelta:
        return self.table.retention

    @property
    def list_read_budget(self) -> int:
        """The most items one filtered list request reads (tests make it small)."""
        return self.table.list_read_budget

    @list_read_budget.setter
    def list_read_budget(self, value: int) -> None:
        self.table.list_read_budget = value

    @property
    def marker_pacer(self) -> PartitionPacer:
        return self.table.marker_pacer

    @marker_pacer.setter
    def marker_pacer(self, pacer: PartitionPacer) -> None:
        self.table.marker_pacer = pacer
