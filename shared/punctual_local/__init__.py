"""`punctual local`: all of Punctual on this machine, through the same handlers that run on Lambda.

The CLI hands `punctual local [args]` to main(). Imports of moto, boto3 and the handlers wait until
the environment is set, since Powertools reads it when the handlers' modules are imported.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
import time
from pathlib import Path
from types import FrameType
from typing import NoReturn

DEFAULT_PORT = 8765
DEFAULT_DATA_DIR = ".punctual"
# Ctrl-C ends the process within this long whatever is still running: every change the stack
# acknowledged is already on disk, so nothing needs more time than that.
STOP_LIMIT_SECONDS = 8.0

DESCRIPTION = """\
Run all of Punctual on this machine: moto's DynamoDB and SQS, the HTTP API on 127.0.0.1, the
scanner at every minute boundary (as the EventBridge rule runs it), and pollers feeding the work,
dead-letter and notification queues to their handlers (as Lambda's event source mappings do).
Jobs and execution history are kept in the data directory; executions that were queued when the
stack stopped run after it starts again, late.

Authentication: Authorization: Bearer <token>. Tokens come from PUNCTUAL_LOCAL_TOKENS
(token=owner,token2=owner2); when it is unset the single token `local` maps to owner `local`.
Webhooks (`http` tasks and notifications) may call loopback addresses: try one with
`punctual receive`. Notifications may also go to any SNS topic or EventBridge bus created in the
stack's moto. Metrics are not published locally, nor execution events (a bus of the deployed stack).
"""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="punctual local",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--port",
        type=_port,
        default=None,
        help=f"API port on 127.0.0.1 (env PUNCTUAL_PORT, default {DEFAULT_PORT})",
    )
    parser.add_argument(
        "--data-dir",
        type=Path,
        default=None,
        metavar="DIR",
        help=f"where jobs and history are kept (env PUNCTUAL_DATA_DIR, default {DEFAULT_DATA_DIR}/)",
    )
    parser.add_argument(
        "--reset", action="store_true", help="start empty: forget the jobs and history in the data dir"
    )
    parser.add_argument(
        "--tick-seconds",
        type=_tick,
        default=60,
        metavar="N",
        help="run the scanner every N seconds (1-60) instead of each minute, with a lookahead of 2N "
        "seconds (at least 5) instead of 90: fewer delayed messages wait in moto's SQS, which slows "
        "down as a queue grows. Executions due within the hand-off window are queued by the API "
        "itself and do not wait for a tick either way.",
    )
    parser.add_argument(
        "--concurrency",
        type=_positive_int,
        default=400,
        metavar="N",
        help="most worker invocations (batches of up to 10 messages) at once: pollers are added while "
        "all are busy, and ahead of messages about to come due, up to N (default 400: a batch waits in "
        "its invocation for its instant, from up to 15 s before it, and receives come in batches of "
        "fewer than 10, so a burst of 1,000 with steady load around it holds a couple of hundred)",
    )
    parser.add_argument(
        "--moto-port", type=_port, default=0, metavar="PORT", help="moto's port (default: a free one)"
    )
    parser.add_argument("--json", action="store_true", help="structured JSON logs (Powertools' format)")
    parser.add_argument(
        "-v", "--verbose", action="store_true", help="debug logs, every request and every scanner tick"
    )
    return parser


def main(args: list[str]) -> int:
    parser = build_parser()
    try:
        parsed = parser.parse_args(args)
    except SystemExit as exc:  # --help and usage errors
        return exc.code if isinstance(exc.code, int) else 2
    try:
        port = parsed.port if parsed.port is not None else _port(os.environ.get("PUNCTUAL_PORT") or "8765")
    except argparse.ArgumentTypeError as exc:
        print(f"punctual local: error: PUNCTUAL_PORT: {exc}", file=sys.stderr)
        return 2
    data_dir = parsed.data_dir or Path(os.environ.get("PUNCTUAL_DATA_DIR") or DEFAULT_DATA_DIR)

    _prepare_environment()
    from punctual_local import logs

    logs.configure(json_logs=parsed.json, verbose=parsed.verbose)
    from punctual_local.clients import StackError
    from punctual_local.persistence import DataDirError
    from punctual_local.server import parse_tokens
    from punctual_local.stack import LocalStack, Options

    try:
        tokens = parse_tokens(os.environ.get("PUNCTUAL_LOCAL_TOKENS"))
    except ValueError as exc:
        print(f"punctual local: error: {exc}", file=sys.stderr)
        return 2
    stack = LocalStack(
        Options(
            port=port,
            data_dir=data_dir,
            tick_seconds=parsed.tick_seconds,
            moto_port=parsed.moto_port,
            concurrency=parsed.concurrency,
            tokens=tokens,
            reset=parsed.reset,
            json_logs=parsed.json,
            verbose=parsed.verbose,
        )
    )

    starting = True

    def request_stop(signum: int, frame: FrameType | None) -> None:
        if stack.stop_requested.is_set():
            os._exit(130)  # a second Ctrl-C: leave at once
        print("\nstopping... (Ctrl-C again to quit at once)", file=sys.stderr, flush=True)
        stack.stop_requested.set()
        if starting:
            raise KeyboardInterrupt  # reading back a large data directory takes a while: stop it

    # Started before anything else so that it bounds every way out, a stop during the start too;
    # a thread started from the handler could find the main thread inside Thread.start's lock.
    threading.Thread(target=_watchdog, args=(stack.stop_requested,), name="watchdog", daemon=True).start()
    signal.signal(signal.SIGINT, request_stop)
    signal.signal(signal.SIGTERM, request_stop)
    try:
        try:
            stack.start()
        finally:
            starting = False
        stack.wait()
    except (StackError, DataDirError) as exc:
        print(f"punctual local: error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        # Ctrl-C during the start (which stopped what it had started) or just after it returned.
        stack.stop()
        _leave(130)
    stack.stop()
    if stack.failure is not None:
        print(f"punctual local: error: {stack.failure}", file=sys.stderr, flush=True)
        _leave(1)
    _leave(0)


def _leave(code: int) -> NoReturn:
    """Exit without waiting for the tasks still running in handler threads (and their executors),
    which would hold a normal exit until they end; their executions stay RUNNING on disk and run
    again on the next start."""
    print("stopped", file=sys.stderr, flush=True)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def _watchdog(stop_requested: threading.Event) -> None:
    stop_requested.wait()
    time.sleep(STOP_LIMIT_SECONDS)
    _stop_now()


def _stop_now() -> None:
    print(
        f"punctual local: still stopping after {STOP_LIMIT_SECONDS:.0f} s; leaving now (every "
        "acknowledged change is on disk)",
        file=sys.stderr,
        flush=True,
    )
    os._exit(0)


def _prepare_environment() -> None:
    """What Lambda's environment provides, set before Powertools and boto3 read it."""
    defaults = {
        "POWERTOOLS_SERVICE_NAME": "punctual",
        "POWERTOOLS_TRACE_DISABLED": "true",  # no X-Ray daemon here
        "AWS_DEFAULT_REGION": "us-east-1",
    }
    for name, value in defaults.items():
        os.environ.setdefault(name, value)


def _port(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a port number: {text!r}") from None
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"not a port number: {text!r}")
    return value


def _tick(text: str) -> int:
    value = _positive_int(text)
    if value > 60:
        raise argparse.ArgumentTypeError("at most 60 (the default: each minute)")
    return value


def _positive_int(text: str) -> int:
    # The CLI has its own; importing it here would make the CLI and the local stack import each other.
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1: {text!r}")
    return value
