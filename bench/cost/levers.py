"""Dollars an execution, and what each lever (batches, savings plans, reserved capacity) saves."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from punctual_cli import capacity
from punctual_cli.capacity.figures import Assumptions, ExecutionUsage, Prices

# The two rows `target` reports, by id (their labels say what they combine).
ALL_SAVINGS = "all_savings"
ALL_SAVINGS_RESERVED = "all_savings_reserved"


def levers(
    usage: ExecutionUsage,
    assumptions: Assumptions,
    batched: ExecutionUsage | None,
    batch_size: int = capacity.BATCH_JOBS,
) -> list[dict[str, Any]]:
    """What each change would make a million one-time executions cost, alone and together.

    The batch-create row is the measured `batched` workload (POST /jobs/batch, `batch_size` jobs a
    request), when it ran; the rows together include it only then."""
    prices = capacity.PRICES
    provisioned = capacity.provisioned_prices(0.7, prices)
    reserved = capacity.provisioned_prices(0.7, capacity.reserved_prices(prices))
    batched_assumptions = replace(assumptions, api_seconds=capacity.batch_api_seconds(batch_size))
    quiet = replace(usage, log_bytes=usage.metric_bytes)

    def total(u: ExecutionUsage, a: Assumptions, p: Prices = prices) -> float:
        return capacity.per_million(capacity.cost_per_execution(u, a, p))["total"]

    rows: list[tuple[str, ExecutionUsage, Assumptions, Prices]] = [
        ("as deployed: HTTP API, indexes projecting KEYS_ONLY, on-demand", usage, assumptions, prices),
        (
            "REST API instead (-c api_type=rest, $3.50/M requests)",
            usage,
            replace(assumptions, http_api=False),
            prices,
        ),
    ]
    if batched is not None:
        rows.append(
            (
                f"batch-create endpoint, {batch_size} jobs a request (measured)",
                batched,
                batched_assumptions,
                prices,
            )
        )
    rows += [
        ("provisioned capacity at 70 % utilisation (steady load)", usage, assumptions, provisioned),
        (
            "provisioned at 70 %, bought as one-year reserved capacity (a commitment)",
            usage,
            assumptions,
            reserved,
        ),
        ("log level WARNING: no INFO lines per execution (EMF metrics kept)", quiet, assumptions, prices),
        (
            "history kept 7 days instead of 30 (-c retention_days=7): storage",
            usage,
            replace(assumptions, retention_days=7),
            prices,
        ),
        (
            "X-Ray tracing off on the API and worker functions",
            usage,
            replace(assumptions, xray_sampled=0.0),
            prices,
        ),
        (
            "execution events only at the end (-c execution_events=final)",
            usage,
            replace(assumptions, execution_events="final"),
            prices,
        ),
        (
            "no execution events on the stack's bus (-c execution_events=off)",
            usage,
            replace(assumptions, execution_events="off"),
            prices,
        ),
    ]
    best, best_assumptions = (batched, batched_assumptions) if batched is not None else (usage, assumptions)
    cheapest = replace(best, log_bytes=best.metric_bytes)
    cheapest_assumptions = replace(
        best_assumptions, http_api=True, keys_only_indexes=True, xray_sampled=0.0, execution_events="off"
    )
    together = ", ".join(
        [
            *(["batch create"] if batched is not None else []),
            "provisioned capacity",
            "WARNING logs",
            "no X-Ray",
            "no execution events",
        ]
    )
    found = [{"change": name, "per_million": total(u, a, p)} for name, u, a, p in rows]
    found += [
        {
            "id": ALL_SAVINGS,
            "change": f"together: {together} (capacity not reserved; 30 days kept)",
            "per_million": total(cheapest, cheapest_assumptions, provisioned),
        },
        {
            "id": ALL_SAVINGS_RESERVED,
            "change": f"together: {together}, the capacity reserved for a year",
            "per_million": total(cheapest, cheapest_assumptions, reserved),
        },
    ]
    return found
