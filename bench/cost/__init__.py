"""Benchmark 3: AWS calls and cost per execution, counted from a real run on moto. Prints JSON.

Four workloads of webhook jobs (calling a receiver on loopback: nothing leaves the machine), each
in its own moto world driven minute by minute as AWS drives Punctual (tests/world.py):
- one-time jobs created one a request (POST /jobs) a few minutes ahead (filed as markers, picked up
  by the scanner);
- one-time jobs due within the hand-off window (enqueued by the API itself);
- one-time jobs created a hundred a request (POST /jobs/batch) a few minutes ahead;
- every-minute cron jobs, per occurrence once in their rhythm.
Each figure is the difference between a busy stretch and an idle one of the same length, so the
scanner's fixed cost per tick is left out (and reported on its own). Every AWS call is counted by
operation; DynamoDB request units are computed from the items' sizes by DynamoDB's rules (old and
new images read back from moto; punctual_testing/units.py), index writes included, for the indexes as deployed
(projection ALL) and as KEYS_ONLY. SQS ReceiveMessage is the event source mapping's polling, billed
per poll and left out (the emulation polls only when a message is visible; Lambda's long polls are
priced in `punctual capacity`). Dollars use the one price table, `punctual_cli.capacity`.

`per_million_usd` gives a million executions' cost as deployed by default (infra/settings.py: the HTTP
API, execution events "all"), in cents, beside its targets, its breakdown by service and its inputs
labelled measured, documented (with each price's page) or assumed.

    .venv/bin/python -m bench.cost                      # 50 + 50 + 100 one-time and 10 cron jobs
    .venv/bin/python -m bench.cost --scenarios handed_off,recurring --one-time 3 --cron 2 --minutes 1
"""

from bench import offline  # noqa: F401  (first: it sets up the environment)
