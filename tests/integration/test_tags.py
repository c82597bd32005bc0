"""Tags on jobs: set at creation and by PATCH, filtered on in lists, and bulk pause and resume by tag,
a bounded page at a time, through the same service path as a single pause."""

from __future__ import annotations

from tests.world import World

CRON = {"type": "cron", "expression": "*/5 * * * *"}


def test_tags_are_set_at_creation_changed_by_patch_and_filtered_on(world: World) -> None:
    # Given jobs of two teams, and one without tags
    billing = [world.create(CRON, tags={"team": "billing", "env": "prod"}) for _ in range(2)]
    ops = world.create(CRON, tags={"team": "ops"})
    world.create(CRON)
    assert billing[0]["tags"] == {"team": "billing", "env": "prod"}

    # When listed by tag (key:value, or the key alone)
    def listed(query: str) -> list[str]:
        answer = world.api("GET", "/jobs", query=query)
        assert answer.status == 200, answer.body
        return sorted(job["id"] for job in answer.body["items"])

    # Then each list holds the jobs with that tag
    assert listed("tag=team:billing") == sorted(j["id"] for j in billing)
    assert listed("tag=team") == sorted([*(j["id"] for j in billing), ops["id"]])
    assert listed("tag=team:billing&status=PAUSED") == []
    # and a PATCH replaces a job's tags
    changed = world.api("PATCH", f"/jobs/{ops['id']}", {"tags": {"team": "billing"}})
    assert changed.status == 200 and changed.body["tags"] == {"team": "billing"}
    assert ops["id"] in listed("tag=team:billing")
    # while bad tags and filters are refused, naming them
    for body in (
        {"tags": {"a:b": "c"}},
        {"tags": {"k": "x" * 257}},
        {"tags": {f"k{i}": "v" for i in range(51)}},
    ):
        answer = world.api("PATCH", f"/jobs/{ops['id']}", body)
        assert (answer.status, answer.body["field"]) == (422, "tags"), answer.body
    answer = world.api("GET", "/jobs", query="tag=%3Avalue")
    assert (answer.status, answer.body["field"]) == (422, "tag")


def test_pause_and_resume_by_tag_page_through_and_say_what_changed(world: World) -> None:
    # Given five billing jobs (one already paused) and one ops job
    billing = [world.create(CRON, tags={"team": "billing"}) for _ in range(5)]
    ops = world.create(CRON, tags={"team": "ops"})
    world.api("POST", f"/jobs/{billing[0]['id']}/pause")

    # When pausing team:billing two jobs a request, following the cursor
    paused: list[str] = []
    cursor = None
    requests = 0
    while True:
        query = "tag=team:billing&limit=2" + (f"&cursor={cursor}" if cursor else "")
        answer = world.api("POST", "/jobs/pause", query=query)
        assert answer.status == 200, answer.body
        assert len(answer.body["changed"]) <= 2 and answer.body["failed"] == []
        paused += [job["id"] for job in answer.body["changed"]]
        requests += 1
        cursor = answer.body["next_cursor"]
        if not cursor:
            break

    # Then the four ACTIVE billing jobs were paused, over more than one request, and nothing else
    assert sorted(paused) == sorted(j["id"] for j in billing[1:])
    assert requests >= 2
    assert {world.job(j["id"])["status"] for j in billing} == {"PAUSED"}
    assert world.job(ops["id"])["status"] == "ACTIVE"
    # each as a single pause does: its next run withdrawn
    assert all(world.job(j["id"])["next_run_at"] is None for j in billing)

    # and resuming by tag brings all five back, with a next run
    answer = world.api("POST", "/jobs/resume", query="tag=team:billing")
    assert sorted(j["id"] for j in answer.body["changed"]) == sorted(j["id"] for j in billing)
    assert answer.body["next_cursor"] is None
    assert all(world.job(j["id"])["next_run_at"] for j in billing)
    # while a bulk request without a tag, or with a bad one, is refused
    assert world.api("POST", "/jobs/pause").status == 422
    assert world.api("POST", "/jobs/pause", query="tag=").status == 422


def test_a_bulk_pause_reads_only_the_tags_jobs(world: World) -> None:
    # Given a read budget of 4 jobs a request and six jobs, the tagged one the oldest
    world.store.list_read_budget = 4
    tagged = world.create(CRON, tags={"team": "billing"})
    for _ in range(5):
        world.clock.advance(0.01)  # (newest first: these come before it)
        world.create(CRON, tags={"team": "ops"})
    # When pausing by tag
    first = world.api("POST", "/jobs/pause", query="tag=team:billing")
    # Then the one request reads the tag's entries, not the other jobs: it pauses the tagged job at once
    assert [job["id"] for job in first.body["changed"]] == [tagged["id"]]
    assert first.body["next_cursor"] is None


def test_a_tag_entry_its_job_no_longer_backs_is_dropped_by_the_list_that_reads_it(world: World) -> None:
    # Given a job tagged team:billing, then retagged team:ops, whose old entry survived (a crash
    # between the job's write and the entry's deletion)
    job = world.create(CRON, tags={"team": "billing"})
    stale = [
        i
        for i in world.dynamodb_client.scan(TableName=world.punctual.settings.table_name)["Items"]
        if i["pk"]["S"].startswith("TAG#")
    ]
    assert world.api("PATCH", f"/jobs/{job['id']}", {"tags": {"team": "ops"}}).status == 200
    for item in stale:
        world.dynamodb_client.put_item(TableName=world.punctual.settings.table_name, Item=item)
    # When the old tag is listed, and then the key alone
    old = world.api("GET", "/jobs", query="tag=team:billing").body
    any_value = world.api("GET", "/jobs", query="tag=team").body
    # Then the job is not listed under its old value, and once under its key
    assert old["items"] == [] and old["next_cursor"] is None
    assert [j["id"] for j in any_value["items"]] == [job["id"]]
    # and only its current entry is left
    entries = [
        i
        for i in world.dynamodb_client.scan(TableName=world.punctual.settings.table_name)["Items"]
        if i["pk"]["S"].startswith("TAG#")
    ]
    assert len(entries) == 1 and entries[0]["sk"]["S"] != stale[0]["sk"]["S"]


def test_a_cursor_of_one_tag_does_not_serve_another(world: World) -> None:
    world.store.list_read_budget = 1
    for _ in range(3):
        world.create(CRON, tags={"team": "billing"})
    page = world.api("GET", "/jobs", query="tag=team:billing&limit=1").body
    assert page["next_cursor"]
    other = world.api("GET", "/jobs", query=f"tag=team:ops&limit=1&cursor={page['next_cursor']}")
    assert other.status == 400
