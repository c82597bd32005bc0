"""Synthesizes the Punctual stack once per test session (per xdist worker) for the infra tests.

jsii makes each synthesis cost seconds, so tests share one synthesized app and read its template,
its validation report and its code asset from the cloud assembly.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

# Node's end-of-life banner from jsii is noise in test output.
os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "18,20")

from aws_cdk import App
from aws_cdk.assertions import Template

from infra.app import build
from punctual.platform import resources

REPO_ROOT = Path(__file__).resolve().parents[2]
CDK_CONTEXT: dict[str, Any] = json.loads((REPO_ROOT / "cdk.json").read_text())["context"]
ALARM_EMAIL = "ops@example.com"


@dataclass
class Synthesized:
    stack_name: str
    outdir: Path
    template: dict[str, Any]
    validation_error: str | None

    @property
    def assertions(self) -> Template:
        return Template.from_json(self.template)

    @property
    def resources(self) -> dict[str, dict[str, Any]]:
        return dict(self.template["Resources"])

    def of_type(self, cfn_type: str) -> dict[str, dict[str, Any]]:
        return {k: v for k, v in self.resources.items() if v["Type"] == cfn_type}

    def function(self, name: str) -> tuple[str, dict[str, Any]]:
        """(logical id, properties) of the function running `resources.FUNCTIONS[name]`."""
        handler = resources.FUNCTIONS[name]
        found = [
            (k, v["Properties"])
            for k, v in self.of_type("AWS::Lambda::Function").items()
            if v["Properties"]["Handler"] == handler
        ]
        assert len(found) == 1, f"expected one function with handler {handler}, found {found}"
        return found[0]

    def statements_of(self, name: str) -> list[dict[str, Any]]:
        """Every IAM statement that applies to the role of function `name`."""
        role = self.function(name)[1]["Role"]["Fn::GetAtt"][0]
        statements: list[dict[str, Any]] = []
        for policy in self.of_type("AWS::IAM::Policy").values():
            if {"Ref": role} in policy["Properties"]["Roles"]:
                statements += policy["Properties"]["PolicyDocument"]["Statement"]
        for inline in self.resources[role]["Properties"].get("Policies", []):
            statements += inline["PolicyDocument"]["Statement"]
        return statements

    def logical_id(self, cfn_type: str, prefix: str) -> str:
        """The one resource of `cfn_type` whose logical id (derived from its path) starts with `prefix`."""
        found = [k for k in self.of_type(cfn_type) if k.startswith(prefix)]
        assert len(found) == 1, f"{cfn_type} {prefix}*: {found}"
        return found[0]

    def validation_report(self) -> dict[str, Any]:
        return dict(json.loads((self.outdir / "validation-report.json").read_text()))

    def asset_dir(self, s3_key: str) -> Path:
        """The staged directory of a zip asset, from the key the template deploys it under."""
        manifest = json.loads((self.outdir / f"{self.stack_name}.assets.json").read_text())
        for asset in manifest["files"].values():
            if any(d["objectKey"] == s3_key for d in asset["destinations"].values()):
                return self.outdir / asset["source"]["path"]
        raise KeyError(s3_key)


@contextmanager
def _environment_agnostic() -> Iterator[None]:
    """The CDK CLI's CDK_DEFAULT_* variables must not leak into the test stack."""
    saved = {k: os.environ.pop(k) for k in ("CDK_DEFAULT_ACCOUNT", "CDK_DEFAULT_REGION") if k in os.environ}
    try:
        yield
    finally:
        os.environ.update(saved)


def synthesize(outdir: Path, overrides: Mapping[str, Any]) -> Synthesized:
    context = {**CDK_CONTEXT, **overrides}
    app = App(outdir=str(outdir), context=context)
    with _environment_agnostic():
        stack = build(app)
    error: str | None = None
    try:
        app.synth()
    except RuntimeError as exc:  # a validation plugin (cdk-nag) failed; the template is still written
        error = str(exc)
    template = json.loads((outdir / f"{stack.stack_name}.template.json").read_text())
    return Synthesized(stack.stack_name, outdir, template, error)


@pytest.fixture(scope="session")
def synthesized(tmp_path_factory: pytest.TempPathFactory) -> Synthesized:
    """The stack as `cdk synth` builds it from cdk.json, with an alarm e-mail given."""
    return synthesize(tmp_path_factory.mktemp("cdk.out"), {"alarm_email": ALARM_EMAIL})


# The functions the unprotected stack lets the `lambda` task invoke.
REPORTS_FUNCTIONS = "arn:aws:lambda:*:123456789012:function:reports-*"
BILLING_FUNCTION = "arn:aws:lambda:eu-west-1:123456789012:function:billing"
# What it lets the AWS target tasks reach (by setting).
TARGET_PATTERNS = {
    "sqs_queues": (
        "arn:aws:sqs:eu-west-1:123456789012:orders-*",
        "arn:aws:sqs:eu-west-1:123456789012:audit.fifo",
    ),
    "sns_topics": ("arn:aws:sns:*:123456789012:alerts",),
    "eventbridge_buses": ("arn:aws:events:eu-west-1:123456789012:event-bus/default",),
    "state_machines": ("arn:aws:states:eu-west-1:123456789012:stateMachine:nightly-*",),
}
# The SNS topics and EventBridge bus its jobs may notify.
ALERT_TOPICS = "arn:aws:sns:*:123456789012:alerts-*"
OPS_BUS = "arn:aws:events:eu-west-1:123456789012:event-bus/ops"


@pytest.fixture(scope="session")
def unprotected(tmp_path_factory: pytest.TempPathFactory) -> Synthesized:
    """A throwaway test stack configured on the command line (`-c key=value` gives strings)."""
    return synthesize(
        tmp_path_factory.mktemp("cdk.out.unprotected"),
        {
            "stack_name": "PunctualTest",
            "deletion_protection": "false",
            "shard_count": "32",
            "scanner_fanout": "1",
            "lookahead_seconds": "120",
            "webhook_allowed_networks": "10.0.0.0/8, 192.168.1.0/24",
            "lambda_functions": f"{REPORTS_FUNCTIONS}, {BILLING_FUNCTION}",
            **{setting: ",".join(patterns) for setting, patterns in TARGET_PATTERNS.items()},
            "notification_targets": f"{ALERT_TOPICS}, {OPS_BUS}",
            "execution_events": "final",
            "worker_max_concurrency": "5",
            "log_level": "debug",
            "api_throttle_rate": "20",
            "api_throttle_burst": "40",
        },
    )


# The provisioned stack's capacity settings, as `-c key=value` gives them.
PROVISIONED_CONTEXT = {
    "table_capacity": "provisioned",
    "table_min_write_units": "200",
    "table_max_write_units": "9000",
    "table_min_read_units": "150",
    "table_max_read_units": "6000",
    "table_target_utilisation": "60",
    "index_min_write_units": "20",
    "index_max_write_units": "3000",
    "index_min_read_units": "5",
    "index_max_read_units": "500",
}


@pytest.fixture(scope="session")
def provisioned(tmp_path_factory: pytest.TempPathFactory) -> Synthesized:
    """The `synthesized` stack with a provisioned, auto-scaled table: nothing else differs."""
    return synthesize(
        tmp_path_factory.mktemp("cdk.out.provisioned"), {"alarm_email": ALARM_EMAIL, **PROVISIONED_CONTEXT}
    )


@pytest.fixture(scope="session")
def rest(tmp_path_factory: pytest.TempPathFactory) -> Synthesized:
    """The `synthesized` stack with a REST API (`-c api_type=rest`) instead of an HTTP API."""
    return synthesize(
        tmp_path_factory.mktemp("cdk.out.rest"), {"alarm_email": ALARM_EMAIL, "api_type": "rest"}
    )


# The warmed stack's context: the worker mapping in provisioned mode, warmed ahead of bursts.
WARMED_CONTEXT = {
    "worker_min_pollers": "10",
    "worker_max_pollers": "300",
    "burst_forecast_minutes": "5",
    "worker_prescale": "true",
    "worker_prescale_max_pollers": "150",
    "lambda_concurrency_quota": "3000",
}


@pytest.fixture(scope="session")
def warmed(tmp_path_factory: pytest.TempPathFactory) -> Synthesized:
    """The `synthesized` stack with the burst forecast on and the worker's pollers warmed ahead."""
    return synthesize(
        tmp_path_factory.mktemp("cdk.out.warmed"), {"alarm_email": ALARM_EMAIL, **WARMED_CONTEXT}
    )


@pytest.fixture(scope="session")
def template(synthesized: Synthesized) -> Template:
    return synthesized.assertions


@pytest.fixture(scope="session")
def alarm_email() -> str:
    return ALARM_EMAIL
