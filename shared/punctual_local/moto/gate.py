"""The local stack's DynamoDB requests to moto: a few at a time, the reads executions wait on first.

moto answers in one interpreter: requests in it at once share its one core, so each takes as much
longer as there are others. When a burst's executions come due while the API creates jobs, the stack
had well over a hundred requests in moto at once, and the read each execution makes at its instant
(whether its job changed: a BatchGetItem, one for up to a hundred executions) took as long as all of
them. Here at most `slots` requests are in moto at once; the others wait their turn in order, and a
BatchGetItem (or a read marked as waited on: call_order.waited_on, an instant's change records) goes
before any waiting request of another kind: such a read is short, and what waits on it (a run at its
instant, a listing) is waiting now, where most writes (an outcome, a claim seconds
ahead of its instant) can wait some milliseconds without anyone seeing it. The outcomes written after
runs (punctual_local.call_order) wait behind every other call, for `LAST_LIMIT_SECONDS` at most:
at a burst's instant they were two writes an execution, and the creations and claims queued behind
them waited up to 0.8 s each. Past that limit they take every other turn, not every turn: a burst
of 1,000 left two thousand of them overdue at once, and letting them all go first held the scanner's
tick for 20 s. The API's process (api_process.py) has clients of its own: its requests do not queue
here behind a burst's claims, but in moto's process, where a gate of the same kind (`MotoGate`) lets
every caller's calls in to moto's handler a few at a time: the stack's first, then the API's writes
(with a share of the turns), then its reads, the stack's bookkeeping last. Executions come first whatever the API's load: two hundred clients listing
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

from punctual_local.call_order import is_bookkeeping, is_waited_on

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
# A read that runs at their instant wait on (call_order.waited_on): first, as a BatchGetItem.
FIRST = "waited-on"
# How long a bookkeeping call waits behind the others at most before it takes its turn among them.
LAST_LIMIT_SECONDS = 2.0
# The calls of the API's reads (clients.connect marks them): after the stack's, before its bookkeeping.
API = "api"
# While the stack's calls wait, the API's take one turn in this many: a busy stack slows the API's
# answers (by a turn in three at most, not by a wait per call: a request makes several calls in turn)
# without stopping them.
API_SHARE = 3
# The API's reads in moto at once. moto runs its calls in one interpreter, so each call let in beside
# a stack's call takes a share of the CPU that call needs, and a list reads a whole table in moto.
API_SLOTS = 1
# The calls of the API's writes (a creation, a change): after the stack's, before the API's reads.
API_WRITE = "api-write"
# While the stack's calls wait, the API's writes take one turn in this many. Let in as equals,
# without turns, they took half of moto's turns whenever the API's clients kept it busy (16 admitted
# at once against the stack's 16), and a burst's claims and reads at its instant waited behind them.
# One turn in three held creations near 50 a second (a creation is two writes) while a burst of
# 2,000 was read and leased around its instant; one in two raises that, and the reads the burst's
# runs wait on (BatchGetItem, the waited-on reads) still go before either.
WRITE_SHARE = 2


class Gate:
    """At most `slots` holders at once. Waiting `first` callers are let in first, then the others, then
    `api` callers (the API's reads), then `last` callers. While others wait, `api` callers still
    get one turn in `api_share`, and at most `api_slots` of them hold slots at once: a busy stack
    slows the API without stopping it. `last` callers take every other turn once the oldest has
    waited `last_limit` seconds."""

    def __init__(
        self,
        slots: int = SLOTS,
        last_limit: float = LAST_LIMIT_SECONDS,
        monotonic: Callable[[], float] = time.monotonic,
        *,
        api_share: int = API_SHARE,
        api_slots: int = API_SLOTS,
        write_share: int = WRITE_SHARE,
    ) -> None:
        self._lock = threading.Lock()
        self._monotonic = monotonic
        self.slots = slots
        self._free = slots
        self._last_limit = last_limit
        self._api_share = api_share
        self._write_share = write_share
        self._api_slots = min(api_slots, slots)
        self._api_holding = 0
        self._first: deque[threading.Event] = deque()
        self._others: deque[threading.Event] = deque()
        self._api: deque[threading.Event] = deque()
        self._writes: deque[threading.Event] = deque()
        self._last: deque[tuple[float, threading.Event]] = deque()  # with when each began to wait
        self._last_went = False  # whether the last turn handed out while overdue went to `last`
        self._others_went = 0  # turns the others took while an api caller could have, since its last
        self._others_went_w = 0  # turns the others took while a write waited, since the last write's

    @contextmanager
    def slot(
        self, *, first: bool = False, last: bool = False, api: bool = False, write: bool = False
    ) -> Iterator[None]:
        self._acquire(first, last, api, write)
        try:
            yield
        finally:
            self._release(api)

    @property
    def waiting(self) -> int:
        with self._lock:
            return len(self._first) + len(self._others) + len(self._writes) + len(self._api) + len(self._last)

    def _acquire(self, first: bool, last: bool, api: bool, write: bool = False) -> None:
        with self._lock:
            # (a free slot means no one waits that could take it: a release hands its slot on)
            if self._free > 0 and (not api or self._api_holding < self._api_slots):
                self._free -= 1
                self._api_holding += api
                return
            turn = threading.Event()
            if api:
                self._api.append(turn)
            elif write:
                self._writes.append(turn)
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
            api_may = bool(self._api) and self._api_holding < self._api_slots
            overdue = bool(self._last) and self._monotonic() - self._last[0][0] >= self._last_limit
            if self._first:
                self._first.popleft().set()  # the slot passes to it
            elif overdue and not self._last_went:
                self._last_went = True
                self._last.popleft()[1].set()
            elif self._writes and (not self._others or self._others_went_w >= self._write_share - 1):
                self._last_went = False
                self._others_went_w = 0
                self._others_went += api_may
                self._writes.popleft().set()
            elif api_may and (not self._others or self._others_went >= self._api_share - 1):
                self._last_went = False
                self._others_went = 0
                self._api_holding += 1
                self._api.popleft().set()
            elif self._others:
                self._last_went = False
                self._others_went += api_may
                self._others_went_w += bool(self._writes)
                self._others.popleft().set()
            elif self._last:
                self._last_went = True
                self._last.popleft()[1].set()
            else:
                self._free += 1


def gate_client(client: Any, gate: Gate) -> None:
    """Send a boto3 DynamoDB client's requests through the gate (every attempt, retries included),
    a bookkeeping call marked as such for moto's own gate (`MotoGate`)."""
    endpoint = client._endpoint
    send = endpoint._send

    def gated_send(request: Any) -> Any:
        last = is_bookkeeping()
        waited_on = is_waited_on()
        if last:
            request.headers[CALL_HEADER] = LAST
        elif waited_on:
            request.headers[CALL_HEADER] = FIRST
        first = waited_on or _is_first(request.headers.get("X-Amz-Target", b""))
        with gate.slot(first=first and not last, last=last):
            return send(request)

    endpoint._send = gated_send


_reading = threading.local()


@contextmanager
def api_read() -> Iterator[None]:
    """The store calls this thread makes in the block answer a read of the API (a GET): a client
    given to `mark_api_reads` marks them `API` for moto's gate; its other calls (a creation, a
    change) are marked `API_WRITE`."""
    _reading.active = True
    try:
        yield
    finally:
        _reading.active = False


def mark_api_reads(client: Any) -> None:
    """Mark a boto3 DynamoDB client's requests made in `api_read` blocks as `API`, its others as
    `API_WRITE` (`MotoGate`)."""
    endpoint = client._endpoint
    send = endpoint._send

    def marked_send(request: Any) -> Any:
        request.headers[CALL_HEADER] = API if getattr(_reading, "active", False) else API_WRITE
        return send(request)

    endpoint._send = marked_send


def _is_first(target: bytes | str) -> bool:
    return (target.decode() if isinstance(target, bytes) else str(target)).rpartition(".")[2] == _FIRST


class MotoGate:
    """WSGI, inside moto's process: its DynamoDB calls run a few at a time, in the gate's order.

    The stack's gate orders the stack's own calls, but the API's process sends its calls to moto
    without it. Here every caller's call waits its turn at moto's handler: a BatchGetItem of the
    stack (the runs at their instant wait on it) first, then the stack's other calls, then the API's
    writes (marked `API_WRITE`: one turn in `WRITE_SHARE` while the stack's calls wait), then the
    API's reads (its GETs' calls, marked `API`), then the stack's bookkeeping (marked `LAST`). The API's reads are as many as its
    clients, and in line with the stack's calls they delayed the executions by minutes; they hold
    one of moto's slots at a time (`API_SLOTS`) and take one turn in `API_SHARE` while the stack's
    calls wait, so that a busy stack slows the API's reads without stopping them (the API answers
    503 rather than queue its callers). The journal's wait for its disk comes after the handler,
    outside this gate (durable_app.DurableApp), so a slot is only ever held by work in moto's
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
        write = call == API_WRITE
        first = (call == FIRST or _is_first(target)) and not (api or write)
        with self.gate.slot(first=first, last=call == LAST, api=api, write=write):
            # (the answer's body is made in the call: moto's handlers return it whole)
            return list(self._app(environ, start_response))
