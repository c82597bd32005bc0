"""moto's server for the local stack, in a process of its own.

moto did most of the local stack's work (bench/precision.py at 20 jobs/s: 71 % of the CPU time was
moto's request handling) and shared one interpreter, so one core, with the handlers that wait on it.
In its own process it has a core and a GIL of its own.

    python -m punctual.local.moto_process --port 0

prints `port <N>` once it listens on 127.0.0.1, or `error <why>` and exits 1. It exits when its
standard input closes: the stack closes it to stop moto, and the system closes it when the stack dies.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import socket
import sys
import threading

HOST = "127.0.0.1"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m punctual.local.moto_process")
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args(argv)
    # Ctrl-C reaches the terminal's whole process group: the stack still needs moto to save its data.
    signal.signal(signal.SIGINT, signal.SIG_IGN)

    from moto.moto_server.werkzeug_app import (
        DomainDispatcherApplication,
        MotoRequestHandler,
        create_backend_app,
    )
    from werkzeug.serving import make_server

    from punctual.moto_atomic import make_writes_atomic

    for noisy in ("werkzeug", "moto"):
        logging.getLogger(noisy).setLevel(logging.ERROR)
    make_writes_atomic()
    # Bound here rather than by werkzeug, which exits the process when the port is taken.
    try:
        listener = socket.create_server((HOST, args.port))
    except OSError as exc:
        print(f"error {exc}", flush=True)
        return 1
    with listener:
        server = make_server(
            HOST,
            args.port,
            DomainDispatcherApplication(create_backend_app),
            threaded=True,
            request_handler=MotoRequestHandler,
            fd=listener.fileno(),
        )
    threading.Thread(target=_exit_when_stdin_closes, name="stdin", daemon=True).start()
    print(f"port {server.port}", flush=True)
    server.serve_forever(0.2)
    return 0


def _exit_when_stdin_closes() -> None:
    sys.stdin.buffer.read()
    os._exit(0)


if __name__ == "__main__":
    sys.exit(main())
