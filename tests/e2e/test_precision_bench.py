"""The precision benchmark (bench/precision/), run as a user runs it, in a tiny configuration."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.e2e.conftest import ROOT

pytestmark = [pytest.mark.e2e, pytest.mark.long]

# A burst of 6 due at one whole second (3 handed off 4 s before it, 3 created 40 s before it,
# beyond the 37 s hand-off window of a 2 s tick, for a scanner tick),
# 2 steady jobs a second for 3 s either side of it, a short creation flood, no cron job.
TINY = [
    *(
        "--burst",
        "6",
        "--burst-scanned-share",
        "0.5",
        "--burst-handoff-lead",
        "4",
        "--burst-scanned-lead",
        "40",
        "--align",
        "1",
    ),
    *("--cron", "0", "--rate", "2", "--around", "3", "--scanned-share", "0", "--handoff-window", "2:4"),
    *("--flood-seconds", "2", "--tick-seconds", "2", "--grace", "2", "--sample", "5", "--no-calibration"),
]


def test_the_precision_benchmark_reports_every_job_delivered_once_and_never_early() -> None:
    # Given the benchmark in a tiny configuration
    command = [sys.executable, "-m", "bench.precision", *TINY]
    # When it runs, starting and stopping its own local stack
    finished = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=120)
    # Then it prints one JSON document with every figure docs/benchmarks.md quotes
    assert finished.returncode == 0, finished.stderr[-3000:]
    result = json.loads(finished.stdout)
    assert {
        "config",
        "calibration",
        "machine",
        "creation",
        "delivery",
        "api_cross_check",
        "targets",
    } <= result.keys()
    creation, delivery = result["creation"], result["delivery"]
    assert {"jobs_created", "latency_ms", "flood"} <= creation.keys()
    assert {"steady", "burst", "cron"} <= delivery["lateness_ms_by_class"].keys()
    assert {"p50", "p95", "p99", "max"} <= delivery["lateness_ms_by_class"]["burst"]["all"].keys()
    assert "+0" in delivery["lateness_ms_by_second_around_burst"]
    assert {"executed_per_second", "early", "missed", "duplicates"} <= delivery.keys()
    # And every job was delivered exactly once, none before its time, as the API also says
    assert creation["jobs_created"] == 6 + 12 and creation["failed"] == 0
    assert creation["by_class_and_path"] == {"burst/scanner": 3, "burst/handoff": 3, "steady/handoff": 12}
    assert delivery["executions_delivered"] == delivery["executions_received"] == 18
    assert (delivery["early"], delivery["missed"], delivery["duplicates"]) == (0, 0, 0)
    assert delivery["unexpected"] == delivery["extra_executions"] == 0
    assert delivery["lateness_ms"]["min"] >= 0
    assert result["api_cross_check"]["statuses"] == {"SUCCEEDED": 5}
    assert result["targets"]["none_early"] and result["targets"]["none_missed"]
