"""The shapes of load the benchmark plans: which jobs, created when, due when, around one burst."""

from __future__ import annotations

import argparse
import math
import random
from dataclasses import dataclass

from bench.precision import log

HANDOFF, SCANNER = "handoff", "scanner"
STEADY, BURST, CRON = "steady", "burst", "cron"
CLASSES = (STEADY, BURST, CRON)
# What a stack started for --stack-age is given to be ready, when planned: it is ready in a few seconds.
YOUNG_START_SECONDS = 5.0


@dataclass(frozen=True)
class Planned:
    index: int
    kind: str  # STEADY, BURST or CRON
    create_at: float  # epoch seconds: when the request is sent (at the earliest)
    due: float  # epoch seconds, whole milliseconds (a cron job: its first :00)


@dataclass(frozen=True)
class Created:
    planned: Planned
    job_id: str | None
    sent: float
    latency: float
    error: str | None = None

    @property
    def path(self) -> str:
        """Who enqueued it: the API (due within the hand-off window when created) or a scanner tick."""
        return HANDOFF if self.planned.due - self.sent < HANDOFF_LIMIT[0] else SCANNER


HANDOFF_LIMIT = [180.0]  # the run's hand-off window, set by run()


@dataclass(frozen=True)
class Shape:
    burst_at: float  # epoch seconds, a minute boundary
    plans: dict[str, list[Planned]]  # by stream: "scanned burst", "steady", "handoff burst", "cron"
    flood: tuple[float, float]  # epoch seconds


def _lead(rng: random.Random, leads: tuple[float, float]) -> float:
    # One lead draws nothing, so the default shape's other draws stay what a seed always gave.
    return leads[0] if leads[0] == leads[1] else rng.uniform(*leads)


def handoff_leads_of(args: argparse.Namespace) -> tuple[float, float]:
    """The hand-off part's leads: a spread (--burst-handoff-leads), or one lead."""
    return args.burst_handoff_leads or (args.burst_handoff_lead, args.burst_handoff_lead)


def young_burst_at(args: argparse.Namespace, now: float) -> float:
    """For --stack-age: the first boundary far enough ahead for a stack started now to be ready
    (`YOUNG_START_SECONDS`), to age the given seconds, and to take the burst's longest lead."""
    earliest = now + YOUNG_START_SECONDS + args.stack_age + handoff_leads_of(args)[1]
    return math.ceil(earliest / args.align) * args.align


def plan_shape(args: argparse.Namespace, limit: int, now: float, burst_at: float | None = None) -> Shape:
    """When each job is created and due, around a burst at the first minute boundary far enough
    ahead for every creation to get its lead. Given `burst_at` (a young stack's, --stack-age), the
    burst is there, and the steady jobs that would be created before `now` are left out: a stack
    started just before has seen none of them."""
    rng = random.Random(args.seed)
    handoff = args.handoff_window or (2.0, float(min(75, limit - 10)))
    scanned = args.scanned_window or (float(limit + 10), float(limit + 40))
    scanned_lead = args.burst_scanned_lead or limit + 30.0
    if scanned_lead <= limit:
        log(
            f"warning: --burst-scanned-lead is within the hand-off window ({limit} s): the API hands those off"
        )
    # A spread of leads (--burst-handoff-leads): clients creating a burst over minutes, each job as
    # someone asks for it, rather than all at one moment.
    handoff_leads = handoff_leads_of(args)
    first_creation = max(
        scanned_lead if args.burst and args.burst_scanned_share > 0 else 0.0,
        handoff_leads[1] + 5.0,
        args.around + (scanned[1] if args.scanned_share > 0 else handoff[1]) + 2.0,
        args.flood_seconds / 2 + 1.0,
    )
    if burst_at is None:
        burst_at = math.ceil((now + first_creation + 5.0) / args.align) * args.align
    scanned_count = round(args.burst * args.burst_scanned_share) if args.burst else 0
    index = iter(range(10**9))
    plans: dict[str, list[Planned]] = {
        "scanned burst": [
            Planned(next(index), BURST, burst_at - scanned_lead, burst_at) for _ in range(scanned_count)
        ],
        "handoff burst": sorted(
            (
                Planned(next(index), BURST, burst_at - _lead(rng, handoff_leads), burst_at)
                for _ in range(args.burst - scanned_count)
            ),
            key=lambda p: p.create_at,
        ),
        "cron": [Planned(next(index), CRON, now, math.ceil(now / 60.0) * 60.0) for _ in range(args.cron)],
    }
    steady = []
    count = round(args.rate * 2 * args.around)
    for i in range(count):
        # Due times evenly spread over B +- around; the scanner's share evenly among them.
        due = round((burst_at - args.around + (i + 0.5) * 2 * args.around / count) * 1000) / 1000
        to_scanner = math.floor((i + 1) * args.scanned_share) > math.floor(i * args.scanned_share)
        low, high = scanned if to_scanner else handoff
        steady.append(Planned(next(index), STEADY, due - rng.uniform(low, high), due))
    plans["steady"] = sorted((p for p in steady if p.create_at >= now), key=lambda p: p.create_at)
    return Shape(burst_at, plans, (burst_at - args.flood_seconds / 2, burst_at + args.flood_seconds / 2))
