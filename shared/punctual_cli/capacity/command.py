"""`punctual capacity`: the planner's options, and the plan it prints for a load (arithmetic only:
nothing is called)."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

from punctual.platform import aws_limits as sizing
from punctual_cli import capacity
from punctual_cli.common import EXIT_OK, UsageError, positive_float, positive_int
from punctual_cli.output import show
from punctual_client.transport import PunctualClient

DEFAULT_UTILISATION = 70  # `capacity --provisioned`: as infra/settings.py deploys


def cmd_capacity(client: PunctualClient, args: argparse.Namespace) -> int:
    """Arithmetic only, nothing is called: the plan of docs/scaling.md for this load."""
    if not 0 <= args.recurring_share <= 1:
        raise UsageError("--recurring-share is a fraction between 0 and 1")
    utilisation = None
    if args.provisioned:
        utilisation = DEFAULT_UTILISATION if args.utilisation is None else args.utilisation
        low, high = capacity.UTILISATION_RANGE
        if not low <= utilisation <= high:
            raise UsageError(
                f"--utilisation is a percent between {low} and {high} (DynamoDB auto scaling's target), "
                f"not {utilisation}"
            )
    elif args.utilisation is not None:
        raise UsageError("--utilisation is the provisioned table's target: add --provisioned")
    elif args.reserved:
        raise UsageError("--reserved prices the provisioned table's capacity: add --provisioned")
    low, high = sizing.MIN_POLLERS_RANGE
    if args.pollers and not low <= args.pollers + args.warm_pollers <= high:
        raise UsageError(f"--pollers (with --warm-pollers) is between {low} and {high}: MinimumPollers")
    if (args.warm_pollers or args.warm_hours) and not args.pollers:
        raise UsageError("--warm-pollers and --warm-hours price a mapping in provisioned mode: add --pollers")
    assumptions = capacity.Assumptions(
        task_seconds=args.task_seconds,
        scanner_memory_mb=args.scanner_memory,
        http_api=args.api == "http",
        keys_only_indexes=not args.all_indexes,
        execution_events=args.execution_events,
    )
    result = capacity.plan(
        args.jobs_per_second,
        recurring_share=args.recurring_share,
        burst_minute=args.burst,
        drain_seconds=args.drain_seconds,
        batched=args.batched,
        utilisation_percent=utilisation,
        reserved=args.reserved,
        pollers=args.pollers,
        warm_pollers=args.warm_pollers,
        warm_hours=args.warm_hours,
        assumptions=assumptions,
    )
    show(result.as_dict(), args, lambda _: capacity.render(result))
    return EXIT_OK


def register(commands: Any, command: Callable[..., Any]) -> None:
    """Add `capacity` to the parser (`command` makes one, as build_parser does)."""
    defaults = capacity.Assumptions()
    plan = command(
        commands, "capacity", cmd_capacity, "plan shards, scanners, workers and monthly cost for a load"
    )
    plan.add_argument(
        "--jobs-per-second", type=positive_float, required=True, metavar="N", help="executions a second"
    )
    plan.add_argument(
        "--recurring-share",
        type=float,
        default=0.0,
        metavar="F",
        help="share that are cron/rate occurrences (default 0: all one-time jobs, created by the API)",
    )
    plan.add_argument("--burst", type=positive_int, metavar="N", help="executions due in the busiest minute")
    plan.add_argument(
        "--drain-seconds", type=positive_float, default=30.0, help="scanner time for a minute (default 30)"
    )
    plan.add_argument(
        "--task-seconds",
        type=positive_float,
        default=defaults.task_seconds,
        help=f"mean task duration (default {defaults.task_seconds})",
    )
    plan.add_argument(
        "--scanner-memory",
        type=positive_int,
        default=defaults.scanner_memory_mb,
        metavar="MB",
        help=f"scanner function memory (default {defaults.scanner_memory_mb})",
    )
    plan.add_argument(
        "--api",
        choices=("http", "rest"),
        default="http" if defaults.http_api else "rest",
        help="the API Gateway type deployed (-c api_type; default http: $1.00 a million requests, rest: $3.50)",
    )
    # (hidden: an alias of --api http that scripts may pass)
    plan.add_argument("--http-api", dest="api", action="store_const", const="http", help=argparse.SUPPRESS)
    plan.add_argument(
        "--batched",
        action="store_true",
        help=f"one-time jobs created {capacity.BATCH_JOBS} a request (POST /jobs/batch)",
    )
    plan.add_argument(
        "--all-indexes", action="store_true", help="price the indexes as projecting ALL (deployed: KEYS_ONLY)"
    )
    plan.add_argument(
        "--execution-events",
        choices=("all", "final", "off"),
        default=defaults.execution_events,
        help="the stack's execution events on EventBridge, as -c execution_events deploys them "
        f"(default {defaults.execution_events}: each status change, a stream batch's changes of one "
        "owner to one status in one event, $1.00 a million events)",
    )
    plan.add_argument(
        "--provisioned",
        action="store_true",
        help="price the table provisioned and auto scaled (a steady load) and print its CDK context",
    )
    plan.add_argument(
        "--utilisation",
        type=int,
        metavar="PERCENT",
        help=f"with --provisioned: auto scaling's target, {capacity.UTILISATION_RANGE[0]}-"
        f"{capacity.UTILISATION_RANGE[1]} (default {DEFAULT_UTILISATION})",
    )
    plan.add_argument(
        "--reserved",
        action="store_true",
        help="with --provisioned: that capacity bought as one-year reserved capacity (a commitment, "
        "about 54%% under provisioned prices)",
    )

    plan.add_argument(
        "--pollers",
        type=int,
        default=0,
        metavar="N",
        help="price the worker mapping in provisioned mode with N minimum pollers (-c worker_min_pollers)",
    )
    plan.add_argument(
        "--warm-pollers",
        type=int,
        default=0,
        metavar="N",
        help="with --pollers: N more, raised ahead of bursts (-c worker_prescale) ...",
    )
    plan.add_argument(
        "--warm-hours", type=float, default=0.0, metavar="H", help="... for H hours a month in all"
    )
