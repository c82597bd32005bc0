"""The `lambda` task: which functions a job may name, the event it sends, and what counts as success.

Lambda's answers come from botocore's Stubber: nothing leaves the process.
"""

from __future__ import annotations

import io
import json
import threading
from datetime import UTC, datetime
from typing import Any

import boto3
import pytest
from botocore.exceptions import ParamValidationError, ReadTimeoutError
from botocore.response import StreamingBody
from botocore.stub import Stubber

from punctual import tasks, wiring
from punctual.domain.errors import InvalidRequest
from punctual.domain.models import TaskSpec
from punctual.platform import aws, lambda_arns
from punctual.platform.clock import ManualClock
from punctual.platform.config import Settings
from punctual.tasks import LambdaClients, TaskContext, TaskFailed, TaskPolicy

REPORTS = "arn:aws:lambda:eu-west-1:123456789012:function:reports-daily"
POLICY = TaskPolicy(lambda_functions=("arn:aws:lambda:eu-west-1:123456789012:function:reports-*",))
SCHEDULED_AT = datetime(2026, 12, 1, 9, 30, tzinfo=UTC)


def lambda_client() -> Any:
    return boto3.client(
        "lambda", region_name="eu-west-1", aws_access_key_id="test", aws_secret_access_key="test"
    )


class Clients:
    """The worker's client factory: one stubbed client, and the regions and timeouts asked for."""

    def __init__(self) -> None:
        self.client = lambda_client()
        self.stubber = Stubber(self.client)
        self.stubber.activate()
        self.asked: list[tuple[str, int]] = []

    def __call__(self, region: str, read_timeout_seconds: int) -> Any:
        self.asked.append((region, read_timeout_seconds))
        return self.client


def context(clients: LambdaClients, policy: TaskPolicy = POLICY) -> TaskContext:
    return TaskContext(
        job_id="job-42",
        execution_id="job-42.19ad6b9e2a3.1",
        scheduled_at=SCHEDULED_AT,
        attempt=2,
        timeout_seconds=30,
        clock=ManualClock(SCHEDULED_AT),
        policy=policy,
        lambda_clients=clients,
    )


def spec(**params: Any) -> TaskSpec:
    return tasks.validate(TaskSpec(type="lambda", params={"function_arn": REPORTS, **params}), POLICY)


def body(value: Any) -> StreamingBody:
    data = value if isinstance(value, bytes) else json.dumps(value).encode()
    return StreamingBody(io.BytesIO(data), len(data))


def expected_event(payload: Any = None) -> bytes:
    event = {
        "job_id": "job-42",
        "execution_id": "job-42.19ad6b9e2a3.1",
        "scheduled_at": "2026-12-01T09:30:00.000Z",
        "attempt": 2,
        "payload": payload,
    }
    return json.dumps(event, separators=(",", ":")).encode()


def invalid(params: dict[str, Any], policy: TaskPolicy = POLICY) -> InvalidRequest:
    with pytest.raises(InvalidRequest) as caught:
        tasks.validate(TaskSpec(type="lambda", params=params), policy)
    return caught.value


# --- which functions ------------------------------------------------------------------------------


def test_a_job_may_name_an_allowed_function_or_its_version_or_alias_and_defaults_to_sync() -> None:
    for arn in (REPORTS, f"{REPORTS}:7", f"{REPORTS}:live", f"{REPORTS}:$LATEST"):
        checked = tasks.validate(TaskSpec(type="lambda", params={"function_arn": arn}), POLICY)
        assert checked.params == {"function_arn": arn, "invocation": "sync"}


@pytest.mark.parametrize(
    "arn",
    [
        "arn:aws:lambda:eu-west-1:123456789012:function:billing",  # another name
        "arn:aws:lambda:eu-west-1:210987654321:function:reports-daily",  # another account
        "arn:aws:lambda:us-east-1:123456789012:function:reports-daily",  # another region
    ],
)
def test_a_function_the_deployment_does_not_allow_is_refused(arn: str) -> None:
    error = invalid({"function_arn": arn})
    assert error.field == "task.params.function_arn"
    assert "lambda_functions" in str(error)


def test_with_no_functions_allowed_every_function_is_refused() -> None:
    assert "not among the functions" in str(invalid({"function_arn": REPORTS}, TaskPolicy()))


@pytest.mark.parametrize(
    "params, where",
    [
        ({"function_arn": "reports-daily"}, "task.params.function_arn"),
        (
            {"function_arn": "arn:aws:lambda:eu-west-1:123456789012:function:reports-*"},
            "task.params.function_arn",
        ),
        ({"function_arn": f"{REPORTS}:live:extra"}, "task.params.function_arn"),
        ({"function_arn": "arn:aws:sqs:eu-west-1:123456789012:reports"}, "task.params.function_arn"),
        ({}, "task.params.function_arn"),
        ({"function_arn": REPORTS, "invocation": "later"}, "task.params.invocation"),
        ({"function_arn": REPORTS, "qualifier": "live"}, "task.params.qualifier"),
    ],
)
def test_malformed_parameters_are_refused_with_the_field_named(params: dict[str, Any], where: str) -> None:
    assert invalid(params).field == where


def test_patterns_match_whole_function_arns_with_iam_wildcards() -> None:
    patterns = ("arn:aws:lambda:*:123456789012:function:job-?",)
    assert lambda_arns.is_allowed("arn:aws:lambda:us-west-2:123456789012:function:job-a", patterns)
    assert lambda_arns.is_allowed("arn:aws:lambda:us-west-2:123456789012:function:job-a:3", patterns)
    assert not lambda_arns.is_allowed("arn:aws:lambda:us-west-2:123456789012:function:job-ab", patterns)
    assert not lambda_arns.is_allowed("arn:aws:lambda:us-west-2:123456789012:function:Job-a", patterns)
    # and grant the same in IAM, versions and aliases included
    assert lambda_arns.iam_resources(patterns) == [patterns[0], f"{patterns[0]}:*"]


def test_the_setting_is_a_comma_separated_list_of_function_arn_patterns() -> None:
    settings = Settings.from_env({"PUNCTUAL_LAMBDA_FUNCTIONS": f"{REPORTS}, arn:aws:lambda:*:*:function:x-*"})
    assert settings.lambda_functions == (REPORTS, "arn:aws:lambda:*:*:function:x-*")
    assert Settings.from_env({}).lambda_functions == ()


@pytest.mark.parametrize(
    "pattern", ["*", "reports-*", f"{REPORTS}:live", "arn:aws:lambda:eu-west-1:1:function:[ab]"]
)
def test_the_setting_refuses_what_is_not_a_function_arn_pattern(pattern: str) -> None:
    with pytest.raises(ValueError, match="function ARN pattern"):
        Settings.from_env({"PUNCTUAL_LAMBDA_FUNCTIONS": pattern})


# --- running --------------------------------------------------------------------------------------


def test_a_sync_invocation_sends_the_execution_in_the_event_and_keeps_the_answer() -> None:
    # Given a function that answers
    clients = Clients()
    clients.stubber.add_response(
        "invoke",
        {"StatusCode": 200, "Payload": body({"rows": 12}), "ExecutedVersion": "7"},
        {"FunctionName": REPORTS, "InvocationType": "RequestResponse", "Payload": expected_event({"day": 1})},
    )

    # When the task runs with the job's 30-second timeout
    result = tasks.run(spec(payload={"day": 1}), context(clients))

    # Then the function got the execution's identity and the payload, and its answer is the result
    clients.stubber.assert_no_pending_responses()
    assert result == {"status": 200, "version": "7", "payload": {"rows": 12}}
    # and the client, in the function's region, waited as long as the job's timeout for it
    assert clients.asked == [("eu-west-1", 30)]


def test_an_answer_that_is_not_json_is_kept_as_text() -> None:
    clients = Clients()
    clients.stubber.add_response("invoke", {"StatusCode": 200, "Payload": body(b"done \xff")})
    assert tasks.run(spec(), context(clients))["payload"] == "done \ufffd"


def test_an_async_invocation_succeeds_once_lambda_accepts_the_event() -> None:
    clients = Clients()
    clients.stubber.add_response(
        "invoke",
        {"StatusCode": 202, "Payload": body(b"")},
        {"FunctionName": REPORTS, "InvocationType": "Event", "Payload": expected_event()},
    )
    assert tasks.run(spec(invocation="async"), context(clients)) == {"status": 202}
    clients.stubber.assert_no_pending_responses()


def test_a_function_error_fails_the_attempt_retryably_with_its_type_and_message() -> None:
    # Given a function that raises
    clients = Clients()
    error = {"errorType": "KeyError", "errorMessage": "'day'", "stackTrace": ["..."]}
    clients.stubber.add_response(
        "invoke", {"StatusCode": 200, "FunctionError": "Unhandled", "Payload": body(error)}
    )

    # When the task runs / Then the attempt fails, may be retried, and keeps the error answer
    with pytest.raises(TaskFailed) as caught:
        tasks.run(spec(), context(clients))
    assert caught.value.retryable is True
    assert str(caught.value) == "function error (Unhandled): KeyError: 'day'"
    assert caught.value.result == {"status": 200, "payload": error}


@pytest.mark.parametrize(
    "code, status, retryable",
    [
        ("TooManyRequestsException", 429, True),
        ("ResourceConflictException", 409, True),
        ("ResourceNotReadyException", 502, True),
        ("ServiceException", 500, True),
        ("EC2ThrottledException", 502, True),
        ("SnapStartNotReadyException", 409, True),
        ("KMSAccessDeniedException", 502, False),
        ("InvalidRuntimeException", 502, False),
        ("ResourceNotFoundException", 404, False),
        ("AccessDeniedException", 403, False),
        ("RequestTooLargeException", 413, False),
        ("InvalidRequestContentException", 400, False),
    ],
)
def test_lambda_errors_are_retried_when_another_attempt_could_succeed(
    code: str, status: int, retryable: bool
) -> None:
    clients = Clients()
    clients.stubber.add_client_error("invoke", code, "refused", http_status_code=status)
    with pytest.raises(TaskFailed) as caught:
        tasks.run(spec(), context(clients))
    assert caught.value.retryable is retryable
    assert str(caught.value) == f"Lambda {code}: refused"


class Raising:
    """A client whose every call raises what botocore raises before Lambda answers."""

    def __init__(self, error: Exception) -> None:
        self.error = error

    def __call__(self, region: str, read_timeout_seconds: int) -> Any:
        return self

    def invoke(self, **_: Any) -> Any:
        raise self.error


def test_no_answer_within_the_timeout_is_retried() -> None:
    with pytest.raises(TaskFailed) as caught:
        tasks.run(
            spec(), context(Raising(ReadTimeoutError(endpoint_url="https://lambda.eu-west-1.amazonaws.com")))
        )
    assert caught.value.retryable is True
    assert "ReadTimeoutError" in str(caught.value)


def test_a_function_no_longer_allowed_is_not_invoked_and_fails_for_good() -> None:
    # Given a job validated while its function was allowed, run by a deployment that no longer allows it
    clients = Clients()

    # When it runs / Then it fails without a retry and without calling Lambda
    with pytest.raises(TaskFailed) as caught:
        tasks.run(spec(), context(clients, policy=TaskPolicy()))
    assert caught.value.retryable is False
    assert "no longer among" in str(caught.value)
    assert clients.asked == []


def test_a_function_in_another_region_is_invoked_with_a_client_of_that_region() -> None:
    # Given a deployment that allows a function in any region
    policy = TaskPolicy(lambda_functions=("arn:aws:lambda:*:123456789012:function:reports-*",))
    arn = REPORTS.replace("eu-west-1", "ap-southeast-4")
    checked = tasks.validate(TaskSpec(type="lambda", params={"function_arn": arn}), policy)
    clients = Clients()
    clients.stubber.add_response("invoke", {"StatusCode": 200, "Payload": body({})})

    # When it runs / Then its client is one of the function's region (Lambda's own rule)
    tasks.run(checked, context(clients, policy))
    assert clients.asked == [("ap-southeast-4", 30)]


@pytest.mark.parametrize(
    "arn",
    [
        "arn:aws-cn:lambda:cn-north-1:123456789012:function:reports-daily",
        "arn:aws-us-gov:lambda:us-gov-west-1:123456789012:function:reports-daily:7",
        "arn:aws:lambda:il-central-1:123456789012:function:reports-daily",
    ],
)
def test_arns_of_every_partition_are_read_and_matched(arn: str) -> None:
    policy = TaskPolicy(lambda_functions=("arn:*:lambda:*:123456789012:function:reports-*",))
    assert (
        tasks.validate(TaskSpec(type="lambda", params={"function_arn": arn}), policy).params["function_arn"]
        == arn
    )


def test_a_request_botocore_refuses_is_not_tried_again() -> None:
    with pytest.raises(TaskFailed) as caught:
        tasks.run(spec(), context(Raising(ParamValidationError(report="Payload: too long"))))
    assert caught.value.retryable is False


# --- the worker's clients -------------------------------------------------------------------------


def test_the_invoking_client_makes_one_attempt_in_the_region_and_waits_the_timeout() -> None:
    client = aws.lambda_invoke_client(Settings(), "eu-central-1", 42)
    assert client.meta.region_name == "eu-central-1"
    assert client.meta.config.read_timeout == 42
    assert client.meta.config.retries["total_max_attempts"] == 1


def test_threads_asking_at_once_share_one_client_per_region_and_timeout() -> None:
    # Given the worker's factory, not used yet, and 16 threads (a batch's records) asking at once
    clients = wiring.lambda_clients_for(Settings())
    barrier = threading.Barrier(16)
    got: list[tuple[tuple[str, int], Any]] = []

    def ask(key: tuple[str, int]) -> None:
        barrier.wait()
        got.append((key, clients(*key)))

    keys = [("eu-west-1", 30), ("eu-west-1", 60)] * 8
    threads = [threading.Thread(target=ask, args=(key,)) for key in keys]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    # Then each region and timeout got one client, made once and kept
    made = {key: {id(client) for k, client in got if k == key} for key in set(keys)}
    assert all(len(ids) == 1 for ids in made.values()), made
    assert len({next(iter(ids)) for ids in made.values()}) == 2
    assert clients("eu-west-1", 30) is next(client for k, client in got if k == ("eu-west-1", 30))
