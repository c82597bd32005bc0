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
