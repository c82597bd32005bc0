"""The local stack's DynamoDB requests to moto: a few at a time, the reads executions wait on first.

moto answers in one interpreter: requests in it at once share its one core, so each takes as much
longer as there are others. When a burst's executions come due while the API creates jobs, the stack
had well over a hundred requests in moto at once, and the read each execution makes at its instant
(whether its job changed: a BatchGetItem, one for up to a hundred executions) took as long as all of
them. Here at most `slots` requests are in moto at once; the others wait their turn in order, and a
BatchGetItem goes before any waiting request of another kind: such a read is short, and what waits on
it (a run at its instant, a listing) is waiting now, where most writes (an outcome, a claim seconds
ahead of its instant) can wait some milliseconds without anyone seeing it. The outcomes written after
runs (punctual.call_class.bookkeeping) wait behind every other call, for `LAST_LIMIT_SECONDS` at most:
at a burst's instant they were two writes an execution, and the creations and claims queued behind
them waited up to 0.8 s each. Past that limit they take every other turn, not every turn: a burst
of 1,000 left two thousand of them overdue at once, and letting them all go first held the scanner's
tick for 20 s. The API's process (api_process.py) has clients of its own: its requests do not queue
here behind a burst's claims, but in moto's process, where a gate of the same kind (`MotoGate`) lets
every caller's calls in to moto's handler a few at a time: the stack's first, then the API's, the
stack's bookkeeping last. Executions come first whatever the API's load: two hundred clients listing
jobs in a loop had put thousands of the API's reads in line with the executions' calls, which then
started more than a minute late.

Only the DynamoDB clients go through the gate: SQS long polls wait in moto without working and would
hold slots for nothing.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from punctual.call_class import is_bookkeeping

# Enough to keep moto busy while some writes wait for the journal's fsync, few enough that a read
# let in shares moto with few others.
SLOTS = 16
# In moto's process a slot holds only moto's work, which shares one interpreter: a few let the next
# request parse while one runs, and a call let in waits behind few others.
MOTO_SLOTS = 4
_FIRST = "BatchGetItem"
_DYNAMODB = "DynamoDB_20120810."
# What a call is for, as the stack marks it for moto's gate.
CALL_HEADER = "X-Punctual-Call"
_CALL_ENVIRON = "HTTP_X_PUNCTUAL_CALL"
LAST = "bookkeeping"
# How long a bookkeeping call waits behind the others at most before it takes its turn among them.
LAST_LIMIT_SECONDS = 2.0
# The calls of the API's process (clients.connect marks them): after the stack's, before its bookkeeping.
API = "api"
# How long an API call waits behind the stack's calls at most before it takes its turn among them.
API_LIMIT_SECONDS = 1.0


class Gate:
    """At most `slots` holders at once. Waiting `first` callers are let in first, then the others, then
    `api` callers (the API's process: at most `api_slots` of them hold slots at once), then `last`
    callers. An `api` or `last` caller that has waited its limit (`api_limit`, `last_limit` seconds)
    takes every other turn from then on, so that neither waits for ever."""

    def __init__(
        self,
        slots: int = SLOTS,
        last_limit: float = LAST_LIMIT_SECONDS,
        monotonic: Callable[[], float] = time.monotonic,
        *,
        api_limit: float = API_LIMIT_SECONDS,
        api_slots: int | None = None,
    ) -> None:
        self._lock = threading.Lock()
        self._monotonic = monotonic
        self.slots = slots
        self._free = slots
        # One slot at least is always left to the stack's calls.
        self._api_slots = api_slots if api_slots is not None else max(1, slots - 1)
        self._api_holding = 0
        self._first: deque[threading.Event] = deque()
        self._others: deque[threading.Event] = deque()
        # With when each began to wait, and how long it waits at most before taking turns.
        self._api: deque[tuple[float, threading.Event]] = deque()
        self._last: deque[tuple[float, threading.Event]] = deque()
        self._limits = {id(self._api): api_limit, id(self._last): last_limit}
        self._overdue_went = False  # whether the last turn handed out went to an overdue caller

    @contextmanager
    def slot(self, *, first: bool = False, last: bool = False, api: bool = False) -> Iterator[None]:
        self._acquire(first, last, api)
        try:
            yield
        finally:
            self._release(api)

    @property
    def waiting(self) -> int:
        with self._lock:
            return len(self._first) + len(self._others) + len(self._api) + len(self._last)

    def _acquire(self, first: bool, last: bool, api: bool) -> None:
        with self._lock:
            # (a free slot means no one waits that could take it: a release hands its slot on)
            if self._free > 0 and (not api or self._api_holding < self._api_slots):
                self._free -= 1
                self._api_holding += api
                return
            turn = threading.Event()
            if api:
                self._api.append((self._monotonic(), turn))
            elif first:
                self._first.append(turn)
            elif last:
                self._last.append((self._monotonic(), turn))
            else:
                self._others.append(turn)
        turn.wait()

    def _release(self, api: bool) -> None:
        with self._lock:
            self._api_holding -= api
            patient = [lane for lane in (self._api, self._last) if lane and self._may_go(lane)]
            now = self._monotonic()
            overdue = [lane for lane in patient if now - lane[0][0] >= self._limits[id(lane)]]
            if self._first:
                self._first.popleft().set()  # the slot passes to it
            elif overdue and not self._overdue_went:
                self._overdue_went = True
                self._hand(min(overdue, key=lambda lane: lane[0][0]))
            elif self._others:
                self._overdue_went = False
                self._others.popleft().set()
            elif patient:
                self._overdue_went = False
                self._hand(patient[0])
            else:
                self._free += 1

    def _may_go(self, lane: deque[tuple[float, threading.Event]]) -> bool:
        return lane is not self._api or self._api_holding < self._api_slots

    def _hand(self, lane: deque[tuple[float, threading.Event]]) -> None:
        self._api_holding += lane is self._api
        lane.popleft()[1].set()


def gate_client(client: Any, gate: Gate) -> None:
    """Send a boto3 DynamoDB client's requests through the gate (every attempt, retries included),
    a bookkeeping call marked as such for moto's own gate (`MotoGate`)."""
    endpoint = client._endpoint
    send = endpoint._send

    def gated_send(request: Any) -> Any:
        last = is_bookkeeping()
        if last:
            request.headers[CALL_HEADER] = LAST
        with gate.slot(first=_is_first(request.headers.get("X-Amz-Target", b"")), last=last):
            return send(request)

    endpoint._send = gated_send


def mark_client(client: Any, call: str) -> None:
    """Mark each of a boto3 DynamoDB client's requests as `call` for moto's gate (`MotoGate`)."""
    endpoint = client._endpoint
    send = endpoint._send

    def marked_send(request: Any) -> Any:
        request.headers[CALL_HEADER] = call
        return send(request)

    endpoint._send = marked_send


def _is_first(target: bytes | str) -> bool:
    return (target.decode() if isinstance(target, bytes) else str(target)).rpartition(".")[2] == _FIRST


class MotoGate:
    """WSGI, inside moto's process: its DynamoDB calls run a few at a time, in the gate's order.

    The stack's gate orders the stack's own calls, but the API's process sends its calls to moto
    without it. Here every caller's call waits its turn at moto's handler: a BatchGetItem of the
    stack (the runs at their instant wait on it) first, then the stack's other calls, then the API's
    (marked `API`), then the stack's bookkeeping (marked `LAST`). The stack's gate lets at most
    sixteen of its calls out at once, so the API's calls wait behind few of them; the API's own are
    as many as its clients, and in line with the stack's they delayed the executions by minutes. The
    API's calls hold all of moto's slots but one at most, and one that waited `API_LIMIT_SECONDS`
    takes every other turn, so that a busy stack slows the API without stopping it (the API answers
    503 rather than queue its callers: server.Limits). The journal's wait for its disk comes after
    the handler, outside this gate (durable.DurableApp), so a slot is only ever held by work in moto's
    interpreter. Other services' calls (SQS's long polls wait without working) go straight to the app.
    """

    def __init__(self, app: Callable[..., Any], gate: Gate) -> None:
        self._app = app
        self.gate = gate

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Any:
        target = environ.get("HTTP_X_AMZ_TARGET", "")
        if not target.startswith(_DYNAMODB):
            return self._app(environ, start_response)
        call = environ.get(_CALL_ENVIRON)
        api = call == API
        with self.gate.slot(first=_is_first(target) and not api, last=call == LAST, api=api):
            # (the answer's body is made in the call: moto's handlers return it whole)
            return list(self._app(environ, start_response))
