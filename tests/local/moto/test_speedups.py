"""punctual_local.moto.speedups changes how fast moto answers, never what: the same sequence of
DynamoDB calls (successes, refusals and validation errors alike) answers the same with and without.
Likewise moto's server with and without the local stack's lane for JSON calls (moto_process)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

SEQUENCE = Path(__file__).with_name("moto_sequence.py")


def _run(*args: str) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, str(SEQUENCE), *args], capture_output=True, text=True, timeout=120, check=True
    )
    return {name: answer for name, answer in json.loads(done.stdout)}


def test_moto_answers_the_same_with_the_speedups() -> None:
    plain, fast = _run(), _run("--speedups")
    assert list(fast) == list(plain)
    for name in plain:
        assert fast[name] == plain[name], name
    # The sequence does reach what it means to compare: writes that apply, and each kind of refusal.
    assert plain["update ALL_NEW"]["Attributes"]["count"] == {"N": "4"}
    assert plain["update UPDATED_NEW"]["Attributes"] == {"count": {"N": "5"}, "more": {"L": [{"S": "i"}] * 2}}
    assert plain["update that stores an absent item"]["Attributes"]["f24"] == {"S": "v"}
    # (a plain SET and REMOVE, which the speedups apply without moto's validator)
    applied = plain["a plain SET and REMOVE, ALL_NEW"]["Attributes"]
    assert applied["label"] == {"S": "DONE"} and applied["plain"] == {"N": "7"}
    assert "blob" not in applied and "blobs" not in applied
    assert plain["a plain update that stores an absent item"]["Attributes"]["b"] == {"NULL": True}
    assert plain["get projected"]["Item"] == {"status": {"S": "ACTIVE"}, "map": {"M": {"a": {"N": "1"}}}}
    assert len(plain["get projected, top-level attributes"]["Item"]) == 8
    assert plain["batch get projected"]["Responses"]["sequence"] == [
        {"pk": {"S": "JOB#1"}, "status": {"S": "RUNNING"}, "count": {"N": "8"}}
    ]
    refusals = {name: answer.get("error") for name, answer in plain.items() if "error" in answer}
    assert refusals == {
        "put refused": "ConditionalCheckFailedException",
        "update refused, old item returned": "ConditionalCheckFailedException",
        "two SET clauses": "ValidationException",
        "overlapping paths": "ValidationException",
        "a key attribute": "ValidationException",
        "an unused value": "ValidationException",
        "a syntax error": "ValidationException",
        "a reserved word in a plain update": "ValidationException",
        "an index's key set empty": "ValidationException",
        "a key attribute removed": "ValidationException",
        "an attribute set twice": "ValidationException",
        "an item made too large": "ValidationException",
        "arithmetic on a string": "ValidationException",
        "transaction cancelled": "TransactionCanceledException",
    }
    assert "Item" in plain["update refused, old item returned"]
    assert plain["batch get"]["ConsumedCapacity"][0]["CapacityUnits"] == 3.0
    assert plain["query"]["Count"] == 5 and "LastEvaluatedKey" in plain["query"]


def test_moto_s_server_answers_the_same_through_the_lane_for_json_calls() -> None:
    plain, lane = _run("--server"), _run("--server", "--lane")
    assert list(lane) == list(plain)
    for name in plain:
        assert lane[name] == plain[name], name
    # Successes and refusals of both services, each with its status and moto's checksum header
    assert plain["put refused"]["http"][0]["status"] == 400
    assert plain["receive from no queue"]["answer"]["error"] == "AWS.SimpleQueueService.NonExistentQueue"
    assert plain["receive"]["answer"] == [["one", "1"], ["m0", "1"], ["m1", "1"], ["m2", "1"]]
    assert plain["send too long a delay"]["http"][0]["status"] == 400
    assert "x-amz-crc32" in plain["put"]["http"][0]["headers"]
