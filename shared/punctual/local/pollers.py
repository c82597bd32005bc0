"""Lambda's SQS event source mapping and its scaling, for the local stack.

Each poller thread is one warm "container": it loads its own copy of the handler module (Powertools'
batch processor keeps per-invocation state at module level, as Lambda allows since a container runs
one invocation at a time) and calls `EventSourceMapping.poll_once` in a loop. While every poller is
busy in its handler, another one starts, up to a limit, as Lambda scales out on a busy queue; extra
pollers stop again after a while without messages.
"""

from __future__ import annotations

import importlib
import importlib.util
import itertools
import threading
import time
from collections.abc import Callable
from typing import Any

from punctual.esm import EventSourceMapping, Handler
from punctual.observability import logger

IDLE_SECONDS_BEFORE_RETIRING = 30.0
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
        batch_size: int = 10,
    ) -> None:
        self.name = name
        self._sqs = sqs
        self.queue_url = queue_url
        self._new_container = new_container
        self._stop = stop
        self._minimum = max(1, minimum)
        self._maximum = max(self._minimum, maximum)
        self._wait_seconds = wait_seconds
        self._batch_size = batch_size
        self._lock = threading.Lock()
        self._warm: list[Handler] = []  # containers of retired pollers, reused by new ones
        self._threads: list[threading.Thread] = []
        self._busy = 0
        self._numbers = itertools.count(1)

    def start(self) -> None:
        for _ in range(self._minimum):
            self._spawn()

    def join(self, deadline: float) -> int:
        """Wait for the pollers to stop (until the monotonic deadline); returns how many still run."""
        with self._lock:
            threads = list(self._threads)
        for thread in threads:
            thread.join(max(0.0, deadline - time.monotonic()))
        return sum(thread.is_alive() for thread in threads)

    def prepare(self, messages: int) -> None:
        """Start pollers ahead of `messages` about to arrive (held delayed messages coming due), as
        many as their batches need beyond those idle, up to the limit: a new poller loads a fresh
        copy of its handler, which should be done before the messages are due, not as they are."""
        with self._lock:
            idle = len(self._threads) - self._busy
            wanted = -(-messages // self._batch_size) - idle
        for _ in range(min(wanted, self._maximum)):
            self._spawn()

    @property
    def size(self) -> int:
        with self._lock:
            return len(self._threads)

    def _spawn(self) -> None:
        with self._lock:
            if len(self._threads) >= self._maximum or self._stop.is_set():
                return
            thread = threading.Thread(
                target=self._run, name=f"{self.name}-{next(self._numbers)}", daemon=True
            )
            self._threads.append(thread)
        thread.start()

    def _run(self) -> None:
        try:
            with self._lock:
                handler = self._warm.pop() if self._warm else None
            if handler is None:
                handler = self._new_container()
            mapping = EventSourceMapping(
                self._sqs, self.queue_url, self._invoker(handler), batch_size=self._batch_size
            )
        except Exception:
            logger.exception("poller could not start", extra={"poller": self.name})
            self._retire(None)
            return
        idle_since = time.monotonic()
        while not self._stop.is_set():
            try:
                received = mapping.poll_once(wait_seconds=self._wait_seconds)
            except Exception as exc:
                if self._stop.is_set():
                    break
                logger.warning("poll failed; retrying", extra={"poller": self.name, "error": str(exc)})
                self._stop.wait(1.0)
                continue
            if received:
                idle_since = time.monotonic()
            elif time.monotonic() - idle_since > IDLE_SECONDS_BEFORE_RETIRING and self._retire_extra(handler):
                return
        self._retire(handler)

    def _retire_extra(self, handler: Handler) -> bool:
        """Stop this poller if there are more than the minimum; its container stays warm."""
        with self._lock:
            if len(self._threads) <= self._minimum:
                return False
            self._threads.remove(threading.current_thread())
            self._warm.append(handler)
            return True

    def _retire(self, handler: Handler | None) -> None:
        with self._lock:
            self._threads.remove(threading.current_thread())
            if handler is not None:
                self._warm.append(handler)

    def _invoker(self, handler: Handler) -> Handler:
        def invoke(event: dict[str, Any], context: Any) -> Any:
            with self._lock:
                self._busy += 1
                all_busy = self._busy >= len(self._threads)
            if all_busy:
                self._spawn()  # keep one poller receiving while the others run their batches
            try:
                return handler(event, context)
            finally:
                with self._lock:
                    self._busy -= 1

        return invoke
