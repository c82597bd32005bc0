"""List, or release, executions set aside because their job's item cannot be read.

The scanner quarantines the markers of a job it cannot parse (say, a time zone the runtime's tzdata
no longer knows) instead of failing on its bucket every tick; the ExecutionsQuarantined alarm fires.
Fix the job's item, then release its executions: they are sent at once, late, their lateness recorded.

On AWS, `--stack` reads the deployment's settings (table, queue, shard count, retention) from the
configuration of one of the stack's functions, with your AWS credentials and region (it needs
cloudformation:ListStackResources and lambda:GetFunctionConfiguration). Otherwise the configuration comes from the
environment, as the functions read it (PUNCTUAL_TABLE_NAME, PUNCTUAL_QUEUE_URL, AWS_REGION;
PUNCTUAL_AWS_ENDPOINT_URL for the local stack's moto server, which `make run` prints):

    .venv/bin/python scripts/quarantine.py --stack Punctual list
    .venv/bin/python scripts/quarantine.py --stack Punctual release JOB_ID
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

import boto3

from punctual import wiring
from punctual.platform import resources
from punctual.platform.config import Settings
from punctual.platform.timefmt import to_rfc3339
from punctual.scheduling.dispatch import release_quarantined


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="scripts/quarantine.py", description=__doc__.split("\n")[0])
    parser.add_argument(
        "--stack", help="a deployed stack's name: its settings from its functions' configuration"
    )
    parser.add_argument("--region", help="the stack's region (default: your AWS configuration's)")
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("list", help="every quarantined execution, with the reason")
    release = commands.add_parser("release", help="send a fixed job's quarantined executions now")
    release.add_argument("job_id")
    args = parser.parse_args(argv)

    punctual = wiring.build(settings(args.stack, args.region))
    if args.command == "list":
        rows = [
            {
                "job_id": marker.job_id,
                "execution_id": marker.execution_id,
                "scheduled_at": to_rfc3339(marker.scheduled_at),
                "reason": reason,
            }
            for marker, reason in punctual.store.markers.quarantined()
        ]
        print(json.dumps(rows, indent=2))
        return 0
    result = release_quarantined(punctual.store, punctual.dispatcher, punctual.clock, args.job_id)
    print(
        json.dumps(
            {
                "enqueued": len(result.enqueued),
                "skipped": len(result.skipped),
                "still_unreadable": len(result.quarantined),
                "failed": len(result.failed),
            }
        )
    )
    return 1 if result.quarantined or result.failed else 0


# What the functions read their deployment from (infra/stack.py sets it on every function).
NEEDED = (resources.ENV_TABLE_NAME, resources.ENV_QUEUE_URL, "PUNCTUAL_SHARD_COUNT")


def settings(
    stack: str | None, region: str | None, cloudformation: Any = None, functions: Any = None
) -> Settings:
    """The deployment's settings as its functions read them (table, queue, shard count, retention…):
    from the environment of one of the stack's functions with `stack`, else from this process's
    environment; a clear error without either."""
    if stack is None:
        if not all(os.environ.get(v) for v in NEEDED[:2]):
            raise SystemExit(
                "which Punctual? pass --stack NAME (a deployed stack), or set "
                f"{resources.ENV_TABLE_NAME} and {resources.ENV_QUEUE_URL} (and PUNCTUAL_AWS_ENDPOINT_URL "
                "for the local stack's moto server)"
            )
        return Settings.from_env()
    session = boto3.Session(region_name=region)
    cloudformation = cloudformation or session.client("cloudformation")
    functions = functions or session.client("lambda", region_name=cloudformation.meta.region_name)
    pages = cloudformation.get_paginator("list_stack_resources").paginate(StackName=stack)
    for page in pages:
        for resource in page["StackResourceSummaries"]:
            if resource["ResourceType"] != "AWS::Lambda::Function":
                continue
            found = functions.get_function_configuration(FunctionName=resource["PhysicalResourceId"])
            environment = dict((found.get("Environment") or {}).get("Variables") or {})
            if all(environment.get(v) for v in NEEDED):
                environment["AWS_REGION"] = functions.meta.region_name
                return Settings.from_env(environment)
    raise SystemExit(f"stack {stack} has no Punctual function ({', '.join(NEEDED)}); is it a Punctual stack?")


if __name__ == "__main__":
    sys.exit(main())
