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
every caller's calls in to moto's handler a few at a time, the stack's bookkeeping last.

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


class Gate:
    """At most `slots` holders at once; waiting `first` callers are let in first, then the others,
    `last` callers after them until the oldest has waited `last_limit` seconds, then in turn with
    them."""

    def __init__(
        self,
        slots: int = SLOTS,
        last_limit: float = LAST_LIMIT_SECONDS,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._lock = threading.Lock()
        self._monotonic = monotonic
        self.slots = slots
        self._free = slots
        self._last_limit = last_limit
        self._first: deque[threading.Event] = deque()
        self._others: deque[threading.Event] = deque()
        self._last: deque[tuple[float, threading.Event]] = deque()  # with when each began to wait
        self._last_went = False  # whether the last turn handed out while overdue went to `last`

    @contextmanager
    def slot(self, *, first: bool = False, last: bool = False) -> Iterator[None]:
        self._acquire(first, last)
        try:
            yield
        finally:
            self._release()

    @property
    def waiting(self) -> int:
        with self._lock:
            return len(self._first) + len(self._others) + len(self._last)

    def _acquire(self, first: bool, last: bool) -> None:
        with self._lock:
            if self._free > 0:  # (a free slot means no one waits: a release hands its slot on)
                self._free -= 1
                return
            turn = threading.Event()
            if first:
                self._first.append(turn)
            elif last:
                self._last.append((self._monotonic(), turn))
            else:
                self._others.append(turn)
        turn.wait()

    def _release(self) -> None:
        with self._lock:
            overdue = bool(self._last) and self._monotonic() - self._last[0][0] >= self._last_limit
            last_turn = overdue and not self._last_went
            if self._first:
                self._first.popleft().set()  # the slot passes to it
            elif self._others and not last_turn:
                self._last_went = False
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
        if last:
            request.headers[CALL_HEADER] = LAST
        with gate.slot(first=_is_first(request.headers.get("X-Amz-Target", b"")), last=last):
            return send(request)

    endpoint._send = gated_send


def _is_first(target: bytes | str) -> bool:
    return (target.decode() if isinstance(target, bytes) else str(target)).rpartition(".")[2] == _FIRST


class MotoGate:
    """WSGI, inside moto's process: its DynamoDB calls run a few at a time, in the gate's order.

    The stack's gate orders the stack's own calls, but the API's process sends its calls to moto
    without it, and under a burst of a thousand they shared moto with the stack's sixteen by numbers
    alone: two seconds after the instant, when moto spent most of a core writing the burst's outcomes,
    the API created under 50 jobs a second. Here every caller's call waits its turn at moto's
    handler: a BatchGetItem (the runs at their instant wait on it) first, the stack's bookkeeping
    (marked `LAST`) after the others, as in the stack's gate. The API's calls are among the others,
    in the order they came: the stack's gate lets at most sixteen of its calls out at once, so an API
    call waits behind few, and many API clients share moto with the claims rather than go before
    them. The journal's wait for its disk comes after the handler, outside this gate
    (durable.DurableApp), so a slot is only ever held by work in moto's interpreter. Other services'
    calls (SQS's long polls wait without working) go straight to the app.
    """

    def __init__(self, app: Callable[..., Any], gate: Gate) -> None:
        self._app = app
        self.gate = gate

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Any:
        target = environ.get("HTTP_X_AMZ_TARGET", "")
        if not target.startswith(_DYNAMODB):
            return self._app(environ, start_response)
        with self.gate.slot(first=_is_first(target), last=environ.get(_CALL_ENVIRON) == LAST):
            # (the answer's body is made in the call: moto's handlers return it whole)
            return list(self._app(environ, start_response))
