"""What the planner answers: the plan for a load (`Plan`), and the provisioned table's part of it
(`ProvisionedPlan`)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass(frozen=True)
class ProvisionedPlan:
    """The table provisioned and auto scaled to keep `target_utilisation` percent of it busy, and the
    CDK context that deploys it (`context`, the keys of infra/settings.py).

    Request units are priced as if the load were steady at the target: auto scaling then keeps the
    capacity at the load over the utilisation, so a unit consumed costs the capacity-hour price /
    3,600 / utilisation, and the minimums (sized to the sustained load) are paid by the executions.
    Units a second are sustained (the plan's rate) or peak (its busiest minute, every unit at its
    rate, job creation included, as the plan's load figures); the table's include the scanner's
    bookkeeping, the index's are those of the index written most (by_status), which each index is
    given (`index_write_units` is all the indexes' together). A busiest minute above
    the minimums is throttled until auto scaling catches up, minutes later: the plan warns.
    """

    target_utilisation: int  # percent
    write_unit_price: float  # USD a write unit consumed, at the target
    read_unit_price: float  # USD a read unit consumed, at the target
    table_write_units: float
    table_write_units_peak: float
    table_read_units: float
    table_read_units_peak: float
    index_write_units: float
    index_write_units_peak: float
    index_read_units: float  # list requests only, which the model leaves out: none assumed
    context: dict[str, Any]  # `-c key=value` to deploy with
    minimums_monthly: float  # USD a month for the minimums alone, busy or idle
    reserved: bool = False  # the capacity bought as one-year reserved capacity (`reserved_prices`)


@dataclass(frozen=True)
class Plan:
    executions_per_second: float  # sustained: the monthly cost is for this rate
    recurring_share: float
    busiest_minute: int  # executions due in the busiest minute
    peak_per_second: float  # the busiest minute's rate: the load figures below are at this rate
    drain_target_seconds: float
    shard_count: int
    scanner_fanout: int
    scanner_memory_mb: int
    scanner_rate_per_invocation: float  # executions a second: CPU share and bucket partition capped
    scanner_drain_seconds: float  # the busiest minute, every invocation in parallel
    markers_per_shard: int  # in the busiest minute
    bucket_drain_write_units: float  # a second, on the partition being drained (soon markers deleted)
    bucket_filing_write_units: float  # a second, markers filed into one bucket partition
    worker_executions_in_flight: float  # Little's law: rate x (task + batch overhead)
    worker_concurrency: float  # concurrent worker invocations, on average
    worker_max_concurrency: int  # the event source mapping setting to deploy, with headroom
    api_concurrency: float
    lambda_concurrency: float  # all functions at once, at peak
    api_requests_per_second: float
    dynamodb_write_units_per_second: float
    dynamodb_read_units_per_second: float
    sqs_requests_per_second: float
    cost_per_million: dict[str, float]
    monthly_cost: dict[str, float]
    warnings: list[str] = field(default_factory=list)
    provisioned: ProvisionedPlan | None = None  # None: the table on-demand
    api_type: str = "http"  # the API Gateway type priced: "http" or "rest" (CDK context api_type)
    # The worker mapping in provisioned mode (priced with `pollers`): the pollers the busiest minute
    # needs, by receives and invokes. None: standard mode.
    worker_pollers: int | None = None
    # Execution events put on the stack's bus a second, at peak (execution_events): PutEvents entries,
    # each a stream batch's changes of one owner to one status, one billed event.
    events_per_second: float = 0.0

    def as_dict(self) -> dict[str, Any]:
        found = asdict(self)
        if self.provisioned is None:
            del found["provisioned"]  # on-demand: no such key, as scripts reading the plan expect
        if self.worker_pollers is None:
            del found["worker_pollers"]
        return found
