"""Creating the planned jobs through the API, each stream at its times, and the flood of creations
around the burst.
"""

from __future__ import annotations

import argparse
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from bench.precision import log
from bench.precision.shapes import CRON, Created, Planned, Shape
from punctual.platform.timefmt import from_epoch_ms, to_rfc3339
from punctual_client.errors import ConnectionFailed, PunctualError
from punctual_client.transport import PunctualClient

CREATE_ATTEMPTS = 3


def job_body(plan: Planned, target_url: str, run_id: str) -> dict[str, Any]:
    task = {"type": "http", "params": {"url": f"{target_url}/hook/{plan.index}", "method": "POST"}}
    name = f"precision-{run_id}-{plan.kind}-{plan.index:05d}"
    if plan.kind == CRON:
        return {"name": name, "task": task, "schedule": {"type": "cron", "expression": "* * * * *"}}
    at = to_rfc3339(from_epoch_ms(round(plan.due * 1000)))
    return {"name": name, "task": task, "schedule": {"type": "at", "at": at}}


def create(
    client: PunctualClient, plans: list[Planned], bodies: list[dict[str, Any]], key: str
) -> list[Created]:
    """Create the plans' jobs in one request: POST /jobs for one, POST /jobs/batch for more (up to 100)."""
    sent = time.time()
    started = time.perf_counter()
    error = ""
    for attempt in range(CREATE_ATTEMPTS):
        try:
            # The same key on a retry: a request that timed out but went through is not doubled.
            if len(plans) == 1:
                answers = [client.create_job(bodies[0], idempotency_key=key)]
            else:
                answers = client.create_jobs(bodies, idempotency_key=key)
            latency = time.perf_counter() - started
            return [
                Created(plan, str(answer["id"]), sent, latency)
                for plan, answer in zip(plans, answers, strict=True)
            ]
        except ConnectionFailed as exc:
            error = f"{type(exc).__name__}: {exc}"
        except PunctualError as exc:
            error = f"{type(exc).__name__}: {exc}"
            break
        log(f"create request {plans[0].index} failed (attempt {attempt + 1}): {error}")
    return [Created(plan, None, sent, time.perf_counter() - started, error) for plan in plans]


def create_stream(
    client: PunctualClient,
    plans: list[Planned],
    threads: int,
    target_url: str,
    run_id: str,
    batch_size: int = 1,
) -> list[Created]:
    """Send each plan's create request at its time (or as soon as one of `threads` clients is free);
    with `batch_size` above 1, plans in batch requests of that many, each sent at its first's time."""
    futures: list[Future[list[Created]]] = []
    with ThreadPoolExecutor(max_workers=threads, thread_name_prefix="create") as pool:
        try:
            for start in range(0, len(plans), batch_size):
                chunk = plans[start : start + batch_size]
                delay = chunk[0].create_at - time.time()
                if delay > 0:
                    time.sleep(delay)
                key = f"precision-{run_id}-{chunk[0].index}"
                bodies = [job_body(plan, target_url, run_id) for plan in chunk]
                futures.append(pool.submit(create, client, chunk, bodies, key))
        except BaseException:
            pool.shutdown(wait=False, cancel_futures=True)
            raise
    return [created for future in futures for created in future.result()]


@dataclass(frozen=True)
class Flooded:
    answered: list[float]  # epoch seconds each create was answered
    sent: list[float]  # epoch seconds each create was sent
    latencies_ms: list[float]
    failed: int
    window: tuple[float, float]  # when the clients began and stopped sending (epoch seconds)


def flood(client: PunctualClient, window: tuple[float, float], threads: int, run_id: str) -> Flooded:
    """Create jobs as fast as `threads` clients can from window[0] to window[1] (due an hour after,
    a noop each: they never run during the benchmark)."""
    lock = threading.Lock()
    answered: list[float] = []
    sent: list[float] = []
    latencies: list[float] = []
    failed = [0]
    counter = iter(range(10**9))

    def client_loop() -> None:
        while (now := time.time()) < window[1]:
            if now < window[0]:
                time.sleep(window[0] - now)
                continue
            n = next(counter)
            at = to_rfc3339(from_epoch_ms(round((window[1] + 3600) * 1000)))
            body = {
                "name": f"flood-{run_id}-{n}",
                "task": {"type": "noop"},
                "schedule": {"type": "at", "at": at},
            }
            started = time.perf_counter()
            with lock:
                sent.append(now)
            try:
                client.create_job(body, idempotency_key=f"flood-{run_id}-{n}")
            except (ConnectionFailed, PunctualError):
                with lock:
                    failed[0] += 1
                continue
            with lock:
                answered.append(time.time())
                latencies.append((time.perf_counter() - started) * 1000)

    workers = [threading.Thread(target=client_loop, daemon=True) for _ in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    return Flooded(answered, sent, latencies, failed[0], window)


def run_streams(
    client: PunctualClient, shape: Shape, args: argparse.Namespace, target_url: str, run_id: str
) -> tuple[list[Created], Flooded | None]:
    """All the streams at once, each with its clients; progress every 10 s."""
    results: dict[str, list[Created]] = {}
    flooded: list[Flooded] = []
    jobs: list[tuple[str, Callable[[], None]]] = [
        (
            name,
            lambda name=name, plans=plans: results.__setitem__(
                name,
                create_stream(
                    client,
                    plans,
                    args.threads,
                    target_url,
                    run_id,
                    args.burst_batch_size if name.endswith("burst") else 1,
                ),
            ),
        )
        for name, plans in shape.plans.items()
        if plans
    ]
    if args.flood_seconds > 0:
        jobs.append(("flood", lambda: flooded.append(flood(client, shape.flood, args.threads, run_id))))
    errors: list[BaseException] = []

    def guarded(target: Callable[[], None]) -> None:
        try:
            target()
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=guarded, args=(job,), name=name, daemon=True) for name, job in jobs]
    for thread in threads:
        thread.start()
    while any(thread.is_alive() for thread in threads):
        next(t for t in threads if t.is_alive()).join(10.0)
        alive = [t.name for t in threads if t.is_alive()]
        log(
            f"creating: {', '.join(alive) or 'done'}; the burst is due in {shape.burst_at - time.time():.0f} s"
        )
    if errors:
        raise errors[0]
    created = [c for name in shape.plans for c in results.get(name, [])]
    return created, (flooded[0] if flooded else None)
