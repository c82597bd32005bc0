"""cdk-nag (AwsSolutions) and cfn-lint pass on the synthesized stack."""

from __future__ import annotations

import json

import pytest
from aws_cdk import App, Stack
from aws_cdk import aws_sqs as sqs
from cfnlint.api import lint

from infra.app import add_checks


def _violations(report: dict) -> list[str]:
    return [
        f"{violation['ruleName']} at {construct['constructPath']}"
        for plugin in report["pluginReports"]
        for violation in plugin["violations"]
        for construct in violation["violatingConstructs"]
    ]


# The default stack (an HTTP API), the one with a provisioned, auto-scaled table, the one with a
# REST API, the throwaway one configured on the command line (functions for the lambda task), and
# the one whose scanner sets the worker mapping's pollers ahead of bursts.
STACKS = ["synthesized", "provisioned", "rest", "unprotected", "warmed"]


@pytest.mark.parametrize("stack", STACKS)
def test_cdk_nag_aws_solutions_has_no_unacknowledged_finding(request, stack):
    synthesized = request.getfixturevalue(stack)
    assert synthesized.validation_error is None, _violations(synthesized.validation_report())
    assert _violations(synthesized.validation_report()) == []


def test_cdk_nag_checks_are_really_applied(tmp_path):
    # Given an app with the same checks and a queue that breaks two AwsSolutions rules
    app = App(outdir=str(tmp_path))
    stack = Stack(app, "Canary")
    sqs.Queue(stack, "PlainQueue", enforce_ssl=False)
    add_checks(app)
    # When it is synthesized, then the checks fail it
    try:
        app.synth()
    except RuntimeError:
        pass
    report = json.loads((tmp_path / "validation-report.json").read_text())
    rules = {v.split(" at ")[0] for v in _violations(report)}
    assert {"AwsSolutions-SQS3", "AwsSolutions-SQS4"} <= rules


@pytest.mark.parametrize("stack", STACKS)
def test_cfn_lint_finds_no_error(request, stack):
    synthesized = request.getfixturevalue(stack)
    matches = lint(json.dumps(synthesized.template), regions=["us-east-1", "eu-west-1"])
    errors = [
        f"{m.rule.id} {m.message} ({'/'.join(map(str, m.path))})" for m in matches if m.rule.id[0] == "E"
    ]
    assert errors == []
