"""A fixed sequence of DynamoDB calls on moto, printed as JSON: what each answered or raised.

Run as `python tests/local/moto/moto_sequence.py [--speedups]` by test_speedups.py, once on
moto as it is and once with punctual_local.moto.speedups, in processes of their own (the speedups
patch moto's classes for good). The two outputs must be equal: the speedups change how fast moto
answers, never what. Likewise `--server [--lane]`: through moto's server, with and without the local
stack's lane for JSON calls (punctual_local.moto.serving.JsonCallsLane), statuses and headers too.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from typing import Any

import boto3
from botocore.exceptions import ClientError
from moto import mock_aws

TABLE = "sequence"


def _answer(call: Callable[[], Any]) -> Any:
    try:
        response = call()
    except ClientError as exc:
        error = exc.response["Error"]
        return {"error": error.get("Code"), "message": error.get("Message"), **_extra(exc.response)}
    if isinstance(response, dict):
        response.pop("ResponseMetadata", None)
    return response


def _extra(response: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in response.items() if key in ("Item", "CancellationReasons")}


def _calls(client: Any) -> list[tuple[str, Callable[[], Any]]]:
    key = {"pk": {"S": "JOB#1"}, "sk": {"S": "JOB"}}
    rich = {
        **key,
        "status": {"S": "ACTIVE"},
        "count": {"N": "3"},
        "ok": {"BOOL": True},
        "none": {"NULL": True},
        "blob": {"B": b"\x00\x01binary"},
        "blobs": {"BS": [b"a", b"b"]},
        "numbers": {"NS": ["1", "2.5"]},
        "names": {"SS": ["x", "y"]},
        "list": {"L": [{"S": "a"}, {"N": "1"}, {"M": {"inner": {"S": "deep"}}}]},
        "map": {"M": {"a": {"N": "1"}, "b": {"L": []}}},
        "owner_pk": {"S": "OWNER#alice"},
        "owner_sk": {"S": "2026-12-01"},
    }
    update = client.update_item
    calls: list[tuple[str, Callable[[], Any]]] = [
        ("put", lambda: client.put_item(TableName=TABLE, Item=rich)),
        (
            "put again, old values",
            lambda: client.put_item(TableName=TABLE, Item=rich, ReturnValues="ALL_OLD"),
        ),
        (
            "put refused",
            lambda: client.put_item(
                TableName=TABLE, Item=rich, ConditionExpression="attribute_not_exists(pk)"
            ),
        ),
        ("get", lambda: client.get_item(TableName=TABLE, Key=key)),
        ("get missing", lambda: client.get_item(TableName=TABLE, Key={"pk": {"S": "NO"}, "sk": {"S": "NO"}})),
        (
            "get projected",
            lambda: client.get_item(
                TableName=TABLE,
                Key=key,
                ProjectionExpression="#s, #m.a",
                ExpressionAttributeNames={"#s": "status", "#m": "map"},
            ),
        ),
        (
            "get projected, top-level attributes",
            lambda: client.get_item(
                TableName=TABLE,
                Key=key,
                # (no sets: moto's own projection gives their members back in another order)
                ProjectionExpression="pk, #s, #c, #o, #n, #b, #l, #m, #absent",
                ExpressionAttributeNames={
                    "#s": "status",
                    "#c": "count",
                    "#o": "ok",
                    "#n": "none",
                    "#b": "blob",
                    "#l": "list",
                    "#m": "map",
                    "#absent": "absent",
                },
            ),
        ),
    ]
    for returns in ("ALL_NEW", "UPDATED_NEW", "UPDATED_OLD", "ALL_OLD", "NONE"):
        calls.append(
            (
                f"update {returns}",
                lambda returns=returns: update(
                    TableName=TABLE,
                    Key=key,
                    UpdateExpression="SET #st = :s, #c = if_not_exists(#c, :zero) + :one, "
                    "#m.a = :one, #l[0] = :s, fresh = if_not_exists(fresh, :s), "
                    "more = list_append(if_not_exists(more, :empty), :items) REMOVE #ok ADD numbers :ns",
                    ConditionExpression="#st IN (:a, :s) AND (attribute_not_exists(gone) OR gone < :one)",
                    ExpressionAttributeNames={
                        "#st": "status",
                        "#c": "count",
                        "#ok": "ok",
                        "#m": "map",
                        "#l": "list",
                    },
                    ExpressionAttributeValues={
                        ":s": {"S": "RUNNING"},
                        ":a": {"S": "ACTIVE"},
                        ":zero": {"N": "0"},
                        ":one": {"N": "1"},
                        ":empty": {"L": []},
                        ":items": {"L": [{"S": "i"}]},
                        ":ns": {"NS": ["7"]},
                    },
                    ReturnValues=returns,
                ),
            )
        )
    chain = ", ".join(f"f{i} = if_not_exists(f{i}, :v)" for i in range(25))
    calls += [
        (
            "update that stores an absent item",
            lambda: update(
                TableName=TABLE,
                Key={"pk": {"S": "JOB#2"}, "sk": {"S": "EXEC#1"}},
                UpdateExpression=f"SET {chain} REMOVE lease",
                ConditionExpression="attribute_not_exists(pk) OR #st = :v",
                ExpressionAttributeNames={"#st": "status"},
                ExpressionAttributeValues={":v": {"S": "v"}},
                ReturnValues="ALL_NEW",
            ),
        ),
        (
            "update refused, old item returned",
            lambda: update(
                TableName=TABLE,
                Key=key,
                UpdateExpression="SET #st = :s",
                ConditionExpression="#st = :other",
                ExpressionAttributeNames={"#st": "status"},
                ExpressionAttributeValues={":s": {"S": "X"}, ":other": {"S": "NOPE"}},
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
            ),
        ),
        (
            "two SET clauses",
            lambda: update(
                TableName=TABLE,
                Key=key,
                UpdateExpression="SET a = :v SET b = :v",
                ExpressionAttributeValues={":v": {"S": "v"}},
            ),
        ),
        (
            "overlapping paths",
            lambda: update(
                TableName=TABLE,
                Key=key,
                UpdateExpression="SET doc = :v, doc.a = :v",
                ExpressionAttributeValues={":v": {"S": "v"}},
            ),
        ),
        (
            "a key attribute",
            lambda: update(
                TableName=TABLE,
                Key=key,
                UpdateExpression="SET sk = :v",
                ExpressionAttributeValues={":v": {"S": "v"}},
            ),
        ),
        (
            "a reserved word in a plain update",
            lambda: update(
                TableName=TABLE,
                Key=key,
                UpdateExpression="SET plain = :n REMOVE blob",
                ExpressionAttributeValues={":n": {"N": "7"}},
            ),
        ),
        (
            "a plain SET and REMOVE, ALL_NEW",
            lambda: update(
                TableName=TABLE,
                Key=key,
                UpdateExpression="SET #l = :s, plain = :n, deep = :m REMOVE #b, blobs, nowhere",
                ExpressionAttributeNames={"#l": "label", "#b": "blob"},
                ExpressionAttributeValues={
                    ":s": {"S": "DONE"},
                    ":n": {"N": "7"},
                    ":m": {"M": {"run": {"L": [{"S": "r"}]}}},
                },
                ReturnValues="ALL_NEW",
            ),
        ),
        (
            "a plain update that stores an absent item",
            lambda: update(
                TableName=TABLE,
                Key={"pk": {"S": "JOB#9"}, "sk": {"S": "JOB"}},
                UpdateExpression="REMOVE gone SET a = :v, b = :w",
                ExpressionAttributeValues={":v": {"S": "v"}, ":w": {"NULL": True}},
                ReturnValues="ALL_NEW",
            ),
        ),
        (
            "an index's key set empty",
            lambda: update(
                TableName=TABLE,
                Key=key,
                UpdateExpression="SET owner_pk = :e",
                ExpressionAttributeValues={":e": {"S": ""}},
            ),
        ),
        (
            "an index's key of another type",
            lambda: update(
                TableName=TABLE,
                Key=key,
                UpdateExpression="SET #o = :n",
                ExpressionAttributeNames={"#o": "owner_pk"},
                ExpressionAttributeValues={":n": {"N": "1"}},
            ),
        ),
        (
            "a key attribute removed",
            lambda: update(TableName=TABLE, Key=key, UpdateExpression="REMOVE sk"),
        ),
        (
            "an attribute set twice",
            lambda: update(
                TableName=TABLE,
                Key=key,
                UpdateExpression="SET a = :v, #a = :v",
                ExpressionAttributeNames={"#a": "a"},
                ExpressionAttributeValues={":v": {"S": "v"}},
            ),
        ),
        (
            "an item made too large",
            lambda: update(
                TableName=TABLE,
                Key=key,
                UpdateExpression="SET big = :big",
                ExpressionAttributeValues={":big": {"S": "x" * 410_000}},
            ),
        ),
        (
            "an unused value",
            lambda: update(
                TableName=TABLE,
                Key=key,
                UpdateExpression="SET a = :v",
                ExpressionAttributeValues={":v": {"S": "v"}, ":w": {"S": "w"}},
            ),
        ),
        (
            "a syntax error",
            lambda: update(
                TableName=TABLE,
                Key=key,
                UpdateExpression="SET a = = :v",
                ExpressionAttributeValues={":v": {"S": "v"}},
            ),
        ),
        (
            "arithmetic on a string",
            lambda: update(
                TableName=TABLE,
                Key=key,
                UpdateExpression="SET #st = #st + :one",
                ExpressionAttributeNames={"#st": "status"},
                ExpressionAttributeValues={":one": {"N": "1"}},
            ),
        ),
        (
            "batch write",
            lambda: client.batch_write_item(
                RequestItems={
                    TABLE: [
                        {
                            "PutRequest": {
                                "Item": {"pk": {"S": "DUE#1"}, "sk": {"S": f"{n:03d}"}, "n": {"N": str(n)}}
                            }
                        }
                        for n in range(12)
                    ]
                    + [{"DeleteRequest": {"Key": {"pk": {"S": "JOB#2"}, "sk": {"S": "EXEC#1"}}}}]
                }
            ),
        ),
        (
            "batch get",
            lambda: client.batch_get_item(
                RequestItems={
                    TABLE: {
                        "Keys": [
                            key,
                            {"pk": {"S": "DUE#1"}, "sk": {"S": "003"}},
                            {"pk": {"S": "NO"}, "sk": {"S": "NO"}},
                        ]
                    }
                }
            ),
        ),
        (
            "batch get projected",
            lambda: client.batch_get_item(
                RequestItems={
                    TABLE: {
                        "Keys": [key, {"pk": {"S": "NO"}, "sk": {"S": "NO"}}],
                        "ConsistentRead": True,
                        "ProjectionExpression": "pk, #s, #c",
                        "ExpressionAttributeNames": {"#s": "status", "#c": "count"},
                    }
                }
            ),
        ),
        (
            "query",
            lambda: client.query(
                TableName=TABLE,
                KeyConditionExpression="pk = :pk AND sk > :from",
                FilterExpression="n < :top",
                ExpressionAttributeValues={":pk": {"S": "DUE#1"}, ":from": {"S": "002"}, ":top": {"N": "9"}},
                Limit=5,
            ),
        ),
        (
            "query backwards, counted",
            lambda: client.query(
                TableName=TABLE,
                KeyConditionExpression="pk = :pk",
                ExpressionAttributeValues={":pk": {"S": "DUE#1"}},
                ScanIndexForward=False,
                Select="COUNT",
            ),
        ),
        (
            "query an index",
            lambda: client.query(
                TableName=TABLE,
                IndexName="by_owner",
                KeyConditionExpression="owner_pk = :o",
                ExpressionAttributeValues={":o": {"S": "OWNER#alice"}},
            ),
        ),
        (
            "scan, filtered, a page",
            lambda: client.scan(
                TableName=TABLE,
                FilterExpression="begins_with(pk, :p)",
                ExpressionAttributeValues={":p": {"S": "DUE#"}},
                Limit=4,
                ReturnConsumedCapacity="TOTAL",
            ),
        ),
        (
            "scan",
            lambda: client.scan(TableName=TABLE),
        ),
        (
            "transaction",
            lambda: client.transact_write_items(
                TransactItems=[
                    {"Put": {"TableName": TABLE, "Item": {"pk": {"S": "T#1"}, "sk": {"S": "T"}}}},
                    {
                        "Update": {
                            "TableName": TABLE,
                            "Key": key,
                            "UpdateExpression": "SET t = :t",
                            "ExpressionAttributeValues": {":t": {"S": "t"}},
                        }
                    },
                ]
            ),
        ),
        (
            "transaction cancelled",
            lambda: client.transact_write_items(
                TransactItems=[
                    {
                        "Put": {
                            "TableName": TABLE,
                            "Item": {"pk": {"S": "T#1"}, "sk": {"S": "T"}},
                            "ConditionExpression": "attribute_not_exists(pk)",
                        }
                    },
                    {
                        "ConditionCheck": {
                            "TableName": TABLE,
                            "Key": key,
                            "ConditionExpression": "attribute_exists(pk)",
                        }
                    },
                ]
            ),
        ),
        (
            "transact get",
            lambda: client.transact_get_items(TransactItems=[{"Get": {"TableName": TABLE, "Key": key}}]),
        ),
        ("delete, old values", lambda: client.delete_item(TableName=TABLE, Key=key, ReturnValues="ALL_OLD")),
        ("describe", lambda: client.describe_table(TableName=TABLE)["Table"]["KeySchema"]),
    ]
    return calls


def _queue_calls(sqs: Any) -> list[tuple[str, Callable[[], Any]]]:
    url: list[str] = []

    def receive() -> Any:
        answer = sqs.receive_message(QueueUrl=url[0], MaxNumberOfMessages=10, AttributeNames=["All"])
        return [(m["Body"], m["Attributes"]["ApproximateReceiveCount"]) for m in answer["Messages"]]

    def create() -> Any:
        url.append(sqs.create_queue(QueueName="sequence-queue")["QueueUrl"])
        return url[0].rsplit("/", 1)[-1]

    return [
        ("create queue", create),
        (
            "send",
            lambda: sorted(set(sqs.send_message(QueueUrl=url[0], MessageBody="one")) - {"ResponseMetadata"}),
        ),
        (
            "send a batch",
            lambda: len(
                sqs.send_message_batch(
                    QueueUrl=url[0], Entries=[{"Id": str(i), "MessageBody": f"m{i}"} for i in range(3)]
                )["Successful"]
            ),
        ),
        ("receive", receive),
        ("receive from no queue", lambda: sqs.receive_message(QueueUrl=url[0] + "-missing")),
        (
            "send too long a delay",
            lambda: sqs.send_message(QueueUrl=url[0], MessageBody="x", DelaySeconds=901),
        ),
        ("attributes", lambda: sqs.get_queue_attributes(QueueUrl=url[0], AttributeNames=["QueueArn"])),
    ]


def on_server(lane: bool) -> list[Any]:
    """The DynamoDB sequence and some SQS calls through moto's server, as punctual_local.moto.process
    serves them (with its lane for JSON calls, or moto's app alone): answers, statuses and headers."""
    import logging
    import threading

    from moto.moto_server.werkzeug_app import DomainDispatcherApplication, create_backend_app
    from werkzeug.serving import make_server

    from punctual.platform import resources
    from punctual_local.moto.serving import JsonCallsLane

    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    app: Any = DomainDispatcherApplication(create_backend_app)
    server = make_server("127.0.0.1", 0, JsonCallsLane(app) if lane else app, threaded=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        options = {
            "endpoint_url": f"http://127.0.0.1:{server.port}",
            "region_name": "us-east-1",
            "aws_access_key_id": "local",
            "aws_secret_access_key": "local",
        }
        client = boto3.client("dynamodb", **options)
        sqs = boto3.client("sqs", **options)
        http: list[dict[str, Any]] = []
        for service in (client, sqs):
            service.meta.events.register(
                "after-call.*.*",
                lambda http_response, **_: http.append(
                    {"status": http_response.status_code, "headers": _http_headers(http_response.headers)}
                ),
            )
        client.create_table(**resources.TABLE.create_table_kwargs(TABLE))
        answers = []
        for name, call in [*_calls(client), *_queue_calls(sqs)]:
            before = len(http)
            answer = _answer(call)
            # (a table's description holds its creation time: its length and checksum vary)
            said = [] if name == "describe" else http[before:]
            answers.append([name, {"answer": answer, "http": said}])
        return answers
    finally:
        server.shutdown()


def _http_headers(headers: Any) -> dict[str, str]:
    varying = {"date", "x-amzn-requestid", "x-amz-request-id", "server", "connection"}
    return {
        name.lower(): value
        for name, value in headers.items()
        if name.lower() not in varying and not name.lower().startswith("access-control-")
    }


def run(speedups: bool) -> list[Any]:
    if speedups:
        from punctual_local.moto.speedups import (
            list_actions_once,
            route_each_request_once,
            speed_up_dynamodb,
        )

        speed_up_dynamodb()
        list_actions_once()
        route_each_request_once()
    from punctual.platform import resources

    with mock_aws():
        client = boto3.client("dynamodb", region_name="us-east-1")
        client.create_table(**resources.TABLE.create_table_kwargs(TABLE))
        return [[name, _answer(call)] for name, call in _calls(client)]


if __name__ == "__main__":
    args = sys.argv[1:]
    result = on_server(lane="--lane" in args) if "--server" in args else run("--speedups" in args)
    print(json.dumps(result, default=str, sort_keys=True, indent=1))
