"""How fast this machine runs moto, right now: the figure to read a local benchmark's results against.

A local benchmark is bound by moto's server (its own process, as the local stack runs it). Machines
differ, and a shared machine differs from minute to minute, so each local benchmark measures this
just before its run and prints it beside its results:

    moto calls a second from 8 client threads: conditional UpdateItem, PutItem, GetItem
    the load average (1, 5, 15 minutes) and the cores

    .venv/bin/python -m bench.calibration            # prints the JSON on its own
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

import boto3
from botocore.config import Config

from bench.common import emit
from punctual_local import provision

CLIENT_THREADS = 8
SECONDS_EACH = 2.0


def load_average() -> list[float] | None:
    try:
        return [round(v, 2) for v in os.getloadavg()]
    except OSError:
        return None


def calibrate(seconds_each: float = SECONDS_EACH, threads: int = CLIENT_THREADS) -> dict[str, Any]:
    """Start a moto server of its own, time three kinds of call on it, stop it."""
    command = [sys.executable, "-m", "punctual_local.moto.process", "--port", "0"]
    moto = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert moto.stdin is not None and moto.stdout is not None
    try:
        word, _, port = moto.stdout.readline().strip().partition(" ")
        if word != "port":
            raise RuntimeError(f"moto did not start: {port}")
        session = boto3.session.Session(
            aws_access_key_id="local", aws_secret_access_key="local", region_name="us-east-1"
        )
        config = Config(retries={"max_attempts": 3, "mode": "standard"}, max_pool_connections=threads * 2)
        url = f"http://127.0.0.1:{port}"
        client = session.client("dynamodb", endpoint_url=url, config=config)
        table = provision.create_all(
            client, session.client("sqs", endpoint_url=url, config=config)
        ).table_name
        return {
            "client_threads": threads,
            "moto_calls_per_s": {
                "conditional_update_item": _rate(threads, seconds_each, _updater(client, table)),
                "put_item": _rate(threads, seconds_each, _putter(client, table)),
                "get_item": _rate(threads, seconds_each, _getter(client, table)),
            },
            "load_average": load_average(),
            "cpus": os.cpu_count(),
        }
    finally:
        moto.stdin.close()
        try:
            moto.wait(10)
        except subprocess.TimeoutExpired:
            moto.kill()
            moto.wait()
        moto.stdout.close()


def _rate(threads: int, seconds: float, make_call: Callable[[int], Callable[[], None]]) -> float:
    """Calls a second, all threads together, over `seconds` of calling."""
    counts = [0] * threads
    start = threading.Barrier(threads + 1)
    stop = threading.Event()

    def run(index: int) -> None:
        call = make_call(index)
        call()  # a connection made before the clock starts
        start.wait()
        while not stop.is_set():
            call()
            counts[index] += 1

    workers = [threading.Thread(target=run, args=(i,), daemon=True) for i in range(threads)]
    for worker in workers:
        worker.start()
    start.wait()
    began = time.perf_counter()
    time.sleep(seconds)
    stop.set()
    for worker in workers:
        worker.join()
    return round(sum(counts) / (time.perf_counter() - began), 1)


def _updater(client: Any, table: str) -> Callable[[int], Callable[[], None]]:
    def make(index: int) -> Callable[[], None]:
        key = {"pk": {"S": f"CAL#U#{index}"}, "sk": {"S": "X"}}
        client.put_item(TableName=table, Item={**key, "n": {"N": "0"}})

        def call() -> None:
            client.update_item(
                TableName=table,
                Key=key,
                UpdateExpression="SET n = n + :one",
                ConditionExpression="attribute_exists(pk) AND n >= :zero",
                ExpressionAttributeValues={":one": {"N": "1"}, ":zero": {"N": "0"}},
            )

        return call

    return make


def _putter(client: Any, table: str) -> Callable[[int], Callable[[], None]]:
    def make(index: int) -> Callable[[], None]:
        def call() -> None:
            item = {"pk": {"S": f"CAL#P#{uuid.uuid4().hex}"}, "sk": {"S": "X"}, "v": {"S": "x" * 200}}
            client.put_item(TableName=table, Item=item)

        return call

    return make


def _getter(client: Any, table: str) -> Callable[[int], Callable[[], None]]:
    def make(index: int) -> Callable[[], None]:
        key = {"pk": {"S": f"CAL#G#{index}"}, "sk": {"S": "X"}}
        client.put_item(TableName=table, Item={**key, "v": {"S": "x" * 200}})
        return lambda: client.get_item(TableName=table, Key=key)

    return make


if __name__ == "__main__":
    emit(calibrate())
