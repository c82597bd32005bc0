"""The webhook receiver on loopback, in a child process: it answers the pack's webhooks and stands in
for DynamoDB (an UpdateItem answered at once), and notes when each request arrived. Over https when
given a certificate, which this process then trusts (`certificate`).
"""

from __future__ import annotations

import json
import os
import ssl
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from multiprocessing.connection import Connection
from multiprocessing.synchronize import Event
from pathlib import Path
from typing import Any

from punctual_testing.loopback_tls import loopback_certificate

UPDATE_ANSWER = json.dumps({"Attributes": {"status": {"S": "RUNNING"}}}).encode()


class _Receiver(BaseHTTPRequestHandler):
    """A webhook receiver that notes when each request arrived (the wall clock both processes share)."""

    arrivals: list[float] = []
    protocol_version = "HTTP/1.0"

    def do_POST(self) -> None:
        _Receiver.arrivals.append(time.time())
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        payload = b'{"ok": true}' if self.path.startswith("/punctual") else UPDATE_ANSWER
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, format: str, *args: Any) -> None:
        return


class _Server(ThreadingHTTPServer):
    request_queue_size = 2048  # a pack's connections all come at once
    daemon_threads = True

    def finish_request(self, request: Any, client_address: Any) -> None:
        if isinstance(request, ssl.SSLSocket):
            request.do_handshake()  # (on the connection's thread, not the one that accepts)
        super().finish_request(request, client_address)


def serve(answer: Connection, stop: Event, collect: Event, tls: tuple[str, str] | None = None) -> None:
    """`tls`: the certificate and key files to answer https with."""
    server = _Server(("127.0.0.1", 0), _Receiver)
    scheme = "http"
    if tls is not None:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(*tls)
        server.socket = context.wrap_socket(server.socket, server_side=True, do_handshake_on_connect=False)
        scheme = "https"
    threading.Thread(target=server.serve_forever, daemon=True).start()
    answer.send(f"{scheme}://127.0.0.1:{server.server_address[1]}")
    while not stop.is_set():
        if collect.wait(0.05):
            collect.clear()
            answer.send(list(_Receiver.arrivals))
            _Receiver.arrivals.clear()
    server.shutdown()


def certificate(directory: str) -> tuple[str, str]:
    """A certificate for 127.0.0.1 and its key, in `directory`; this process trusts it from now on,
    beside the system's authorities (SSL_CERT_FILE: each connection's context loads them all)."""
    cert_file, key_file = loopback_certificate(Path(directory))
    bundle = os.path.join(directory, "bundle.pem")
    system = ssl.get_default_verify_paths().cafile
    with open(bundle, "wb") as out:
        if system and os.path.exists(system):
            with open(system, "rb") as authorities:
                out.write(authorities.read())
        out.write(cert_file.read_bytes())
    os.environ["SSL_CERT_FILE"] = bundle
    return str(cert_file), str(key_file)
