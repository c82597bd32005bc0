"""moto's server for the local stack, in a process of its own.

moto did most of the local stack's work (bench/precision.py at 20 jobs/s: 71 % of the CPU time was
moto's request handling) and shared one interpreter, so one core, with the handlers that wait on it.
In its own process it has a core and a GIL of its own.

    python -m punctual_local.moto.process --port 0 [--data-dir DIR [--reset]]

prints `port <N>` once it listens on 127.0.0.1, or `error <why>` (`data-error <why>` for its data
directory) and exits 1. With a data directory its tables are durable (durable.py): once the stack
has created them it writes `restore <epoch ms>` on moto's standard input, and moto answers
`restored <JSON>` (what was read back, the unfinished executions among it) or `error <why>`. It
exits when its standard input closes, once the journal is on disk: the stack closes it to stop moto,
and the system closes it when the stack dies.
"""

from __future__ import annotations

import argparse
import functools
import io
import json
import logging
import os
import selectors
import signal
import socket
import sys
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from punctual_local.moto.durable import DurableTables

HOST = "127.0.0.1"
# A call to moto ends its waits (for its request, its turn in the gate, the journal's fsync) by asking
# for the interpreter lock, which a busy thread gives up only after the switch interval: 5 ms by
# default, several times a call. After a burst of 1,000, with moto busy writing its outcomes, that
# made each of the API's calls 15-20 ms, and creation fell under 50 a second in some runs; at 1 ms its
# slowest second was 66 or more in each of twelve runs since (docs/scaling.md).
SWITCH_INTERVAL_SECONDS = 0.001


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m punctual_local.moto.process")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--data-dir", type=Path, default=None)
    parser.add_argument("--reset", action="store_true")
    args = parser.parse_args(argv)
    # Ctrl-C reaches the terminal's whole process group: the stack still needs moto to save its data.
    signal.signal(signal.SIGINT, signal.SIG_IGN)

    from moto.moto_server.werkzeug_app import (
        DomainDispatcherApplication,
        MotoRequestHandler,
        create_backend_app,
    )
    from werkzeug.serving import make_server

    from punctual_local import collector
    from punctual_local.moto.atomic import make_queues_atomic, make_writes_atomic
    from punctual_local.moto.durable import DurableApp, DurableTables, install_hooks
    from punctual_local.moto.faults import ENVIRONMENT_SWITCH, FillableDisk
    from punctual_local.moto.gate import MOTO_SLOTS, Gate, MotoGate
    from punctual_local.moto.journal import StoreError
    from punctual_local.moto.speedups import speed_up_dynamodb

    for noisy in ("werkzeug", "moto"):
        logging.getLogger(noisy).setLevel(logging.ERROR)
    tables = None
    # Tests fill the journal's disk on demand through this switch; the stack never sets it.
    disk = FillableDisk() if os.environ.get(ENVIRONMENT_SWITCH) == "1" else None
    if args.data_dir is not None:
        try:
            tables = DurableTables(args.data_dir, reset=args.reset, opener=disk.open if disk else None)
        except StoreError as exc:
            print(f"data-error {exc}", flush=True)
            return 1
        install_hooks()  # before the write lock, so that the journal's order is moto's
    make_writes_atomic()
    make_queues_atomic()
    speed_up_dynamodb()
    query_only_the_partition()
    lighten_sqs_receives()
    list_actions_once()
    parse_headers_plainly()
    answer_invocations_with_their_event()
    app: Any = DomainDispatcherApplication(create_backend_app)
    remember_each_services_app(app)
    app = MotoGate(JsonCallsLane(app), Gate(MOTO_SLOTS))
    sys.setswitchinterval(SWITCH_INTERVAL_SECONDS)
    collector.freeze_after_full_passes()  # the table's objects: collector.py says why
    # Bound here rather than by werkzeug, which exits the process when the port is taken.
    try:
        listener = socket.create_server((HOST, args.port))
    except OSError as exc:
        print(f"error {exc}", flush=True)
        return 1
    if tables is not None:
        app = DurableApp(app, tables, disk)
    with listener:
        server = make_server(
            HOST,
            args.port,
            app,
            threaded=True,
            request_handler=keep_alive_handler(MotoRequestHandler),
            fd=listener.fileno(),
        )
    threading.Thread(target=_follow_stdin, args=(tables,), name="stdin", daemon=True).start()
    print(f"port {server.port}", flush=True)
    server.serve_forever(0.2)
    return 0


def lighten_sqs_receives() -> None:
    """Two costs of moto's ReceiveMessage that grew with the queue, under a burst most of moto's time.

    - For every message it hands out, it checks the message against the queue's retention period
      by asking for all of the queue's attributes, which counts the visible, in-flight and delayed
      messages one by one: a receive cost the square of what the queue held (executions claimed
      ahead of their instant hold their messages in flight). The period is read from its field.
    - Each look at a message (visible? delayed?) read the time through moto's unix_time, which
      builds two datetimes and runs an import: the time is read as time.time(), the same clock.
    """
    import moto.sqs.models as sqs_models
    from moto.core.utils import unix_time as moto_unix_time

    def unix_time(dt: Any = None) -> float:
        return time.time() if dt is None else float(moto_unix_time(dt))

    def unix_time_millis(dt: Any = None) -> float:
        return unix_time(dt) * 1000.0

    def is_message_valid_based_on_retention_period(self: Any, queue_name: str, message: Any) -> bool:
        retention = int(self.get_queue(queue_name).message_retention_period)
        return bool(retention + (message.sent_timestamp or 0) / 1000 > unix_time())

    sqs_models.unix_time = unix_time
    sqs_models.unix_time_millis = unix_time_millis
    sqs_models.SQSBackend.is_message_valid_based_on_retention_period = (  # type: ignore[method-assign]
        is_message_valid_based_on_retention_period
    )


def parse_headers_plainly() -> None:
    """http.server reads each request's headers through the email package's parser, a tenth of moto's
    CPU under a creation flood. The stack's requests carry plain `Name: value` lines, read here into
    the same HTTPMessage; anything else (a folded line, a line without a colon) still goes to the
    email parser."""
    import email.parser
    import http.client

    read_lines = getattr(http.client, "_read_headers", None)
    if read_lines is None:  # (not in every Python: then the parser as it is)
        return

    def parse_headers(fp: Any, _class: Any = http.client.HTTPMessage) -> Any:
        lines = read_lines(fp)
        message = _class()
        for line in lines[:-1]:  # the last: the blank line that ends them
            name, colon, value = line.decode("iso-8859-1").partition(":")
            if not colon or not name or name != name.strip():
                return email.parser.Parser(_class=_class).parsestr(b"".join(lines).decode("iso-8859-1"))
            message[name] = value.lstrip(" \t").rstrip("\r\n")
        return message

    http.client.parse_headers = parse_headers


def list_actions_once() -> None:
    """moto finds which actions a service's handler answers by listing the class's members on every
    request (inspect.getmembers: a few percent of each DynamoDB call). A class's members do not change
    while it serves: listed once per class."""
    import moto.core.responses as core_responses

    core_responses.method_names_from_class = functools.lru_cache(maxsize=None)(
        core_responses.method_names_from_class
    )


def answer_invocations_with_their_event() -> None:
    """moto runs a Lambda function only in Docker, which the local stack does without: its simpler
    Lambda keeps the functions created in it and answers each invocation with the event it was
    given, so that a `lambda` task can be tried locally end to end."""
    from moto.core.models import default_user_config

    default_user_config["lambda"] = {"use_docker": False}


class JsonCallsLane:
    """WSGI: DynamoDB's and SQS's calls (a POST to / naming its action in X-Amz-Target) go straight to
    moto's handler for the service, not through its Flask app.

    For each such call moto's server finds the service's Flask app, which routes the one URL those
    services have to the handler, wraps the request and the answer and runs its CORS hook: a fifth
    of moto's CPU per DynamoDB call (sampled, under the calibration's load). The handler here gets
    the request as the app would have given it (moto's Request, marked as coming from its server),
    and its answer becomes the response the app would have made; the CORS headers, which no AWS SDK
    reads, are left out. Anything else goes to the app.
    """

    def __init__(self, app: Any) -> None:
        from botocore.exceptions import ClientError
        from flask import Response
        from moto.core.request import Request
        from moto.dynamodb.responses import DynamoHandler
        from moto.sqs.responses import SQSResponse

        class ServerRequest(Request):
            from_wsgi_server = True

        self._app = app
        self._request = ServerRequest
        self._response = Response
        self._client_error = ClientError
        self._handlers = {"DynamoDB_20120810": DynamoHandler.dispatch, "AmazonSQS": SQSResponse.dispatch}

    def __call__(self, environ: dict[str, Any], start_response: Any) -> Any:
        handler = None
        if environ.get("REQUEST_METHOD") == "POST" and environ.get("PATH_INFO") == "/":
            handler = self._handlers.get(environ.get("HTTP_X_AMZ_TARGET", "").partition(".")[0])
        if handler is None:
            return self._app(environ, start_response)
        request = self._request(environ)
        try:
            result = handler(request, request.raw_url, dict(request.headers))
        except self._client_error as exc:  # (as moto's app answers one)
            result = 400, {}, exc.response["Error"]["Message"]
        status, headers, content = result if len(result) == 3 else (200, {}, result)
        return self._response(response=content, status=status, headers=headers)(environ, start_response)


_request = threading.local()


def keep_alive_handler(base: Any) -> Any:
    """moto's request handler, keeping each client's connection open between requests.

    werkzeug's development server closes every connection after its response, because http.server
    cannot skip a body the application left unread, and after each response it reads whatever the
    socket still holds and throws it away. So every moto call cost a TCP connection, a server thread
    and a client-side connect: a quarter of the stack's and moto's time under load. This handler reads
    each Content-Length body in full before the application sees it, so the stream stands at the next
    request line; only for such a request is the connection kept and the discarding read skipped
    (it would swallow the client's next request). A chunked body still closes the connection.
    Responses go out without Nagle's delay, since headers and body are written separately.
    """
    import werkzeug.serving

    werkzeug.serving.selectors = _SkipDrainWhenBodyRead  # type: ignore[assignment]

    class KeepAliveHandler(base):
        disable_nagle_algorithm = True
        protocol_version = "HTTP/1.1"

        def make_environ(self) -> dict[str, Any]:
            environ: dict[str, Any] = super().make_environ()
            _request.whole_body_read = False
            if environ.get("HTTP_TRANSFER_ENCODING", "").lower() == "chunked":
                return environ
            try:
                length = int(environ.get("CONTENT_LENGTH") or 0)
            except ValueError:
                return environ
            environ["wsgi.input"] = io.BytesIO(self.rfile.read(length) if length > 0 else b"")
            _request.whole_body_read = True
            return environ

        def send_header(self, keyword: str, value: str) -> None:
            if keyword.lower() == "connection" and value.lower() == "close" and _body_read():
                return
            super().send_header(keyword, value)

    return KeepAliveHandler


def _body_read() -> bool:
    return bool(getattr(_request, "whole_body_read", False))


class _NothingLeft:
    """The selector of werkzeug's discarding read, when the request's body was read in full."""

    def register(self, *args: Any) -> None:
        pass

    def select(self, timeout: float | None = None) -> list[Any]:
        return []

    def close(self) -> None:
        pass


class _SkipDrainWhenBodyRead:
    """Stands in for the selectors module inside werkzeug.serving, which uses it only for that read."""

    EVENT_READ = selectors.EVENT_READ

    @staticmethod
    def DefaultSelector() -> Any:
        return _NothingLeft() if _body_read() else selectors.DefaultSelector()


# Services whose backend follows from the signed service name and the X-Amz-Target prefix alone.
_KEYED_SERVICES = frozenset({"dynamodb", "sqs"})


def remember_each_services_app(app: Any) -> None:
    """Find a DynamoDB or SQS request's backend once per service, not on every request.

    moto's DomainDispatcherApplication works out each request's service under one lock, matching the
    host against every backend's URL patterns: a fifth of its server's time under the local stack's
    load, and a point where all requests queue. For the two services the stack calls on every
    execution, the answer depends only on the SigV4 credential scope's service and the target's
    prefix (DynamoDB_20120810 or DynamoDBStreams_...), so it is kept per such key; other requests
    are dispatched as moto does.
    """
    original = app.get_application
    known: dict[tuple[str, str], Any] = {}

    def get_application(environ: dict[str, Any]) -> Any:
        key = _service_key(environ)
        if key is None:
            return original(environ)
        found = known.get(key)
        if found is None:
            found = known[key] = original(environ)
        return found

    app.get_application = get_application


def _service_key(environ: dict[str, Any]) -> tuple[str, str] | None:
    path = environ.get("PATH_INFO", "")
    if not isinstance(path, str) or path.startswith(("/moto-api", "/latest/", "/_punctual")):
        return None
    try:  # "AWS4-HMAC-SHA256 Credential=<key>/<date>/<region>/<service>/aws4_request, ..."
        service = environ["HTTP_AUTHORIZATION"].split(",")[0].split()[1].split("/")[3].lower()
    except (KeyError, IndexError):
        return None
    if service not in _KEYED_SERVICES:
        return None
    return service, environ.get("HTTP_X_AMZ_TARGET", "").partition(".")[0]


_partition = threading.local()
_QUERY_INDEX_NAME_ARG = 6  # Table.query(hash_key, range_comparison, ..., index_name, ...): its place


def query_only_the_partition() -> None:
    """Answer a query on the table's own key from that partition's items, as DynamoDB does.

    moto 5's Table.query sorts every item of the table (all_items) and then keeps the partition's,
    so each of the scanner's queries (shards x minutes, every tick) cost more as the table grew:
    a tick took seconds at the precision benchmark's 7,000 items, and moto was busy for the handlers
    meanwhile. While a thread runs such a query, all_items returns only the partition's items, in
    the order all_items would. Queries on an index, and everything else, are left as they are.
    """
    from moto.dynamodb.models.table import Table

    if getattr(Table, "_punctual_partition_queries", False):
        return
    original_query, original_all_items = Table.query, Table.all_items

    def query(self: Any, hash_key: Any, *args: Any, **kwargs: Any) -> Any:
        index_name = args[_QUERY_INDEX_NAME_ARG] if len(args) > _QUERY_INDEX_NAME_ARG else None
        if index_name is not None or kwargs.get("index_name") is not None or hash_key is None:
            return original_query(self, hash_key, *args, **kwargs)
        _partition.key = hash_key
        try:
            return original_query(self, hash_key, *args, **kwargs)
        finally:
            _partition.key = None

    def all_items(self: Any) -> Any:
        key = getattr(_partition, "key", None)
        if key is None or not self.range_key_attr:
            return original_all_items(self)
        return sorted(self.items.get(key, {}).values(), key=lambda item: item.range_key)

    Table.query = query  # type: ignore[method-assign]
    Table.all_items = all_items  # type: ignore[method-assign]
    Table._punctual_partition_queries = True  # type: ignore[attr-defined]


def _follow_stdin(tables: DurableTables | None) -> None:
    from punctual_local.moto.journal import StoreError

    for line in sys.stdin:
        word, _, argument = line.strip().partition(" ")
        if word == "restore" and tables is not None:
            try:
                found = tables.restore(int(argument))
            except (StoreError, OSError, ValueError) as exc:
                print(f"error {exc}", flush=True)
            else:
                print(f"restored {json.dumps(found)}", flush=True)
    if tables is not None:
        tables.close()
    os._exit(0)


if __name__ == "__main__":
    sys.exit(main())
