"""How a request is authenticated: a bearer token for the local stack, or SigV4 for API Gateway IAM
authorization of a deployed API (botocore signs, with the standard AWS credential chain)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from punctual_client.errors import ConfigurationError


class Authenticator(Protocol):
    def headers(
        self, method: str, url: str, headers: Mapping[str, str], body: bytes | None
    ) -> dict[str, str]:
        """The headers to add to this request to authenticate it."""
        ...


@dataclass(frozen=True)
class BearerAuth:
    token: str

    def headers(
        self, method: str, url: str, headers: Mapping[str, str], body: bytes | None
    ) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"}


@dataclass(frozen=True)
class SigV4Auth:
    """API Gateway IAM authorization: SigV4 for the `execute-api` service."""

    region: str
    credentials: Any = None  # botocore Credentials; None reads the standard chain on first use
    aws_profile: str | None = None  # the AWS config profile the chain reads (None: AWS_PROFILE's)

    def headers(
        self, method: str, url: str, headers: Mapping[str, str], body: bytes | None
    ) -> dict[str, str]:
        return sign_request(
            method,
            url,
            headers,
            body,
            region=self.region,
            credentials=self.credentials,
            aws_profile=self.aws_profile,
        )


def sign_request(
    method: str,
    url: str,
    headers: Mapping[str, str],
    body: bytes | None,
    *,
    region: str,
    credentials: Any = None,
    aws_profile: str | None = None,
) -> dict[str, str]:
    """SigV4-sign a request for `execute-api`; returns the headers to add (Authorization, X-Amz-*)."""
    # Imported here: boto3 takes a noticeable time to import and local use never needs it.
    import boto3
    import botocore.exceptions
    from botocore.auth import SigV4Auth as BotocoreSigV4Auth
    from botocore.awsrequest import AWSRequest

    if credentials is None:
        try:
            credentials = boto3.Session(profile_name=aws_profile).get_credentials()
        except botocore.exceptions.ProfileNotFound as exc:
            raise ConfigurationError(str(exc)) from None
    if credentials is None:
        raise ConfigurationError(
            "no AWS credentials found for a non-local endpoint "
            "(set AWS_PROFILE or AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, or use a loopback endpoint)"
        )
    request = AWSRequest(method=method, url=url, data=body or b"", headers=dict(headers))
    BotocoreSigV4Auth(credentials.get_frozen_credentials(), "execute-api", region).add_auth(request)
    added = {"Authorization", "X-Amz-Date", "X-Amz-Security-Token", "X-Amz-Content-SHA256"}
    return {name: str(value) for name, value in request.headers.items() if name in added}
