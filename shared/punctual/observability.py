"""Logger, Metrics and Tracer, created once and imported everywhere.

Metric names are defined here and nowhere else: the dashboard and the alarms in infra/ use them too.
"""

from __future__ import annotations

from aws_lambda_powertools import Logger, Metrics, Tracer

SERVICE = "punctual"
NAMESPACE = "Punctual"

# Metric names (Powertools Metrics, namespace NAMESPACE, dimension service=SERVICE).
JOBS_CREATED = "JobsCreated"
EXECUTIONS_ENQUEUED = "ExecutionsEnqueued"
EXECUTIONS_STARTED = "ExecutionsStarted"
EXECUTIONS_SUCCEEDED = "ExecutionsSucceeded"
EXECUTIONS_FAILED = "ExecutionsFailed"
EXECUTIONS_RETRIED = "ExecutionsRetried"
EXECUTIONS_SKIPPED = "ExecutionsSkipped"
LATENESS_MS = "LatenessMs"
SCANNER_DURATION_MS = "ScannerDurationMs"
# How far the scanner's furthest-behind shard is behind now (0 when every shard has read up to now).
SCANNER_BEHIND_SECONDS = "ScannerBehindSeconds"
DEAD_LETTERED = "ExecutionsDeadLettered"
EXECUTIONS_QUARANTINED = "ExecutionsQuarantined"

logger = Logger(service=SERVICE)
metrics = Metrics(namespace=NAMESPACE, service=SERVICE)
tracer = Tracer(service=SERVICE)
