"""The local stack's moto process on a disk that fills up and frees again (punctual_local.moto.faults):
what it answers, what it serves meanwhile and what a restart reads back."""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
import threading
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

import boto3
import pytest
from botocore.exceptions import ClientError
from moto import mock_aws

from punctual_local import clients, provision
from punctual_local.moto.atomic import make_writes_atomic
from punctual_local.moto.durable import DurableTables
from punctual_local.moto.faults import ENVIRONMENT_SWITCH
from punctual_local.moto.journal import StorageFailed
from punctual_local.moto.write_hooks import install_hooks


class MotoProcess:
    """`python -m punctual_local.moto.process` on a data directory whose disk fills on demand."""

    def __init__(self, data_dir: Path) -> None:
        command = [sys.executable, "-m", "punctual_local.moto.process", "--port", "0"]
        self.process = subprocess.Popen(
            [*command, "--data-dir", str(data_dir)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env={**os.environ, ENVIRONMENT_SWITCH: "1"},
        )
        assert self.process.stdin is not None and self.process.stdout is not None
        word, _, port = self.process.stdout.readline().strip().partition(" ")
        assert word == "port", word
        self.url = f"http://127.0.0.1:{port}"
        made = clients.connect(self.url)
        self.client = made.dynamodb_client
        self.table = provision.create_all(made.dynamodb_client, made.sqs).table_name
        self.process.stdin.write("restore 0\n")
        self.process.stdin.flush()
        assert self.process.stdout.readline().startswith("restored ")

    def disk(self, state: str) -> None:
        request = urllib.request.Request(f"{self.url}/_punctual/disk", data=state.encode(), method="POST")
        with urllib.request.urlopen(request, timeout=5) as answer:
            answer.read()

    def failure(self) -> str | None:
        with urllib.request.urlopen(f"{self.url}/_punctual/status", timeout=5) as answer:
            return json.loads(answer.read())["failure"]  # type: ignore[no-any-return]

    def stop(self) -> None:
        if self.process.poll() is None:
            assert self.process.stdin is not None
            self.process.stdin.close()
            self.process.wait(20)

    # ------------------------------------------------------------------ calls
    def put(self, pk: str, **attrs: Any) -> None:
        item = {"pk": {"S": pk}, "sk": {"S": "JOB"}, **attrs}
        self.client.put_item(TableName=self.table, Item=item)

    def get(self, pk: str) -> dict[str, Any] | None:
        found = self.client.get_item(TableName=self.table, Key={"pk": {"S": pk}, "sk": {"S": "JOB"}})
        return found.get("Item")  # type: ignore[no-any-return]

    def stored(self) -> list[str]:
        found = self.client.scan(TableName=self.table)["Items"]
        return sorted(item["pk"]["S"] for item in found)


@pytest.fixture(scope="module")
def shared_moto(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MotoProcess]:
    started = MotoProcess(tmp_path_factory.mktemp("data"))
    try:
        yield started
    finally:
        started.stop()


@pytest.fixture
def moto(shared_moto: MotoProcess) -> Iterator[MotoProcess]:
    """moto's process (one for the module: it takes seconds to start), its disk free and its table
    empty after each test."""
    yield shared_moto
    shared_moto.disk("free")
    for pk in shared_moto.stored():
        shared_moto.client.delete_item(TableName=shared_moto.table, Key={"pk": {"S": pk}, "sk": {"S": "JOB"}})


def refused(call: Any) -> str:
    with pytest.raises(ClientError) as caught:
        call()
    assert caught.value.response["Error"]["Code"] == "PunctualStorageFailed", caught.value.response
    return str(caught.value.response["Error"]["Message"])


def test_a_write_the_full_disk_refused_is_never_read_back_and_reads_go_on(moto: MotoProcess) -> None:
    # Given an item on disk, then a disk that is full
    first = {"name": {"S": "first"}, "task": {"M": {"params": {"M": {"n": {"N": "1"}}}}}}
    moto.put("JOB#a", **first)
    moto.disk("full")

    # When an item is put, the first one updated (a nested attribute too) and deleted
    assert "No space left on device" in refused(lambda: moto.put("JOB#b"))
    refused(
        lambda: moto.client.update_item(
            TableName=moto.table,
            Key={"pk": {"S": "JOB#a"}, "sk": {"S": "JOB"}},
            UpdateExpression="SET #n = :n, task.params.n = :two",
            ExpressionAttributeNames={"#n": "name"},
            ExpressionAttributeValues={":n": {"S": "renamed"}, ":two": {"N": "2"}},
        )
    )
    refused(
        lambda: moto.client.delete_item(TableName=moto.table, Key={"pk": {"S": "JOB#a"}, "sk": {"S": "JOB"}})
    )

    # Then reads are answered, and show none of the refused writes
    assert moto.get("JOB#b") is None
    assert moto.get("JOB#a") == {"pk": {"S": "JOB#a"}, "sk": {"S": "JOB"}, **first}
    assert moto.stored() == ["JOB#a"]


def test_a_batch_the_full_disk_refused_leaves_none_of_its_items(moto: MotoProcess) -> None:
    # Given a full disk
    moto.disk("full")

    # When 25 items are batch-written, and 10 written in a transaction
    puts = [{"PutRequest": {"Item": {"pk": {"S": f"JOB#{n:02d}"}, "sk": {"S": "JOB"}}}} for n in range(25)]
    refused(lambda: moto.client.batch_write_item(RequestItems={moto.table: puts}))
    transaction = [
        {"Put": {"TableName": moto.table, "Item": {"pk": {"S": f"JOB#t{n}"}, "sk": {"S": "JOB"}}}}
        for n in range(10)
    ]
    refused(lambda: moto.client.transact_write_items(TransactItems=transaction))

    # Then none of them is read back
    assert moto.stored() == []


def test_once_the_disk_has_room_again_writes_succeed_without_a_restart_and_survive_one(
    tmp_path: Path,
) -> None:
    # Given an item on disk, and a write the full disk refused
    moto = MotoProcess(tmp_path)
    moto.put("JOB#a")
    moto.disk("full")
    refused(lambda: moto.put("JOB#b"))
    assert moto.failure() is not None

    # When the disk has room again
    moto.disk("free")

    # Then the next write succeeds, and the store says it is well again
    moto.put("JOB#c")
    assert moto.failure() is None
    # And a restart reads back the acknowledged items, and not the refused one
    moto.stop()  # (left running if an assertion above fails: its stdin closes as the test session ends)
    restarted = MotoProcess(tmp_path)
    try:
        assert restarted.stored() == ["JOB#a", "JOB#c"]
    finally:
        restarted.stop()


class StallingDisk:
    """Files whose writes, once `stall` is set, wait for `release` and then fail as on a full disk."""

    def __init__(self) -> None:
        self.stall = threading.Event()
        self.stalled = threading.Event()
        self.release = threading.Event()

    def open(self, path: Path, mode: str) -> IO[bytes]:
        disk = self
        file: IO[bytes] = open(path, mode)  # noqa: SIM115 - the journal closes it

        class Stalling:
            def write(self, data: bytes) -> int:
                if disk.stall.is_set():
                    disk.stalled.set()
                    assert disk.release.wait(10)
                    raise OSError(errno.ENOSPC, "No space left on device")
                return file.write(data)

            def __getattr__(self, name: str) -> Any:
                return getattr(file, name)

        return Stalling()  # type: ignore[return-value]


def test_writes_lost_together_are_taken_back_newest_first(tmp_path: Path) -> None:
    # Given moto journaling its writes in this process (where a write returns before its batch is on
    # disk), with one item on disk, then a disk that holds the next batch and fails it
    install_hooks()
    make_writes_atomic()
    disk = StallingDisk()
    with mock_aws():
        client = boto3.client("dynamodb", region_name="us-east-1")
        table = provision.create_all(client, boto3.client("sqs", region_name="us-east-1")).table_name
        tables = DurableTables(tmp_path, opener=disk.open)
        tables.restore(0)
        journal = tables.journal
        assert journal is not None
        try:
            key = {"pk": {"S": "JOB#a"}, "sk": {"S": "JOB"}}
            client.put_item(TableName=table, Item={**key, "v": {"N": "1"}})
            journal.wait(journal.sequence)
            disk.stall.set()

            # When the item is changed twice and deleted, and another one put, while the first of
            # those writes is held by the disk, which then fails it
            for value in ("2", "3"):
                client.update_item(
                    TableName=table,
                    Key=key,
                    UpdateExpression="SET v = :v",
                    ExpressionAttributeValues={":v": {"N": value}},
                )
                assert disk.stalled.wait(5)
            client.delete_item(TableName=table, Key=key)
            client.put_item(TableName=table, Item={"pk": {"S": "JOB#b"}, "sk": {"S": "JOB"}})
            disk.release.set()
            with pytest.raises(StorageFailed):
                journal.wait(journal.sequence, first=2)

            # Then the store reads as its disk holds it
            assert client.get_item(TableName=table, Key=key)["Item"]["v"] == {"N": "1"}
            assert [i["pk"]["S"] for i in client.scan(TableName=table)["Items"]] == ["JOB#a"]
        finally:
            tables.close()
