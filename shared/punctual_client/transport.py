"""The HTTP transport of Punctual's public API (see docs/api.md): one method per endpoint answering
the API's JSON, a request refused for load sent again after the wait it names.

Standard library only for HTTP. Against a loopback endpoint (the local stack) it sends a bearer
token; against anything else it signs with SigV4 (punctual_client.auth).

    client = PunctualClient.from_endpoint("http://127.0.0.1:8765", token="local")
    job = client.create_job({"task": {"type": "noop"}, "schedule": {"type": "now"}})
"""

from __future__ import annotations

import http.client
import json
import os
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from punctual import __version__
from punctual_client.auth import Authenticator, BearerAuth, SigV4Auth
from punctual_client.endpoints import DEFAULT_TOKEN, default_endpoint, is_loopback, region_for, scheme_hint
from punctual_client.errors import ApiError, ConfigurationError, ConnectionFailed, InvalidId

USER_AGENT = f"punctual-cli/{__version__}"
# A request refused for load is sent again up to this many times, after the wait the answer names.
LOAD_RETRIES = 3
MAX_LOAD_WAIT_SECONDS = 10.0

JsonObject = dict[str, Any]


@dataclass(frozen=True)
class Response:
    status: int
    body: Any
    headers: Mapping[str, str] = field(default_factory=dict)


class PunctualClient:
    """One method per endpoint of the API; errors raise ApiError / ConnectionFailed."""

    def __init__(self, endpoint: str, auth: Authenticator | None, *, timeout: float = 30.0) -> None:
        parts = urllib.parse.urlsplit(endpoint)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ConfigurationError(
                f"endpoint must be an http(s) URL, got {endpoint!r}{scheme_hint(endpoint)}"
            )
        self.endpoint = endpoint.rstrip("/")
        self.auth = auth
        self.timeout = timeout
        # Never send local traffic through a proxy from the environment.
        handlers = [urllib.request.ProxyHandler({})] if is_loopback(endpoint) else []
        self._opener = urllib.request.build_opener(*handlers)
        self.sleep: Callable[[float], None] = time.sleep  # between attempts refused for load

    @classmethod
    def from_endpoint(
        cls,
        endpoint: str | None = None,
        *,
        token: str | None = None,
        region: str | None = None,
        aws_profile: str | None = None,
        timeout: float = 30.0,
    ) -> PunctualClient:
        """Bearer token for a loopback endpoint, SigV4 for anything else."""
        endpoint = endpoint or default_endpoint()
        auth: Authenticator
        if is_loopback(endpoint):
            auth = BearerAuth(token or os.environ.get("PUNCTUAL_TOKEN") or DEFAULT_TOKEN)
        else:
            region = region or region_for(endpoint)
            if not region:
                raise ConfigurationError(
                    f"cannot tell the AWS region of {endpoint}: set AWS_REGION "
                    "(or use the *.execute-api.<region>.amazonaws.com URL)"
                )
            auth = SigV4Auth(region, aws_profile=aws_profile)
        return cls(endpoint, auth, timeout=timeout)

    # -- transport ---------------------------------------------------------------------------------

    def url(self, path: str, query: Mapping[str, Any] | None = None) -> str:
        url = self.endpoint + path
        params = {key: value for key, value in (query or {}).items() if value is not None}
        if params:
            url += "?" + urllib.parse.urlencode(params)
        return url

    def request(
        self,
        method: str,
        path: str,
        *,
        query: Mapping[str, Any] | None = None,
        body: Any = None,
        headers: Mapping[str, str] | None = None,
        check: bool = True,
    ) -> Response:
        """Send one request; with check, a 4xx/5xx answer raises ApiError. A request refused for load
        (429, or 503 with a `Retry-After` of a few seconds) is sent again after the wait it names."""
        url = self.url(path, query)
        data = None if body is None else json.dumps(body).encode()
        for attempt in range(LOAD_RETRIES + 1):
            sent = {"Accept": "application/json", "User-Agent": USER_AGENT, **(headers or {})}
            if data is not None:
                sent["Content-Type"] = "application/json"
            if self.auth is not None:
                sent.update(self.auth.headers(method, url, sent, data))
            request = urllib.request.Request(url, data=data, headers=sent, method=method)
            try:
                with self._opener.open(request, timeout=self.timeout) as answer:
                    response = Response(answer.status, _decode(answer.read()), dict(answer.headers.items()))
            except urllib.error.HTTPError as exc:
                with exc:
                    response = Response(exc.code, _decode(exc.read()), dict(exc.headers.items()))
                wait = _load_wait(response) if attempt < LOAD_RETRIES else None
                if wait is not None:
                    self.sleep(wait)
                    continue
                if check:
                    raise ApiError(exc.code, exc.reason, response.body) from None
            except (OSError, http.client.HTTPException) as exc:  # URLError, refused, reset, timeout, TLS
                reason = getattr(exc, "reason", exc)
                raise ConnectionFailed(f"cannot reach {self.endpoint}: {reason}") from exc
            return response
        raise AssertionError("unreachable: the last attempt returns or raises")

    def _call(self, method: str, path: str, **kwargs: Any) -> Any:
        return self.request(method, path, **kwargs).body

    # -- jobs ----------------------------------------------------------------------------------------

    def create_job(self, job: Mapping[str, Any], *, idempotency_key: str | None = None) -> JsonObject:
        headers = {"Idempotency-Key": idempotency_key} if idempotency_key else None
        result: JsonObject = self._call("POST", "/jobs", body=dict(job), headers=headers)
        return result

    def create_jobs(
        self, jobs: Sequence[Mapping[str, Any]], *, idempotency_key: str | None = None
    ) -> list[JsonObject]:
        """POST /jobs/batch: 1 to 100 jobs in one request, all or none; returns them in order."""
        headers = {"Idempotency-Key": idempotency_key} if idempotency_key else None
        body = {"jobs": [dict(job) for job in jobs]}
        result: JsonObject = self._call("POST", "/jobs/batch", body=body, headers=headers)
        return list(result["items"])

    def list_jobs(
        self,
        *,
        status: str | None = None,
        limit: int | None = None,
        cursor: str | None = None,
        tag: str | None = None,
        task: str | None = None,
        outcome: str | None = None,
        name_prefix: str | None = None,
    ) -> JsonObject:
        query = {
            "status": status,
            "outcome": outcome,
            "name_prefix": name_prefix,
            "tag": tag,
            "task": task,
            "limit": limit,
            "cursor": cursor,
        }
        result: JsonObject = self._call("GET", "/jobs", query=query)
        return result

    def iter_jobs(
        self,
        *,
        status: str | None = None,
        limit: int | None = None,
        tag: str | None = None,
        task: str | None = None,
        outcome: str | None = None,
        name_prefix: str | None = None,
    ) -> Iterator[JsonObject]:
        """Every job, following next_cursor page by page."""
        return self._paginate(
            lambda cursor: self.list_jobs(
                status=status,
                limit=limit,
                cursor=cursor,
                tag=tag,
                task=task,
                outcome=outcome,
                name_prefix=name_prefix,
            )
        )

    def pause_jobs(self, tag: str, *, limit: int | None = None, cursor: str | None = None) -> JsonObject:
        """POST /jobs/pause?tag=: one page of the ACTIVE jobs with the tag paused; follow next_cursor."""
        query = {"tag": tag, "limit": limit, "cursor": cursor}
        result: JsonObject = self._call("POST", "/jobs/pause", query=query)
        return result

    def resume_jobs(self, tag: str, *, limit: int | None = None, cursor: str | None = None) -> JsonObject:
        query = {"tag": tag, "limit": limit, "cursor": cursor}
        result: JsonObject = self._call("POST", "/jobs/resume", query=query)
        return result

    def get_job(self, job_id: str) -> JsonObject:
        result: JsonObject = self._call("GET", _job_path(job_id))
        return result

    def update_job(
        self, job_id: str, changes: Mapping[str, Any], *, revision: int | None = None
    ) -> JsonObject:
        """PATCH a job; with `revision` (its `revision` as read), only if it is still at it: else
        ApiError 412, and nothing changed (read it again and apply the change to that)."""
        headers = None if revision is None else {"If-Match": f'"{revision}"'}
        result: JsonObject = self._call("PATCH", _job_path(job_id), body=dict(changes), headers=headers)
        return result

    def cancel_job(self, job_id: str) -> JsonObject:
        result: JsonObject = self._call("DELETE", _job_path(job_id))
        return result

    def pause_job(self, job_id: str, note: str | None = None) -> JsonObject:
        body = None if note is None else {"note": note}
        result: JsonObject = self._call("POST", _job_path(job_id, "pause"), body=body)
        return result

    def resume_job(self, job_id: str) -> JsonObject:
        result: JsonObject = self._call("POST", _job_path(job_id, "resume"))
        return result

    def run_job(self, job_id: str) -> JsonObject:
        """One extra execution now; returns the Execution (202)."""
        result: JsonObject = self._call("POST", _job_path(job_id, "run"))
        return result

    # -- executions, schedules, tasks ----------------------------------------------------------------

    def list_executions(
        self,
        job_id: str,
        *,
        limit: int | None = None,
        cursor: str | None = None,
        status: str | None = None,
        since: str | None = None,
        until: str | None = None,
    ) -> JsonObject:
        query = {"status": status, "since": since, "until": until, "limit": limit, "cursor": cursor}
        result: JsonObject = self._call("GET", _job_path(job_id, "executions"), query=query)
        return result

    def iter_executions(
        self,
        job_id: str,
        *,
        limit: int | None = None,
        status: str | None = None,
        since: str | None = None,
        until: str | None = None,
    ) -> Iterator[JsonObject]:
        return self._paginate(
            lambda cursor: self.list_executions(
                job_id, limit=limit, cursor=cursor, status=status, since=since, until=until
            )
        )

    def retry_execution(self, job_id: str, execution_id: str) -> JsonObject:
        """Run a finished execution that did not succeed once more; returns the new Execution (202)."""
        path = _job_path(job_id, "executions") + "/" + _segment(execution_id, "execution id") + "/retry"
        result: JsonObject = self._call("POST", path)
        return result

    def dead_letters(self, *, limit: int | None = None, cursor: str | None = None) -> JsonObject:
        result: JsonObject = self._call("GET", "/dead-letters", query={"limit": limit, "cursor": cursor})
        return result

    def iter_dead_letters(self, *, limit: int | None = None) -> Iterator[JsonObject]:
        return self._paginate(lambda cursor: self.dead_letters(limit=limit, cursor=cursor))

    def redrive(self, execution_ids: Sequence[str]) -> list[JsonObject]:
        """Redrive 1 to 100 dead-lettered executions; what became of each, in order."""
        result: JsonObject = self._call(
            "POST", "/dead-letters/redrive", body={"execution_ids": list(execution_ids)}
        )
        return list(result["items"])

    def coming_up(self) -> JsonObject:
        """GET /coming-up: the caller's scheduled runs in the coming hour, minute by minute."""
        result: JsonObject = self._call("GET", "/coming-up")
        return result

    def preview(self, schedule: Mapping[str, Any], count: int | None = None) -> JsonObject:
        body: JsonObject = {"schedule": dict(schedule)}
        if count is not None:
            body["count"] = count
        result: JsonObject = self._call("POST", "/schedules/preview", body=body)
        return result

    def tasks(self, *, limit: int | None = None, cursor: str | None = None, tag: str | None = None) -> Any:
        """GET /tasks: the built-in types, and a page of the caller's named tasks."""
        return self._call("GET", "/tasks", query={"limit": limit, "cursor": cursor, "tag": tag})

    def create_task(self, task: Mapping[str, Any]) -> JsonObject:
        result: JsonObject = self._call("POST", "/tasks", body=dict(task))
        return result

    def get_task(self, name: str) -> JsonObject:
        result: JsonObject = self._call("GET", _task_path(name))
        return result

    def update_task(self, name: str, changes: Mapping[str, Any], *, version: int | None = None) -> JsonObject:
        """PATCH a named task; with `version` (its `version` as read), only if it is still at it: else
        ApiError 412, and nothing changed."""
        headers = None if version is None else {"If-Match": f'"{version}"'}
        result: JsonObject = self._call("PATCH", _task_path(name), body=dict(changes), headers=headers)
        return result

    def delete_task(self, name: str) -> JsonObject:
        result: JsonObject = self._call("DELETE", _task_path(name))
        return result

    def health(self) -> bool:
        return self.request("GET", "/health", check=False).status == 200

    @staticmethod
    def _paginate(fetch: Callable[[str | None], JsonObject]) -> Iterator[JsonObject]:
        cursor: str | None = None
        while True:
            page = fetch(cursor)
            yield from page.get("items") or []
            cursor = page.get("next_cursor")
            if not cursor:
                return


def _task_path(name: str) -> str:
    return "/tasks/" + _segment(name, "task name")


def _job_path(job_id: str, action: str | None = None) -> str:
    path = "/jobs/" + _segment(job_id, "job id")
    return f"{path}/{action}" if action else path


# What no encoding keeps inside one segment: an HTTP API (the deployed default, and the local stack's)
# hands the API the path decoded, where `/` separates segments and `?` or `#` ends the path.
_NOT_IN_A_SEGMENT = frozenset("/?#")


def _segment(value: str, noun: str) -> str:
    """`value` percent-encoded as one segment of a path. A value that would not reach the API as one
    (`job_1/executions` would be read as that job's executions), and that no id or task name is, is
    refused: `/`, `?` or `#` in it, or empty, `.` or `..`."""
    if value in ("", ".", "..") or not _NOT_IN_A_SEGMENT.isdisjoint(value):
        raise InvalidId(
            f"{value!r} cannot be a {noun}: no {noun} holds '/', '?' or '#', or is empty, '.' or '..'"
        )
    return urllib.parse.quote(value, safe="")


def _load_wait(response: Response) -> float | None:
    """How long to wait before sending a request again that was refused for load, or None when it is
    not to be sent again: a 429 (not served; API Gateway's throttle names no wait), or a 503 naming a
    wait of a few seconds at most (the local API shedding load; a longer one is not load)."""
    value = next((v for k, v in response.headers.items() if k.lower() == "retry-after"), None)
    try:
        wait = float(value) if value is not None else None
    except ValueError:
        wait = None
    if response.status == 429:
        return min(wait if wait is not None and wait >= 0 else 1.0, MAX_LOAD_WAIT_SECONDS)
    if response.status == 503 and wait is not None and 0 <= wait <= MAX_LOAD_WAIT_SECONDS:
        return wait
    return None


def _decode(raw: bytes) -> Any:
    if not raw:
        return None
    text = raw.decode("utf-8", errors="replace")
    try:
        return json.loads(text)
    except ValueError:
        return text
