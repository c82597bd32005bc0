"""What the CLI's transport signs and keeps for library users, and `punctual local`'s dispatch."""

from __future__ import annotations

import sys
import types

import pytest
from botocore.auth import SigV4Auth as BotocoreSigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

from punctual_cli import main as cli
from punctual_client.auth import SigV4Auth
from punctual_client.errors import ApiError
from punctual_client.transport import PunctualClient
from tests.unit.cli.fake_api import FakeApi, job


def test_sigv4_signature_covers_exactly_what_is_sent(api: FakeApi) -> None:
    # Given a client that signs (pointed at the loopback test double, so nothing leaves the machine)
    credentials = Credentials("AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY")
    client = PunctualClient(api.url, SigV4Auth("eu-west-1", credentials))
    api.answer("POST", "/jobs", job(), status=201)

    # When a job is created with a query-free path and a JSON body
    client.create_job({"task": {"type": "noop"}, "schedule": {"type": "now"}}, idempotency_key="k1")

    # Then recomputing the signature from the received request gives the one sent
    [request] = api.sent()
    authorization = request.headers["Authorization"]
    assert authorization.startswith("AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/")
    assert "/eu-west-1/execute-api/aws4_request" in authorization
    signed = authorization.split("SignedHeaders=")[1].split(",")[0].split(";")
    assert {"host", "x-amz-date", "content-type", "idempotency-key"} <= set(signed)
    received = {name: value for name, value in request.headers.items() if name.lower() in signed}
    again = AWSRequest(method="POST", url=api.url + "/jobs", data=request.raw_body, headers=received)
    again.context["timestamp"] = request.headers["X-Amz-Date"]
    signer = BotocoreSigV4Auth(credentials, "execute-api", "eu-west-1")
    expected = signer.signature(signer.string_to_sign(again, signer.canonical_request(again)), again)
    assert authorization.endswith(f"Signature={expected}")


def test_local_dispatches_to_punctual_local_main(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a punctual_local module
    calls: list[list[str]] = []
    fake = types.ModuleType("punctual_local")

    def local_main(args: list[str]) -> int:
        calls.append(args)
        return 0

    fake.main = local_main  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "punctual_local", fake)

    # When `punctual local` runs with options of its own
    code = cli.main(["local", "--port", "9000", "--json"])

    # Then they reach punctual_local.main untouched
    assert code == 0
    assert calls == [["--port", "9000", "--json"]]


def test_local_without_the_module_exits_1_with_a_clear_error(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given punctual_local cannot be imported
    monkeypatch.setitem(sys.modules, "punctual_local", None)

    # When `punctual local` runs
    code = cli.main(["--json", "local"])

    # Then it says so and exits 1
    assert code == 1
    assert "local stack is not available" in capsys.readouterr().err


def test_api_error_keeps_status_and_body_for_library_users(api: FakeApi) -> None:
    # Given the API answers 409 to a reused idempotency key
    api.answer("POST", "/jobs", {"message": "Idempotency-Key reused with another body"}, status=409)
    client = PunctualClient.from_endpoint(api.url, token="local")

    # When a job is created through the client class
    with pytest.raises(ApiError) as caught:
        client.create_job({"task": {"type": "noop"}, "schedule": {"type": "now"}}, idempotency_key="k")

    # Then the error carries the status and message
    assert caught.value.status == 409
    assert caught.value.message == "Idempotency-Key reused with another body"
