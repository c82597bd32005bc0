"""The client's errors: the API answered an error, the endpoint could not be reached, the client
cannot make a request as configured, or an id could not be sent. All are PunctualError."""

from __future__ import annotations

import json
from typing import Any


class PunctualError(Exception):
    """Base class of the client's errors."""


class ApiError(PunctualError):
    """The API answered 4xx or 5xx."""

    def __init__(self, status: int, reason: str, body: Any) -> None:
        self.status = status
        self.reason = reason
        self.body = body
        super().__init__(self.message)

    @property
    def message(self) -> str:
        if isinstance(self.body, dict):
            for key in ("message", "error", "detail"):
                value = self.body.get(key)
                if isinstance(value, str) and value:
                    return value
        if isinstance(self.body, str) and self.body.strip():
            return self.body.strip()[:500]
        return self.reason or f"HTTP {self.status}"

    @property
    def details(self) -> list[str]:
        """The per-field problems the API listed (`details` or `errors`), as readable lines."""
        if not isinstance(self.body, dict):
            return []
        # `detail` is what Powertools' request validation answers; `details`/`errors` are common too.
        items = self.body.get("details") or self.body.get("errors") or self.body.get("detail") or []
        if isinstance(items, str):
            return [] if items == self.message else [items]
        if isinstance(items, dict):
            return [f"{key}: {value}" for key, value in items.items()]
        if not isinstance(items, list):
            return [str(items)]
        return [_describe_detail(item) for item in items]


class ConnectionFailed(PunctualError):
    """The endpoint could not be reached (refused, DNS, timeout, TLS)."""


class ConfigurationError(PunctualError):
    """The client cannot make a request as configured (no credentials, no region)."""


class InvalidId(PunctualError, ValueError):
    """An id or task name that names nothing and that no request could carry whole (`a/run`): refused
    before a request is sent."""


def _describe_detail(item: Any) -> str:
    if not isinstance(item, dict):
        return str(item)
    where = item.get("field") or item.get("path") or item.get("name")
    loc = item.get("loc")
    if not where and isinstance(loc, list | tuple):
        where = ".".join(str(part) for part in loc)
    what = item.get("message") or item.get("msg") or item.get("detail") or json.dumps(item)
    return f"{where}: {what}" if where else str(what)
