"""Where the API is: the default endpoint (the local stack on this machine), whether an endpoint is
loopback (the local stack, which takes a bearer token) and the AWS region a deployed one is in."""

from __future__ import annotations

import ipaddress
import os
import re
import urllib.parse
from collections.abc import Mapping

DEFAULT_PORT = 8765
DEFAULT_TOKEN = "local"

_EXECUTE_API_HOST = re.compile(r"\.execute-api\.([a-z]{2}(?:-[a-z]+)+-\d+)\.amazonaws\.com(?:\.cn)?$")


def is_loopback(endpoint: str) -> bool:
    """True for 127.0.0.0/8, ::1 and localhost: the local stack, which takes a bearer token."""
    host = urllib.parse.urlsplit(endpoint).hostname or ""
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def scheme_hint(url: str) -> str:
    """`: add http://, as in http://127.0.0.1:9001/x` for a URL written without its scheme, else ""."""
    if "://" in url or not url.strip():
        return ""
    return f": add http:// or https://, as in http://{url.strip()}"


def region_for(endpoint: str, environ: Mapping[str, str] | None = None) -> str | None:
    """The region of an `*.execute-api.<region>.amazonaws.com` host, else AWS_REGION/AWS_DEFAULT_REGION."""
    env = os.environ if environ is None else environ
    host = urllib.parse.urlsplit(endpoint).hostname or ""
    match = _EXECUTE_API_HOST.search(host)
    if match:
        return match.group(1)
    return env.get("AWS_REGION") or env.get("AWS_DEFAULT_REGION") or None


def default_endpoint(environ: Mapping[str, str] | None = None) -> str:
    env = os.environ if environ is None else environ
    if env.get("PUNCTUAL_ENDPOINT"):
        return env["PUNCTUAL_ENDPOINT"]
    return f"http://127.0.0.1:{env.get('PUNCTUAL_PORT') or DEFAULT_PORT}"
