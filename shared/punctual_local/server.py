"""The local stack's HTTP front end: what API Gateway does in front of the API function.

Each request is authenticated by its bearer token (docs/api.md: `PUNCTUAL_LOCAL_TOKENS`), turned into a
proxy event with the token's owner where IAM authorization puts the caller, and handed to the API
handler; its answer becomes the HTTP response. The events are those of an HTTP API (payload format
2.0), the deployed default; `api_event` chooses.

Each connection is served on a thread of its own (connection.py reads and writes its HTTP/1.1).
Past `Limits.connections` connections a new one is answered 503. Past `Limits.active` requests in
the handler (and `Limits.queued` waiting for one, each for `Limits.queue_seconds` at most) a request
is answered 503 with `Retry-After`: the API's callers share moto with the executions, which come
first.
"""

from __future__ import annotations

import base64
import hmac
import json
import socket
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from punctual.platform.observability import logger
from punctual_local import lambda_events
from punctual_local.connection import GONE, Connection, Limits, Refused, Reply, header, retry_after
from punctual_local.moto.journal import STORAGE_FAILED

# The event format the API function is driven with: http_api_event (HTTP API, payload format 2.0, as
# deployed by default) or api_gateway_event (REST API, payload format 1.0; `-c api_type=rest`).
api_event = lambda_events.http_api_event

DEFAULT_TOKENS = {"local": "local"}
# Answered without a token, as the contract lets anyone check liveness and read the API's document.
PUBLIC_PATHS = frozenset({"/health", "/openapi.json"})
METHODS = frozenset({"GET", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "HEAD"})
_WRITES = frozenset({"POST", "PUT", "PATCH", "DELETE"})

DEFAULT_LIMITS = Limits()

Invoke = Callable[[dict[str, Any]], dict[str, Any]]


def parse_tokens(spec: str | None) -> dict[str, str]:
    """`token=owner,token2=owner2` -> {token: owner}; unset or blank means the single token `local`."""
    if spec is None or not spec.strip():
        return dict(DEFAULT_TOKENS)
    tokens: dict[str, str] = {}
    for entry in spec.split(","):
        if not entry.strip():
            continue
        token, separator, owner = (part.strip() for part in entry.partition("="))
        if not separator or not token or not owner:
            raise ValueError(f"PUNCTUAL_LOCAL_TOKENS: {entry.strip()!r} is not token=owner")
        if tokens.get(token, owner) != owner:
            raise ValueError(f"PUNCTUAL_LOCAL_TOKENS: token {token!r} is given to two owners")
        tokens[token] = owner
    if not tokens:
        raise ValueError("PUNCTUAL_LOCAL_TOKENS names no token")
    return tokens


class Admission:
    """At most `active` holders at once, and `queued` more waiting, each for `wait_seconds` at most."""

    def __init__(self, active: int, queued: int, wait_seconds: float) -> None:
        self._slots = threading.BoundedSemaphore(active)
        self._lock = threading.Lock()
        self._waiting = 0
        self._queued = queued
        self._wait_seconds = wait_seconds

    def enter(self) -> bool:
        """Whether a slot was taken (then `leave` gives it back)."""
        if self._slots.acquire(blocking=False):
            return True
        with self._lock:
            if self._waiting >= self._queued:
                return False
            self._waiting += 1
        try:
            return self._slots.acquire(timeout=self._wait_seconds)
        finally:
            with self._lock:
                self._waiting -= 1

    def leave(self) -> None:
        self._slots.release()


class ApiServer:
    # Many clients connecting at once would be reset with a small backlog (the stack binds the
    # socket it hands to the API's process with this one too).
    request_queue_size = 1024

    def __init__(
        self,
        address: tuple[str, int],
        invoke: Invoke,
        tokens: Mapping[str, str],
        *,
        access_log: bool,
        storage_failure: Callable[[], str | None] | None = None,
        listening: socket.socket | None = None,
        limits: Limits = DEFAULT_LIMITS,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        """`listening`: a socket already bound and listening (the stack binds it, then hands it to
        the API's process), used instead of binding `address`."""
        self.invoke = invoke
        self.tokens = dict(tokens)
        self.access_log = access_log
        self.limits = limits
        self.monotonic = monotonic
        self.stopping = False
        # Asked after a write failed: why the data directory refuses writes, if it does.
        self.storage_failure = storage_failure or (lambda: None)
        self.admission = Admission(limits.active, limits.queued, limits.queue_seconds)
        if listening is None:
            listening = socket.create_server(address, backlog=self.request_queue_size)
        self.socket = listening
        self.server_address = listening.getsockname()
        self._lock = threading.Lock()
        self._open = 0
        self._stop = threading.Event()
        self._stopped = threading.Event()

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        return f"http://{host!s}:{port}"

    def serve_forever(self, poll_interval: float = 0.5) -> None:
        """Accept connections, one thread each, until `shutdown`."""
        self._stopped.clear()
        self.socket.settimeout(poll_interval)
        try:
            while not self._stop.is_set():
                try:
                    connection, client = self.socket.accept()
                except TimeoutError:
                    continue
                except OSError as exc:
                    if self._stop.is_set():
                        break
                    logger.warning("cannot accept a connection", extra={"error": repr(exc)})
                    self._stop.wait(poll_interval)  # (out of descriptors: let some close)
                    continue
                threading.Thread(target=self._serve, args=(connection, client), daemon=True).start()
        finally:
            self._stopped.set()

    def shutdown(self) -> None:
        """Stop accepting; returns once `serve_forever` has. Open connections end on their own."""
        self._stop.set()
        self._stopped.wait()

    def server_close(self) -> None:
        self.socket.close()

    def owner_for(self, authorization: str | None) -> str | None:
        """The owner of a `Bearer <token>` header; None when it is missing or unknown."""
        scheme, _, token = (authorization or "").strip().partition(" ")
        token = token.strip()
        if scheme.lower() != "bearer" or not token:
            return None
        found = None
        for known, owner in self.tokens.items():  # compare them all, in constant time
            if hmac.compare_digest(known.encode(), token.encode()):
                found = owner
        return found

    def _serve(self, connection: socket.socket, client: Any) -> None:
        with self._lock:
            self._open += 1
            crowded = self._open > self.limits.connections
        try:
            connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            Connection(self, connection).serve(crowded)
        except GONE as exc:
            logger.info("client disconnected", extra={"client": str(client), "error": repr(exc)})
        except Exception:
            logger.exception("request failed", extra={"client": str(client)})
        finally:
            connection.close()
            with self._lock:
                self._open -= 1

    def check(self, method: str, path: str, headers: Mapping[str, str]) -> None:
        """What is refused before the body is read: the method, the stack's state, the caller."""
        if method not in METHODS:
            allow = {"Allow": ", ".join(sorted(METHODS))}
            raise Refused(405, f"method {method} is not allowed", allow)
        if self.stopping:
            raise Refused(503, "the local stack is stopping")
        public = method in ("GET", "HEAD") and path in PUBLIC_PATHS
        authorization = header(headers, "authorization")
        if self.owner_for(authorization) is None and not public:
            message = "unknown bearer token" if authorization else "missing bearer token"
            raise Refused(
                401,
                f"{message}: send Authorization: Bearer <token>",
                {"WWW-Authenticate": 'Bearer realm="punctual"'},
            )

    def respond(
        self, method: str, path: str, query: str, headers: dict[str, str], body: bytes | None
    ) -> Reply:
        """Run the API function on a request that passed `check`, once an admission slot is free."""
        if not self.admission.enter():
            raise Refused(503, "the local API is busy: retry shortly", retry_after())
        try:
            owner = self.owner_for(header(headers, "authorization"))
            # Credentials stop here, as API Gateway's IAM authorization keeps them from the function.
            headers = {k: v for k, v in headers.items() if k.lower() != "authorization"}
            called = "GET" if method == "HEAD" else method
            event = api_event(called, path, owner=owner, query=query, headers=headers, body=body)
            response = self.invoke(event)
        except Exception as exc:
            logger.exception("API handler failed", extra={"method": method, "path": path})
            # Said by the failed call itself: a status asked afterwards can find the disk taking
            # writes again, as a small write fits where this one did not.
            why = storage_failed(exc)
            if why is not None:
                raise Refused(503, _refusing(why), {"Retry-After": "60"}) from exc
            response = {
                "statusCode": 502,
                "headers": {"Content-Type": "application/json"},
                "body": json.dumps({"message": "Internal server error"}),
            }
        finally:
            # The slot bounds work in the function, not a slow client's reading of the answer: it is
            # free before the answer is sent, so a client that has its answer finds it free.
            self.admission.leave()
        status = int(response.get("statusCode") or 502)
        if method in _WRITES and status >= 500:
            # Asked each time: moto's store takes writes again by itself once its disk has room, and a
            # call that stores nothing (a preview) never needs it.
            why = self.storage_failure()
            if why:
                raise Refused(503, _refusing(why), {"Retry-After": "60"})
        raw = response.get("body") or ""
        data = base64.b64decode(raw) if response.get("isBase64Encoded") else str(raw).encode()
        answer: dict[str, list[str]] = {k: [str(v)] for k, v in (response.get("headers") or {}).items()}
        for name, values in (response.get("multiValueHeaders") or {}).items():  # payload 1.0
            answer[name] = [str(v) for v in values]
        if response.get("cookies"):  # payload 2.0
            answer["Set-Cookie"] = [str(c) for c in response["cookies"]]
        return Reply(status, data, answer)


def storage_failed(exc: BaseException) -> str | None:
    """Why the local store refused a write, if `exc` (or what it was raised from) is that refusal."""
    seen: BaseException | None = exc
    for _ in range(10):  # a chain is short; a cycle must not hang a request
        if seen is None:
            return None
        error = getattr(seen, "response", None)
        if isinstance(error, dict) and error.get("Error", {}).get("Code") == STORAGE_FAILED:
            return str(error["Error"].get("Message") or "the disk refused the write")
        seen = seen.__cause__ or seen.__context__
    return None


def _refusing(why: str) -> str:
    return f"the local stack cannot save changes to its data directory, so it refuses them: {why}"
