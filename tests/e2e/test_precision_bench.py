"""The precision benchmark (bench/precision.py), run as a user runs it, in a tiny configuration."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.e2e.conftest import ROOT

pytestmark = pytest.mark.e2e

TINY = ["--rate", "2", "--duration", "5", "--scanned-share", "0", "--handoff-window", "3:8"]


def test_the_precision_benchmark_reports_every_job_delivered_once_and_never_early() -> None:
    # Given the benchmark in a tiny configuration: 10 jobs at 2 a second, due 3-8 s ahead
    command = [sys.executable, "-m", "bench.precision", *TINY, "--grace", "2", "--sample", "5"]
    # When it runs, starting and stopping its own local stack
    finished = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=60)
    # Then it prints one JSON document with every figure the README quotes
    assert finished.returncode == 0, finished.stderr[-3000:]
    result = json.loads(finished.stdout)
    assert {"config", "machine", "creation", "delivery", "api_cross_check", "targets"} <= result.keys()
    creation, delivery = result["creation"], result["delivery"]
    assert {"jobs_created", "rate_per_s", "latency_ms"} <= creation.keys()
    assert {"p50", "p95", "p99", "max"} <= delivery["lateness_ms"].keys()
    assert {"executed_per_second", "early", "missed", "duplicates"} <= delivery.keys()
    # And every job was delivered exactly once, none before its time, as the API also says
    assert creation["jobs_created"] == 10 and creation["failed"] == 0
    assert delivery["jobs_delivered"] == delivery["executions_received"] == 10
    assert (delivery["early"], delivery["missed"], delivery["duplicates"]) == (0, 0, 0)
    assert delivery["unexpected"] == delivery["extra_executions"] == 0
    assert delivery["lateness_ms"]["min"] >= 0
    assert result["api_cross_check"]["statuses"] == {"SUCCEEDED": 5}
    assert result["targets"]["none_early"] and result["targets"]["none_missed"]
