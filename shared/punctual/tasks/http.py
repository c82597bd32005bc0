"""The `http` task: call a webhook, carrying the execution's identity so that receivers can de-duplicate."""

from __future__ import annotations

import http.client
import json
import re
import socket
import ssl
from typing import Annotated, Any, Literal
from urllib.parse import urlsplit

from pydantic import AnyHttpUrl, BaseModel, ConfigDict, Field, field_validator

from punctual import signing
from punctual.errors import InvalidRequest
from punctual.netguard import (
    AddressRefused,
    is_allowed,
    is_loopback_name,
    literal_address,
    loopback_allowed,
    resolve_checked,
)
from punctual.tasks import (
    ANSWER_PREVIEW_BYTES,
    TaskContext,
    TaskFailed,
    TaskPolicy,
    decode_answer,
    register,
    retryable_status,
)
from punctual.timefmt import to_rfc3339
from punctual.validation import JSON_NUMBER

_RESERVED_HEADERS = {"host", "content-length", "transfer-encoding", "connection"}
_TOKEN = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")


class HttpParams(BaseModel):
    model_config = ConfigDict(extra="forbid")

    url: AnyHttpUrl = Field(description="http or https URL to call.")
    method: Literal["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD"] = "POST"
    headers: dict[str, str] = Field(default_factory=dict, description="Extra request headers.")
    body: Any = Field(default=None, description="JSON body, sent with Content-Type application/json.")
    timeout_seconds: Annotated[float | None, JSON_NUMBER] = Field(
        default=None, gt=0, le=300, description="Per-request timeout."
    )

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
        # address (the URL parser has already read every spelling of one, `http://2130706433/` and
        # `http://0x7f.1/` included, into its usual form) and a name that always means this machine.
        # Other names are checked when they are resolved, at run time: their addresses may change.
        host = params.url.host or ""
        literal = literal_address(host)
        if literal and not is_allowed(literal, policy.allowed_networks):
            raise InvalidRequest(
                f"task.params.url: {host} is a private, loopback or link-local address",
                field="task.params.url",
            )
        if literal is None and is_loopback_name(host) and not loopback_allowed(policy.allowed_networks):
            raise InvalidRequest(
                f"task.params.url: {host} names this machine (a loopback address), which webhooks may not call",
                field="task.params.url",
            )

    def run(self, params: BaseModel, context: TaskContext) -> Any:
        assert isinstance(params, HttpParams)
        parts = urlsplit(str(params.url))
        host = parts.hostname or ""
        port = parts.port or (443 if parts.scheme == "https" else 80)
        try:
            addresses = resolve_checked(host, port, context.policy.allowed_networks, context.resolver)
        except AddressRefused as exc:
            raise TaskFailed(str(exc), retryable=False) from exc
        timeout = min(params.timeout_seconds or context.timeout_seconds, context.timeout_seconds)
        path = parts.path or "/"
        if parts.query:
            path += "?" + parts.query
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
        connection_type = _PinnedHTTPSConnection if parts.scheme == "https" else _PinnedHTTPConnection
        connection = connection_type(host, addresses[0], port, timeout)
        try:
            connection.request(params.method, path, body=body, headers=headers)
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
