"""The local stack's API function in a process of its own, as on AWS it runs apart from the workers.

In the stack's process the API shared one interpreter with the worker handlers. At a burst's instant a
thousand executions start there at once, and the creations of the same second got what little of the
interpreter was left: 34 to 45 a second from 8 clients, where the promise is 50. Here the API has an
interpreter of its own, and the operating system shares the cores between the two processes.

    python -m punctual_local.api_process --socket-fd N --notices-fd M [--json-logs] [--verbose]

The stack binds the API's port (so that a port in use is refused before anything starts) and passes the
listening socket as descriptor N. The process loads the API's modules while the stack starts moto;
then its standard input carries one JSON line (Config) and stays open: the process stops when it
closes (the stack closes it to stop the API, the system when the stack dies). On descriptor M it
writes one line each:

    ready                       serving
    error <why>                 could not start (then exits 1)
    coming <count> <queue url>  held messages (API hand-offs) about to come due: HoldingSqs.on_coming,
                                so that the stack starts pollers for them in time

Delayed sends are held here as in the stack (holding.py): the API's hand-offs are released to moto
when due. They are journaled as the stack's are, in the same file (queue_journal.py), so what is held
when the process stops is held again by the stack on its next start.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import socket
import sys
import threading
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import IO, Any

STOP_SECONDS = 2.0
# Below the stack's process on a busy machine: at a burst's instant its thousand starts and the API's
# creations both want a core, and a start is the scarcer (a creation can wait a moment). The kernel
# gives an idle core to either.
NICENESS = 5


@dataclass(frozen=True)
class Config:
    settings: dict[str, Any]  # Settings.model_dump(mode="json")
    tokens: dict[str, str]
    moto_url: str
    access_log: bool
    data_dir: str  # where the work queue's journal is

    def line(self) -> str:
        return json.dumps(asdict(self)) + "\n"


class Notices:
    """Lines to the stack, one whole line per write, from any thread."""

    def __init__(self, stream: IO[str]) -> None:
        self._stream = stream
        self._lock = threading.Lock()

    def send(self, line: str) -> None:
        with self._lock:
            try:
                self._stream.write(line + "\n")
                self._stream.flush()
            except (OSError, ValueError):
                pass  # the stack is gone: this process ends when its input closes

    def coming(self, queue_url: str, count: int) -> None:
        self.send(f"coming {count} {queue_url}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m punctual_local.api_process")
    parser.add_argument("--socket-fd", type=int, required=True)
    parser.add_argument("--notices-fd", type=int, required=True)
    parser.add_argument("--json-logs", action="store_true")
    parser.add_argument("--verbose", action="store_true")
    args = parser.parse_args(argv)
    # Ctrl-C reaches the terminal's whole process group: the stack decides when the API stops.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    os.nice(NICENESS)
    from punctual_local import collector

    collector.freeze_after_full_passes()
    notices = Notices(os.fdopen(args.notices_fd, "w", encoding="utf-8"))
    listening = socket.socket(fileno=args.socket_fd)
    try:
        from punctual_local import logs

        logs.configure(json_logs=args.json_logs, verbose=args.verbose)
        from punctual.platform import resources
        from punctual_local import clients
        from punctual_local.pollers import load_handler

        clients.add_source_root()
        handler = load_handler(resources.FUNCTIONS["api"], fresh=False)
    except Exception as exc:
        notices.send(f"error {type(exc).__name__}: {exc}")
        return 1
    first = sys.stdin.readline()
    if not first:
        return 0  # the stack stopped before it configured this process
    try:
        server, holding = _serve(Config(**json.loads(first)), handler, listening, notices)
    except Exception as exc:
        notices.send(f"error {type(exc).__name__}: {exc}")
        return 1
    # Ready is said before the first answer: a client that got one may rely on the stack knowing
    # this process serves (early connections wait in the listening socket's backlog meanwhile).
    notices.send("ready")
    threading.Thread(target=server.serve_forever, args=(0.2,), name="api", daemon=True).start()
    for _ in sys.stdin:
        pass  # nothing more is said: the input stays open while the stack runs
    server.stopping = True
    stopper = threading.Thread(target=server.shutdown, daemon=True)
    stopper.start()
    stopper.join(STOP_SECONDS)
    holding.stop()
    sys.stdout.flush()
    sys.stderr.flush()
    # Without waiting for requests still in their handler threads: the stack is stopping.
    os._exit(0)


def _serve(config: Config, handler: Any, listening: socket.socket, notices: Notices) -> tuple[Any, Any]:
    """The API handler behind an ApiServer on `listening`, wired to moto; not yet serving."""
    from punctual import wiring
    from punctual.platform.clock import SystemClock
    from punctual.platform.config import Settings
    from punctual_local import clients
    from punctual_local.holding import HoldingSqs
    from punctual_local.lambda_events import FakeLambdaContext
    from punctual_local.moto.gate import api_read
    from punctual_local.queue_journal import JournaledSqs, QueueJournal
    from punctual_local.server import ApiServer
    from punctual_local.threaded_api import install

    # The server answers in threads; the API's resolvers are made for one request at a time.
    install()
    settings = Settings(**config.settings)
    aws = clients.connect(config.moto_url, api_reads=True)
    clock = SystemClock()
    holding = HoldingSqs(aws.sqs, clock, on_coming=notices.coming)
    holding.start()
    punctual = wiring.build(
        settings,
        clock=clock,
        dynamodb=aws.dynamodb,
        dynamodb_client=aws.dynamodb_client,
        sqs=JournaledSqs(holding, QueueJournal(Path(config.data_dir)), clock, [settings.queue_url]),
        lambda_clients=wiring.lambda_clients_for(settings, aws.session),
        aws_clients=wiring.aws_clients_for(settings, aws.session),
    )
    wiring.set_default(punctual)

    def invoke(event: dict[str, Any]) -> dict[str, Any]:
        method = event.get("httpMethod") or event["requestContext"]["http"]["method"]
        # A read's store calls wait behind the executions' in moto (gate.MotoGate); a write's do not.
        with api_read() if method == "GET" else contextlib.nullcontext():
            return dict(handler(event, FakeLambdaContext(function_name="punctual-api")))

    server = ApiServer(
        listening.getsockname()[:2],
        invoke,
        config.tokens,
        access_log=config.access_log,
        storage_failure=clients.storage_failure(config.moto_url),
        listening=listening,
    )
    return server, holding


if __name__ == "__main__":
    sys.exit(main())
