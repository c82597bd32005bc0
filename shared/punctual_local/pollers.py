"""Lambda's SQS event source mapping and its scaling, for the local stack.

As on AWS, pollers and function instances are apart: a few poller threads receive from the queue,
and each batch they receive runs in a warm "container" of its own, up to `maximum` at once. A
container is its own copy of the handler module (Powertools' batch processor keeps per-invocation
state at module level, as Lambda allows since a container runs one invocation at a time); a new one
is loaded when every warm one is busy. A poller receives only while a container is free to take
what it receives, so a busy function leaves messages on the queue rather than in memory.

Few pollers, not one per container: every long poll that waits in moto is woken by each message sent
and scans the queue again, so sixty-four waiting pollers made moto's SQS most of its work.
`prepare` loads containers ahead of messages about to come due (HoldingSqs knows them), since a
fresh module load is slow next to an execution.
"""

from __future__ import annotations

import importlib
import importlib.util
import itertools
import threading
import time
from collections.abc import Callable
from typing import Any

from punctual.platform import aws_limits as sizing
from punctual.platform.observability import logger
from punctual_local.esm import EventSourceMapping, Handler

POLLERS = 2
_copies = itertools.count(1)
_copies_lock = threading.Lock()


def load_handler(dotted_path: str, *, fresh: bool) -> Handler:
    """`package.module.function`; with fresh, from a new copy of the module (a new container)."""
    module_name, _, function_name = dotted_path.rpartition(".")
    if not fresh:
        return getattr(importlib.import_module(module_name), function_name)
    spec = importlib.util.find_spec(module_name)
    if spec is None or spec.origin is None:
        raise ImportError(f"cannot find {module_name}")
    with _copies_lock:
        copy = next(_copies)
    clone = importlib.util.spec_from_file_location(f"{module_name}__container{copy}", spec.origin)
    assert clone is not None and clone.loader is not None
    module = importlib.util.module_from_spec(clone)
    clone.loader.exec_module(module)
    return getattr(module, function_name)


class PollerPool:
    def __init__(
        self,
        name: str,
        sqs: Any,
        queue_url: str,
        new_container: Callable[[], Handler],
        stop: threading.Event,
        *,
        minimum: int,
        maximum: int,
        wait_seconds: int = 1,
        batch_size: int | None = None,
        pollers: int = POLLERS,
    ) -> None:
        self.name = name
        self._sqs = sqs
        self.queue_url = queue_url
        self._new_container = new_container
        self._stop = stop
        self._minimum = max(1, minimum)
        self._maximum = max(self._minimum, maximum)
        self._wait_seconds = wait_seconds
        # Ten messages a container, the worker's too (AWS's worker takes one pack an invocation): here
        # messages come early (LOCAL_EARLY_VISIBILITY_SECONDS) and a container waits out the rest of
        # each, so one message a container held a container per lone execution for seconds, and at
        # twenty a second the pool ran out and every execution queued behind.
        self._batch_size = batch_size or sizing.SQS_BATCH
        self._pollers = max(1, min(pollers, self._maximum))
        self._lock = threading.Lock()
        self._free = threading.Semaphore(self._maximum)  # a container's worth of room per batch
        self._warm: list[Handler] = []  # loaded containers not running a batch
        self._loaded = 0  # containers loaded or being loaded
        self._threads: list[threading.Thread] = []  # pollers and running batches
        self._numbers = itertools.count(1)
        self._mapping: EventSourceMapping | None = None

    def start(self) -> None:
        self._mapping = EventSourceMapping(
            self._sqs, self.queue_url, self._unassigned, batch_size=self._batch_size
        )
        with self._lock:
            reserved = self._reserve(self._minimum)
        self._load(reserved)
        for _ in range(self._pollers):
            self._thread(self._poll, "poller")

    def join(self, deadline: float) -> int:
        """Wait for pollers and batches to end (until the monotonic deadline); returns how many run."""
        with self._lock:
            threads = list(self._threads)
        for thread in threads:
            thread.join(max(0.0, deadline - time.monotonic()))
        return sum(thread.is_alive() for thread in threads)

    def prepare(self, messages: int) -> None:
        """Load containers ahead of `messages` about to arrive (held delayed messages coming due):
        as many as their batches need beyond those warm, up to the limit."""
        with self._lock:
            wanted = min(-(-messages // self._batch_size), self._maximum) - len(self._warm)
            reserved = self._reserve(wanted)
        if reserved > 0:
            self._thread(lambda: self._load(reserved), "loader")

    @property
    def size(self) -> int:
        """Containers loaded."""
        with self._lock:
            return self._loaded

    def _thread(self, target: Callable[[], None], role: str) -> None:
        def run() -> None:
            try:
                target()
            finally:
                with self._lock:
                    self._threads.remove(threading.current_thread())

        with self._lock:
            if self._stop.is_set():
                return
            thread = threading.Thread(
                target=run, name=f"{self.name}-{role}-{next(self._numbers)}", daemon=True
            )
            self._threads.append(thread)
        thread.start()

    def _reserve(self, count: int) -> int:
        """Count up to `count` containers as loading, within the limit (the lock held)."""
        count = max(0, min(count, self._maximum - self._loaded))
        self._loaded += count
        return count

    def _load(self, count: int) -> None:
        """Load `count` reserved containers into the warm ones."""
        for _ in range(count):
            handler = self._loaded_container()
            if handler is None:
                return
            with self._lock:
                self._warm.append(handler)

    def _loaded_container(self) -> Handler | None:
        """A new container, for one already reserved; None (and the reservation given back) if it
        cannot load."""
        try:
            return self._new_container()
        except Exception:
            logger.exception("container could not load", extra={"function": self.name})
            with self._lock:
                self._loaded -= 1
            return None

    def _poll(self) -> None:
        assert self._mapping is not None
        while not self._stop.is_set():
            if not self._free.acquire(timeout=0.5):
                continue  # every container busy: the messages wait on the queue
            try:
                messages = self._mapping.receive(self._wait_seconds)
            except Exception as exc:
                self._free.release()
                if self._stop.is_set():
                    break
                logger.warning("poll failed; retrying", extra={"poller": self.name, "error": str(exc)})
                self._stop.wait(1.0)
                continue
            if not messages:
                self._free.release()
                continue
            self._thread(lambda batch=messages: self._run_batch(batch), "batch")  # type: ignore[misc]

    def _run_batch(self, messages: list[dict[str, Any]]) -> None:
        assert self._mapping is not None
        try:
            handler = self._container()
            if handler is None:
                return  # not delivered: the messages come back after their visibility timeout
            try:
                self._mapping.deliver(messages, handler)
            finally:
                with self._lock:
                    self._warm.append(handler)
        finally:
            self._free.release()

    def _container(self) -> Handler | None:
        with self._lock:
            if self._warm:
                return self._warm.pop()
            self._loaded += 1  # beyond the limit only while a prepared load is still under way
        return self._loaded_container()

    @staticmethod
    def _unassigned(event: dict[str, Any], context: Any) -> Any:
        raise AssertionError("batches are delivered to a container")
