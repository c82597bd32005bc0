"""List, or release, executions set aside because their job's item cannot be read.

The scanner quarantines the markers of a job it cannot parse (say, a time zone the runtime's tzdata
no longer knows) instead of failing on its bucket every tick; the ExecutionsQuarantined alarm fires.
Fix the job's item, then release its executions: they are sent at once, late, their lateness recorded.

On AWS, `--stack` reads the table and the work queue from the stack's outputs (TableName,
WorkQueueUrl), with your AWS credentials and region. Otherwise the configuration comes from the
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

from punctual import resources, wiring
from punctual.config import Settings
from punctual.dispatch import release_quarantined
from punctual.timefmt import to_rfc3339


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="scripts/quarantine.py", description=__doc__.split("\n")[0])
    parser.add_argument("--stack", help="a deployed stack's name: its table and queue from its outputs")
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
            for marker, reason in punctual.store.quarantined()
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


# The outputs infra/stack.py declares, and the environment variables the functions read them from.
OUTPUTS = {"TableName": resources.ENV_TABLE_NAME, "WorkQueueUrl": resources.ENV_QUEUE_URL}


def settings(stack: str | None, region: str | None, cloudformation: Any = None) -> Settings:
    """The stack's table and queue from its outputs, or the environment's; a clear error without."""
    if stack is None:
        if not all(os.environ.get(v) for v in OUTPUTS.values()):
            raise SystemExit(
                "which Punctual? pass --stack NAME (a deployed stack), or set "
                f"{resources.ENV_TABLE_NAME} and {resources.ENV_QUEUE_URL} (and PUNCTUAL_AWS_ENDPOINT_URL "
                "for the local stack's moto server)"
            )
        return Settings.from_env()
    client = cloudformation or boto3.Session(region_name=region).client("cloudformation")
    outputs = client.describe_stacks(StackName=stack)["Stacks"][0].get("Outputs", [])
    values = {o["OutputKey"]: o["OutputValue"] for o in outputs if o["OutputKey"] in OUTPUTS}
    missing = sorted(set(OUTPUTS) - set(values))
    if missing:
        raise SystemExit(f"stack {stack} has no {', '.join(missing)} output; is it a Punctual stack?")
    environment = {variable: values[key] for key, variable in OUTPUTS.items()}
    if client.meta.region_name:
        environment["AWS_REGION"] = client.meta.region_name
    return Settings.from_env(environment)


if __name__ == "__main__":
    sys.exit(main())
