"""The moto process's WSGI front: an answer goes out only once the journal holds its writes.

So the stack sees a write succeed only once it is durable, and so does everyone the stack answers.
A write the disk lost is answered PunctualStorageFailed instead.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from typing import Any

from punctual_local.moto.durable import DurableTables
from punctual_local.moto.faults import FillableDisk
from punctual_local.moto.journal import STORAGE_FAILED, StorageFailed
from punctual_local.moto.write_hooks import start_request, written_in_request


class DurableApp:
    """WSGI middleware: a request's answer waits for the journal to hold its writes.

    Also answers GET /_punctual/status (the journal's state, for the stack and the benchmarks),
    POST /_punctual/compact (compact now) and, given a disk that fills on demand (faults.py), POST
    /_punctual/disk with `full` or `free`."""

    def __init__(
        self, app: Callable[..., Any], tables: DurableTables, disk: FillableDisk | None = None
    ) -> None:
        self._app = app
        self._tables = tables
        self._disk = disk

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        path = environ.get("PATH_INFO", "")
        if path.startswith("/_punctual/"):
            return self._control(environ, path, start_response)
        start_request()
        started: list[tuple[Any, ...]] = []
        written: list[bytes] = []

        def deferred(status: str, headers: list[tuple[str, str]], exc_info: Any = None) -> Any:
            started.append((status, headers, exc_info))
            return written.append

        answer = self._app(environ, deferred)
        try:
            chunks = written + list(answer)
        finally:
            if hasattr(answer, "close"):
                answer.close()
        first, last = written_in_request()
        journal = self._tables.journal
        if last and journal is not None:
            try:
                journal.wait(last, first=first)
            except StorageFailed as exc:
                body = json.dumps({"__type": STORAGE_FAILED, "message": str(exc)}).encode()
                start_response("400 Bad Request", [("Content-Type", "application/x-amz-json-1.0")])
                return [body]
        status, headers, exc_info = started[0]
        start_response(status, headers, exc_info)
        return chunks

    def _control(self, environ: dict[str, Any], path: str, start_response: Callable[..., Any]) -> list[bytes]:
        post = environ.get("REQUEST_METHOD") == "POST"
        if path == "/_punctual/compact" and post:
            self._tables.request_compaction()
        elif path == "/_punctual/disk" and post and self._disk is not None:
            length = int(environ.get("CONTENT_LENGTH") or 0)
            self._disk.full = environ["wsgi.input"].read(length).strip() == b"full"
        elif path != "/_punctual/status":
            start_response("404 Not Found", [("Content-Type", "application/json")])
            return [b'{"message": "not found"}']
        body = json.dumps(self._tables.status()).encode()
        start_response("200 OK", [("Content-Type", "application/json")])
        return [body]
