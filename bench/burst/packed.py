"""The packed path as the code runs it: the scanner sends one message a pack (up to `pack_size`
executions of one instant and shard, scheduling.dispatch), held by DelaySeconds until `lead` seconds
before the instant (rounded down to whole seconds, domain.work.delay_seconds; the lead is the code's
own, scheduling.prescaling.lead_seconds); the worker mapping's pollers hand each pack to one
invocation (BatchSize 1), and its PackRunner (execution.packs) takes it under one lease: it reads the
pack's jobs, writes the lease, holds until the instant (never early), reads the jobs' stamps, starts
min(pack, FIRE_THREADS) members side by side and writes each end once every start is made
(execution.starts_first); members beyond the threads wait for a thread, which is free once its
member has answered and its end is written. One environment's CPU is its share of a vCPU
(memory / 1,769 MB), spent on one thing at a time in that order.
"""

from __future__ import annotations

import heapq
import math
import random
from collections import defaultdict
from dataclasses import dataclass, field

from bench.burst.documented import (
    COLD_START,
    END_WRITE_UNITS,
    ENVIRONMENTS_PER_10_SECONDS,
    INVOCATION_START_SECONDS,
    PROVISIONED_PER_MINUTE,
    RECEIVE_SECONDS,
    TICK_LEAD_SECONDS,
)
from bench.burst.model import percentile
from punctual.platform import aws_limits as sizing
from punctual.platform.config import FIRE_THREADS
from punctual.scheduling.prescaling import LeadPolicy, lead_seconds

DT = 0.01
READS_PER_CALL = 100  # BatchGetItem keys a call


@dataclass(frozen=True)
class Costs:
    """A member's CPU in the worker, in ms of one core (bench.pack_fire measures them), and the
    table's answer time."""

    webhook_ms: float  # a webhook's start, on the pack's thread pool
    dynamodb_call_ms: float  # a boto3 UpdateItem (a claim, an outcome write)
    batch_read_ms: float  # a BatchGetItem of a hundred (the pack's reads)
    decode_ms_per_entry: float  # the pack's body read
    call_seconds: float = 0.01  # a DynamoDB call's round trip (assumed)
    task_seconds: float = 0.2  # a webhook's round trip (assumed, as the capacity plan)


@dataclass(frozen=True)
class PackedDeployment:
    # How long before its instant each instant's messages become visible: the code's lead for the
    # executions due then (prescaling.lead_seconds), unless `lead_seconds` fixes one for every instant.
    lead: LeadPolicy = field(default_factory=LeadPolicy)
    lead_seconds: float | None = None
    memory_mb: int = 512
    pack_size: int = 500
    fire_threads: int = FIRE_THREADS
    min_pollers: int = 200  # raised ahead by the pre-scaling
    max_pollers: int = 200
    lambda_quota: int = 1000
    table_write_units: float = 40_000
    warm_environments: int = 0
    shards: int = 64
    scanner_fanout: int = 64
    scanner_rate: float = 4098.0

    @property
    def share(self) -> float:
        return min(1.0, self.memory_mb / sizing.LAMBDA_MB_PER_VCPU)

    def ahead(self, executions: int) -> float:
        """Seconds before an instant of `executions` its messages become visible."""
        return self.lead_seconds if self.lead_seconds is not None else lead_seconds(executions, self.lead)


@dataclass
class PackedResult:
    executions: int
    packs: int
    p50_seconds: float
    p99_seconds: float
    max_seconds: float
    environments: int
    cold_starts: int
    peak_concurrency: int
    last_received_seconds: float  # the last pack taken, from the instant (negative: before it)
    peak_write_units_per_second: float  # asked of the table in its busiest second
    last_end_written_seconds: float  # the last member's end stored, at the table's rate, from the instant
    invocation_seconds: float  # mean billed time a pack's invocation, hold included
    bound_by: list[str] = field(default_factory=list)


class _Table:
    """The table's write rate: writes wait once a second's units are used up (a second may burst)."""

    def __init__(self, units: float) -> None:
        self.units = units
        self.free_at = -math.inf
        self.by_second: dict[int, float] = defaultdict(float)
        self.first_wait: float | None = None  # when a write first had to wait for units

    def write(self, count: float, at: float) -> float:
        """When `count` units asked at `at` are all written."""
        self.free_at = max(self.free_at, at - 1.0)
        self.free_at += count / self.units
        self.by_second[math.floor(at)] += count
        if self.free_at > at and self.first_wait is None:
            self.first_wait = at
        return max(at, self.free_at)


def pack_sizes(executions: int, shards: int, pack_size: int) -> list[list[int]]:
    """An instant's executions spread evenly over the shards, each shard's cut every `pack_size`
    (tick.instant_chunks): the packs' sizes, shard by shard."""
    sizes = []
    for shard in range(shards):
        count = executions // shards + (1 if shard < executions % shards else 0)
        sizes.append([pack_size] * (count // pack_size) + ([count % pack_size] if count % pack_size else []))
    return sizes


def run_pack(
    size: int, ready: float, due: float, d: PackedDeployment, c: Costs, claims: _Table, after: _Table
) -> tuple[list[float], float]:
    """Start times of one pack's members (`ready`: its invocation has the pack, after any cold start),
    and when its invocation ends. `claims`: the table's rate as the leases ahead find it, `after`: as
    the ends' writes from the instant on do (each booked in its own order of time)."""
    cpu = 1000 * d.share  # ms of work a second
    threads = min(size, d.fire_threads)
    t = ready + size * c.decode_ms_per_entry / cpu
    t += c.call_seconds + math.ceil(size / READS_PER_CALL) * c.batch_read_ms / cpu  # the jobs
    leased = claims.write(1, t)  # the pack's one lease, ahead if there is time
    leased = max(leased, t + c.dynamodb_call_ms / cpu) + c.call_seconds
    # Held until the instant, never early; then the jobs' stamps, in one batch a hundred.
    fire = max(due, leased) + c.call_seconds + math.ceil(size / READS_PER_CALL) * c.batch_read_ms / cpu
    starts = [fire + (k + 1) * c.webhook_ms / cpu for k in range(threads)]
    # The rest wait for a thread: one frees once its member answered and its end is written.
    rest = size - threads
    base = max(starts[-1], starts[0] + c.task_seconds)
    each = (c.dynamodb_call_ms + c.webhook_ms) / cpu  # an end written, a start
    if rest:
        written = after.write(rest * END_WRITE_UNITS, base)
        base = max(base, written - rest * each)
    starts += [base + (j + 1) * each for j in range(rest)]
    # The first threads' ends, once every start is made.
    ends = after.write(threads * END_WRITE_UNITS, starts[threads - 1])
    outcomes = threads * c.dynamodb_call_ms / cpu
    end = max(starts[-1] + c.task_seconds, starts[threads - 1] + outcomes, ends)
    return starts, end


def simulate_packs(
    instants: list[tuple[float, int]], d: PackedDeployment, c: Costs, *, seed: int = 1
) -> PackedResult:
    """`instants`: (when due, executions due then). Every execution's lateness: its start minus its instant."""
    rng = random.Random(seed)
    packs: list[tuple[float, float, int]] = []  # visible, due, size
    for due, executions in instants:
        lead = d.ahead(executions)
        for shard_packs in pack_sizes(executions, d.shards, d.pack_size):
            # The tick reads the instant TICK_LEAD_SECONDS ahead at the latest; a scanner invocation
            # sends its shard's packs in order at its measured rate; SQS delays in whole seconds,
            # rounded down (the worker waits out the fraction).
            sent = due - TICK_LEAD_SECONDS + INVOCATION_START_SECONDS
            for size in shard_packs:
                sent += size / d.scanner_rate
                packs.append((sent + max(0, math.floor(due - lead - sent)), due, size))
    packs.sort()
    claims, after = _Table(d.table_write_units), _Table(d.table_write_units)
    lateness: list[float] = []
    busy: list[float] = []  # heap: when each busy environment's invocation ends
    idle = d.warm_environments
    environments = d.warm_environments
    cold = 0
    peak = 0
    billed = 0.0
    bounds: dict[str, float] = {}
    t = packs[0][0] - DT
    first: float | None = None
    i = 0
    receives = 0.0
    last_received = -math.inf
    while i < len(packs):
        t += DT
        while busy and busy[0] <= t:
            heapq.heappop(busy)
            idle += 1
        if packs[i][0] > t:
            continue
        if first is None:
            first = t
        ramp = t - first
        mapping = min(
            d.max_pollers * sizing.POLLER_CONCURRENT_INVOKES,
            d.min_pollers * sizing.POLLER_CONCURRENT_INVOKES + PROVISIONED_PER_MINUTE * ramp / 60,
        )
        env_cap = d.warm_environments + ENVIRONMENTS_PER_10_SECONDS * (1 + ramp / 10)
        limit = min(mapping, d.lambda_quota, env_cap)
        receives += mapping / sizing.POLLER_CONCURRENT_INVOKES * sizing.POLLER_RECEIVES_PER_SECOND * DT
        while i < len(packs) and packs[i][0] <= t and len(busy) < limit and receives >= 1:
            _, due, size = packs[i]
            i += 1
            receives -= 1
            init = 0.0
            if idle > 0:
                idle -= 1
            else:
                environments += 1
                cold += 1
                init = rng.uniform(*COLD_START)
            ready = t + RECEIVE_SECONDS + init
            starts, end = run_pack(size, ready, due, d, c, claims, after)
            lateness += [max(0.0, s - due) for s in starts]
            heapq.heappush(busy, end)
            billed += end - t
            last_received = max(last_received, t - due)
        if i < len(packs) and packs[i][0] <= t:
            limits = [
                (mapping, "the mapping's pollers (10 concurrent invokes each)"),
                (d.lambda_quota, "Lambda concurrency quota"),
                (env_cap, "Lambda environment scaling"),
            ]
            if receives < 1:
                bounds.setdefault("poller receives (10 a second a poller)", round(t, 2))
            else:
                bounds.setdefault(min(limits, key=lambda pair: pair[0])[1], round(t, 2))
        peak = max(peak, len(busy))
    if claims.first_wait is not None:
        bounds.setdefault("table write units (the leases ahead)", round(claims.first_wait, 2))
    per_second = defaultdict(float, claims.by_second)
    for second, units in after.by_second.items():
        per_second[second] += units
    ordered = sorted(lateness)
    return PackedResult(
        executions=len(ordered),
        packs=len(packs),
        p50_seconds=round(percentile(ordered, 0.5), 3),
        p99_seconds=round(percentile(ordered, 0.99), 3),
        max_seconds=round(ordered[-1], 3),
        environments=environments,
        cold_starts=cold,
        peak_concurrency=peak,
        last_received_seconds=round(last_received, 2),
        peak_write_units_per_second=round(max(per_second.values(), default=0.0), 1),
        last_end_written_seconds=round(after.free_at - min(due for _, due, _ in packs), 1),
        invocation_seconds=round(billed / len(packs), 2),
        bound_by=sorted(bounds, key=bounds.__getitem__),
    )
