"""The local stack's gate on its DynamoDB requests to moto (punctual_local.moto.gate)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from punctual_local import call_order
from punctual_local.moto.gate import (
    API,
    API_WRITE,
    CALL_HEADER,
    FIRST,
    LAST,
    Gate,
    MotoGate,
    api_read,
    gate_client,
    mark_api_reads,
)


def hold(
    gate: Gate,
    first: bool,
    entered: list[str],
    name: str,
    leave: threading.Event,
    *,
    last: bool = False,
) -> threading.Thread:
    def run() -> None:
        with gate.slot(first=first, last=last):
            entered.append(name)
            assert leave.wait(10)

    thread = threading.Thread(target=run)
    thread.start()
    return thread


def line_up(
    gate: Gate, entered: list[str], callers: list[tuple[str, str]]
) -> tuple[list[threading.Thread], dict[str, threading.Event]]:
    """A holder in the gate's slot, then each (name, kind) caller waiting in turn, in that order;
    kind: "first", "last" or "" (any other call). Their threads, and what lets each leave."""
    leave = {name: threading.Event() for name in ["holder", *(name for name, _ in callers)]}
    threads = [hold(gate, False, entered, "holder", leave["holder"])]
    wait_until(lambda: entered == ["holder"])
    for waiting, (name, kind) in enumerate(callers, start=1):
        threads.append(hold(gate, kind == "first", entered, name, leave[name], last=kind == "last"))
        wait_until(lambda waiting=waiting: gate.waiting == waiting)
    return threads, leave


def leave_in_turn(entered: list[str], leave: dict[str, threading.Event], names: tuple[str, ...]) -> None:
    """Each of `names` leaves in turn, and the next caller is let in each time."""
    for count, name in enumerate(names, start=len(entered) + 1):
        leave[name].set()
        wait_until(lambda count=count: len(entered) == count)


def wait_until(condition: Any) -> None:
    done = threading.Event()
    for _ in range(1000):
        if condition():
            return
        done.wait(0.005)
    raise AssertionError("condition not reached")


def test_no_more_than_its_slots_hold_at_once_and_a_release_lets_the_next_in() -> None:
    gate = Gate(2)
    entered: list[str] = []
    leave = [threading.Event() for _ in range(3)]
    # Given two holders and a third caller
    threads = [hold(gate, False, entered, f"c{n}", leave[n]) for n in range(2)]
    wait_until(lambda: len(entered) == 2)
    threads.append(hold(gate, False, entered, "c2", leave[2]))
    wait_until(lambda: gate.waiting == 1)
    # Then the third waits until one of them leaves, and then gets in
    assert entered == ["c0", "c1"]
    leave[0].set()
    wait_until(lambda: len(entered) == 3)
    assert entered[2] == "c2" and gate.waiting == 0
    for event in leave:
        event.set()
    for thread in threads:
        thread.join(10)


def test_a_waiting_first_caller_goes_before_others_that_waited_longer() -> None:
    gate = Gate(1)
    entered: list[str] = []
    # Given a holder, a write waiting, then a read (a BatchGetItem) waiting
    threads, leave = line_up(gate, entered, [("write", ""), ("read", "first")])
    # When the holder leaves, Then the read goes in first, then the write
    leave["holder"].set()
    wait_until(lambda: len(entered) == 2)
    assert entered[1] == "read"
    leave["read"].set()
    wait_until(lambda: len(entered) == 3)
    assert entered[2] == "write"
    leave["write"].set()
    for thread in threads:
        thread.join(10)


def test_bookkeeping_waits_behind_the_others_until_it_has_waited_its_limit() -> None:
    gate = Gate(1, last_limit=60)
    entered: list[str] = []
    # Given a holder, an outcome waiting, then a claim waiting
    threads, leave = line_up(gate, entered, [("outcome", "last"), ("claim", "")])
    # When the holder leaves, Then the claim goes in first, then the outcome
    leave["holder"].set()
    wait_until(lambda: len(entered) == 2)
    assert entered[1] == "claim"
    leave["claim"].set()
    wait_until(lambda: len(entered) == 3)
    assert entered[2] == "outcome"
    leave["outcome"].set()
    for thread in threads:
        thread.join(10)


def test_bookkeeping_that_waited_its_limit_goes_before_the_others_but_not_before_reads() -> None:
    now = [100.0]
    gate = Gate(1, last_limit=2.0, monotonic=lambda: now[0])
    entered: list[str] = []
    threads, leave = line_up(gate, entered, [("outcome", "last"), ("claim", ""), ("read", "first")])
    # When the outcome has waited its 2 s and the slot is given back each time
    now[0] += 2.0
    # Then the read, the overdue outcome, then the claim
    leave_in_turn(entered, leave, ("holder", "read", "outcome"))
    assert entered == ["holder", "read", "outcome", "claim"]
    leave["claim"].set()
    for thread in threads:
        thread.join(10)


def test_overdue_bookkeeping_takes_every_other_turn_so_the_others_still_go() -> None:
    now = [100.0]
    gate = Gate(1, last_limit=2.0, monotonic=lambda: now[0])
    entered: list[str] = []
    names = ("holder", "outcome1", "outcome2", "outcome3", "create1", "create2")
    # Given three outcomes waiting, then two creations
    threads, leave = line_up(
        gate, entered, [(name, "last" if name.startswith("outcome") else "") for name in names[1:]]
    )
    # When the outcomes have waited past their limit and each holder leaves in turn
    now[0] += 5.0
    for count in range(2, len(names) + 1):
        leave[entered[-1]].set()
        wait_until(lambda count=count: len(entered) == count)
    # Then outcomes and creations alternate (an outcome first) until the creations have gone
    assert entered == ["holder", "outcome1", "create1", "outcome2", "create2", "outcome3"]
    leave["outcome3"].set()
    for thread in threads:
        thread.join(10)


class Request:
    def __init__(self, target: bytes) -> None:
        self.headers = {"X-Amz-Target": target}


class Endpoint:
    def __init__(self, gate: Gate, seen: list[tuple[str, int]]) -> None:
        self._gate = gate
        self._seen = seen

    def _send(self, request: Request) -> str:
        self._seen.append((request.headers["X-Amz-Target"].decode(), self._gate._free))
        return "response"


class Client:
    def __init__(self, endpoint: Endpoint) -> None:
        self._endpoint = endpoint


def test_a_gated_client_sends_each_request_from_inside_a_slot_and_gives_it_back() -> None:
    gate = Gate(1)
    seen: list[tuple[str, int]] = []
    client = Client(Endpoint(gate, seen))
    gate_client(client, gate)
    # When two requests are sent one after the other through a one-slot gate
    assert client._endpoint._send(Request(b"DynamoDB_20120810.BatchGetItem")) == "response"
    assert client._endpoint._send(Request(b"DynamoDB_20120810.PutItem")) == "response"
    # Then each was sent holding the gate's one slot (none free meanwhile), given back after it
    assert seen == [("DynamoDB_20120810.BatchGetItem", 0), ("DynamoDB_20120810.PutItem", 0)]
    assert gate._free == 1


class RecordingGate(Gate):
    """A gate that lets every call in at once, noting each call's (first, last)."""

    def __init__(self) -> None:
        super().__init__(1)
        self.classes: list[tuple[bool, bool]] = []

    @contextmanager
    def slot(
        self, *, first: bool = False, last: bool = False, api: bool = False, write: bool = False
    ) -> Iterator[None]:
        self.classes.append((first, last))
        yield


class SendingEndpoint(Endpoint):
    """An endpoint that keeps what it is given to send."""

    def __init__(self, gate: Gate) -> None:
        super().__init__(gate, [])
        self.sent: list[Request] = []

    def _send(self, request: Request) -> str:
        self.sent.append(request)
        return "response"


def test_a_gated_client_sends_an_outcome_write_as_bookkeeping() -> None:
    gate = RecordingGate()
    classes = gate.classes
    client = Client(Endpoint(gate, []))
    gate_client(client, gate)
    client._endpoint._send(Request(b"DynamoDB_20120810.UpdateItem"))
    with call_order.bookkeeping():  # (as the stack's store writes an outcome)
        client._endpoint._send(Request(b"DynamoDB_20120810.UpdateItem"))
    client._endpoint._send(Request(b"DynamoDB_20120810.PutItem"))
    assert classes == [(False, False), (False, True), (False, False)]
    assert not call_order.is_bookkeeping()


def test_a_gated_client_marks_its_bookkeeping_calls_for_motos_gate_and_no_other() -> None:
    endpoint = SendingEndpoint(Gate(1))
    sent = endpoint.sent
    client = Client(endpoint)
    gate_client(client, Gate(1))
    client._endpoint._send(Request(b"DynamoDB_20120810.PutItem"))
    with call_order.bookkeeping():
        client._endpoint._send(Request(b"DynamoDB_20120810.UpdateItem"))
    assert [request.headers.get(CALL_HEADER) for request in sent] == [None, LAST]


def test_a_gated_client_lets_a_read_waited_on_in_first_and_marks_it_for_motos_gate() -> None:
    gate = RecordingGate()
    endpoint = SendingEndpoint(gate)
    client = Client(endpoint)
    gate_client(client, gate)
    client._endpoint._send(Request(b"DynamoDB_20120810.Query"))
    with call_order.waited_on():  # (as the stack's store reads an instant's change records)
        client._endpoint._send(Request(b"DynamoDB_20120810.Query"))
    assert gate.classes == [(False, False), (True, False)]
    assert [request.headers.get(CALL_HEADER) for request in endpoint.sent] == [None, FIRST]
    assert not call_order.is_waited_on()


def dynamodb_call(operation: str, *, mark: str | None = None) -> dict[str, Any]:
    environ = {"REQUEST_METHOD": "POST", "PATH_INFO": "/", "HTTP_X_AMZ_TARGET": operation}
    if mark is not None:
        environ["HTTP_X_PUNCTUAL_CALL"] = mark
    return environ


class HeldApp:
    """A WSGI app whose calls each hold until let go, recording the order they came in."""

    def __init__(self) -> None:
        self.entered: list[str] = []
        self.leave: dict[str, threading.Event] = {}

    def __call__(self, environ: dict[str, Any], start_response: Any) -> list[bytes]:
        name = environ["name"]
        self.entered.append(name)
        assert self.leave[name].wait(10)
        start_response("200 OK", [])
        return [name.encode()]

    def call(
        self, app: MotoGate, name: str, environ: dict[str, Any], answers: list[bytes]
    ) -> threading.Thread:
        self.leave[name] = threading.Event()
        environ["name"] = name
        thread = threading.Thread(target=lambda: answers.extend(app(environ, lambda *_: None)))
        thread.start()
        return thread


def test_motos_gate_lets_the_apis_call_in_before_the_stacks_bookkeeping_that_waited_longer() -> None:
    held = HeldApp()
    gate = MotoGate(held, Gate(1, last_limit=60))
    answers: list[bytes] = []
    # Given a call in moto's one slot, an outcome (marked bookkeeping) waiting, then a creation
    threads = [held.call(gate, "holder", dynamodb_call("DynamoDB_20120810.UpdateItem"), answers)]
    wait_until(lambda: held.entered == ["holder"])
    threads.append(
        held.call(gate, "outcome", dynamodb_call("DynamoDB_20120810.UpdateItem", mark=LAST), answers)
    )
    wait_until(lambda: gate.gate.waiting == 1)
    threads.append(held.call(gate, "create", dynamodb_call("DynamoDB_20120810.PutItem", mark=API), answers))
    wait_until(lambda: gate.gate.waiting == 2)
    # When each call in the slot leaves in turn
    for count, name in enumerate(("holder", "create"), start=2):
        held.leave[name].set()
        wait_until(lambda count=count: len(held.entered) == count)
    held.leave["outcome"].set()
    for thread in threads:
        thread.join(10)
    # Then the creation went in before the outcome, and each got its own answer
    assert held.entered == ["holder", "create", "outcome"]
    assert answers == [b"holder", b"create", b"outcome"]
    assert gate.gate.waiting == 0 and gate.gate._free == 1


def test_motos_gate_lets_a_read_in_first_then_the_others_then_the_apis_then_bookkeeping() -> None:
    held = HeldApp()
    gate = MotoGate(held, Gate(1, last_limit=60))
    answers: list[bytes] = []
    # Given a call in moto's one slot, then an outcome, a claim, an API call and a read waiting
    threads = [held.call(gate, "holder", dynamodb_call("DynamoDB_20120810.UpdateItem"), answers)]
    wait_until(lambda: held.entered == ["holder"])
    waiting = [
        ("outcome", dynamodb_call("DynamoDB_20120810.UpdateItem", mark=LAST)),
        ("claim", dynamodb_call("DynamoDB_20120810.UpdateItem")),
        ("create", dynamodb_call("DynamoDB_20120810.PutItem", mark=API)),
        ("read", dynamodb_call("DynamoDB_20120810.BatchGetItem")),
        ("changes", dynamodb_call("DynamoDB_20120810.Query", mark=FIRST)),
    ]
    for count, (name, environ) in enumerate(waiting, start=1):
        threads.append(held.call(gate, name, environ, answers))
        wait_until(lambda count=count: gate.gate.waiting == count)
    # When each call in the slot leaves in turn
    for count in range(2, 7):
        held.leave[held.entered[-1]].set()
        wait_until(lambda count=count: len(held.entered) == count)
    held.leave["outcome"].set()
    for thread in threads:
        thread.join(10)
    # Then the reads went first (an instant's change records as a BatchGetItem), then the claim,
    # then the API's call, the outcome last
    assert held.entered == ["holder", "read", "changes", "claim", "create", "outcome"]


def test_motos_gate_lets_sqs_calls_through_while_its_slots_are_held() -> None:
    held = HeldApp()
    gate = MotoGate(held, Gate(1))
    answers: list[bytes] = []
    # Given a DynamoDB call holding moto's one slot
    holder = held.call(gate, "holder", dynamodb_call("DynamoDB_20120810.Query"), answers)
    wait_until(lambda: held.entered == ["holder"])
    # When an SQS receive (a long poll) and a plain GET come in, Then both reach moto at once
    receive = held.call(gate, "receive", dynamodb_call("AmazonSQS.ReceiveMessage"), answers)
    status = held.call(gate, "status", {"REQUEST_METHOD": "GET", "PATH_INFO": "/_punctual/status"}, answers)
    wait_until(lambda: len(held.entered) == 3)
    assert gate.gate.waiting == 0
    for event in held.leave.values():
        event.set()
    for thread in (holder, receive, status):
        thread.join(10)


def test_motos_gate_lets_the_stacks_calls_in_before_the_apis_that_waited_longer() -> None:
    held = HeldApp()
    gate = MotoGate(held, Gate(1, last_limit=60))
    answers: list[bytes] = []
    # Given a call in moto's one slot, then two API reads (a list, a BatchGetItem), a claim and an
    # outcome waiting, in that order
    threads = [held.call(gate, "holder", dynamodb_call("DynamoDB_20120810.Query", mark=API), answers)]
    wait_until(lambda: held.entered == ["holder"])
    waiting = [
        ("list", dynamodb_call("DynamoDB_20120810.Query", mark=API)),
        ("api read", dynamodb_call("DynamoDB_20120810.BatchGetItem", mark=API)),
        ("claim", dynamodb_call("DynamoDB_20120810.UpdateItem")),
        ("outcome", dynamodb_call("DynamoDB_20120810.UpdateItem", mark=LAST)),
    ]
    for count, (name, environ) in enumerate(waiting, start=1):
        threads.append(held.call(gate, name, environ, answers))
        wait_until(lambda count=count: gate.gate.waiting == count)
    # When each call in the slot leaves in turn
    for count in range(2, 6):
        held.leave[held.entered[-1]].set()
        wait_until(lambda count=count: len(held.entered) == count)
    held.leave["outcome"].set()
    for thread in threads:
        thread.join(10)
    # Then the stack's claim went first, the API's calls in their order (its read is not the stack's
    # read at an instant), the stack's bookkeeping last
    assert held.entered == ["holder", "claim", "list", "api read", "outcome"]


def test_api_calls_take_one_turn_in_three_while_the_stacks_wait() -> None:
    gate = Gate(1)
    entered: list[str] = []
    names = ("holder", "list1", "list2", "claim1", "claim2", "claim3", "claim4")
    threads: list[threading.Thread] = []
    leave = {name: threading.Event() for name in names}

    def hold_api(name: str) -> threading.Thread:
        def run() -> None:
            with gate.slot(api=True):
                entered.append(name)
                assert leave[name].wait(10)

        thread = threading.Thread(target=run)
        thread.start()
        return thread

    # Given two API calls waiting, then four of the stack's
    threads.append(hold(gate, False, entered, "holder", leave["holder"]))
    wait_until(lambda: entered == ["holder"])
    for waiting, name in enumerate(names[1:], start=1):
        threads.append(
            hold_api(name) if name.startswith("list") else hold(gate, False, entered, name, leave[name])
        )
        wait_until(lambda waiting=waiting: gate.waiting == waiting)
    # When each holder leaves in turn
    for count in range(2, len(names) + 1):
        leave[entered[-1]].set()
        wait_until(lambda count=count: len(entered) == count)
    # Then the stack's go first, two at a time, and the API's take every third turn
    assert entered == ["holder", "claim1", "claim2", "list1", "claim3", "claim4", "list2"]
    leave["list2"].set()
    for thread in threads:
        thread.join(10)


def test_api_writes_take_one_turn_in_three_while_the_stacks_wait() -> None:
    gate = Gate(1, write_share=3)
    entered: list[str] = []
    names = ("holder", "list1", "create1", "create2", "claim1", "claim2", "claim3", "claim4")
    threads: list[threading.Thread] = []
    leave = {name: threading.Event() for name in names}

    def hold_api(name: str, **kind: bool) -> threading.Thread:
        def run() -> None:
            with gate.slot(**kind):
                entered.append(name)
                assert leave[name].wait(10)

        thread = threading.Thread(target=run)
        thread.start()
        return thread

    # Given an API read and two API writes waiting, then four of the stack's calls
    threads.append(hold(gate, False, entered, "holder", leave["holder"]))
    wait_until(lambda: entered == ["holder"])
    for waiting, name in enumerate(names[1:], start=1):
        if name.startswith("list"):
            threads.append(hold_api(name, api=True))
        elif name.startswith("create"):
            threads.append(hold_api(name, write=True))
        else:
            threads.append(hold(gate, False, entered, name, leave[name]))
        wait_until(lambda waiting=waiting: gate.waiting == waiting)
    # When each holder leaves in turn
    for count in range(2, len(names) + 1):
        leave[entered[-1]].set()
        wait_until(lambda count=count: len(entered) == count)
    # Then the stack's go first, two at a time; the writes take every third turn of theirs, and the
    # read, which counts every turn not its own, the one after the first write
    assert entered == ["holder", "claim1", "claim2", "create1", "list1", "claim3", "claim4", "create2"]
    leave["create2"].set()
    for thread in threads:
        thread.join(10)


def test_the_apis_calls_leave_a_slot_to_the_stacks() -> None:
    gate = Gate(2, api_slots=1)
    entered: list[str] = []
    leave = {name: threading.Event() for name in ("list1", "list2", "claim")}

    def run(name: str, api: bool) -> None:
        with gate.slot(api=api):
            entered.append(name)
            assert leave[name].wait(10)

    # Given an API call holding one of two slots
    threads = [threading.Thread(target=run, args=("list1", True))]
    threads[0].start()
    wait_until(lambda: entered == ["list1"])
    # When another API call comes, Then it waits though a slot is free
    threads.append(threading.Thread(target=run, args=("list2", True)))
    threads[1].start()
    wait_until(lambda: gate.waiting == 1)
    # And a call of the stack takes that slot at once
    threads.append(threading.Thread(target=run, args=("claim", False)))
    threads[2].start()
    wait_until(lambda: entered == ["list1", "claim"])
    # And the waiting API call goes in when the first leaves
    leave["list1"].set()
    wait_until(lambda: entered == ["list1", "claim", "list2"])
    for event in leave.values():
        event.set()
    for thread in threads:
        thread.join(10)
    assert gate._free == 2 and gate.waiting == 0


def test_a_client_of_the_api_marks_its_reads_and_its_writes_apart() -> None:
    sent: list[Request] = []

    class Recording(Endpoint):
        def _send(self, request: Request) -> str:
            sent.append(request)
            return "response"

    client = Client(Recording(Gate(1), []))
    mark_api_reads(client)
    # When it makes calls for a read (a GET), then for a write
    with api_read():
        client._endpoint._send(Request(b"DynamoDB_20120810.Query"))
        client._endpoint._send(Request(b"DynamoDB_20120810.BatchGetItem"))
    client._endpoint._send(Request(b"DynamoDB_20120810.PutItem"))
    # Then the read's calls are marked as the API's reads, the write's as its writes
    assert [request.headers.get(CALL_HEADER) for request in sent] == [API, API, API_WRITE]
