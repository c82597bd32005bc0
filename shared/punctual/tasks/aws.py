"""The AWS target tasks: `sqs`, `sns`, `eventbridge` and `stepfunctions`, shaped like `lambda`.

Each names its resource by ARN, which the deployment must allow (its setting in
`punctual.platform.target_arns`, whose patterns also scope the worker's IAM grant), is checked again when it
runs, is retried by the job's policy on throttling and AWS's 5xx, and carries the execution's
identity so that a receiver can de-duplicate:

- sqs: SendMessage of `message`, with message attributes Punctual-Execution-Id, -Job-Id,
  -Scheduled-At and -Attempt; a FIFO queue gets the execution id as its MessageDeduplicationId (a
  retry within SQS's five-minute window is dropped by SQS itself).
- sns: Publish of `message` with the same attributes (and, to a FIFO topic, the same de-duplication).
- eventbridge: PutEvents of one event whose detail is {"job_id", "execution_id", "scheduled_at",
  "attempt", "payload"}.
- stepfunctions: StartExecution named after the execution id, input {"job_id", "execution_id",
  "scheduled_at", "payload"}: the same on every attempt, so a duplicate delivery or a retry after a
  lost answer finds the execution already started (standard workflows keep names for 90 days) and
  cannot start a second one.
"""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError, ParamValidationError
from pydantic import BaseModel, ConfigDict, Field, field_validator

from punctual.domain.errors import InvalidRequest
from punctual.platform import target_arns
from punctual.platform.target_arns import Target
from punctual.platform.timefmt import to_rfc3339
from punctual.tasks import TaskContext, TaskFailed, TaskPolicy, register, retryable_status

# Error codes another attempt can get past (throttling, a dependency briefly unavailable); any
# other 4xx is the request or the resource, and fails at once. 5xx are retried.
_RETRYABLE_CODES = {
    "ThrottlingException",
    "Throttling",
    "Throttled",
    "RequestThrottled",
    "TooManyRequestsException",
    "KMSThrottlingException",
    "KmsThrottled",
    "KMSThrottling",
    "ExecutionLimitExceeded",
    "InternalFailure",
    "InternalError",
    "ServiceUnavailable",
}
MAX_MESSAGE_BYTES = 256 * 1024


def _checked_arn(target: Target, value: str) -> str:
    if not target.arn.fullmatch(value):
        raise ValueError(f"not an ARN for {target.type} (e.g. {target.example.replace('*', 'name')})")
    return value


def _message_text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, separators=(",", ":"))


def _attributes(context: TaskContext) -> dict[str, dict[str, str]]:
    """The execution's identity as SQS and SNS message attributes (as an HTTP task's headers)."""
    values = {
        "Punctual-Job-Id": context.job_id,
        "Punctual-Execution-Id": context.execution_id,
        "Punctual-Scheduled-At": to_rfc3339(context.scheduled_at),
        "Punctual-Attempt": str(context.attempt),
    }
    return {name: {"DataType": "String", "StringValue": value} for name, value in values.items()}


def _envelope(context: TaskContext, payload: Any, *, attempt: bool = True) -> dict[str, Any]:
    event: dict[str, Any] = {
        "job_id": context.job_id,
        "execution_id": context.execution_id,
        "scheduled_at": to_rfc3339(context.scheduled_at),
    }
    if attempt:
        event["attempt"] = context.attempt
    event["payload"] = payload
    return event


def _check_allowed(target: Target, arn: str | None, policy: TaskPolicy, *, at_run: bool = False) -> None:
    if arn is None:
        return
    if target.is_allowed(arn, getattr(policy, target.setting)):
        return
    if at_run:
        raise TaskFailed(
            f"{arn} is no longer among the resources this deployment's {target.setting} allows",
            retryable=False,
        )
    field = f"task.params.{target.param}"
    raise InvalidRequest(
        f"{field}: {arn} is not among those this deployment allows (setting {target.setting})", field=field
    )


def _client(target: Target, arn: str, context: TaskContext, service: str) -> Any:
    if context.aws_clients is None:
        raise TaskFailed(f"this worker has no client for {target.type}", retryable=False)
    return context.aws_clients(service, target_arns.region(arn), max(1, round(context.timeout_seconds)))


def _call(target: Target, call: Any) -> Any:
    """One AWS call, its failures as TaskFailed: retryable when another attempt could succeed."""
    try:
        return call()
    except ClientError as exc:
        error = exc.response.get("Error", {})
        code = str(error.get("Code", ""))
        status = int(exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0) or 0)
        retryable = code in _RETRYABLE_CODES or retryable_status(status)
        raise TaskFailed(
            f"{target.type} {code or status}: {error.get('Message', exc)}", retryable=retryable
        ) from exc
    except ParamValidationError as exc:  # the request itself: another attempt sends it again
        raise TaskFailed(f"{type(exc).__name__}: {exc}", retryable=False) from exc
    except BotoCoreError as exc:  # no connection, or no answer within the job's timeout
        raise TaskFailed(f"{type(exc).__name__}: {exc}", retryable=True) from exc


def _size_check(text: str, what: str) -> None:
    if len(text.encode()) > MAX_MESSAGE_BYTES:
        raise ValueError(f"{what} is more than {MAX_MESSAGE_BYTES // 1024} KiB as sent")


# ------------------------------------------------------------------------ sqs
class SqsParams(BaseModel):
    model_config = ConfigDict(extra="forbid")

    queue_arn: str = Field(
        description="The queue's ARN (arn:aws:sqs:REGION:ACCOUNT:NAME); the deployment must allow it."
    )
    message: Any = Field(
        description="The message body: a string as it is, any other JSON value as JSON text."
    )
    message_group_id: str | None = Field(
        default=None, max_length=128, description="FIFO queues: the message group (default: the job's id)."
    )
    delay_seconds: int | None = Field(
        default=None, ge=0, le=900, description="SQS DelaySeconds (standard queues)."
    )

    @field_validator("queue_arn")
    @classmethod
    def _is_arn(cls, value: str) -> str:
        return _checked_arn(target_arns.SQS, value)

    @field_validator("message")
    @classmethod
    def _fits(cls, value: Any) -> Any:
        if value is None:
            raise ValueError("a message is required")
        _size_check(_message_text(value), "the message")
        return value


def queue_url(arn: str) -> str:
    """The queue's URL, from its ARN (SendMessage takes the URL)."""
    _, partition, _, region, account, name = arn.split(":", 5)
    suffix = "amazonaws.com.cn" if partition == "aws-cn" else "amazonaws.com"
    return f"https://sqs.{region}.{suffix}/{account}/{name}"


class SqsTask:
    name = "sqs"
    description = (
        "Sends `message` to an SQS queue the deployment allows (setting sqs_queues), with message "
        "attributes Punctual-Execution-Id, Punctual-Job-Id, Punctual-Scheduled-At and Punctual-Attempt; "
        "a FIFO queue gets the execution id as MessageDeduplicationId. Throttling and 5xx are retried."
    )
    params_model: type[BaseModel] = SqsParams

    def check(self, params: BaseModel, policy: TaskPolicy) -> None:
        _check_allowed(target_arns.SQS, getattr(params, "queue_arn", None), policy)

    def run(self, params: BaseModel, context: TaskContext) -> Any:
        assert isinstance(params, SqsParams)
        target = target_arns.SQS
        _check_allowed(target, params.queue_arn, context.policy, at_run=True)
        request: dict[str, Any] = {
            "QueueUrl": queue_url(params.queue_arn),
            "MessageBody": _message_text(params.message),
            "MessageAttributes": _attributes(context),
        }
        if params.queue_arn.endswith(".fifo"):
            request["MessageDeduplicationId"] = _dedup_id(context.execution_id)
            request["MessageGroupId"] = params.message_group_id or context.job_id
        elif params.delay_seconds is not None:
            request["DelaySeconds"] = params.delay_seconds
        client = _client(target, params.queue_arn, context, "sqs")
        answer = _call(target, lambda: client.send_message(**request))
        return {"message_id": answer.get("MessageId"), "sequence_number": answer.get("SequenceNumber")}


def _dedup_id(execution_id: str) -> str:
    """SQS and SNS take up to 128 characters of [A-Za-z0-9] and punctuation: an id as it is."""
    if len(execution_id) <= 128 and re.fullmatch(r"[!-~]+", execution_id):
        return execution_id
    return hashlib.sha256(execution_id.encode()).hexdigest()


# ------------------------------------------------------------------------ sns
class SnsParams(BaseModel):
    model_config = ConfigDict(extra="forbid")

    topic_arn: str = Field(
        description="The topic's ARN (arn:aws:sns:REGION:ACCOUNT:NAME); the deployment must allow it."
    )
    message: Any = Field(description="The message: a string as it is, any other JSON value as JSON text.")
    subject: str | None = Field(
        default=None, min_length=1, max_length=100, description="For e-mail subscriptions."
    )
    message_group_id: str | None = Field(
        default=None, max_length=128, description="FIFO topics (default: the job's id)."
    )

    @field_validator("topic_arn")
    @classmethod
    def _is_arn(cls, value: str) -> str:
        return _checked_arn(target_arns.SNS, value)

    @field_validator("message")
    @classmethod
    def _fits(cls, value: Any) -> Any:
        if value is None:
            raise ValueError("a message is required")
        _size_check(_message_text(value), "the message")
        return value


class SnsTask:
    name = "sns"
    description = (
        "Publishes `message` to an SNS topic the deployment allows (setting sns_topics), with the same "
        "Punctual-* message attributes as sqs; a FIFO topic de-duplicates on the execution id."
    )
    params_model: type[BaseModel] = SnsParams

    def check(self, params: BaseModel, policy: TaskPolicy) -> None:
        _check_allowed(target_arns.SNS, getattr(params, "topic_arn", None), policy)

    def run(self, params: BaseModel, context: TaskContext) -> Any:
        assert isinstance(params, SnsParams)
        target = target_arns.SNS
        _check_allowed(target, params.topic_arn, context.policy, at_run=True)
        request: dict[str, Any] = {
            "TopicArn": params.topic_arn,
            "Message": _message_text(params.message),
            "MessageAttributes": _attributes(context),
        }
        if params.subject is not None:
            request["Subject"] = params.subject
        if params.topic_arn.endswith(".fifo"):
            request["MessageDeduplicationId"] = _dedup_id(context.execution_id)
            request["MessageGroupId"] = params.message_group_id or context.job_id
        client = _client(target, params.topic_arn, context, "sns")
        answer = _call(target, lambda: client.publish(**request))
        return {"message_id": answer.get("MessageId")}


# ---------------------------------------------------------------- eventbridge
class EventBridgeParams(BaseModel):
    model_config = ConfigDict(extra="forbid")

    event_bus_arn: str = Field(
        description="The bus's ARN (arn:aws:events:REGION:ACCOUNT:event-bus/NAME); the deployment must allow it."
    )
    source: str = Field(default="punctual", min_length=1, max_length=256, description="The event's source.")
    detail_type: str = Field(
        default="Punctual Execution", min_length=1, max_length=128, description="Its detail-type."
    )
    payload: Any = Field(default=None, description="JSON given as the event detail's `payload`.")

    @field_validator("event_bus_arn")
    @classmethod
    def _is_arn(cls, value: str) -> str:
        return _checked_arn(target_arns.EVENTBRIDGE, value)

    @field_validator("source")
    @classmethod
    def _not_aws(cls, value: str) -> str:
        if value.startswith("aws."):
            raise ValueError("sources starting with aws. are AWS's own")
        return value


class EventBridgeTask:
    name = "eventbridge"
    description = (
        "Puts one event on an EventBridge bus the deployment allows (setting eventbridge_buses): source "
        '`source`, detail-type `detail_type`, detail {"job_id", "execution_id", "scheduled_at", "attempt", '
        '"payload"}. Throttling and internal failures are retried.'
    )
    params_model: type[BaseModel] = EventBridgeParams

    def check(self, params: BaseModel, policy: TaskPolicy) -> None:
        _check_allowed(target_arns.EVENTBRIDGE, getattr(params, "event_bus_arn", None), policy)

    def run(self, params: BaseModel, context: TaskContext) -> Any:
        assert isinstance(params, EventBridgeParams)
        target = target_arns.EVENTBRIDGE
        _check_allowed(target, params.event_bus_arn, context.policy, at_run=True)
        detail = json.dumps(_envelope(context, params.payload), separators=(",", ":"))
        if len(detail.encode()) > MAX_MESSAGE_BYTES:
            raise TaskFailed("the event is larger than EventBridge's 256 KiB", retryable=False)
        entry = {
            "EventBusName": params.event_bus_arn,
            "Source": params.source,
            "DetailType": params.detail_type,
            "Detail": detail,
        }
        client = _client(target, params.event_bus_arn, context, "events")
        answer = _call(target, lambda: client.put_events(Entries=[entry]))
        [result] = answer.get("Entries") or [{}]
        if answer.get("FailedEntryCount") or result.get("ErrorCode"):
            code = str(result.get("ErrorCode", ""))
            raise TaskFailed(
                f"eventbridge {code}: {result.get('ErrorMessage', 'the event was not put')}",
                retryable=code in _RETRYABLE_CODES,
            )
        return {"event_id": result.get("EventId")}


# ------------------------------------------------------------- stepfunctions
class StepFunctionsParams(BaseModel):
    model_config = ConfigDict(extra="forbid")

    state_machine_arn: str = Field(
        description="The state machine's ARN (arn:aws:states:REGION:ACCOUNT:stateMachine:NAME); the "
        "deployment must allow it."
    )
    payload: Any = Field(default=None, description="JSON given as the execution input's `payload`.")

    @field_validator("state_machine_arn")
    @classmethod
    def _is_arn(cls, value: str) -> str:
        return _checked_arn(target_arns.STEPFUNCTIONS, value)


def execution_name(execution_id: str) -> str:
    """A Step Functions execution name for the execution: its id where Step Functions takes it (80
    characters of letters, digits, - _ and .), else a digest of it, the same for every attempt."""
    if len(execution_id) <= 80 and re.fullmatch(r"[A-Za-z0-9_.-]+", execution_id):
        return execution_id
    return "punctual-" + hashlib.sha256(execution_id.encode()).hexdigest()[:64]


class StepFunctionsTask:
    name = "stepfunctions"
    description = (
        "Starts an execution of a Step Functions state machine the deployment allows (setting "
        'state_machines), named after the execution id, with input {"job_id", "execution_id", '
        '"scheduled_at", "payload"}: a duplicate delivery or a retry finds it started and starts no '
        "second one (standard workflows)."
    )
    params_model: type[BaseModel] = StepFunctionsParams

    def check(self, params: BaseModel, policy: TaskPolicy) -> None:
        _check_allowed(target_arns.STEPFUNCTIONS, getattr(params, "state_machine_arn", None), policy)

    def run(self, params: BaseModel, context: TaskContext) -> Any:
        assert isinstance(params, StepFunctionsParams)
        target = target_arns.STEPFUNCTIONS
        _check_allowed(target, params.state_machine_arn, context.policy, at_run=True)
        name = execution_name(context.execution_id)
        # (no attempt in the input: Step Functions answers a repeated name with the same input as
        # the execution it started, and refuses one with another input)
        started = json.dumps(_envelope(context, params.payload, attempt=False), separators=(",", ":"))
        client = _client(target, params.state_machine_arn, context, "stepfunctions")
        try:
            answer = _call(
                target,
                lambda: client.start_execution(
                    stateMachineArn=params.state_machine_arn, name=name, input=started
                ),
            )
        except TaskFailed as exc:
            if "ExecutionAlreadyExists" not in str(exc):
                raise
            # Started under this name already, with other input (its payload refers to the attempt):
            # that execution is this one's.
            arn = params.state_machine_arn.replace(":stateMachine:", ":execution:", 1) + f":{name}"
            return {"execution_arn": arn, "already_started": True}
        return {"execution_arn": answer.get("executionArn"), "already_started": False}


register(SqsTask())
register(SnsTask())
register(EventBridgeTask())
register(StepFunctionsTask())
