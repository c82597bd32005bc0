"""The tracer where tracing is off (punctual.platform.observability): traced calls work, and open no segments."""

from __future__ import annotations

import pytest

from punctual.platform import observability
from punctual.platform.observability import tracer


def test_outside_lambda_the_tracer_opens_no_segments_and_traced_calls_behave_as_untraced() -> None:
    assert isinstance(tracer.provider, observability._NoTracing)

    @tracer.capture_method
    def double(value: int) -> int:
        return value * 2

    @tracer.capture_method
    def fail() -> None:
        raise ValueError("no")

    assert double(21) == 42
    with pytest.raises(ValueError, match="no"):
        fail()
    tracer.put_annotation("job_id", "j1")  # (nothing to record it on: no error)


def test_on_lambda_with_tracing_on_the_tracer_is_x_rays(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LAMBDA_TASK_ROOT", "/var/task")
    monkeypatch.delenv("POWERTOOLS_TRACE_DISABLED", raising=False)
    monkeypatch.delenv("AWS_SAM_LOCAL", raising=False)
    monkeypatch.delenv("AWS_CHALICE_CLI_MODE", raising=False)
    assert observability._tracer_provider() is None
    monkeypatch.setenv("POWERTOOLS_TRACE_DISABLED", "true")
    assert isinstance(observability._tracer_provider(), observability._NoTracing)
