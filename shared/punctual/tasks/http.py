"""The `http` task: call a webhook, carrying the execution's identity so that receivers can de-duplicate.

Its call on the wire is in http_wire; made ready ahead of its start, in http_ahead."""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator
from pydantic_core import PydanticCustomError

from punctual.domain.errors import InvalidRequest
from punctual.domain.validation import JSON_NUMBER
from punctual.tasks import Prepared, TaskContext, TaskPolicy, register
from punctual.tasks.http_ahead import prepare_call
from punctual.tasks.http_wire import exchange, pinned_connection, request_parts, send_on, target, timeout_for
from punctual.tasks.netguard import MAX_URL_LENGTH, AddressRefused, BadUrl, check_url, parse_url

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
        default=None, ge=0.001, le=300, description="Per-request timeout: 0.001 to 300 seconds."
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
            if any(c in header_value for c in "\r\n"):
                raise ValueError(f"header {name!r} has a line break in its value")
            if "\0" in header_value:
                raise ValueError(f"header {name!r} has a NUL character in its value")
            try:
                header_value.encode("latin-1")
            except UnicodeEncodeError:
                raise ValueError(f"header {name!r} has characters HTTP cannot carry (latin-1 only)") from None
        return value


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
        url, addresses = target(params, context)
        timeout = timeout_for(params, context)
        body, headers = request_parts(params, context)
        connection = pinned_connection(url, addresses[0], timeout)
        return exchange(lambda: send_on(connection, params.method, url.target, body, headers))

    def prepare(self, params: BaseModel, context: TaskContext) -> Prepared:
        """http_ahead.prepare_call: its address checked and a connection opened ahead of the start."""
        assert isinstance(params, HttpParams)
        return prepare_call(params, context)


register(HttpTask())
