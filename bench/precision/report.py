"""What the deliveries say: lateness by class, path and second, early, missed and doubled
executions, the creation rates, a cross-check through the API, and the targets met.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from bench.precision.creation import Flooded
from bench.precision.receiver import Delivery
from bench.precision.shapes import BURST, CLASSES, CRON, HANDOFF, HANDOFF_LIMIT, SCANNER, STEADY, Created
from punctual.platform.timefmt import parse_rfc3339, to_rfc3339
from punctual_client.errors import PunctualError
from punctual_client.transport import PunctualClient

# The local stack's targets (docs/benchmarks.md).
TARGET_P99_MS = 500  # steady load
TARGET_MAX_MS = 2000  # steady load, and a burst of 1,000 or more
TARGET_SMALL_BURST_MS = 500  # a burst of fewer than 1,000
LARGE_BURST = 1000
TARGET_CREATES_PER_S = 50


# Seconds of scheduled time around the burst reported one by one.
SECONDS_AROUND_REPORTED = 10


def percentile(values: Sequence[float], p: float) -> float | None:
    """Nearest rank: the smallest value that at least p % of the values do not exceed."""
    if not values:
        return None
    ordered = sorted(values)
    return ordered[max(0, math.ceil(p / 100 * len(ordered)) - 1)]


def summary_ms(values_ms: Sequence[float]) -> dict[str, Any]:
    def rounded(value: float | None) -> float | None:
        return None if value is None else round(value, 1)

    return {
        "count": len(values_ms),
        "min": rounded(min(values_ms, default=None)),
        "p50": rounded(percentile(values_ms, 50)),
        "p95": rounded(percentile(values_ms, 95)),
        "p99": rounded(percentile(values_ms, 99)),
        "max": rounded(max(values_ms, default=None)),
        "mean": rounded(sum(values_ms) / len(values_ms)) if values_ms else None,
    }


@dataclass
class Analysis:
    report: dict[str, Any]
    lateness_by_class: dict[str, dict[str, list[float]]]  # class -> path -> lateness (ms)


def expected_cron_runs(created: Created, last: float) -> list[float]:
    """The :00 instants a `* * * * *` job created then runs at, up to `last` (epoch seconds)."""
    first = math.floor(created.sent / 60.0) * 60.0 + 60.0
    return [first + 60.0 * i for i in range(int((last - first) // 60.0) + 1)] if first <= last else []


def analyse(created: list[Created], deliveries: list[Delivery], burst_at: float, last_due: float) -> Analysis:
    jobs = {c.job_id: c for c in created if c.job_id}
    per_execution = Counter(d.execution_id for d in deliveries)
    first: dict[tuple[str, float], Delivery] = {}  # per execution (job, scheduled time): its first delivery
    for delivery in sorted(deliveries, key=lambda d: d.arrived):
        if delivery.job_id in jobs:
            scheduled = (
                delivery.scheduled_at
                if delivery.scheduled_at is not None
                else jobs[delivery.job_id].planned.due
            )
            first.setdefault((delivery.job_id, round(scheduled, 3)), delivery)

    def lateness_ms(delivery: Delivery) -> float:
        scheduled = delivery.scheduled_at
        if scheduled is None:
            scheduled = jobs[delivery.job_id].planned.due if delivery.job_id in jobs else delivery.arrived
        return (delivery.arrived - scheduled) * 1000

    by_class: dict[str, dict[str, list[float]]] = {k: {HANDOFF: [], SCANNER: []} for k in CLASSES}
    per_second: dict[int, list[float]] = defaultdict(list)
    burst_answered_in_time: list[float] = []  # created (the API's answer) before its instant
    for (job_id, scheduled), delivery in first.items():
        job = jobs[job_id]
        late = lateness_ms(delivery)
        if job.planned.kind == BURST and job.sent + job.latency <= scheduled:
            burst_answered_in_time.append(late)
        path = (
            job.path
            if job.planned.kind != CRON
            else (HANDOFF if scheduled - job.sent < HANDOFF_LIMIT[0] else SCANNER)
        )
        by_class[job.planned.kind][path].append(late)
        offset = math.floor(scheduled - burst_at)
        if abs(offset) <= SECONDS_AROUND_REPORTED:
            per_second[offset].append(late)
    delivered_one_time = {job_id for job_id, _ in first}
    missed_one_time = [
        c for c in jobs.values() if c.planned.kind != CRON and c.job_id not in delivered_one_time
    ]
    cron_expected = {
        (c.job_id, t)
        for c in jobs.values()
        if c.planned.kind == CRON
        for t in expected_cron_runs(c, last_due)
    }
    missed_cron = len({(j, round(t, 3)) for j, t in cron_expected} - set(first))
    arrivals = sorted(d.arrived for d in first.values())
    span = arrivals[-1] - arrivals[0] if len(arrivals) > 1 else 0.0
    report = {
        "executions_received": len(deliveries),
        "executions_delivered": len(first),
        "executed_per_second": {
            "mean": round(len(arrivals) / span, 2) if span else None,
            "peak_1s": max(Counter(int(t) for t in arrivals).values(), default=0),
            "over_seconds": round(span, 1),
        },
        "lateness_ms": summary_ms([v for paths in by_class.values() for vs in paths.values() for v in vs]),
        # How long after its arrival the receiver's handler got to each request (Receiver says why
        # arrival is the kernel's time): what lateness measured at the handler would have added.
        "receiver_delay_ms": summary_ms([(d.handled - d.arrived) * 1000 for d in first.values()]),
        "lateness_ms_by_class": {
            kind: {
                "all": summary_ms(paths[HANDOFF] + paths[SCANNER]),
                **{path: summary_ms(values) for path, values in paths.items() if values},
            }
            for kind, paths in by_class.items()
        },
        # The burst's executions whose creation was answered before their instant: with a short lead
        # on a busy machine some are answered after it, late before the scheduler has them.
        "burst_answered_before_instant": summary_ms(burst_answered_in_time),
        # Every execution scheduled in each second around the burst (B + offset), whatever its class.
        "lateness_ms_by_second_around_burst": {
            f"{offset:+d}": {
                "count": len(values),
                "p50": round(percentile(values, 50) or 0, 1),
                "p99": round(percentile(values, 99) or 0, 1),
                "max": round(max(values), 1),
            }
            for offset, values in sorted(per_second.items())
        },
        "early": sum(1 for d in deliveries if d.job_id in jobs and lateness_ms(d) < 0),
        "missed": len(missed_one_time) + missed_cron,
        "missed_by_class": {
            **Counter(c.planned.kind for c in missed_one_time),
            **({CRON: missed_cron} if missed_cron else {}),
        },
        # (the first few, to look up: `punctual jobs get`, or the table)
        "missed_job_ids": [c.job_id for c in missed_one_time][:20],
        "duplicates": sum(n - 1 for n in per_execution.values() if n > 1),
        "retried_attempts": sum(1 for d in deliveries if d.attempt > 1),
        # A one-time job has one execution: more distinct execution ids for it would be a bug.
        "extra_executions": len({(d.job_id, d.execution_id) for d in deliveries if d.job_id in jobs})
        - len(first),
        "unexpected": sum(1 for d in deliveries if d.job_id not in jobs),
        "burst_at": iso(burst_at),
    }
    return Analysis(report, by_class)


def cross_check(
    client: PunctualClient, created: list[Created], deliveries: list[Delivery], size: int
) -> dict[str, Any]:
    """Ask the API about a sample of one-time jobs: their execution's status and the worker's
    lateness_ms; the missed ones, if any, separately (still QUEUED, or no execution at all?)."""
    made = [c for c in created if c.job_id and c.planned.kind != CRON]
    if not made or size <= 0:
        return {"sampled": 0}
    result = _check_jobs(client, _spread(made, size), deliveries)
    delivered = {d.job_id for d in deliveries}
    missed = [c for c in made if c.job_id not in delivered]
    if missed:
        result["missed_jobs"] = _check_jobs(client, _spread(missed, size), deliveries)
    return result


def _spread(items: list[Created], size: int) -> list[Created]:
    return items[:: max(1, len(items) // size)][:size]


def _check_jobs(client: PunctualClient, sample: list[Created], deliveries: list[Delivery]) -> dict[str, Any]:
    arrived = {d.execution_id: d for d in sorted(deliveries, key=lambda d: d.arrived, reverse=True)}
    statuses: Counter[str] = Counter()
    api_lateness: list[float] = []
    claim_to_arrival: list[float] = []
    errors = 0
    for job in sample:
        assert job.job_id is not None
        try:
            items = client.list_executions(job.job_id, limit=10)["items"]
        except PunctualError:
            errors += 1
            continue
        if not items:
            statuses["(none)"] += 1
        for execution in items:
            statuses[str(execution["status"])] += 1
            if execution.get("lateness_ms") is not None:
                api_lateness.append(float(execution["lateness_ms"]))
            delivery = arrived.get(str(execution["id"]))
            if delivery and execution.get("started_at"):
                started = parse_rfc3339(str(execution["started_at"])).timestamp()
                claim_to_arrival.append((delivery.arrived - started) * 1000)
    return {
        "sampled": len(sample),
        "api_errors": errors,
        "statuses": dict(sorted(statuses.items())),
        "lateness_ms": summary_ms(api_lateness),
        "started_to_arrival_ms": summary_ms(claim_to_arrival),
    }


def creation_report(created: list[Created], flooded: Flooded | None, burst_at: float) -> dict[str, Any]:
    made = [c for c in created if c.job_id]
    latencies = [c.latency * 1000 for c in made]
    near = [c.latency * 1000 for c in made if abs(c.sent - burst_at) <= SECONDS_AROUND_REPORTED]
    report: dict[str, Any] = {
        "jobs_created": len(made),
        "failed": sum(1 for c in created if c.error),
        "by_class_and_path": dict(Counter(f"{c.planned.kind}/{c.path}" for c in made)),
        "latency_ms": summary_ms(latencies),
        "latency_ms_within_10s_of_burst": summary_ms(near),
    }
    if flooded is not None:
        per_second = Counter(math.floor(t) for t in flooded.answered)
        sent_per_second = Counter(math.floor(t) for t in flooded.sent)
        # Every whole second of the flood's window, those without an answer included (a stall at its
        # start is a second of none, not a flood that began later).
        whole = range(math.ceil(flooded.window[0]), math.floor(flooded.window[1]))
        inner = [per_second[s] for s in whole]
        seconds = sorted(set(per_second) | set(whole))
        report["flood"] = {
            "jobs_created": len(flooded.answered),
            "failed": flooded.failed,
            "rate_per_s": round(sum(inner) / len(inner), 1) if inner else None,
            "slowest_second": min(inner) if inner else None,
            # answered in each second from the burst's instant (0: the burst's own second)
            "answered_by_second_around_burst": {
                f"{s - math.floor(burst_at):+d}": per_second[s] for s in seconds
            },
            # sent in each such second: a second with few sent is the clients', not the API's
            "sent_by_second_around_burst": {
                f"{s - math.floor(burst_at):+d}": sent_per_second[s] for s in seconds
            },
            "latency_ms": summary_ms(flooded.latencies_ms),
        }
    return report


def iso(epoch: float) -> str:
    return to_rfc3339(datetime.fromtimestamp(epoch, UTC))


def targets_for(analysis: Analysis, creation: dict[str, Any], burst: int) -> dict[str, Any]:
    report = analysis.report
    classes = report["lateness_ms_by_class"]
    steady, bursting = classes[STEADY]["all"], classes[BURST]["all"]
    burst_limit = TARGET_MAX_MS if burst >= LARGE_BURST else TARGET_SMALL_BURST_MS
    flood = creation.get("flood") or {}
    flood_rate, slowest = flood.get("rate_per_s"), flood.get("slowest_second")
    checks = {
        "burst_max_ms_at_most": burst_limit,
        "burst_met": not burst or (bursting["max"] is not None and bursting["max"] <= burst_limit),
        "steady_p99_ms_at_most": TARGET_P99_MS,
        "steady_p99_met": steady["p99"] is not None and steady["p99"] <= TARGET_P99_MS,
        "steady_max_ms_at_most": TARGET_MAX_MS,
        "steady_max_met": steady["max"] is not None and steady["max"] <= TARGET_MAX_MS,
        "creates_per_s_at_least": TARGET_CREATES_PER_S,
        "creation_met": flood_rate is None or flood_rate >= TARGET_CREATES_PER_S,
        # "during all of it": every whole second of the flood, not only its average
        "creation_each_second_met": slowest is None or slowest >= TARGET_CREATES_PER_S,
        "none_early": report["early"] == 0,
        "none_missed": report["missed"] == 0 and not creation["failed"],
        "none_doubled": report["duplicates"] == 0 and report["extra_executions"] == 0,
    }
    checks["met"] = all(v for k, v in checks.items() if k.endswith("_met") or k.startswith("none_"))
    return checks
