import io
import json

from bench.common import logs_to
from punctual.platform.observability import logger
from tests.world import World


def test_a_now_job_runs_and_completes(world: World) -> None:
    # Given a job to run now
    job = world.create({"type": "now"})
    # When the workers poll
    world.run_for(5)
    # Then it ran once and the job is complete
    [execution] = world.executions(job["id"])
    assert execution["status"] == "SUCCEEDED"
    assert execution["attempts"] == 1
    assert world.job(job["id"])["status"] == "COMPLETED"


def test_an_attempts_log_line_names_its_invocation_but_not_the_function(world: World) -> None:
    # Given a job handed to the queue (a "now" job: the API sends it)
    job = world.create({"type": "now"})
    # and the worker's log lines as Powertools writes them in the worker's own process, at the
    # deployed level (the tests run at WARNING; the API's handler left its keys on the shared logger)
    stream, level = io.StringIO(), logger.log_level
    logger.clear_state()
    logger.setLevel("INFO")
    try:
        with logs_to(stream):
            # When the worker runs it
            world.drain()
    finally:
        logger.setLevel(level)
    lines = [json.loads(line) for line in stream.getvalue().splitlines() if line.startswith("{")]
    # (a first attempt run under its pack's lease: its success a share of the pack's line)
    [line] = [line for line in lines if line["message"] == "pack succeeded"]
    # Then its pack's line carries the execution and the invocation's request id
    [[execution_id, task, lateness_ms, took_ms]] = line["succeeded"]
    assert execution_id.startswith(job["id"] + ".")
    assert (task, type(lateness_ms), type(took_ms)) == ("noop", int, int)
    assert line["function_request_id"]
    # and not what the log group and the platform's lines already say (billed per execution)
    assert not {"function_arn", "function_name", "function_memory_size", "cold_start"} & set(line)
    # nor, once the invocation is over, its request id
    assert "function_request_id" not in logger.get_current_keys()
