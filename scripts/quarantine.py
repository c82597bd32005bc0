"""List, or release, executions set aside because their job's item cannot be read.

The scanner quarantines the markers of a job it cannot parse (say, a time zone the runtime's tzdata
no longer knows) instead of failing on its bucket every tick; the ExecutionsQuarantined alarm fires.
Fix the job's item, then release its executions: they are sent at once, late, their lateness recorded.

Configuration comes from the environment, as the functions read it (PUNCTUAL_TABLE_NAME,
PUNCTUAL_QUEUE_URL, AWS_REGION; PUNCTUAL_AWS_ENDPOINT_URL for the local stack's moto server):

    .venv/bin/python scripts/quarantine.py list
    .venv/bin/python scripts/quarantine.py release JOB_ID
"""

from __future__ import annotations

import argparse
import json
import sys

from punctual import wiring
from punctual.config import Settings
from punctual.dispatch import release_quarantined
from punctual.timefmt import to_rfc3339


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="scripts/quarantine.py", description=__doc__.split("\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("list", help="every quarantined execution, with the reason")
    release = commands.add_parser("release", help="send a fixed job's quarantined executions now")
    release.add_argument("job_id")
    args = parser.parse_args(argv)

    punctual = wiring.build(Settings.from_env())
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


if __name__ == "__main__":
    sys.exit(main())
