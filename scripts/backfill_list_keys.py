"""Give the jobs of a table made before the sparse list indexes their by_flag and by_name keys.

A job stored by an earlier version has no `flag` until its next status or outcome change, so the
lists by a paused, cancelled or failed state (which read by_flag) miss it; and one named by its id
stores that name, so `?name_prefix=` with its id lists it twice (its by_name entry, and the read by
id). This scans the table's job items a page at a time and sets each one's flag as the functions
compute it (list_keys.stored_flag), and removes a stored name that is the job's id. Each write is
conditioned on the status, outcome and name it was computed from: a job changed meanwhile is read
again and its keys computed anew, never overwritten with stale ones. A job a later version wrote
(a status or outcome this one does not know) keeps its flag.

Run it once after the deployment that adds by_flag (docs/upgrading.md). Each page prints a line of
JSON with a cursor: pass the last one with `--cursor` to go on where a run stopped. `--dry-run`
counts what would change and writes nothing. The scan reads the whole table (executions and markers
too: about 0.5 read units each 4 KB); the writes are one unit a job changed.

The table is found as scripts/quarantine.py finds it: from a stack's functions with `--stack`
(cloudformation:ListStackResources, lambda:GetFunctionConfiguration; dynamodb:Scan, GetItem, UpdateItem
on the table), else from the environment (PUNCTUAL_TABLE_NAME, PUNCTUAL_QUEUE_URL, AWS_REGION;
PUNCTUAL_AWS_ENDPOINT_URL for the local stack's moto server). Run from the repository's root:

    .venv/bin/python -m scripts.backfill_list_keys --stack Punctual --dry-run
    .venv/bin/python -m scripts.backfill_list_keys --stack Punctual
    .venv/bin/python -m scripts.backfill_list_keys --stack Punctual --cursor CURSOR
"""

from __future__ import annotations

import argparse
import base64
import json
import sys
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

from botocore.exceptions import ClientError

from punctual.platform import aws
from punctual.store import keys, list_keys
from scripts.quarantine import settings as deployment_settings

# Reads a job item again after a write lost to a change at most this often (each change since the
# first is another writer's, which sets the flag itself when it moves a status or an outcome).
ATTEMPTS = 3
_NAMES = {"#st": "status", "#oc": "outcome", "#nm": "name", "#fl": "flag"}
_READ = "pk, sk, id, #st, #oc, #nm, #fl"


@dataclass
class Totals:
    """What a run did: items read, the jobs among them, jobs written (or, dry, to write), jobs that
    already had their keys, and jobs still changing after `ATTEMPTS` reads (run again for them)."""

    scanned: int = 0
    jobs: int = 0
    changed: int = 0
    unchanged: int = 0
    contended: int = 0


def changes(item: dict[str, Any]) -> tuple[str | None, bool] | None:
    """(the flag to store, whether to remove the stored name) for a job item, or None if its keys are
    right: its flag as the functions compute it, and no name stored that is its id."""
    flag = list_keys.stored_flag(item)
    drop_name = "name" in item and list_keys.stored_name(str(item["id"]), str(item["name"])) is None
    if flag == item.get("flag") and not drop_name:
        return None
    return flag, drop_name


def _update(item: dict[str, Any], flag: str | None, drop_name: bool) -> dict[str, Any]:
    """The conditional UpdateItem: only while the job's status, outcome and name are as read."""
    names = {"#st": "status", "#oc": "outcome", "#fl": "flag"}
    values: dict[str, Any] = {":st": item["status"]}
    conditions = ["#st = :st"]
    if item.get("outcome") is not None:
        values[":oc"] = item["outcome"]
        conditions.append("#oc = :oc")
    else:
        conditions.append("attribute_not_exists(#oc)")
    if flag is None:
        expression = "REMOVE #fl"
    else:
        expression = "SET #fl = :fl"
        values[":fl"] = flag
    if drop_name:
        names["#nm"] = "name"
        values[":nm"] = item["name"]
        conditions.append("#nm = :nm")
        expression += ", #nm" if flag is None else " REMOVE #nm"
    return {
        "Key": {"pk": item["pk"], "sk": item["sk"]},
        "UpdateExpression": expression,
        "ConditionExpression": " AND ".join(conditions),
        "ExpressionAttributeNames": names,
        "ExpressionAttributeValues": values,
    }


def fix(table: Any, item: dict[str, Any]) -> bool | None:
    """Give one job item its keys: True if written, False if it had them (or is gone, or a writer
    since gave them), None if it kept changing under the write."""
    for _ in range(ATTEMPTS):
        wanted = changes(item)
        if wanted is None:
            return False
        try:
            table.update_item(**_update(item, *wanted))
            return True
        except ClientError as exc:
            if exc.response["Error"]["Code"] != "ConditionalCheckFailedException":
                raise
        found = table.get_item(
            Key={"pk": item["pk"], "sk": item["sk"]},
            ProjectionExpression=_READ,
            ExpressionAttributeNames=_NAMES,
            ConsistentRead=True,
        ).get("Item")
        if found is None:
            return False
        item = found
    return None


def backfill(
    table: Any,
    *,
    cursor: str | None = None,
    page_size: int = 500,
    dry_run: bool = False,
    report: Callable[[dict[str, Any]], None] = lambda line: print(json.dumps(line), flush=True),
) -> Totals:
    """Scan the table's job items from `cursor` (None: the start), a page of `page_size` items at a
    time, fixing each job's keys (with `dry_run`, counting them); `report` is given each page's
    counts and the cursor after it (None at the end)."""
    totals = Totals()
    start = decode_cursor(cursor) if cursor else None
    while True:
        request: dict[str, Any] = {
            "Limit": page_size,
            "FilterExpression": "sk = :job",
            "ExpressionAttributeValues": {":job": keys.JOB_SK},
            "ProjectionExpression": _READ,
            "ExpressionAttributeNames": _NAMES,
        }
        if start is not None:
            request["ExclusiveStartKey"] = start
        response = table.scan(**request)
        page = Totals(scanned=response.get("ScannedCount", 0))
        for item in response.get("Items", []):
            page.jobs += 1
            if dry_run:
                done: bool | None = changes(item) is not None
            else:
                done = fix(table, item)
            if done is None:
                page.contended += 1
            elif done:
                page.changed += 1
            else:
                page.unchanged += 1
        for name, count in asdict(page).items():
            setattr(totals, name, getattr(totals, name) + count)
        start = response.get("LastEvaluatedKey")
        report({**asdict(page), "dry_run": dry_run, "cursor": encode_cursor(start) if start else None})
        if start is None:
            return totals


def encode_cursor(key: dict[str, Any]) -> str:
    return base64.urlsafe_b64encode(json.dumps(key, separators=(",", ":")).encode()).decode()


def decode_cursor(cursor: str) -> dict[str, Any]:
    try:
        key = json.loads(base64.urlsafe_b64decode(cursor.encode()))
    except ValueError as exc:
        raise SystemExit(f"--cursor {cursor!r} is not a cursor this command printed") from exc
    if not isinstance(key, dict) or set(key) != {"pk", "sk"}:
        raise SystemExit(f"--cursor {cursor!r} is not a cursor this command printed")
    return key


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m scripts.backfill_list_keys", description=__doc__.split("\n")[0]
    )
    parser.add_argument(
        "--stack", help="a deployed stack's name: its table from its functions' configuration"
    )
    parser.add_argument("--region", help="the stack's region (default: your AWS configuration's)")
    parser.add_argument("--cursor", help="go on from where a run stopped (the last cursor it printed)")
    parser.add_argument("--page-size", type=int, default=500, help="items a Scan page (default 500)")
    parser.add_argument("--dry-run", action="store_true", help="count what would change; write nothing")
    args = parser.parse_args(argv)
    if not 1 <= args.page_size <= 1000:
        parser.error("--page-size must be between 1 and 1000")

    deployment = deployment_settings(args.stack, args.region)
    table = aws.dynamodb_resource(deployment).Table(deployment.table_name)
    totals = backfill(table, cursor=args.cursor, page_size=args.page_size, dry_run=args.dry_run)
    print(json.dumps({"total": asdict(totals), "dry_run": args.dry_run}))
    return 1 if totals.contended else 0


if __name__ == "__main__":
    sys.exit(main())
