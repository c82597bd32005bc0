"""All of Punctual on this machine in three processes: the handlers, and what AWS does between them.

    moto server (DynamoDB + SQS, on 127.0.0.1)   <- table and queues from resources.py; own process
    HTTP front end (API Gateway)                  -> API handler; own process (api_process.py says why)
    ticker (EventBridge rule)                     -> scanner handler, each minute or --tick-seconds
    delayed sends (SQS DelaySeconds)              -> held here until due, then sent to moto
    poller pools (SQS event source mappings)      -> worker, dead-letter and notifier handlers
    journal + snapshot (<data dir>)               <- every write to the table, before it is answered
    queue.journal (<data dir>)                    <- every work message sent, and deleted

The handlers are the Lambda handlers of functions/, called with the events AWS would send.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from punctual import wiring
from punctual.platform import resources, target_arns
from punctual.platform.clock import SystemClock
from punctual.platform.config import Settings
from punctual.platform.observability import logger
from punctual.platform.timefmt import to_epoch_ms
from punctual_local import banner, call_order, clients, collector, owners, provision, ticker
from punctual_local.api_process import Config as ApiConfig
from punctual_local.children import MotoChild, end_child
from punctual_local.clients import REGION, StackError
from punctual_local.esm import Handler
from punctual_local.holding import ComingCounts, HoldingSqs
from punctual_local.moto.gate import Gate, gate_client
from punctual_local.persistence import (
    DataDirError,
    DataDirLock,
    recover,
    release_claims,
    replay,
    withdraw_claims,
    work_items,
)
from punctual_local.pollers import PollerPool, load_handler
from punctual_local.queue_journal import JOURNAL_NAME, JournaledSqs, QueueJournal
from punctual_local.server import ApiServer

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
# How long the API's process may take to load and serve, and to stop.
API_START_SECONDS = 60.0
API_STOP_SECONDS = 3.0
STOP_GRACE_SECONDS = 3.0


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
        self._moto = MotoChild(options.moto_port, options.data_dir, reset=options.reset)
        self._pools: list[PollerPool] = []
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
        moto_url = self._moto.start()

        aws = clients.connect(moto_url)
        gate = Gate()
        gate_client(aws.dynamodb_client, gate)
        gate_client(aws.dynamodb.meta.client, gate)
        provisioned = provision.create_all(aws.dynamodb_client, aws.sqs)

        clock = SystemClock()
        restored = self._moto.restore(to_epoch_ms(clock.now()))

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
            tick_lateness_seconds=0,
            lookahead_seconds=lookahead_for(options.tick_seconds),
            webhook_allowed_networks=LOOPBACK_NETWORKS,
            lambda_functions=LOCAL_LAMBDA_FUNCTIONS,
            **targets,
            # Any topic or bus in its moto, for job notifications (the same patterns as the tasks').
            notification_targets=tuple(target.local for target in target_arns.NOTIFICATION_TARGETS),
            # A developer trying a change to a named task sees it at the next run.
            task_cache_seconds=LOCAL_TASK_CACHE_SECONDS,
            early_visibility_seconds=LOCAL_EARLY_VISIBILITY_SECONDS,
        )
        # Pollers for messages about to come due are started before they are due (pools set below).
        self._delays = HoldingSqs(aws.sqs, clock, on_coming=self._coming.reporter("stack"))
        journal = self._queue_journal()
        sqs = JournaledSqs(self._delays, journal, clock, [settings.queue_url])
        punctual = wiring.build(
            settings,
            clock=clock,
            dynamodb=aws.dynamodb,
            dynamodb_client=aws.dynamodb_client,
            sqs=sqs,
            lambda_clients=wiring.lambda_clients_for(settings, aws.session),
            aws_clients=wiring.aws_clients_for(settings, aws.session),
        )
        call_order.mark_calls(punctual.store)  # (call_order says why)
        wiring.set_default(punctual)
        work = work_items(restored["unfinished"])
        journaled = journal.exists
        # Every message sent and not deleted is held again: the queue as it was, less what ran.
        pending = journal.pending()
        queues = [settings.queue_url, settings.dlq_url, settings.notify_queue_url]
        requeued = replay(pending, self._delays, queues)
        if journaled or not work:
            release_claims(work, punctual.store)
        else:
            # A data directory from before the queue's journal, whose stack stored every execution
            # QUEUED before sending it: those not finished are sent again, once.
            requeued = recover(work, punctual.queue, punctual.clock.now(), punctual.store)
        self._delays.start()
        # Hand-offs the API claimed but had not enqueued when the stack stopped: their requests are
        # gone, so the first tick (below, at once) sends them instead of waiting for the claims to
        # run out. No request of this run has claimed any yet: the API serves once configured, below.
        withdraw_claims(
            punctual.store, range(settings.shard_count), punctual.clock.now() + punctual.dispatcher.soon
        )

        self._pools = [
            PollerPool(
                "worker",
                sqs,
                settings.queue_url,
                _containers(resources.FUNCTIONS["worker"]),
                self.stop_requested,
                minimum=min(2, options.concurrency),
                maximum=options.concurrency,
            ),
            PollerPool(
                "dead-letter",
                sqs,
                settings.dlq_url,
                _containers(resources.FUNCTIONS["dead_letter"]),
                self.stop_requested,
                minimum=1,
                maximum=1,
            ),
            PollerPool(
                "notifier",
                sqs,
                settings.notify_queue_url,
                _containers(resources.FUNCTIONS["notifier"]),
                self.stop_requested,
                minimum=1,
                maximum=2,
            ),
        ]
        for pool in self._pools:
            pool.start()
        self._thread("ticker", ticker.run, scanner, options.tick_seconds, self.stop_requested)
        self._serve_api(settings, moto_url)

        if restored["torn"]:
            logger.warning(
                "ignored the torn end of the journal (a crash mid-write; it was never acknowledged)",
                extra={"torn": restored["torn"]},
            )
        self.banner(moto_url, int(restored["items"]), requeued, provisioned.table_name)
        orphans = owners.owners_without_token(restored.get("active_owners", {}), self.options.tokens.values())
        note = owners.warning(orphans, self.options.tokens)
        if note is not None:
            print(note, file=sys.stderr if self.options.json_logs else sys.stdout, flush=True)

    def _queue_journal(self) -> QueueJournal:
        """The work queue's journal in the data directory (emptied by --reset, as the table is)."""
        path = self.options.data_dir / JOURNAL_NAME
        if self.options.reset:
            path.unlink(missing_ok=True)
        return QueueJournal(self.options.data_dir)

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
            data_dir=str(self.options.data_dir),
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
            end_child(api, API_STOP_SECONDS)

    def _thread(self, name: str, target: Callable[..., Any], *args: Any) -> None:
        thread = threading.Thread(target=target, args=args, name=name, daemon=True)
        thread.start()
        self._threads.append(thread)

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
        self._moto.stop()
        self._lock.release()

    # ----------------------------------------------------------------- banner
    def banner(self, moto_url: str, restored: int, requeued: int, table: str) -> None:
        options = self.options
        banner.show(
            port=options.port,
            tokens=options.tokens,
            data_dir=options.data_dir,
            tick_seconds=options.tick_seconds,
            json_logs=options.json_logs,
            api_url=self._api_url,
            moto_url=moto_url,
            ready=time.monotonic() - self._started,
            lookahead=lookahead_for(options.tick_seconds),
            restored=restored,
            requeued=requeued,
            table=table,
        )


def _containers(dotted_path: str) -> Callable[[], Handler]:
    """New containers of one function: the imported module first, then fresh copies of it."""
    first = threading.Lock()  # acquired (for good) by the first call only

    def new_container() -> Handler:
        return load_handler(dotted_path, fresh=not first.acquire(blocking=False))

    return new_container
