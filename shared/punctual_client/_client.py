"""The client: one method per thing a program does with jobs, typed results, iterators over lists."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from datetime import timedelta
from typing import Any

from punctual.platform.clock import Clock, SystemClock
from punctual_client import profiles
from punctual_client._results import Execution, Job
from punctual_client.transport import PunctualClient


class Client:
    """Punctual's API from Python. Found as the `punctual` command finds it: `endpoint` and `token`
    given here, else PUNCTUAL_ENDPOINT and PUNCTUAL_TOKEN, else the config file's profile (`profile`,
    else PUNCTUAL_PROFILE, else `default`), else the local stack on 127.0.0.1:8765. A loopback
    endpoint takes a bearer token; any other is called signed with SigV4 (the AWS credential chain,
    or the profile's aws_profile).

    Errors: ApiError (the API answered 4xx/5xx: `.status`, `.message`, `.details`), ConnectionFailed,
    ConfigurationError; all are PunctualError.
    """

    def __init__(
        self,
        endpoint: str | None = None,
        *,
        token: str | None = None,
        profile: str | None = None,
        http: PunctualClient | None = None,
        clock: Clock | None = None,
    ) -> None:
        if http is None:
            http = profiles.connect(profiles.load_profile(profile), endpoint, token)
        self.http = http  # the transport, one method per endpoint answering the API's JSON
        self.clock = clock or SystemClock()  # wait()'s deadline and its pauses between polls

    @property
    def endpoint(self) -> str:
        return self.http.endpoint

    # -- jobs ----------------------------------------------------------------------------------------

    def create_job(
        self,
        *,
        task: Mapping[str, Any] | str,
        schedule: Mapping[str, Any] | None = None,
        idempotency_key: str | None = None,
        **fields: Any,
    ) -> Job:
        """Create a job: a task (`{"type": "http", "params": {...}}`, or a named task's name with
        `params=`), a schedule (default: now) and any other field of POST /jobs (`name`, `tags`,
        `retry`, `timeout_seconds`, `policy`, `notify`...)."""
        body: dict[str, Any] = {"task": task, "schedule": dict(schedule or {"type": "now"}), **fields}
        return Job.from_api(self.http.create_job(body, idempotency_key=idempotency_key))

    def get_job(self, job_id: str) -> Job:
        return Job.from_api(self.http.get_job(job_id))

    def jobs(
        self,
        *,
        status: str | None = None,
        tag: str | None = None,
        name_prefix: str | None = None,
        outcome: str | None = None,
        task: str | None = None,
        page_size: int | None = None,
    ) -> Iterator[Job]:
        """Your jobs, newest first, page after page as the iteration goes (`tag`: `key:value` or `key`)."""
        pages = self.http.iter_jobs(
            status=status, tag=tag, name_prefix=name_prefix, outcome=outcome, task=task, limit=page_size
        )
        return (Job.from_api(item) for item in pages)

    def update_job(self, job_id: str, **changes: Any) -> Job:
        """Change fields of a job (PATCH /jobs/{id}): `name=`, `schedule=`, `task=`, `retry=`..."""
        return Job.from_api(self.http.update_job(job_id, changes))

    def pause_job(self, job_id: str, note: str | None = None) -> Job:
        return Job.from_api(self.http.pause_job(job_id, note=note))

    def resume_job(self, job_id: str) -> Job:
        return Job.from_api(self.http.resume_job(job_id))

    def cancel_job(self, job_id: str) -> Job:
        return Job.from_api(self.http.cancel_job(job_id))

    def run_job(self, job_id: str) -> Execution:
        """One more execution of the job, now."""
        return Execution.from_api(self.http.run_job(job_id))

    # -- executions ----------------------------------------------------------------------------------

    def executions(
        self,
        job_id: str,
        *,
        status: str | None = None,
        since: str | None = None,
        until: str | None = None,
        page_size: int | None = None,
    ) -> Iterator[Execution]:
        """The job's executions, newest first, page after page as the iteration goes."""
        pages = self.http.iter_executions(job_id, status=status, since=since, until=until, limit=page_size)
        return (Execution.from_api(item) for item in pages)

    def retry_execution(self, job_id: str, execution_id: str) -> Execution:
        return Execution.from_api(self.http.retry_execution(job_id, execution_id))

    def wait(
        self, job_id: str, *, count: int = 1, timeout: float = 60.0, interval: float = 0.5
    ) -> list[Execution]:
        """Wait until the job has `count` finished executions; returns them, oldest first. Raises
        TimeoutError after `timeout` seconds."""
        deadline = self.clock.now() + timedelta(seconds=timeout)
        while True:
            done = [e for e in self.executions(job_id) if e.finished]
            if len(done) >= count:
                return list(reversed(done))[:count]
            if self.clock.now() >= deadline:
                raise TimeoutError(
                    f"job {job_id}: {len(done)} of {count} executions finished in {timeout:g}s"
                )
            self.clock.sleep(interval)
