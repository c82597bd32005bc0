"""API Gateway (IAM auth; an HTTP API, or a REST API) -> the Punctual HTTP API."""

from typing import Any

from aws_lambda_powertools.logging import correlation_paths
from aws_lambda_powertools.utilities.typing import LambdaContext

from punctual.api.app import resolve
from punctual.platform.observability import logger, metrics, tracer


# Both payload formats carry the request id at requestContext.requestId (API_GATEWAY_HTTP is the
# same path as API_GATEWAY_REST).
@logger.inject_lambda_context(correlation_id_path=correlation_paths.API_GATEWAY_HTTP)
@metrics.log_metrics
@tracer.capture_lambda_handler
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    return resolve(event, context)
