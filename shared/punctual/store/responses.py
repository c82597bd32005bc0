"""DynamoDB's item responses taken as the JSON they arrive in, not walked through botocore's model.

botocore parses a response by walking the operation's output shape, node by node: for items (a map
of attribute values each) that costs far more than the call's own work. A scanner dispatch reads its
jobs with BatchGetItem, about a kilobyte each, and that walk took about a third of the scanner's CPU
(bench/scanner_throughput). Yet DynamoDB's JSON protocol sends items exactly as the client returns them
(`{"S": "..."}`, `{"N": "12"}`, maps and lists) but for binary values, base64 text on the wire and
bytes once parsed. So a successful response of an item operation without a binary value is loaded
with `json.loads` and handed over as parsed; botocore parses an empty body beside it, for its
response metadata. Errors and anything binary go botocore's way. The CRC32 check of DynamoDB's
answers reads the HTTP response, not this, and still runs.
"""

from __future__ import annotations

import json
from typing import Any

# The operations whose output is items, keys, counts and consumed capacity only: no timestamps, no
# blobs but binary attribute values (which are left to botocore).
ITEM_OPERATIONS = frozenset(
    {
        "GetItem",
        "BatchGetItem",
        "Query",
        "Scan",
        "PutItem",
        "UpdateItem",
        "DeleteItem",
        "BatchWriteItem",
        "TransactGetItems",
        "TransactWriteItems",
    }
)
# A binary attribute value ("B" or "BS") as JSON writes its type, whatever the spacing around its
# colon. A map key or a string that is just "B" or "BS" matches too: that answer only goes
# botocore's way.
_BINARY = (b'"B"', b'"BS"')
_EMPTY = b"{}"
_HANDLER_ID = "punctual-item-responses-as-json"


def parse_item_responses_as_json(client: Any) -> None:
    """Make `client` (a DynamoDB client, or a resource's) take its item responses as sent."""
    client.meta.events.register("before-parse.dynamodb", _as_json, unique_id=_HANDLER_ID)


def _as_json(
    operation_model: Any, response_dict: dict[str, Any], customized_response_dict: dict[str, Any], **_: Any
) -> None:
    if response_dict.get("status_code", 500) >= 300 or operation_model.name not in ITEM_OPERATIONS:
        return
    body = response_dict.get("body")
    if not isinstance(body, bytes) or not body or any(marker in body for marker in _BINARY):
        return
    customized_response_dict.update(json.loads(body))
    response_dict["body"] = _EMPTY
