"""What else a pack's member costs the worker's CPU: its share of the pack's body made and read, and
a DynamoDB write through boto3 (a claim's or an outcome's) to the loopback stand-in.
"""

from __future__ import annotations

import os
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from typing import Any

from punctual.domain.executions import execution_id_for
from punctual.domain.work import PACK_MAX_BYTES, Pack, WorkItem, read_body


def codec(entries: int, rounds: int) -> dict[str, Any]:
    """The CPU to make and read a pack's body of `entries` scheduled executions."""
    at = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)
    items = tuple(
        WorkItem(f"job_{i:020d}", execution_id_for(f"job_{i:020d}", at, 1), at, 1) for i in range(entries)
    )
    pack = Pack(at, items, shard=7)
    body = pack.to_body()
    start = time.process_time()
    for _ in range(rounds):
        pack.to_body()
    encode = (time.process_time() - start) / rounds
    start = time.process_time()
    for _ in range(rounds):
        read_body(body)
    decode = (time.process_time() - start) / rounds
    assert read_body(body).items == items
    return {
        "entries": entries,
        "body_bytes": len(body.encode()),
        "bytes_per_entry": round(len(body.encode()) / entries, 1),
        "max_bytes": PACK_MAX_BYTES,
        "encode_ms": round(encode * 1000, 2),
        "decode_ms": round(decode * 1000, 2),
        "decode_ms_per_entry": round(decode * 1000 / entries, 4),
    }


def dynamodb_calls(url: str, calls: int, threads: int) -> dict[str, Any]:
    """The caller's CPU for a boto3 UpdateItem (a claim's or an outcome's size) to a stand-in that
    answers at once, `threads` at a time."""
    import boto3
    from botocore.config import Config

    client = boto3.client(
        "dynamodb",
        endpoint_url=url,
        region_name="us-east-1",
        aws_access_key_id="bench",
        aws_secret_access_key="bench",
        verify=os.environ.get("SSL_CERT_FILE") if url.startswith("https") else None,
        config=Config(max_pool_connections=threads, retries={"max_attempts": 1}),
    )

    def update(i: int) -> None:
        client.update_item(
            TableName="punctual",
            Key={"pk": {"S": f"JOB#job_{i:020d}"}, "sk": {"S": f"EXEC#2026-12-01T09:00:00.000Z#{i:032x}"}},
            UpdateExpression="SET #st = :st, started_at = :s, lease_until = :l, attempts = :a",
            ConditionExpression="attribute_not_exists(pk) OR #st IN (:q, :p)",
            ExpressionAttributeNames={"#st": "status"},
            ExpressionAttributeValues={
                ":st": {"S": "RUNNING"},
                ":s": {"N": "1796115600000"},
                ":l": {"N": "1796115690000"},
                ":a": {"N": "1"},
                ":q": {"S": "QUEUED"},
                ":p": {"S": "PENDING"},
            },
            ReturnValues="ALL_NEW",
        )

    for i in range(20):  # warm: the client's models, its first connections
        update(i)
    cpu, wall = time.process_time(), time.perf_counter()
    with ThreadPoolExecutor(max_workers=threads) as pool:
        list(pool.map(update, range(calls)))
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    return {
        "calls": calls,
        "threads": threads,
        "cpu_ms_per_call": round(cpu * 1000 / calls, 3),
        "wall_s": round(wall, 3),
    }
