"""The one source of truth for Punctual's AWS resources.

The CDK stack, the local stack and the tests all build the table and queues from these
definitions, so a moto table cannot drift from the deployed one.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

# Logical names: CDK construct ids, local resource names and environment variables derive from these.
APP_NAME = "Punctual"

# Environment variables through which functions learn their resources (read only in config.py).
ENV_TABLE_NAME = "PUNCTUAL_TABLE_NAME"
ENV_QUEUE_URL = "PUNCTUAL_QUEUE_URL"
ENV_DLQ_URL = "PUNCTUAL_DLQ_URL"
ENV_NOTIFY_QUEUE_URL = "PUNCTUAL_NOTIFY_QUEUE_URL"
# The stack's EventBridge bus for execution status changes (the execution_events function).
ENV_EVENT_BUS_NAME = "PUNCTUAL_EVENT_BUS_NAME"
# The worker's SQS event source mapping (its UUID), whose pollers the scanner warms before a burst.
ENV_WORKER_MAPPING_ID = "PUNCTUAL_WORKER_MAPPING_ID"


@dataclass(frozen=True)
class Index:
    """A global secondary index. Its keys may span attributes (DynamoDB's multi-attribute keys): a
    query names every partition attribute with `=`, then sort attributes from the first, `=` on all
    but the last it names; an item is in the index only if it has every key attribute."""

    name: str
    partition_keys: tuple[str, ...]
    sort_keys: tuple[str, ...]
    # KEYS_ONLY: a job's index entry is written only when its keys change (its creation), not on
    # every update of the job; a list reads the page's jobs from the table.
    projection: str = "KEYS_ONLY"
    # Only some items carry its key (a sparse index): it costs nothing for the others.
    sparse: bool = False

    @property
    def partition_key(self) -> str:
        """The partition key's attribute, of an index whose partition key is one attribute."""
        (name,) = self.partition_keys
        return name

    @property
    def sort_key(self) -> str:
        """The sort key's attribute, of an index whose sort key is one attribute."""
        (name,) = self.sort_keys
        return name

    @property
    def key_attributes(self) -> tuple[str, ...]:
        return self.partition_keys + self.sort_keys

    def key_schema(self) -> list[dict[str, str]]:
        return [{"AttributeName": name, "KeyType": "HASH"} for name in self.partition_keys] + [
            {"AttributeName": name, "KeyType": "RANGE"} for name in self.sort_keys
        ]


@dataclass(frozen=True)
class TableDefinition:
    name: str
    partition_key: str
    sort_key: str
    ttl_attribute: str
    indexes: tuple[Index, ...] = field(default_factory=tuple)

    def create_table_kwargs(self, table_name: str | None = None) -> dict[str, Any]:
        """Arguments for DynamoDB CreateTable (moto and the local stack)."""
        attributes = {self.partition_key, self.sort_key}
        for index in self.indexes:
            attributes.update(index.key_attributes)
        return {
            "TableName": table_name or self.name,
            "BillingMode": "PAY_PER_REQUEST",
            "KeySchema": [
                {"AttributeName": self.partition_key, "KeyType": "HASH"},
                {"AttributeName": self.sort_key, "KeyType": "RANGE"},
            ],
            "AttributeDefinitions": [
                {"AttributeName": name, "AttributeType": "S"} for name in sorted(attributes)
            ],
            "GlobalSecondaryIndexes": [
                {
                    "IndexName": index.name,
                    "KeySchema": index.key_schema(),
                    "Projection": {"ProjectionType": index.projection},
                }
                for index in self.indexes
            ],
        }


@dataclass(frozen=True)
class QueueDefinition:
    name: str
    visibility_timeout_seconds: int
    retention_seconds: int
    max_receive_count: int | None = None  # set on a queue that redrives to the dead-letter queue


# One table holds jobs, their executions, the time-bucketed due markers and small bookkeeping items.
# Key formats live in store/keys.py; only the attribute names are shared here. Every index projects
# keys only, so an entry is written only when its keys change; the list indexes besides by_owner are
# sparse (multi-attribute keys: the owner and an attribute only some jobs carry). What each costs a
# job write and a list: docs/scaling.md, "Filtered lists".
BY_OWNER_INDEX = Index(name="by_owner", partition_keys=("owner_pk",), sort_keys=("owner_sk",))
# The ACTIVE and PAUSED jobs that use a named task (store/tasks.py): sparse, only those jobs carry its
# key, so a job with an inline task writes nothing to it, and a named task's is written when the job
# is created and removed when it completes or is cancelled.
BY_TASK_INDEX = Index(name="by_task", partition_keys=("task_ref",), sort_keys=("owner_sk",), sparse=True)
# An owner's jobs in a state users seldom ask for, newest first: sparse, keyed by `flag`, which a job
# carries only while it is PAUSED or CANCELLED or its latest outcome is FAILED (list_keys.flag_of). A
# job created, run and succeeded never enters it; a failing one enters at its first failure and leaves at
# its next success. `?status=PAUSED|CANCELLED` and `?outcome=failed` read it; the other statuses and
# outcomes read by_owner, a bounded read (job_views.page).
BY_FLAG_INDEX = Index(
    name="by_flag", partition_keys=("owner_pk", "flag"), sort_keys=("owner_sk",), sparse=True
)
# An owner's jobs by name, then oldest first (`?name_prefix=`: begins_with on the name): sparse, as a
# job item stores `name` only when one was given (a job named by its id, the default, has none): an
# entry at creation for those alone, moved only by a rename.
BY_NAME_INDEX = Index(
    name="by_name", partition_keys=("owner_pk",), sort_keys=("name", "owner_sk"), sparse=True
)

# The list indexes, in the order an existing table gains them: one a deployment (DynamoDB creates one
# global secondary index per table update; the deploy setting `list_indexes`, docs/upgrading.md).
LIST_INDEXES = (BY_NAME_INDEX, BY_FLAG_INDEX)
# The list indexes of earlier versions, which this one no longer reads: a table that has them keeps
# them while it gains by_flag, then drops them one a deployment, the last first (docs/upgrading.md).
RETIRED_LIST_INDEXES = (
    Index(name="by_status", partition_keys=("owner_pk", "status"), sort_keys=("owner_sk",)),
    Index(name="by_outcome", partition_keys=("owner_pk", "outcome"), sort_keys=("owner_sk",), sparse=True),
)

TABLE = TableDefinition(
    name="punctual",
    partition_key="pk",
    sort_key="sk",
    ttl_attribute="expires_at",
    indexes=(BY_OWNER_INDEX, BY_TASK_INDEX, *LIST_INDEXES),
)

# The scanner's Lambda memory: a full vCPU (the scanner is CPU-bound; bench/scanner_throughput.py).
SCANNER_MEMORY_MB = 1769

# The worker's Lambda timeout; the work queue's visibility timeout must cover it.
WORKER_TIMEOUT_SECONDS = 360
MAX_TASK_TIMEOUT_SECONDS = 300

DEAD_LETTER_QUEUE = QueueDefinition(
    name="punctual-dead-letter",
    visibility_timeout_seconds=60,
    retention_seconds=14 * 24 * 3600,
)

WORK_QUEUE = QueueDefinition(
    name="punctual-work",
    visibility_timeout_seconds=WORKER_TIMEOUT_SECONDS + 30,
    retention_seconds=4 * 24 * 3600,
    # Receives, not attempts: a message is also received when it waits for its instant or for a
    # running duplicate's lease. Retries are counted by the execution record, not here.
    max_receive_count=25,
)

# The notifier's Lambda timeout (a webhook gets 10 s; a batch's deliveries run side by side).
NOTIFIER_TIMEOUT_SECONDS = 60

# Where notifications wait for the notifier, and for its retries (their visibility is their backoff).
NOTIFY_DEAD_LETTER_QUEUE = QueueDefinition(
    name="punctual-notify-dead-letter",
    visibility_timeout_seconds=60,
    retention_seconds=14 * 24 * 3600,
)
NOTIFY_QUEUE = QueueDefinition(
    name="punctual-notify",
    visibility_timeout_seconds=NOTIFIER_TIMEOUT_SECONDS + 30,
    # (the longest retry schedule, about eleven hours, fits well within it)
    retention_seconds=4 * 24 * 3600,
    # Receives: the notifier gives up after its own attempts (punctual.notify.delivery.MAX_ATTEMPTS) and records
    # so; only a message it cannot handle at all (a notifier failing on it) reaches its dead-letter queue.
    max_receive_count=20,
)

# Lambda handlers, as dotted paths inside the one code asset (functions/ plus the punctual package).
FUNCTIONS = {
    "api": "functions.api.handler.lambda_handler",
    "scanner": "functions.scanner.handler.lambda_handler",
    "worker": "functions.worker.handler.lambda_handler",
    "dead_letter": "functions.dead_letter.handler.lambda_handler",
    "notifier": "functions.notifier.handler.lambda_handler",
    "execution_events": "functions.execution_events.handler.lambda_handler",
}
