"""The `http` task: call a webhook, carrying the execution's identity so that receivers can de-duplicate."""

from __future__ import annotations

import http.client
import json
import re
import socket
import ssl
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator
from pydantic_core import PydanticCustomError

from punctual.domain.errors import InvalidRequest
from punctual.domain.validation import JSON_NUMBER
from punctual.platform import signing
from punctual.platform.timefmt import to_rfc3339
from punctual.tasks import (
    ANSWER_PREVIEW_BYTES,
    TaskContext,
    TaskFailed,
    TaskPolicy,
    decode_answer,
    register,
    retryable_status,
)
from punctual.tasks.netguard import MAX_URL_LENGTH, AddressRefused, BadUrl, check_url, parse_url, resolve_url

_RESERVED_HEADERS = {"host", "content-length", "transfer-encoding", "connection"}
_TOKEN = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")


class HttpParams(BaseModel):
    model_config = ConfigDict(extra="forbid")

    # Kept as given: pydantic's URL types rewrite what they read (`http:///x` into `http://x/`, a
    # line break dropped), so the URL is read by the guard's own parser and stored unchanged.
    url: str = Field(
        json_schema_extra={"format": "uri", "minLength": 1, "maxLength": MAX_URL_LENGTH},
        description="http or https URL to call, absolute, as RFC 3986 writes it (no user information, "
        "no fragment); sent as given.",
    )
    method: Literal["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD"] = "POST"
    headers: dict[str, str] = Field(default_factory=dict, description="Extra request headers.")
    body: Any = Field(default=None, description="JSON body, sent with Content-Type application/json.")
    timeout_seconds: Annotated[float | None, JSON_NUMBER] = Field(
        default=None, gt=0, le=300, description="Per-request timeout."
    )

    @field_validator("url")
    @classmethod
    def _absolute_http_url(cls, value: str) -> str:
        try:
            parse_url(value)
        except BadUrl as exc:
            raise PydanticCustomError("url_parsing", str(exc)) from None
        return value

    @field_validator("method", mode="before")
    @classmethod
    def _upper(cls, value: Any) -> Any:
        return value.upper() if isinstance(value, str) else value

    @field_validator("headers")
    @classmethod
    def _headers_allowed(cls, value: dict[str, str]) -> dict[str, str]:
        for name, header_value in value.items():
            if not _TOKEN.fullmatch(name):
                raise ValueError(f"header name {name!r} is not a valid HTTP token")
            if name.lower() in _RESERVED_HEADERS or name.lower().startswith("x-punctual-"):
                raise ValueError(f"header {name!r} is set by Punctual")
            if any(c in header_value for c in "\r\n\0"):
                raise ValueError(f"header {name!r} has a line break in its value")
            try:
                header_value.encode("latin-1")
            except UnicodeEncodeError:
                raise ValueError(f"header {name!r} has characters HTTP cannot carry (latin-1 only)") from None
        return value


class _PinnedHTTPConnection(http.client.HTTPConnection):
    """Connects to an address already checked by the guard, not to a fresh lookup of the host."""

    def __init__(self, host: str, address: str, port: int, timeout: float) -> None:
        super().__init__(host, port, timeout=timeout)
        self._address = address

    def connect(self) -> None:
        self.sock = socket.create_connection((self._address, self.port), self.timeout)


class _PinnedHTTPSConnection(http.client.HTTPSConnection):
    def __init__(self, host: str, address: str, port: int, timeout: float) -> None:
        super().__init__(host, port, timeout=timeout, context=ssl.create_default_context())
        self._address = address

    def connect(self) -> None:
        raw = socket.create_connection((self._address, self.port), self.timeout)
        self.sock = self._context.wrap_socket(raw, server_hostname=self.host)  # type: ignore[attr-defined]


class HttpTask:
    name = "http"
    description = (
        "Calls a URL. Headers X-Punctual-Job-Id, X-Punctual-Execution-Id, X-Punctual-Scheduled-At and "
        "X-Punctual-Attempt identify the execution. 2xx succeeds; 408, 429, 5xx and network errors are "
        "retried; other statuses fail at once. Redirects are not followed. A job with a signing secret "
        "signs each request (Standard Webhooks: webhook-id, the execution id; webhook-timestamp; "
        "webhook-signature)."
    )
    params_model: type[BaseModel] = HttpParams

    def check(self, params: BaseModel, policy: TaskPolicy) -> None:
        assert isinstance(params, HttpParams)
        # What can be refused without a lookup is refused now, rather than at every run: a literal
        # address and a name that always means this machine. Other names are checked when they are
        # resolved, at run time: their addresses may change.
        try:
            check_url(params.url, policy.allowed_networks)
        except (BadUrl, AddressRefused) as exc:
            raise InvalidRequest(f"task.params.url: {exc}", field="task.params.url") from None

    def run(self, params: BaseModel, context: TaskContext) -> Any:
        assert isinstance(params, HttpParams)
        # The URL as the guard read it is where the request goes: its host, port and target.
        try:
            url, addresses = resolve_url(params.url, context.policy.allowed_networks, context.resolver)
        except (BadUrl, AddressRefused) as exc:
            raise TaskFailed(str(exc), retryable=False) from exc
        timeout = min(params.timeout_seconds or context.timeout_seconds, context.timeout_seconds)
        body: bytes | None = None if params.body is None else json.dumps(params.body).encode()
        # Defaults first; a user's header replaces a default whatever its case.
        headers = {"User-Agent": "Punctual/1"}
        if body is not None:
            headers["Content-Type"] = "application/json"
        given = {name.lower() for name in params.headers}
        headers = {name: value for name, value in headers.items() if name.lower() not in given}
        headers.update(params.headers)
        headers.update(
            {
                "X-Punctual-Job-Id": context.job_id,
                "X-Punctual-Execution-Id": context.execution_id,
                "X-Punctual-Scheduled-At": to_rfc3339(context.scheduled_at),
                "X-Punctual-Attempt": str(context.attempt),
            }
        )
        if context.signing_keys:
            # The signature covers exactly the bytes sent; a user's header of the same name would
            # contradict it, so Punctual's replace it.
            headers = {name: value for name, value in headers.items() if name.lower() not in signing.HEADERS}
            message_id = context.message_id or context.execution_id
            headers.update(
                signing.headers(context.signing_keys, message_id, context.clock.now(), body or b"")
            )
        connection_type = _PinnedHTTPSConnection if url.is_https else _PinnedHTTPConnection
        connection = connection_type(url.host, addresses[0], url.port, timeout)
        try:
            connection.request(params.method, url.target, body=body, headers=headers)
            response = connection.getresponse()
            payload = response.read(ANSWER_PREVIEW_BYTES)
        except (OSError, http.client.HTTPException) as exc:
            raise TaskFailed(f"{type(exc).__name__}: {exc}", retryable=True) from exc
        finally:
            connection.close()
        result = {"status": response.status, "body": decode_answer(payload)}
        if 200 <= response.status < 300:
            return result
        retryable = retryable_status(response.status)
        raise TaskFailed(f"HTTP {response.status} {response.reason}", retryable=retryable, result=result)


register(HttpTask())
