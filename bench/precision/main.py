"""The command: its options, one run from the stack's start to the report, and Ctrl-C's clean-up."""

from __future__ import annotations

import argparse
import math
import signal
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path
from types import FrameType
from typing import Any

from bench.calibration import calibrate, load_average
from bench.common import emit, environment, int_within
from bench.precision import log
from bench.precision.chart import draw_histograms
from bench.precision.creation import run_streams
from bench.precision.machine import CpuMeter, StallWatch
from bench.precision.receiver import running_receiver
from bench.precision.report import analyse, creation_report, cross_check, iso, targets_for
from bench.precision.shapes import (
    BURST,
    CRON,
    HANDOFF_LIMIT,
    YOUNG_START_SECONDS,
    handoff_leads_of,
    plan_shape,
    young_burst_at,
)
from bench.precision.stack import LocalStack
from punctual.platform.config import Settings
from punctual_client.endpoints import is_loopback
from punctual_client.errors import PunctualError
from punctual_client.transport import PunctualClient

REQUEST_TIMEOUT_SECONDS = 60.0


def window(text: str) -> tuple[float, float]:
    """`LOW:HIGH` seconds ahead."""
    low, separator, high = text.partition(":")
    try:
        pair = (float(low), float(high))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected LOW:HIGH seconds, got {text!r}") from None
    if not separator or not 0 < pair[0] <= pair[1]:
        raise argparse.ArgumentTypeError(f"expected 0 < LOW <= HIGH, got {text!r}")
    return pair


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m bench.precision",
        description="Precision end to end under bursts, cron at :00 and steady load: lateness of webhook "
        "jobs created through the API, measured at a receiver. Prints JSON.",
    )
    load = parser.add_argument_group("load")
    load.add_argument("--burst", type=int, default=100, help="one-time jobs due at one instant (default 100)")
    load.add_argument(
        "--burst-scanned-share",
        type=float,
        default=0.5,
        help="share of the burst created before the hand-off window, for the scanner (default 0.5)",
    )
    load.add_argument(
        "--burst-scanned-lead",
        type=float,
        default=None,
        help="seconds before the burst its scanned part is created (default: the hand-off window + 30)",
    )
    load.add_argument(
        "--burst-handoff-lead",
        type=float,
        default=30.0,
        help="seconds before the burst the rest of it is created, as fast as the clients go (default 30)",
    )
    load.add_argument(
        "--burst-handoff-leads",
        type=window,
        default=None,
        metavar="LOW:HIGH",
        help="spread the hand-off part's creations over these leads, in seconds, instead of one lead",
    )
    load.add_argument(
        "--burst-batch-size",
        type=lambda text: int_within(text, 1, 100, "--burst-batch-size"),
        default=1,
        help="burst jobs created a request (POST /jobs/batch above 1; default 1: one a request)",
    )
    load.add_argument(
        "--align",
        type=int,
        default=60,
        help="the burst is due on a multiple of this many seconds (default 60: a minute boundary)",
    )
    load.add_argument("--cron", type=int, default=20, help="recurring jobs * * * * * (default 20)")
    load.add_argument("--rate", type=float, default=20.0, help="steady jobs due a second (default 20)")
    load.add_argument(
        "--around",
        type=float,
        default=30.0,
        help="steady jobs due from B - this to B + this seconds (default 30)",
    )
    load.add_argument(
        "--scanned-share",
        type=float,
        default=0.2,
        help="share of the steady jobs created before the hand-off window, for the scanner (default 0.2)",
    )
    load.add_argument(
        "--handoff-window",
        type=window,
        default=None,
        metavar="LOW:HIGH",
        help="seconds ahead steady jobs the API hands off are created (default 2:75)",
    )
    load.add_argument(
        "--scanned-window",
        type=window,
        default=None,
        metavar="LOW:HIGH",
        help="seconds ahead steady jobs left to the scanner are created (default: hand-off window +10 to +40)",
    )
    load.add_argument(
        "--flood-seconds",
        type=float,
        default=20.0,
        help="seconds around the burst more clients create jobs as fast as they can (default 20; 0: none)",
    )
    load.add_argument("--threads", type=int, default=8, help="clients per stream of creations (default 8)")
    load.add_argument("--grace", type=float, default=10.0, help="seconds to wait after the last due time")
    load.add_argument(
        "--settle",
        type=float,
        default=60.0,
        help="seconds more to wait for executions not received after the grace, before counting them missed",
    )
    load.add_argument(
        "--sample", type=int, default=100, help="jobs cross-checked through the API (default 100)"
    )
    load.add_argument("--seed", type=int, default=1, help="seed of the lead draws")
    load.add_argument("--no-calibration", action="store_true", help="skip measuring moto first")
    output = parser.add_argument_group("output")
    output.add_argument("--png", type=Path, default=None, help="write the lateness histograms here")
    output.add_argument("--stack-log", type=Path, default=None, help="keep the local stack's output here")
    output.add_argument(
        "--stack-data",
        type=Path,
        default=None,
        help="keep the local stack's data directory here (must not exist)",
    )
    stack = parser.add_argument_group("the local stack (ignored with --endpoint)")
    stack.add_argument("--tick-seconds", type=int, default=None, help="punctual local --tick-seconds")
    stack.add_argument("--concurrency", type=int, default=None, help="punctual local --concurrency")
    stack.add_argument(
        "--stack-age",
        type=float,
        default=None,
        metavar="SECONDS",
        help="a young stack: start it this long before the burst's first hand-off creation (it waits "
        "for the boundary that allows it); steady jobs planned before it is ready are left out; "
        "no calibration",
    )
    remote = parser.add_argument_group("another stack")
    remote.add_argument(
        "--endpoint",
        default=None,
        help="use this API instead of starting a local stack (SigV4 if not loopback)",
    )
    remote.add_argument("--token", default="local", help="bearer token for a loopback endpoint")
    remote.add_argument("--receiver-host", default="127.0.0.1", help="address the receiver binds")
    remote.add_argument("--receiver-port", type=int, default=0, help="receiver port (default: a free one)")
    remote.add_argument(
        "--receiver-url", default=None, help="URL the jobs call, if not http://<receiver-host>:<port>"
    )
    return parser


def handoff_seconds(tick_seconds: int) -> int:
    """The API's hand-off window (Settings.handoff_seconds) with the local stack's lookahead rule."""
    lookahead = (
        Settings.model_fields["lookahead_seconds"].default if tick_seconds >= 60 else max(5, 2 * tick_seconds)
    )
    return Settings(tick_seconds=tick_seconds, lookahead_seconds=lookahead).handoff_seconds


def run(args: argparse.Namespace, cleanup: ExitStack) -> dict[str, Any]:
    tick = args.tick_seconds or 60
    limit = handoff_seconds(tick)
    HANDOFF_LIMIT[0] = float(limit)
    young = args.stack_age is not None and not args.endpoint
    calibration = None if args.no_calibration or args.endpoint or young else calibrate()
    if calibration:
        log(f"calibration: {calibration}")
    receiver = cleanup.enter_context(running_receiver(args.receiver_host, args.receiver_port))
    receiver_url = args.receiver_url or f"http://{args.receiver_host}:{receiver.server_address[1]}"
    stack_args: list[str] = []
    stack: LocalStack | None = None
    young_at = stack_ready = 0.0
    if args.endpoint:
        endpoint = args.endpoint
    else:
        if args.tick_seconds:
            stack_args += ["--tick-seconds", str(args.tick_seconds)]
        if args.concurrency:
            stack_args += ["--concurrency", str(args.concurrency)]
        workdir = Path(cleanup.enter_context(tempfile.TemporaryDirectory(prefix="punctual-precision-")))
        stack = LocalStack(workdir, stack_args, args.stack_log, args.stack_data)
        cleanup.callback(stack.stop)
        if young:
            # Started so that the burst's first creation comes --stack-age seconds after it is ready.
            young_at = young_burst_at(args, time.time())
            start_at = young_at - handoff_leads_of(args)[1] - args.stack_age - YOUNG_START_SECONDS
            log(f"starting the local stack in {start_at - time.time():.0f} s (burst at {iso(young_at)})")
            time.sleep(max(0.0, start_at - time.time()))
        log(f"starting the local stack: {' '.join(stack.command[2:])}")
        stack.start()
        stack_ready = time.time()
        endpoint = stack.url
    meter = CpuMeter(stack.process.pid if stack and stack.process else None, receiver.process.pid)
    client = PunctualClient.from_endpoint(endpoint, token=args.token, timeout=REQUEST_TIMEOUT_SECONDS)
    run_id = f"{int(time.time())}"
    shape = plan_shape(args, limit, time.time(), burst_at=young_at if young else None)
    log(
        f"burst of {args.burst} at {iso(shape.burst_at)} (in {shape.burst_at - time.time():.0f} s), "
        f"{args.cron} cron jobs, {args.rate:g} steady jobs/s; receiver {receiver_url}"
    )
    meter.mark("start")
    watch = StallWatch()
    watch.start()
    cleanup.callback(watch.stop)
    load_before = load_average()
    created, flooded = run_streams(client, shape, args, receiver_url, run_id)
    made = [c for c in created if c.job_id]
    for failure in [c for c in created if c.error][:5]:
        log(f"create failed: {failure.error}")
    last_due = max([c.planned.due for c in made if c.planned.kind != CRON] + [shape.burst_at])
    # A create answered after its due time (the API that slow) has its execution still to come.
    deadline = max([last_due] + [c.sent + c.latency for c in made]) + args.grace
    while (remaining := deadline - time.time()) > 0:
        log(f"received {receiver.count()}; last due time + grace in {remaining:.0f} s")
        time.sleep(min(10.0, remaining))
    # Missed means never run, not late: what has not come yet gets up to --settle more seconds (its
    # lateness counted as it is), so that a loss and a long delay are told apart.
    expected = {c.job_id for c in made if c.planned.kind != CRON}
    settle_until = time.time() + args.settle
    while (waiting := len(expected - {d.job_id for d in receiver.snapshot()})) and time.time() < settle_until:
        log(f"{waiting} executions not received yet; waiting up to {settle_until - time.time():.0f} s more")
        time.sleep(2.0)
    meter.mark("end")
    deliveries = receiver.snapshot()
    analysis = analyse(created, deliveries, shape.burst_at, last_due)
    log(f"checking {min(args.sample, len(made))} executions through the API")
    checked = cross_check(client, created, deliveries, args.sample)
    for job in made:
        if job.planned.kind == CRON and job.job_id:
            try:
                client.cancel_job(job.job_id)
            except PunctualError as exc:
                log(f"could not cancel cron job {job.job_id}: {exc}")
    creation = creation_report(created, flooded, shape.burst_at)
    if young:
        burst_created = [c.sent for c in made if c.planned.kind == BURST]
        creation["stack_age_s"] = {
            "at_first_burst_creation": round(min(burst_created, default=math.nan) - stack_ready, 1),
            "at_burst": round(shape.burst_at - stack_ready, 1),
        }
    result: dict[str, Any] = {
        "benchmark": "precision",
        "stack": "deployed (--endpoint)" if args.endpoint and not is_loopback(endpoint) else "local",
        "config": {
            "endpoint": endpoint if args.endpoint else "local stack started by the benchmark",
            "local_stack_args": None if args.endpoint else stack_args,
            "burst": args.burst,
            "burst_scanned_share": args.burst_scanned_share,
            "burst_batch_size": args.burst_batch_size,
            "burst_handoff_lead_s": args.burst_handoff_lead,
            "burst_handoff_leads_s": list(args.burst_handoff_leads) if args.burst_handoff_leads else None,
            "cron_jobs": args.cron,
            "steady_rate_per_s": args.rate,
            "steady_around_s": args.around,
            "steady_scanned_share": args.scanned_share,
            "handoff_limit_s": limit,
            "flood_seconds": args.flood_seconds,
            "clients_per_stream": args.threads,
            "grace_s": args.grace,
            "settle_s": args.settle,
            "seed": args.seed,
            "stack_age_s": args.stack_age,
        },
        "calibration": {
            **(calibration or {}),
            "load_average_at_start": load_before,
            "load_average_at_end": load_average(),
        },
        "machine": {
            **environment(),
            "cpu_whole_run": meter.between("start", "end"),
            "benchmark_process_stalls": watch.report(shape.burst_at),
        },
        "creation": creation,
        "delivery": {
            **analysis.report,
            "arrival_clock": "kernel receive time" if receiver.kernel_times else "receiver handler",
        },
        "api_cross_check": checked,
        "targets": targets_for(analysis, creation, args.burst),
    }
    if args.png:
        where = "Punctual on AWS" if args.endpoint and not is_loopback(endpoint) else "Punctual local stack"
        title = (
            f"{where}: a burst of {args.burst} at one instant, {args.cron} cron jobs at :00, "
            f"{args.rate:g} steady jobs/s"
        )
        if calibration:
            rates = calibration["moto_calls_per_s"]
            title += (
                f"\nmachine: moto {rates['conditional_update_item']:.0f} conditional updates/s, "
                f"{rates['put_item']:.0f} puts/s; load average {load_before[0] if load_before else '?'}"
            )
        draw_histograms(args.png, analysis.lateness_by_class, title)
        result["png"] = str(args.png)
        log(f"wrote {args.png}")
    return result


def _interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt  # SIGTERM too: unwind, so that the local stack is stopped


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if (
        args.rate < 0
        or args.around <= 0
        or args.burst < 0
        or args.cron < 0
        or not 0 <= args.scanned_share <= 1
        or not 0 <= args.burst_scanned_share <= 1
        or args.threads < 1
        or args.align < 1
    ):
        parser.error("counts and rates must not be negative, --around positive, shares within 0..1")
    signal.signal(signal.SIGTERM, _interrupt)
    try:
        with ExitStack() as cleanup:
            result = run(args, cleanup)
    except KeyboardInterrupt:
        log("interrupted; the local stack was stopped")
        return 130
    emit(result)
    return 0
