"""The precision benchmark's creations: one a request, or a burst's in batch requests."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

from bench.precision.creation import create_stream
from bench.precision.shapes import BURST, Planned


class Recording:
    """A client that answers every create, recording the requests."""

    def __init__(self) -> None:
        self.requests: list[int] = []

    def create_job(self, job: Mapping[str, Any], *, idempotency_key: str | None = None) -> dict[str, Any]:
        self.requests.append(1)
        return {"id": f"job_{len(self.requests)}"}

    def create_jobs(
        self, jobs: Sequence[Mapping[str, Any]], *, idempotency_key: str | None = None
    ) -> list[dict[str, Any]]:
        self.requests.append(len(jobs))
        return [{"id": f"job_{len(self.requests)}_{i}"} for i in range(len(jobs))]


def test_a_burst_goes_in_batch_requests_each_job_answered_once() -> None:
    # Given 250 burst jobs to create now
    now = time.time()
    plans = [Planned(i, BURST, now, now + 60) for i in range(250)]
    for batch_size, requests in ((1, [1] * 250), (100, [100, 100, 50])):
        client = Recording()
        # When they are created one a request, then 100 a request
        created = create_stream(client, plans, 4, "http://127.0.0.1:9", "run", batch_size)  # type: ignore[arg-type]
        # Then each is answered once, in order, from as many requests as that takes
        assert sorted(client.requests, reverse=True) == requests
        assert [c.planned for c in created] == plans
        assert len({c.job_id for c in created}) == 250 and all(c.error is None for c in created)
