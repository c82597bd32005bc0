"""The `lambda` task: invoke an AWS Lambda function, with the execution's identity in its event."""

from __future__ import annotations

import json
from contextlib import closing
from typing import Any, Literal

from botocore.exceptions import BotoCoreError, ClientError, ParamValidationError
from pydantic import BaseModel, ConfigDict, Field, field_validator

from punctual.domain.errors import InvalidRequest
from punctual.platform import lambda_arns
from punctual.platform.timefmt import to_rfc3339
from punctual.tasks import (
    ANSWER_PREVIEW_BYTES,
    TaskContext,
    TaskFailed,
    TaskPolicy,
    decode_answer,
    register,
    retryable_status,
)

# Errors Lambda answers with a 4xx that another attempt can get past: too many requests (429), a
# function being updated or initialised (409), or not ready yet. Other 4xx fail at once.
_RETRYABLE_CODES = {
    "TooManyRequestsException",
    "ResourceConflictException",
    "ResourceNotReadyException",
    "SnapStartNotReadyException",
    "CodeArtifactUserPendingException",
}
# Errors Lambda answers with a 502 that are the function's configuration, not a passing fault: no
# attempt gets past them until someone fixes the function. Every other 5xx is retried.
_CONFIGURATION_CODES = {
    "KMSAccessDeniedException",
    "KMSDisabledException",
    "KMSNotFoundException",
    "InvalidRuntimeException",
    "InvalidZipFileException",
    "InvalidSubnetIDException",
    "InvalidSecurityGroupIDException",
    "EC2AccessDeniedException",
}


class LambdaParams(BaseModel):
    model_config = ConfigDict(extra="forbid")

    function_arn: str = Field(
        description="The function's ARN, optionally with a version or alias "
        "(arn:aws:lambda:REGION:ACCOUNT:function:NAME[:QUALIFIER]); the deployment must allow it."
    )
    payload: Any = Field(default=None, description="JSON given to the function as the event's `payload`.")
    invocation: Literal["sync", "async"] = Field(
        default="sync",
        description="sync: wait for the function's answer, which decides success; async: succeed once "
        "Lambda has queued the event (Lambda then retries the function itself).",
    )

    @field_validator("function_arn")
    @classmethod
    def _is_function_arn(cls, value: str) -> str:
        if not lambda_arns.FUNCTION_ARN.fullmatch(value):
            raise ValueError(
                "not a Lambda function ARN (arn:aws:lambda:REGION:ACCOUNT:function:NAME[:VERSION or ALIAS])"
            )
        return value


class LambdaTask:
    name = "lambda"
    description = (
        "Invokes a Lambda function the deployment allows (setting lambda_functions) with the event "
        '{"job_id", "execution_id", "scheduled_at", "attempt", "payload"}, so that the function can '
        "de-duplicate. sync: succeeds when the function returns; a function error, throttling and "
        "Lambda's 5xx are retried, other errors fail at once. async: succeeds when Lambda accepts the event."
    )
    params_model: type[BaseModel] = LambdaParams

    def check(self, params: BaseModel, policy: TaskPolicy) -> None:
        assert isinstance(params, LambdaParams)
        if not lambda_arns.is_allowed(params.function_arn, policy.lambda_functions):
            raise InvalidRequest(
                f"task.params.function_arn: {lambda_arns.unqualified(params.function_arn)} is not among the "
                "functions this deployment may invoke (setting lambda_functions)",
                field="task.params.function_arn",
            )

    def run(self, params: BaseModel, context: TaskContext) -> Any:
        assert isinstance(params, LambdaParams)
        if not lambda_arns.is_allowed(params.function_arn, context.policy.lambda_functions):
            raise TaskFailed(
                f"{lambda_arns.unqualified(params.function_arn)} is no longer among the functions this "
                "deployment may invoke (setting lambda_functions)",
                retryable=False,
            )
        if context.lambda_clients is None:
            raise TaskFailed("this worker has no Lambda client", retryable=False)
        event = {
            "job_id": context.job_id,
            "execution_id": context.execution_id,
            "scheduled_at": to_rfc3339(context.scheduled_at),
            "attempt": context.attempt,
            "payload": params.payload,
        }
        # A client in the function's region: Lambda invokes only its own region's functions.
        client = context.lambda_clients(
            lambda_arns.region(params.function_arn), max(1, round(context.timeout_seconds))
        )
        try:
            answer = client.invoke(
                FunctionName=params.function_arn,
                InvocationType="RequestResponse" if params.invocation == "sync" else "Event",
                Payload=json.dumps(event, separators=(",", ":")).encode(),
            )
            payload = b""
            if "Payload" in answer:
                with closing(answer["Payload"]) as stream:  # unread, it would hold its connection
                    payload = stream.read(ANSWER_PREVIEW_BYTES)
        except ClientError as exc:
            error = exc.response.get("Error", {})
            code = error.get("Code", "")
            status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0)
            retryable = code not in _CONFIGURATION_CODES and (
                code in _RETRYABLE_CODES or retryable_status(status)
            )
            raise TaskFailed(
                f"Lambda {code or status}: {error.get('Message', exc)}", retryable=retryable
            ) from exc
        except ParamValidationError as exc:  # the request itself: another attempt sends it again
            raise TaskFailed(f"{type(exc).__name__}: {exc}", retryable=False) from exc
        except BotoCoreError as exc:  # no connection, or no answer within the job's timeout
            raise TaskFailed(f"{type(exc).__name__}: {exc}", retryable=True) from exc
        result: dict[str, Any] = {"status": answer.get("StatusCode")}
        if answer.get("ExecutedVersion"):
            result["version"] = answer["ExecutedVersion"]
        if params.invocation == "async":
            return result
        result["payload"] = decode_answer(payload)
        if answer.get("FunctionError"):
            raise TaskFailed(
                f"function error ({answer['FunctionError']}): {_error_summary(result['payload'])}",
                retryable=True,
                result=result,
            )
        return result


def _error_summary(payload: Any) -> str:
    """Lambda's error answer is {"errorType", "errorMessage", "stackTrace"}: its type and message."""
    if isinstance(payload, dict) and ("errorType" in payload or "errorMessage" in payload):
        return f"{payload.get('errorType', 'Error')}: {payload.get('errorMessage', '')}"
    return str(payload)[:500]


register(LambdaTask())
