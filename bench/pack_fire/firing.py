"""A pack fired at its instant on the PackRunner's pool: cold (each member's task started from
nothing) or prepared (its address checked and its connection opened while it holds), with the CPU it
took, when its calls began and were answered, and the process's peak threads and descriptors.
"""

from __future__ import annotations

import os
import statistics
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from typing import Any

from bench.common import WEBHOOK
from bench.webhook_cpu import LOOPBACK
from punctual.execution.firing import Starters
from punctual.execution.receipts import Disposition
from punctual.execution.starts_first import StartsFirst
from punctual.platform.clock import SystemClock
from punctual.platform.config import FIRE_THREADS
from punctual.tasks import Awaited, Prepared, TaskContext, TaskPolicy
from punctual.tasks.http import HttpParams, HttpTask

# Members hold until this long after the pool is started: every thread is up and waiting by then.
HOLD_SECONDS = 1.0
SAMPLE_SECONDS = 0.005


class _Peaks:
    """The process's threads and open descriptors, sampled while a pack fires."""

    def __init__(self) -> None:
        self.threads = 0
        self.descriptors = 0
        self.cpu = 0.0  # the sampler's own CPU seconds, not the pack's
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def _sample(self) -> None:
        while not self._stop.is_set():
            self.threads = max(self.threads, threading.active_count())
            self.descriptors = max(self.descriptors, _descriptors())
            time.sleep(SAMPLE_SECONDS)
        self.cpu = time.thread_time()

    def __enter__(self) -> _Peaks:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def spent(self) -> float:
        """The sampler's CPU seconds so far (while it runs)."""
        assert self._thread.ident is not None
        return time.clock_gettime(time.pthread_getcpuclockid(self._thread.ident))


def _descriptors() -> int:
    try:
        return len(os.listdir("/proc/self/fd"))
    except OSError:
        return 0


def fire(
    size: int,
    call: Callable[[int], Any],
    arrivals: Callable[[], list[float]],
    most_threads: int = FIRE_THREADS,
) -> dict[str, Any]:
    """`size` calls on the PackRunner's pool, each held until one instant, then made side by side."""
    threads = min(size, most_threads)
    began = [0.0] * size
    answered = [0.0] * size
    baseline = _descriptors()
    cpu = time.process_time()
    instant = time.time() + HOLD_SECONDS

    def member(i: int) -> None:
        time.sleep(max(0.0, instant - time.time()))
        began[i] = time.time()
        call(i)
        answered[i] = time.time()

    with _Peaks() as peaks, ThreadPoolExecutor(max_workers=threads) as pool:
        list(pool.map(member, range(size)))
    cpu = time.process_time() - cpu - peaks.cpu
    return _fired(size, threads, instant, began, answered, arrivals(), cpu) | {
        "peak_threads": peaks.threads,
        "peak_open_descriptors": peaks.descriptors,
        "descriptors_before": baseline,
    }


def _fired(
    size: int,
    threads: int,
    instant: float,
    began: list[float],
    answered: list[float],
    received: list[float],
    cpu: float,
) -> dict[str, Any]:
    """A pack's starts against its instant (epoch seconds) and the CPU they took."""
    return {
        "executions": size,
        "threads": threads,
        "last_call_began_s": round(max(began) - instant, 3),
        "last_request_received_s": round(max(received) - instant, 3) if received else None,
        "requests_received": len(received),
        "last_answered_s": round(max(answered) - instant, 3),
        "p50_call_began_s": round(sorted(began)[size // 2] - instant, 3),
        "cpu_s": round(cpu, 3),
        "cpu_ms_per_webhook": round(cpu * 1000 / size, 3),
    }


def preparer(
    url: str,
) -> tuple[Callable[[int], Prepared], Callable[[int, Prepared], Any], Callable[[int, Prepared], bool]]:
    """The `http` task of `_caller`, prepared (its connection opened), launched, and then fired."""
    task = HttpTask()
    params = HttpParams(**{**WEBHOOK["params"], "url": f"{url}/punctual/reminders"})
    policy = TaskPolicy(allowed_networks=LOOPBACK)
    clock = SystemClock()

    def context(i: int) -> TaskContext:
        return TaskContext(
            job_id=f"job-{i}",
            execution_id=f"exe-{i}",
            scheduled_at=clock.now(),  # (due now: its connection is opened ahead)
            attempt=1,
            timeout_seconds=10.0,
            clock=clock,
            policy=policy,
        )

    def prepare(i: int) -> Prepared:
        return task.prepare(params, context(i))

    def start(i: int, ready: Prepared) -> Any:
        return ready.fire(context(i))

    def launch(i: int, ready: Prepared) -> bool:
        return ready.launch(context(i))

    return prepare, start, launch


def fire_prepared(
    size: int,
    prepare: Callable[[int], Prepared],
    start: Callable[[int, Prepared], Any],
    launch: Callable[[int, Prepared], bool],
    arrivals: Callable[[], list[float]],
    most_threads: int = FIRE_THREADS,
) -> dict[str, Any]:
    """Each member prepared first on the pack's pool, then held until the instant by the PackRunner's
    own `Starters` (punctual.execution.firing): a member expected to launch gives its thread back.
    At the instant one thread launches them one after another (their requests sent on the
    connections opened ahead, as Firing._launch does), then one thread waits for the answers and
    hands each to the pool as it comes (a member not launched starts on its thread). The CPU of the
    preparing and of the starts (from the hold on) apart."""
    threads = min(size, most_threads)
    began = [0.0] * size
    answered = [0.0] * size
    baseline = _descriptors()
    with _Peaks() as peaks, ThreadPoolExecutor(max_workers=threads) as pool:
        cpu, sampler = time.process_time(), peaks.spent()
        preparing = {i: pool.submit(prepare, i) for i in range(size)}
        readied = [preparing[i].result() for i in range(size)]
        preparing_cpu = time.process_time() - cpu - (peaks.spent() - sampler)
        connected = _descriptors() - baseline
        instant = time.time() + HOLD_SECONDS
        cpu, sampler = time.process_time(), peaks.spent()
        starters = Starters(pool, preparing, StartsFirst(), SystemClock())

        def member(i: int) -> Disposition:
            if not began[i]:
                began[i] = time.time()
            start(i, readied[i])
            answered[i] = time.time()
            return Disposition.DONE

        time.sleep(max(0.0, instant - time.time()))
        launched: dict[int, Awaited | None] = {}
        for i in range(size):
            began[i] = time.time()
            if launch(i, readied[i]):
                launched[i] = readied[i].awaited()
            else:
                began[i] = 0.0
        starters.go(
            {i: partial(member, i) for i in range(size)},
            starting=[i for i in range(size) if i not in launched],
            answers=launched,
        )
        for done in starters.outcomes.values():
            done.result()
        cpu = time.process_time() - cpu - (peaks.spent() - sampler)
    return _fired(size, threads, instant, began, answered, arrivals(), cpu) | {
        "connections_open_at_hold": connected,
        "preparing_cpu_ms_per_webhook": round(preparing_cpu * 1000 / size, 3),
        "peak_threads": peaks.threads,
        "peak_open_descriptors": peaks.descriptors,
        "descriptors_before": baseline,
    }


def side_by_side(cold: list[dict[str, Any]], prepared: list[dict[str, Any]]) -> dict[str, Any]:
    """Rounds of one pack size, cold and prepared: the median of each figure."""

    def median(rounds: list[dict[str, Any]], key: str) -> float:
        return round(statistics.median(r[key] for r in rounds if r[key] is not None), 3)

    return {
        "rounds": len(cold),
        "last_request_received_s": {
            "cold": median(cold, "last_request_received_s"),
            "prepared": median(prepared, "last_request_received_s"),
        },
        "last_answered_s": {
            "cold": median(cold, "last_answered_s"),
            "prepared": median(prepared, "last_answered_s"),
        },
        "cpu_ms_per_start": {
            "cold": median(cold, "cpu_ms_per_webhook"),
            "prepared": median(prepared, "cpu_ms_per_webhook"),
            "prepared_preparing": median(prepared, "preparing_cpu_ms_per_webhook"),
        },
    }
