"""All of Punctual on this machine in three processes: the handlers, and what AWS does between them.

    moto server (DynamoDB + SQS, on 127.0.0.1)   <- table and queues from resources.py; own process
    HTTP front end (API Gateway)                  -> API handler; own process (api_process.py says why)
    ticker (EventBridge rule)                     -> scanner handler, each minute or --tick-seconds
    delayed sends (SQS DelaySeconds)              -> held here until due, then sent to moto
    poller pools (SQS event source mappings)      -> worker, dead-letter and notifier handlers
    journal + snapshot (<data dir>)               <- every write to the table, before it is answered

The handlers are the Lambda handlers of functions/, called with the events AWS would send.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any

from botocore.exceptions import BotoCoreError, ClientError

from punctual import wiring
from punctual.execution import call_class
from punctual.platform import randomness, resources, target_arns
from punctual.platform.clock import SystemClock
from punctual.platform.config import Settings
from punctual.platform.observability import logger
from punctual.platform.timefmt import to_epoch_ms
from punctual_local import clients, collector, owners, provision
from punctual_local.api_process import Config as ApiConfig
from punctual_local.clients import REGION, StackError
from punctual_local.esm import Handler
from punctual_local.holding import ComingCounts, HoldingSqs
from punctual_local.lambda_events import FakeLambdaContext
from punctual_local.moto.gate import Gate, gate_client
from punctual_local.persistence import DataDirError, DataDirLock, recover, withdraw_claims, work_items
from punctual_local.pollers import PollerPool, load_handler
from punctual_local.server import ApiServer

ACCOUNT = "000000000000"
HOST = "127.0.0.1"
# Fewer shards than on AWS: the scanner queries every shard of every due minute on each tick, and
# moto scans the whole table per query. Markers keep their shard, so this must not change between runs.
LOCAL_SHARD_COUNT = 4
# The webhooks a developer points at locally run on this machine.
LOOPBACK_NETWORKS = ("127.0.0.0/8", "::1/128")
# Any function created in moto (whose account is always this one), for the `lambda` task.
LOCAL_LAMBDA_FUNCTIONS = ("arn:aws:lambda:*:123456789012:function:*",)
# Messages become visible this early and the worker waits out the rest: a head start for receiving,
# reading and claiming an execution before its instant, which many may share. moto answers a few
# hundred writes a second and a burst's executions share it with the API's creations, so a burst of a
# thousand needs most of this lead for its claims. (Delayed messages are held by HoldingSqs and sent
# to moto when due, which wakes a waiting long poll; moto's own delays would not.)
LOCAL_EARLY_VISIBILITY_SECONDS = 15
LOCAL_TASK_CACHE_SECONDS = 2.0
# Threads of the stack writing outcomes at once (call_class.bookkeeping). Their writes wait behind the
# others in the gate anyway; what this bounds is their CPU in the one interpreter: a burst's outcomes,
# written together once its starts are made, would hold it while steady executions due then wait to
# start.
BOOKKEEPING_LANES = 6
# How long the API's process may take to load and serve, and to stop.
API_START_SECONDS = 60.0
API_STOP_SECONDS = 3.0
STOP_GRACE_SECONDS = 3.0
MOTO_STOP_SECONDS = 5.0


@dataclass
class Options:
    port: int = 8765
    data_dir: Path = Path(".punctual")
    tick_seconds: int = 60
    moto_port: int = 0
    concurrency: int = 400
    tokens: dict[str, str] = field(default_factory=lambda: {"local": "local"})
    reset: bool = False
    json_logs: bool = False
    verbose: bool = False


def next_tick_in(now: float, period: float) -> float:
    """Seconds from `now` (epoch seconds) to the next tick: ticks fall halfway between multiples of
    the period, not on them. Round instants (each minute's :00) are where bursts are, and a tick
    enqueues the coming minutes' scanned work: on :00 that work shared the burst's own instant (one
    run, 60 s tick, burst of 1,000: max 1,374 -> 743 ms, steady p99 474 -> 166 ms). The lookahead
    reaches past the next tick wherever it falls."""
    return period - (now - period / 2) % period


def lookahead_for(tick_seconds: int) -> int:
    """How far ahead a tick enqueues: past the next tick, with room for SQS's whole-second delays."""
    if tick_seconds >= 60:
        return Settings.model_fields["lookahead_seconds"].default
    return max(5, 2 * tick_seconds)


class LocalStack:
    def __init__(self, options: Options) -> None:
        self.options = options
        self.stop_requested = threading.Event()
        self.lingering = 0  # handler invocations still running when the stack stopped
        self.failure: str | None = None  # why the stack stopped by itself, if it did
        self._stopped = False
        self._threads: list[threading.Thread] = []
        self._lock = DataDirLock(options.data_dir)
        self._api: subprocess.Popen[str] | None = None
        self._api_url = ""
        self._api_ready = threading.Event()
        self._api_error: str | None = None
        self._moto: subprocess.Popen[str] | None = None
        self._pools: list[PollerPool] = []
        self._moto_url = ""
        self._delays: HoldingSqs | None = None
        self._coming = ComingCounts(self._prepare_pool)
        self._started = time.monotonic()

    # ------------------------------------------------------------------ start
    def start(self) -> None:
        try:
            self._start()
        except BaseException:
            self.stop()
            raise

    def _start(self) -> None:
        options = self.options
        try:
            options.data_dir.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise DataDirError(f"cannot use the data directory {options.data_dir}: {exc}") from exc
        self._lock.acquire()
        clients.add_source_root()
        collector.freeze_after_full_passes()
        scanner = load_handler(resources.FUNCTIONS["scanner"], fresh=False)
        # Bound before anything starts: a port in use is the likeliest reason not to start. Its
        # process loads the API while moto starts.
        self._launch_api(self._bind_api())
        moto_url = self._start_moto()

        aws = clients.connect(moto_url)
        gate = Gate()
        call_class.limit_bookkeeping(BOOKKEEPING_LANES)
        gate_client(aws.dynamodb_client, gate)
        gate_client(aws.dynamodb.meta.client, gate)
        provisioned = provision.create_all(aws.dynamodb_client, aws.sqs)

        clock = SystemClock()
        restored = self._restore(to_epoch_ms(clock.now()))

        # Anything created in its moto, for the sqs, sns, eventbridge and stepfunctions tasks.
        targets: dict[str, Any] = {target.setting: (target.local,) for target in target_arns.TARGETS}
        settings = Settings(
            table_name=provisioned.table_name,
            queue_url=provisioned.queue_url,
            dlq_url=provisioned.dlq_url,
            notify_queue_url=provisioned.notify_queue_url,
            endpoint_url=moto_url,
            region=REGION,
            shard_count=LOCAL_SHARD_COUNT,
            tick_seconds=options.tick_seconds,
            lookahead_seconds=lookahead_for(options.tick_seconds),
            webhook_allowed_networks=LOOPBACK_NETWORKS,
            lambda_functions=LOCAL_LAMBDA_FUNCTIONS,
            **targets,
            # Any topic or bus in its moto, for job notifications (the same patterns as the tasks').
            notification_targets=tuple(target.local for target in target_arns.NOTIFICATION_TARGETS),
            # A developer trying a change to a named task sees it at the next run.
            task_cache_seconds=LOCAL_TASK_CACHE_SECONDS,
            early_visibility_seconds=LOCAL_EARLY_VISIBILITY_SECONDS,
            # Its queue is in memory: recovery after a restart re-sends the executions stored QUEUED.
            record_queued=True,
        )
        # Pollers for messages about to come due are started before they are due (pools set below).
        self._delays = HoldingSqs(aws.sqs, clock, on_coming=self._coming.reporter("stack"))
        self._delays.start()
        punctual = wiring.build(
            settings,
            clock=clock,
            dynamodb=aws.dynamodb,
            dynamodb_client=aws.dynamodb_client,
            sqs=self._delays,
            lambda_clients=wiring.lambda_clients_for(settings, aws.session),
            aws_clients=wiring.aws_clients_for(settings, aws.session),
        )
        wiring.set_default(punctual)
        work = work_items(restored["unfinished"])
        requeued = recover(work, punctual.queue, punctual.clock.now(), punctual.store) if work else 0
        # Hand-offs the API claimed but had not enqueued when the stack stopped: their requests are
        # gone, so the first tick (below, at once) sends them instead of waiting for the claims to
        # run out. No request of this run has claimed any yet: the API serves once configured, below.
        withdraw_claims(
            punctual.store, range(settings.shard_count), punctual.clock.now() + punctual.dispatcher.soon
        )

        self._pools = [
            PollerPool(
                "worker",
                aws.sqs,
                settings.queue_url,
                _containers(resources.FUNCTIONS["worker"]),
                self.stop_requested,
                minimum=min(2, options.concurrency),
                maximum=options.concurrency,
            ),
            PollerPool(
                "dead-letter",
                aws.sqs,
                settings.dlq_url,
                _containers(resources.FUNCTIONS["dead_letter"]),
                self.stop_requested,
                minimum=1,
                maximum=1,
            ),
            PollerPool(
                "notifier",
                aws.sqs,
                settings.notify_queue_url,
                _containers(resources.FUNCTIONS["notifier"]),
                self.stop_requested,
                minimum=1,
                maximum=2,
            ),
        ]
        for pool in self._pools:
            pool.start()
        self._thread("ticker", self._tick_loop, scanner)
        self._serve_api(settings, moto_url)

        if restored["torn"]:
            logger.warning(
                "ignored the torn end of the journal (a crash mid-write; it was never acknowledged)",
                extra={"torn": restored["torn"]},
            )
        self.banner(moto_url, int(restored["items"]), requeued, provisioned.table_name)
        # (after the banner: one pass over the table, which a large data directory makes long)
        self._thread("owners", self._name_owners_without_token, aws.dynamodb_client, provisioned.table_name)

    def _name_owners_without_token(self, dynamodb_client: Any, table: str) -> None:
        try:
            orphans = owners.owners_without_token(dynamodb_client, table, self.options.tokens.values())
        except (BotoCoreError, ClientError):
            return  # stopping, or moto gone: nothing to say
        note = owners.warning(orphans, self.options.tokens)
        if note is not None:
            print(note, file=sys.stderr if self.options.json_logs else sys.stdout, flush=True)

    def _prepare_pool(self, queue_url: str, messages: int) -> None:
        for pool in self._pools:
            if pool.queue_url == queue_url:
                pool.prepare(messages)

    # -------------------------------------------------------------------- api
    def _bind_api(self) -> socket.socket:
        try:
            return socket.create_server((HOST, self.options.port), backlog=ApiServer.request_queue_size)
        except OSError as exc:
            raise StackError(
                f"cannot listen on {HOST}:{self.options.port}: {exc.strerror or exc}. Is another "
                "`punctual local` running? Pick another port with --port or PUNCTUAL_PORT."
            ) from exc

    def _launch_api(self, listening: socket.socket) -> None:
        """Start the API's process on the bound socket (api_process.py): it loads meanwhile."""
        with listening:
            host, port = listening.getsockname()[:2]
            self._api_url = f"http://{host}:{port}"
            ours, theirs = os.pipe()  # it writes its notices, the stack reads them
            command = [sys.executable, "-m", "punctual_local.api_process"]
            command += ["--socket-fd", str(listening.fileno()), "--notices-fd", str(theirs)]
            command += ["--json-logs"] * self.options.json_logs + ["--verbose"] * self.options.verbose
            try:
                self._api = subprocess.Popen(
                    command, stdin=subprocess.PIPE, text=True, pass_fds=(listening.fileno(), theirs)
                )
            finally:
                os.close(theirs)
        notices = os.fdopen(ours, encoding="utf-8")
        self._thread("api-notices", self._follow_api, notices)

    def _serve_api(self, settings: Settings, moto_url: str) -> None:
        """Give the API's process its configuration; returns once it serves."""
        api = self._api
        assert api is not None and api.stdin is not None
        config = ApiConfig(
            settings=settings.model_dump(mode="json"),
            tokens=self.options.tokens,
            moto_url=moto_url,
            access_log=self.options.verbose,
        )
        try:
            api.stdin.write(config.line())
            api.stdin.flush()
        except OSError:
            pass  # it has stopped: its notices say why
        if not self._api_ready.wait(API_START_SECONDS):
            raise StackError(f"the API did not start within {API_START_SECONDS:.0f} s")
        if self._api_error is not None:
            raise StackError(f"the API could not start: {self._api_error}")

    def _follow_api(self, notices: IO[str]) -> None:
        """Read the API process's notices until it stops; it stopping unbidden stops the stack."""
        with notices:
            for line in notices:
                word, _, rest = line.strip().partition(" ")
                if word == "ready":
                    self._api_ready.set()
                elif word == "error":
                    self._api_error = rest
                elif word == "coming":
                    count, _, queue_url = rest.partition(" ")
                    self._coming.report("api", queue_url, int(count))
        if self._api_error is None and not self._api_ready.is_set():
            self._api_error = "its process stopped"
        self._api_ready.set()
        if not self.stop_requested.is_set() and self._api_error is None:
            self.failure = "the API's process stopped unexpectedly; the stack stopped too"
            self.stop_requested.set()

    def _stop_api(self) -> None:
        api, self._api = self._api, None
        if api is not None:
            _end(api, API_STOP_SECONDS)

    def _start_moto(self) -> str:
        """moto's server in a process of its own (moto_process.py says why); returns its URL."""
        command = [sys.executable, "-m", "punctual_local.moto.process", "--port", str(self.options.moto_port)]
        command += ["--data-dir", str(self.options.data_dir)] + (["--reset"] if self.options.reset else [])
        self._moto = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        assert self._moto.stdout is not None
        word, _, value = self._moto.stdout.readline().strip().partition(" ")
        if word != "port":
            self._moto.wait(MOTO_STOP_SECONDS)
            if word == "data-error":
                raise DataDirError(value)
            raise StackError(
                f"cannot listen on {HOST}:{self.options.moto_port} for moto: {value or 'it did not start'}"
            )
        self._moto_url = f"http://{HOST}:{value}"
        return self._moto_url

    def _restore(self, now_ms: int) -> dict[str, Any]:
        """moto's process reads the data directory into the tables just created; what it found."""
        moto = self._moto
        assert moto is not None and moto.stdin is not None and moto.stdout is not None
        moto.stdin.write(f"restore {now_ms}\n")
        moto.stdin.flush()
        word, _, value = moto.stdout.readline().strip().partition(" ")
        if word != "restored":
            raise DataDirError(value or "moto's process stopped while reading the data directory")
        return dict(json.loads(value))

    def _stop_moto(self) -> None:
        moto, self._moto = self._moto, None
        if moto is not None:
            _end(moto, MOTO_STOP_SECONDS)
            assert moto.stdout is not None
            moto.stdout.close()

    def _thread(self, name: str, target: Callable[..., Any], *args: Any) -> None:
        thread = threading.Thread(target=target, args=args, name=name, daemon=True)
        thread.start()
        self._threads.append(thread)

    # ------------------------------------------------------------------ ticks
    def _tick_loop(self, scanner: Handler) -> None:
        # A tick at once catches up with whatever came due while the stack was stopped.
        self._tick(scanner)
        period = self.options.tick_seconds
        while not self.stop_requested.wait(next_tick_in(time.time(), period)):
            self._tick(scanner)

    def _tick(self, scanner: Handler) -> None:
        now = datetime.now(UTC)
        event = {  # what the EventBridge rule sends
            "version": "0",
            "id": str(randomness.uuid4()),
            "detail-type": "Scheduled Event",
            "source": "aws.events",
            "account": ACCOUNT,
            "time": now.strftime("%Y-%m-%dT%H:%M:%SZ"),
            "region": REGION,
            "resources": [f"arn:aws:events:{REGION}:{ACCOUNT}:rule/punctual-local-tick"],
            "detail": {},
        }
        try:
            scanner(event, FakeLambdaContext(function_name="punctual-scanner"))
        except Exception:
            if not self.stop_requested.is_set():
                logger.exception("scanner tick failed; the next tick covers the same minutes")

    # ------------------------------------------------------------------- stop
    def wait(self) -> None:
        while not self.stop_requested.wait(0.5):
            pass

    def stop(self) -> None:
        """Stop taking requests and messages, let running handlers finish briefly, stop moto.
        Once: a Ctrl-C during the start stops it there, and the caller may not know it did."""
        if self._stopped:
            return
        self._stopped = True
        self.stop_requested.set()
        deadline = time.monotonic() + STOP_GRACE_SECONDS
        self._stop_api()
        self.lingering = sum(pool.join(deadline) for pool in self._pools)
        if self._delays is not None:
            self._delays.stop()
        for thread in self._threads:
            if thread.name == "ticker":
                thread.join(max(0.0, deadline - time.monotonic()))
        # Every write was on disk before it was answered: moto only writes out what is in flight.
        self._stop_moto()
        self._lock.release()

    # ----------------------------------------------------------------- banner
    def banner(self, moto_url: str, restored: int, requeued: int, table: str) -> None:
        options = self.options
        api_url = self._api_url
        token, owner = next(iter(options.tokens.items()))
        ready = time.monotonic() - self._started
        tick = "every minute" if options.tick_seconds >= 60 else f"every {options.tick_seconds} s"
        data = f"{options.data_dir.resolve()}"
        if restored:
            data += f"  ({restored} items restored, {requeued} unfinished executions re-queued)"
        env = ""
        if options.port != 8765:
            env += f"PUNCTUAL_PORT={options.port} "
        if token != "local":
            env += f"PUNCTUAL_TOKEN={token} "
        others = (
            f"  (+{len(options.tokens) - 1} more from PUNCTUAL_LOCAL_TOKENS)"
            if len(options.tokens) > 1
            else ""
        )
        lines = [
            f"Punctual local stack ready in {ready:.1f} s",
            f"  API      {api_url}",
            f"  token    {token}  (owner {owner}){others}",
            f"  AWS      {moto_url}  (moto, on a new port at each start: any credentials, region {REGION})",
            f"           AWS_ACCESS_KEY_ID=test AWS_SECRET_ACCESS_KEY=test aws --endpoint-url {moto_url} "
            f"--region {REGION} dynamodb scan --table-name {table}",
            f"  data     {data}",
            f"  scanner  {tick}, lookahead {lookahead_for(options.tick_seconds)} s",
            "Try:",
            f"  curl -s -H 'Authorization: Bearer {token}' -H 'Content-Type: application/json' "
            f'-d \'{{"task": {{"type": "noop"}}, "schedule": {{"type": "now"}}}}\' {api_url}/jobs',
            f"  {env}{_cli()} jobs create --in 10s --task noop",
            f"  {env}{_cli()} watch <job id>",
            f"  {env}{_cli()} console        (a web page of your jobs and runs)",
            "Ctrl-C stops (jobs and history are kept in the data directory).",
        ]
        stream = sys.stderr if options.json_logs else sys.stdout
        print("\n".join(lines), file=stream, flush=True)
        if options.json_logs:
            logger.info(
                "local stack ready",
                extra={
                    "api_url": api_url,
                    "moto_url": moto_url,
                    "data_dir": data,
                    "ready_s": round(ready, 2),
                },
            )


def _cli() -> str:
    """How to call the CLI from here: `punctual` when it is on PATH, else its path (.venv/bin/...)."""
    if shutil.which("punctual"):
        return "punctual"
    script = Path(sys.executable).parent / "punctual"
    if not script.exists():
        return "punctual"
    try:
        return str(script.relative_to(Path.cwd()))
    except ValueError:
        return str(script)


def _end(child: subprocess.Popen[str], seconds: float) -> None:
    """Close a child's standard input, its signal to stop; kill it if it has not within `seconds`."""
    assert child.stdin is not None
    try:
        child.stdin.close()
    except OSError:
        pass  # it has gone already
    try:
        child.wait(seconds)
    except subprocess.TimeoutExpired:
        child.kill()
        child.wait()


def _containers(dotted_path: str) -> Callable[[], Handler]:
    """New containers of one function: the imported module first, then fresh copies of it."""
    first = threading.Lock()  # acquired (for good) by the first call only

    def new_container() -> Handler:
        return load_handler(dotted_path, fresh=not first.acquire(blocking=False))

    return new_container
