"""Punctual's Python client: jobs and their executions as typed results, lists as iterators that
follow the pages, and the errors the `punctual` command raises (docs/client.md).

    from punctual_client import Client

    client = Client()  # as the command finds its endpoint: PUNCTUAL_ENDPOINT, a profile, the local stack
    job = client.create_job(task={"type": "noop"}, schedule={"type": "in", "seconds": 5})
    for execution in client.executions(job.id):
        print(execution.status, execution.lateness_ms)

Off Lambda (punctual.OFF_LAMBDA): it speaks the HTTP API through the command's transport
(punctual_client.transport), which signs requests to a deployed API and sends a token to the local stack.
"""

from punctual_client._client import Client
from punctual_client._results import Execution, Job
from punctual_client.errors import ApiError, ConfigurationError, ConnectionFailed, InvalidId, PunctualError

__all__ = [
    "ApiError",
    "Client",
    "ConfigurationError",
    "ConnectionFailed",
    "Execution",
    "InvalidId",
    "Job",
    "PunctualError",
]
