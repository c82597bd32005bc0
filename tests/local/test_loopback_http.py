"""The local stack's HTTP to its moto (punctual_local.loopback_http), on loopback only."""

from __future__ import annotations

import http.server
import socket
import struct
import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from botocore import UNSIGNED
from botocore.awsrequest import AWSRequest
from botocore.config import Config
from botocore.exceptions import ConnectionClosedError, EndpointConnectionError, ReadTimeoutError
from moto.server import ThreadedMotoServer

from punctual_local.loopback_http import LoopbackHttp, use_loopback_http


class _Server(http.server.ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.connections = 0
        self.requests: list[tuple[str, bytes, dict[str, str]]] = []
        self.mode = "length"  # length | chunked | close-after | quiet-close | hang-up | silent
        self.silence = threading.Event()


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def setup(self) -> None:
        super().setup()
        self.server.connections += 1

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        self.server.requests.append((self.path, body, dict(self.headers.items())))
        mode = self.server.mode
        if mode == "silent":
            self.server.silence.wait(5)
            self.close_connection = True
            return
        if mode == "hang-up":
            self.close_connection = True
            return
        answer = b'{"echo": ' + str(len(body)).encode() + b"}"
        self.send_response(200)
        self.send_header("Content-Type", "application/x-amz-json-1.0")
        if mode == "chunked":
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            half = len(answer) // 2
            for part in (answer[:half], answer[half:]):
                self.wfile.write(f"{len(part):x}\r\n".encode() + part + b"\r\n")
            self.wfile.write(b"0\r\n\r\n")
            return
        self.send_header("Content-Length", str(len(answer)))
        if mode == "close-after":
            self.send_header("Connection", "close")
            self.close_connection = True
        if mode == "quiet-close":
            self.close_connection = True
        self.end_headers()
        self.wfile.write(answer)

    def log_message(self, *_: Any) -> None:
        pass


@pytest.fixture
def server() -> Iterator[_Server]:
    srv = _Server()
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    yield srv
    srv.shutdown()
    srv.server_close()


def url(server: _Server) -> str:
    return f"http://127.0.0.1:{server.server_address[1]}"


def post(http: LoopbackHttp, base: str, body: bytes, headers: dict[str, str] | None = None) -> Any:
    return http.send(AWSRequest(method="POST", url=f"{base}/path?q=1", data=body, headers=headers).prepare())


def test_requests_share_one_kept_alive_connection_and_carry_their_headers_and_body(server: _Server) -> None:
    transport = LoopbackHttp(url(server), authorization="AWS4-HMAC-SHA256 Credential=x/y/us-east-1/dynamodb")
    first = post(transport, url(server), b'{"a": 1}', {"X-Amz-Target": "DynamoDB_20120810.GetItem"})
    second = post(transport, url(server), b"{}")
    assert (first.status_code, first.content, second.content) == (200, b'{"echo": 8}', b'{"echo": 2}')
    assert first.headers["content-type"] == "application/x-amz-json-1.0"
    assert server.connections == 1
    path, body, headers = server.requests[0]
    assert (path, body) == ("/path?q=1", b'{"a": 1}')
    assert headers["X-Amz-Target"] == "DynamoDB_20120810.GetItem"
    assert headers["Authorization"].startswith("AWS4-HMAC-SHA256 Credential=x/y/us-east-1/dynamodb")
    assert headers["Content-Length"] == "8"


def test_a_chunked_answer_is_read_whole(server: _Server) -> None:
    server.mode = "chunked"
    transport = LoopbackHttp(url(server))
    assert post(transport, url(server), b"12345").content == b'{"echo": 5}'
    assert post(transport, url(server), b"1").content == b'{"echo": 1}'
    assert server.connections == 1


def test_an_answer_that_closes_its_connection_is_not_reused(server: _Server) -> None:
    server.mode = "close-after"
    transport = LoopbackHttp(url(server))
    for _ in range(3):
        assert post(transport, url(server), b"x").content == b'{"echo": 1}'
    assert server.connections == 3
    assert len(server.requests) == 3


def test_a_kept_connection_the_server_closed_meanwhile_is_replaced_and_the_request_made_once(
    server: _Server,
) -> None:
    # Given a server that ends each connection after its answer without saying so (as one does at an
    # idle timeout, or moto's at its restart)
    server.mode = "quiet-close"
    transport = LoopbackHttp(url(server))
    for body in (b"x", b"yy", b"zzz"):
        post(transport, url(server), body)
    # Then each request after the first found its kept connection closed, and went once on a new one
    assert [body for _, body, _ in server.requests] == [b"x", b"yy", b"zzz"]
    assert server.connections == 3


def test_an_answer_cut_off_on_a_new_connection_is_a_connection_error(server: _Server) -> None:
    server.mode = "hang-up"
    transport = LoopbackHttp(url(server))
    with pytest.raises(ConnectionClosedError):
        post(transport, url(server), b"x")
    assert len(server.requests) == 1  # not sent again: botocore's retries decide that


def test_an_answer_that_does_not_come_is_a_read_timeout_after_the_read_timeout(server: _Server) -> None:
    server.mode = "silent"
    transport = LoopbackHttp(url(server), read_timeout=0.3)
    started = time.monotonic()
    try:
        with pytest.raises(ReadTimeoutError):
            post(transport, url(server), b"x")
    finally:
        server.silence.set()
    assert 0.25 <= time.monotonic() - started < 3
    assert len(server.requests) == 1


def test_the_read_timeout_is_the_kernels_on_a_blocking_socket(server: _Server) -> None:
    # (a socket with a timeout in Python polls before each send and receive: punctual_local.loopback_http)
    transport = LoopbackHttp(url(server), read_timeout=2.5)
    post(transport, url(server), b"x")
    (conn,) = transport._idle
    assert conn.gettimeout() is None
    seconds, micros = struct.unpack("ll", conn.getsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, 16))
    assert (seconds, micros) == (2, 500_000)


def test_no_server_is_an_endpoint_connection_error() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    transport = LoopbackHttp(f"http://127.0.0.1:{port}")
    with pytest.raises(EndpointConnectionError):
        post(transport, f"http://127.0.0.1:{port}", b"x")


def test_only_a_plain_http_endpoint_with_a_port() -> None:
    for bad in ("https://127.0.0.1:1", "http://127.0.0.1"):
        with pytest.raises(ValueError):
            LoopbackHttp(bad)


def test_unsigned_boto3_clients_reach_moto_through_it() -> None:
    moto = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    moto.start()
    try:
        host, port = moto.get_host_and_port()
        endpoint = f"http://{host}:{port}"
        config = Config(signature_version=UNSIGNED, retries={"max_attempts": 1})
        session = boto3.session.Session(region_name="us-east-1")
        dynamodb = session.client("dynamodb", endpoint_url=endpoint, config=config)
        sqs = session.client("sqs", endpoint_url=endpoint, config=config)
        for client in (dynamodb, sqs):
            use_loopback_http(client)
        dynamodb.create_table(
            TableName="t",
            KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
            AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
            BillingMode="PAY_PER_REQUEST",
        )
        dynamodb.put_item(TableName="t", Item={"pk": {"S": "a"}, "v": {"N": "1"}})
        # Each call has an invocation id of its own (from punctual.platform.randomness), kept on its retries
        ids: set[str] = set()

        def keep_id(request: Any, **_: Any) -> None:
            value = request.headers["amz-sdk-invocation-id"]
            ids.add(value.decode() if isinstance(value, bytes) else value)

        dynamodb.meta.events.register("before-send.dynamodb", keep_id)
        for _ in range(3):
            dynamodb.get_item(TableName="t", Key={"pk": {"S": "a"}})
        assert len(ids) == 3
        assert all(uuid.UUID(i).version == 4 for i in ids)
        queue = sqs.create_queue(QueueName="q")["QueueUrl"]
        sqs.send_message(QueueUrl=queue, MessageBody="hello")
        messages = sqs.receive_message(QueueUrl=queue, WaitTimeSeconds=1)["Messages"]
        assert [m["Body"] for m in messages] == ["hello"]
        # The region and account moto filed them under: those of a signed client
        signed = session.client(
            "dynamodb", endpoint_url=endpoint, aws_access_key_id="local", aws_secret_access_key="local"
        )
        assert signed.describe_table(TableName="t")["Table"]["TableArn"].startswith(
            "arn:aws:dynamodb:us-east-1:123456789012:"
        )
    finally:
        moto.stop()


def test_the_api_process_clients_mark_the_dynamodb_calls_of_its_reads_for_motos_gate(server: _Server) -> None:
    from punctual_local import clients
    from punctual_local.moto.gate import API, API_WRITE, CALL_HEADER, api_read

    # Given the clients the API's process makes, and those the stack makes
    marked = clients.connect(url(server), api_reads=True)
    plain = clients.connect(url(server))
    # When each sends DynamoDB calls (the resource's and the client's) and an SQS call for a read,
    # and the API's client another for a write
    with api_read():
        marked.dynamodb_client.list_tables()
        marked.dynamodb.meta.client.list_tables()
        plain.dynamodb_client.list_tables()
        marked.sqs.list_queues()
    marked.dynamodb_client.list_tables()
    # Then the API's DynamoDB calls carry the mark of a read or of a write, and no other call a mark
    marks = [headers.get(CALL_HEADER) for _, _, headers in server.requests]
    assert marks == [API, API, None, None, API_WRITE]
