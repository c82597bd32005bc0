"""Observability for the local stack: readable log lines, and no CloudWatch metrics.

The handlers log through the shared Powertools logger exactly as on Lambda. Locally a person reads
those lines, so by default they are rendered as one short line each (`--json` keeps Powertools' JSON).

What a line carries may come from a request (a path, a header, a client's address): in a readable
line every character that is not printable (control characters such as ESC, NUL and BEL, line and
paragraph separators, bidirectional overrides) is written as its escape, so that a request cannot
colour, rewrite or split the lines a person reads in a terminal. JSON lines escape control characters
by JSON's own rules (Powertools' serializer), on Lambda as here.
"""

from __future__ import annotations

import io
import logging
import sys
import threading
from collections import OrderedDict
from datetime import datetime
from typing import Any

from aws_lambda_powertools.logging.formatter import LambdaPowertoolsFormatter
from aws_lambda_powertools.metrics.provider.cloudwatch_emf.cloudwatch import AmazonCloudWatchEMFProvider

from punctual.platform.observability import NAMESPACE, SERVICE, logger, metrics

# Attributes every LogRecord has; whatever else a record carries came from `extra=`.
_STANDARD_ATTRIBUTES = frozenset(logging.makeLogRecord({}).__dict__) | {"message", "asctime", "taskName"}
# Extras shown first, in this order, and how they are labelled.
_LEADING = ("job_id", "execution_id", "attempt", "lateness_ms", "took_ms", "task", "error")
_LABELS = {"job_id": "job", "execution_id": "execution", "lateness_ms": "late_ms"}
# Messages of the worker whose lines carry the outcome of an execution.
_STARTED = "execution started"
_SUCCEEDED = "execution succeeded"
_FINISHED = frozenset({_SUCCEEDED, "execution failed", "execution will retry"})
# The worker's one line for a pack's successes (punctual.execution.packs).
_PACK_SUCCEEDED = "pack succeeded"


class ReadableFormatter(LambdaPowertoolsFormatter):
    """`HH:MM:SS.mmm message key=value ...`; finish lines repeat the lateness and add the duration.

    It stays a Powertools formatter so that the handlers' `inject_lambda_context` still works; the
    Lambda context keys it appends are left out of the line.
    """

    def __init__(self) -> None:
        super().__init__()
        # execution id -> (lateness in ms, monotonic start), remembered from the "started" line.
        self._running: OrderedDict[str, tuple[Any, float]] = OrderedDict()
        self._lock = threading.Lock()

    def format(self, record: logging.LogRecord) -> str:
        extras = {k: v for k, v in record.__dict__.items() if k not in _STANDARD_ATTRIBUTES}
        message = record.getMessage()
        if message == _PACK_SUCCEEDED and isinstance(extras.get("succeeded"), list):
            # A person reads an execution a line, as the worker logs a success run on its own.
            return "\n".join(self._line(record, _SUCCEEDED, _member(m)) for m in extras["succeeded"])
        return self._line(record, message, extras)

    def _line(self, record: logging.LogRecord, message: str, extras: dict[str, Any]) -> str:
        self._remember(message, record, extras)
        message = escaped(message)
        fields = [(key, extras.pop(key)) for key in _LEADING if extras.get(key) is not None]
        fields += sorted((k, v) for k, v in extras.items() if v is not None and not k.startswith("_"))
        when = datetime.fromtimestamp(record.created).strftime("%H:%M:%S.%f")[:-3]
        level = "" if record.levelno == logging.INFO else f"{record.levelname} "
        text = f"{when} {level}{message:<22}" + "".join(
            f" {_LABELS.get(key, key)}={_value(value)}" for key, value in fields
        )
        if record.exc_info:
            # (a traceback's own lines stay lines; anything else in it is escaped)
            trace = self.formatException(record.exc_info)
            text += "\n" + "\n".join(escaped(line) for line in trace.split("\n"))
        return text.rstrip()

    def _remember(self, message: str, record: logging.LogRecord, extras: dict[str, Any]) -> None:
        execution_id = extras.get("execution_id")
        if not isinstance(execution_id, str):
            return
        with self._lock:
            if message == _STARTED:
                self._running[execution_id] = (extras.get("lateness_ms"), record.created)
                self._running.move_to_end(execution_id)
                while len(self._running) > 10_000:
                    self._running.popitem(last=False)
            elif message in _FINISHED and execution_id in self._running:
                lateness, started = self._running.pop(execution_id)
                extras.setdefault("lateness_ms", lateness)
                extras.setdefault("took_ms", round((record.created - started) * 1000))


class QuietScannerTicks(logging.Filter):
    """Scanner ticks that found nothing to do are noise when the scanner ticks every few seconds."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.getMessage() != "scanner tick":
            return True
        return bool(getattr(record, "enqueued", 0) or getattr(record, "failed", 0))


class _LocalMetrics(AmazonCloudWatchEMFProvider):
    """There is no CloudWatch locally: metrics are dropped instead of printed as EMF.

    (Powertools keeps one metric set per process, which concurrent local invocations would share.)
    """

    def add_metric(self, *args: Any, **kwargs: Any) -> None:
        return None

    def flush_metrics(self, raise_on_empty_metrics: bool = False) -> None:
        return None


def configure(*, json_logs: bool, verbose: bool) -> None:
    """Set up logging and metrics; call before the handler modules are imported."""
    # The handlers' @metrics.log_metrics binds the provider when they are decorated.
    metrics.provider = _LocalMetrics(namespace=NAMESPACE, service=SERVICE)
    if isinstance(sys.stdout, io.TextIOWrapper):
        sys.stdout.reconfigure(line_buffering=True)
    handler = logger.registered_handler
    if not json_logs:
        handler.setFormatter(ReadableFormatter())
    if not verbose:
        handler.addFilter(QuietScannerTicks())
    logger.setLevel(logging.DEBUG if verbose else logging.INFO)
    for noisy in ("werkzeug", "botocore", "boto3", "urllib3", "moto"):
        logging.getLogger(noisy).setLevel(logging.WARNING if verbose else logging.ERROR)


def _member(fields: Any) -> dict[str, Any]:
    """A pack line's member, `[execution_id, task, lateness_ms, took_ms]`, as a line's extras."""
    execution_id, task, lateness_ms, took_ms = (list(fields) + [None] * 4)[:4]
    return {
        "job_id": str(execution_id).rsplit(".", 2)[0],
        "execution_id": execution_id,
        "lateness_ms": lateness_ms,
        "took_ms": took_ms,
        "task": task,
    }


def escaped(text: str) -> str:
    """`text` with each character that is not printable written as its escape (`\\x1b`, `\\u2028`)."""
    if text.isprintable():
        return text
    return "".join(char if char.isprintable() else repr(char)[1:-1] for char in text)


def _value(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:g}"
    text = str(value)
    return repr(text) if (" " in text or not text) else escaped(text)
