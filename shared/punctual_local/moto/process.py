"""moto's server for the local stack, in a process of its own.

moto did most of the local stack's work (bench/precision/ at 20 jobs/s: 71 % of the CPU time was
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
import json
import logging
import os
import signal
import socket
import sys
import threading
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
    from punctual_local.moto.data_files import StoreError
    from punctual_local.moto.durable import DurableTables
    from punctual_local.moto.durable_app import DurableApp
    from punctual_local.moto.faults import ENVIRONMENT_SWITCH, FillableDisk
    from punctual_local.moto.gate import MOTO_SLOTS, Gate, MotoGate
    from punctual_local.moto.serving import (
        JsonCallsLane,
        keep_alive_handler,
        parse_headers_plainly,
        remember_each_services_app,
    )
    from punctual_local.moto.speedups import (
        lighten_sqs_receives,
        list_actions_once,
        query_only_the_partition,
        route_each_request_once,
        speed_up_dynamodb,
    )
    from punctual_local.moto.write_hooks import install_hooks

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
    route_each_request_once()
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


def answer_invocations_with_their_event() -> None:
    """moto runs a Lambda function only in Docker, which the local stack does without: its simpler
    Lambda keeps the functions created in it and answers each invocation with the event it was
    given, so that a `lambda` task can be tried locally end to end."""
    from moto.core.models import default_user_config

    default_user_config["lambda"] = {"use_docker": False}


def _follow_stdin(tables: DurableTables | None) -> None:
    from punctual_local.moto.data_files import StoreError

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
