"""`punctual console` in a real browser: Debian's headless Chromium, driven by Selenium through
Debian's chromedriver (nothing downloaded), against the session's local stack.

The screenshots of each view go to $PUNCTUAL_CONSOLE_SCREENSHOTS (docs/console/ for the docs'
pictures), else to a temporary directory.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.conftest import ROOT, Stack, eventually, free_port, wait_for_job_status

CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")
HOSTILE = "<img src=x onerror=alert(1)>"
# Chromium without anything that would reach the network or the machine's profile.
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
    "--window-size=1280,800",
)
SHOWN_WITHIN = 2.0  # a change shows without a reload within this (the page polls every 1.5 s)

pytestmark = pytest.mark.e2e

if not (CHROMIUM.exists() and CHROMEDRIVER.exists()):
    # `make test` installs them (and sets PUNCTUAL_REQUIRE_BROWSER): there a missing browser fails.
    if os.environ.get("PUNCTUAL_REQUIRE_BROWSER"):
        raise RuntimeError("chromium and chromium-driver are missing: `make test` installs them")
    pytest.skip("no /usr/bin/chromium: `make test` installs Debian's chromium", allow_module_level=True)

from selenium import webdriver  # noqa: E402  (only where there is a browser to drive)
from selenium.common.exceptions import NoAlertPresentException, StaleElementReferenceException  # noqa: E402
from selenium.webdriver.chrome.service import Service  # noqa: E402
from selenium.webdriver.common.action_chains import ActionChains  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.remote.webdriver import WebDriver  # noqa: E402
from selenium.webdriver.support.ui import Select  # noqa: E402


@pytest.fixture(scope="module")
def seeded(stack: Stack) -> dict[str, Any]:
    """Alice's jobs (one hostile name, one that fails at once, one with a named task) and Bob's."""
    alice, bob = stack.client("alice-token"), stack.client("bob-token")
    tag = uuid.uuid4().hex[:8]
    every_minute = {"type": "cron", "expression": "* * * * *"}
    task = alice.create_task(
        {"name": f"nap-{tag}", "type": "sleep", "params_schema": {"type": "object", "required": ["seconds"]}}
    )
    return {
        "report": alice.create_job(
            {
                "name": f"report-{tag}",
                "task": {"type": "noop"},
                "schedule": every_minute,
                "tags": {"team": "ops"},
            }
        ),
        "hostile": alice.create_job({"name": HOSTILE, "task": {"type": "noop"}, "schedule": every_minute}),
        "failing": alice.create_job(
            {
                "name": f"fails-{tag}",
                "task": {"type": "fail", "params": {"message": "the receiver said no"}},
                "schedule": {"type": "now"},
                "retry": {"max_attempts": 1},
            }
        ),
        "napper": alice.create_job(
            {
                "name": f"napper-{tag}",
                "task": task["name"],
                "params": {"seconds": 0},
                "schedule": every_minute,
            }
        ),
        "task": task,
        "bobs": bob.create_job(
            {"name": f"bob-private-{tag}", "task": {"type": "fail"}, "schedule": {"type": "now"}}
        ),
    }


@contextlib.contextmanager
def running_console(stack: Stack, token: str) -> Iterator[str]:
    """`punctual console --no-browser --port N` for the token's owner; the URL it prints on a line of
    its own."""
    port = free_port()
    command = [sys.executable, "-m", "punctual_cli", "--endpoint", stack.url, "--token", token]
    command += ["console", "--no-browser", "--port", str(port)]
    process = subprocess.Popen(
        command,
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        stdin=subprocess.DEVNULL,
    )
    try:
        assert process.stdout is not None
        lines = []
        while not any(line.startswith("http://") for line in lines):
            line = process.stdout.readline()
            assert line, f"the console exited: {''.join(lines)}"
            lines.append(line)
        [url] = [line.strip() for line in lines if line.startswith("http://")]
        assert url.startswith(f"http://127.0.0.1:{port}/") and " " not in url
        yield url
    finally:
        process.terminate()
        process.wait(10)


@pytest.fixture(scope="module")
def console_url(stack: Stack) -> Iterator[str]:
    """Alice's console."""
    with running_console(stack, "alice-token") as url:
        yield url


@pytest.fixture(scope="module")
def bobs_console_url(stack: Stack) -> Iterator[str]:
    """Bob's console, on another port, beside Alice's in the same browser."""
    with running_console(stack, "bob-token") as url:
        yield url


@pytest.fixture(scope="module")
def browser() -> Iterator[WebDriver]:
    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for flag in FLAGS:
        options.add_argument(flag)
    profile = tempfile.mkdtemp(prefix="punctual-chromium-")
    options.add_argument(f"--user-data-dir={profile}")
    # The driver named: Selenium Manager has nothing to look up or download.
    driver = webdriver.Chrome(service=Service(str(CHROMEDRIVER)), options=options)
    try:
        yield driver
    finally:
        driver.quit()


@pytest.fixture(scope="module")
def shots(tmp_path_factory: pytest.TempPathFactory) -> Callable[[WebDriver, str], None]:
    folder = Path(os.environ.get("PUNCTUAL_CONSOLE_SCREENSHOTS") or tmp_path_factory.mktemp("console-shots"))
    folder.mkdir(parents=True, exist_ok=True)

    def take(driver: WebDriver, name: str) -> None:
        driver.execute_script("window.scrollTo(0, 0)")
        assert driver.save_screenshot(str(folder / f"{name}.png"))

    return take


def rendered(probe: Callable[[], Any]) -> Callable[[], Any]:
    """The probe, read again later if the page re-rendered under it (it polls every 1.5 s)."""

    def read() -> Any:
        try:
            return probe()
        except StaleElementReferenceException:
            return None

    return read


def main_text(driver: WebDriver) -> str:
    # One script call reads the whole view at once, so a re-render cannot leave it half read.
    return str(driver.execute_script("return document.querySelector('main').innerText"))


def shows(driver: WebDriver, *texts: str, timeout: float = 10) -> str:
    """The view's text once it holds every one of `texts`."""

    def holds() -> str | None:
        text = main_text(driver)
        return text if all(t in text for t in texts) else None

    return eventually(holds, timeout=timeout, interval=0.1, what=f"the page to show {texts}")


def signed_in_tab(driver: WebDriver, console_url: str) -> bool:
    origin = console_url.split("/login")[0]
    return driver.current_url.startswith(origin + "/") and bool(
        driver.execute_script("return sessionStorage.length")
    )


def go(driver: WebDriver, console_url: str, view: str) -> None:
    """The view, in this tab signed in first where it is not (a tab keeps its sign-in, a test run
    on another worker starts with none)."""
    if not signed_in_tab(driver, console_url):
        driver.get(console_url)
        eventually(lambda: signed_in_tab(driver, console_url), timeout=5, what="the sign-in")
    driver.get(console_url.split("/login")[0] + "/#/" + view)


def test_the_printed_url_shows_the_owners_jobs_and_statuses_as_text_and_no_one_elses(
    browser: WebDriver, console_url: str, seeded: dict[str, Any], shots: Callable[[WebDriver, str], None]
) -> None:
    # Given Alice's jobs and Bob's, when the URL the console printed is opened
    browser.get(console_url)
    # Then the page, signed in (the token has left the address bar), lists Alice's jobs by name with
    # their statuses, as text
    assert "token" not in browser.current_url
    text = shows(browser, seeded["report"]["name"], seeded["napper"]["name"], "ACTIVE")
    row = browser.find_element(By.CSS_SELECTOR, f'tr[data-job-id="{seeded["report"]["id"]}"]')
    assert seeded["report"]["name"] in row.text and "ACTIVE" in row.text and "team:ops" in row.text
    # And Bob's job is nowhere
    assert seeded["bobs"]["name"] not in text
    # And the hostile name is those characters: no image made of it, no script run
    link = browser.find_element(By.CSS_SELECTOR, f'tr[data-job-id="{seeded["hostile"]["id"]}"] a')
    assert link.text == HOSTILE
    assert browser.execute_script("return document.querySelectorAll('img').length") == 0
    with pytest.raises(NoAlertPresentException):
        browser.switch_to.alert  # noqa: B018  (reading it is the check)
    # And the filters narrow the list through the API's own
    browser.find_element(By.ID, "filter-name").send_keys(seeded["report"]["name"][:10])
    eventually(
        lambda: (
            seeded["napper"]["name"] not in main_text(browser)
            and seeded["report"]["name"] in main_text(browser)
        ),
        timeout=5,
        interval=0.1,
        what="the name filter",
    )
    browser.find_element(By.ID, "filter-name").clear()
    shows(browser, seeded["napper"]["name"])
    shots(browser, "jobs")


def test_pausing_from_the_page_pauses_the_job_and_the_page_shows_what_the_api_does_within_2_s(
    browser: WebDriver,
    console_url: str,
    seeded: dict[str, Any],
    stack: Stack,
    shots: Callable[[WebDriver, str], None],
) -> None:
    alice, job = stack.client("alice-token"), seeded["report"]
    # Given the job's page, once its every-minute run has been listed or not
    go(browser, console_url, f"job/{job['id']}")
    shows(browser, job["name"], "every minute", "Next run", "Policies")
    # When it is paused from the page with a note
    browser.find_element(By.ID, "pause-note").send_keys("paused from the console")
    browser.find_element(By.ID, "pause").click()
    # Then the API says PAUSED, with the note
    wait_for_job_status(alice, job["id"], "PAUSED", stack, timeout=5)
    assert alice.get_job(job["id"])["pause_note"] == "paused from the console"
    shows(browser, "PAUSED", "paused from the console", timeout=SHOWN_WITHIN + 1)
    # And a change made elsewhere shows without a reload within 2 s
    alice.resume_job(job["id"])
    eventually(
        lambda: "paused from the console" not in main_text(browser),
        timeout=SHOWN_WITHIN,
        interval=0.1,
        what="the resume to show",
    )


def test_a_jobs_page_charts_its_runs_lateness_and_runs_it_now(
    browser: WebDriver,
    console_url: str,
    seeded: dict[str, Any],
    stack: Stack,
    shots: Callable[[WebDriver, str], None],
) -> None:
    # Given the hostile job, run twice through the API
    alice, job = stack.client("alice-token"), seeded["hostile"]
    for _ in range(2):
        alice.run_job(job["id"])
    # When its page is opened and "Run now" pressed
    go(browser, console_url, f"job/{job['id']}")
    shows(browser, "Runs", "Policies")
    assert browser.find_element(By.CSS_SELECTOR, "main h1").text == HOSTILE
    browser.find_element(By.ID, "run-now").click()

    # Then three runs end SUCCEEDED, each with its lateness, charted
    def charted() -> bool:
        runs = browser.find_elements(By.CSS_SELECTOR, 'section[aria-labelledby="h-runs"] tbody tr')
        bars = browser.find_elements(By.CSS_SELECTOR, "svg.chart rect.bar")
        return sum("SUCCEEDED" in row.text for row in runs) >= 3 and len(bars) >= 3

    eventually(rendered(charted), timeout=15, interval=0.2, what="three runs charted", stack=stack)
    assert browser.execute_script("return document.querySelectorAll('img').length") == 0
    shots(browser, "job")


def test_a_failed_run_shows_in_failures_with_its_error_and_no_other_owners(
    browser: WebDriver,
    console_url: str,
    seeded: dict[str, Any],
    stack: Stack,
    shots: Callable[[WebDriver, str], None],
) -> None:
    # Given the job that fails at once, once its run has failed
    alice = stack.client("alice-token")
    wait_for_job_status(alice, seeded["failing"]["id"], "COMPLETED", stack, timeout=15)
    # When Failures is opened
    go(browser, console_url, "failures")
    # Then it lists the job with its error, and nothing of Bob's (whose job fails too)
    text = shows(browser, seeded["failing"]["name"], "the receiver said no")
    assert seeded["bobs"]["name"] not in text
    shots(browser, "failures")


def test_named_tasks_show_their_schema_and_the_jobs_using_them(
    browser: WebDriver, console_url: str, seeded: dict[str, Any], shots: Callable[[WebDriver, str], None]
) -> None:
    go(browser, console_url, "tasks")
    shows(browser, seeded["task"]["name"], "version 1")
    browser.find_element(By.CSS_SELECTOR, f'details[data-task="{seeded["task"]["name"]}"] summary').click()
    shows(browser, seeded["napper"]["name"], '"required"')
    shots(browser, "tasks")


def test_coming_up_counts_the_owners_runs_per_minute(
    browser: WebDriver, console_url: str, seeded: dict[str, Any], shots: Callable[[WebDriver, str], None]
) -> None:
    go(browser, console_url, "coming-up")
    text = shows(browser, "due in the next hour", seeded["napper"]["name"])
    assert seeded["bobs"]["name"] not in text
    assert browser.find_elements(By.CSS_SELECTOR, "svg.chart rect.bar")
    shots(browser, "coming-up")


def test_a_job_is_rescheduled_and_cancelled_and_a_failed_run_retried_from_the_page(
    browser: WebDriver, console_url: str, seeded: dict[str, Any], stack: Stack
) -> None:
    alice, job = stack.client("alice-token"), seeded["napper"]
    # Given the napper's page, when a new cron schedule in Paris is sent from its form
    go(browser, console_url, f"job/{job['id']}")
    shows(browser, "every minute")
    browser.find_element(By.ID, "reschedule-value").send_keys("30 9 * * 1-5")
    browser.find_element(By.ID, "reschedule-zone").send_keys("Europe/Paris")
    browser.find_element(By.ID, "reschedule").click()
    # Then the API holds it, and the page says it in words with its next runs
    eventually(
        lambda: alice.get_job(job["id"])["schedule"].get("expression") == "30 9 * * 1-5",
        timeout=5,
        what="the new schedule",
    )
    shows(browser, "every weekday at 09:30 (Europe/Paris)", timeout=SHOWN_WITHIN + 1)
    # with each next run on Paris's wall clock too, for a viewer elsewhere
    if browser.execute_script("return Intl.DateTimeFormat().resolvedOptions().timeZone") != "Europe/Paris":
        runs = browser.find_element(By.CSS_SELECTOR, 'ol[aria-label="Next runs"]').text
        assert runs.count("09:30 Europe/Paris") == 5, runs
    # When Cancel is pressed twice (once arms it; the second press counts from half a second on)
    cancel = browser.find_element(By.ID, "cancel")
    cancel.click()
    assert alice.get_job(job["id"])["status"] == "ACTIVE"
    time.sleep(0.6)
    cancel.click()
    # Then the job is CANCELLED
    wait_for_job_status(alice, job["id"], "CANCELLED", stack, timeout=5)
    # And a failed run retried from Failures runs again (a new execution naming it)
    failing = seeded["failing"]["id"]
    wait_for_job_status(alice, failing, "COMPLETED", stack, timeout=15)
    go(browser, console_url, "failures")
    shows(browser, seeded["failing"]["name"])
    before = len(alice.list_executions(failing)["items"])
    browser.find_element(By.CSS_SELECTOR, f'tr[data-job-id="{failing}"] button').click()
    eventually(
        lambda: len(alice.list_executions(failing)["items"]) > before, timeout=5, what="the retried run"
    )
    assert any(e["retry_of"] for e in alice.list_executions(failing)["items"])


def test_the_sign_in_survives_a_reload_in_its_tab_and_sets_no_cookie(
    browser: WebDriver, console_url: str, seeded: dict[str, Any]
) -> None:
    # Given the tab signed in by the printed URL
    browser.get(console_url)
    shows(browser, seeded["report"]["name"])
    # When it is reloaded, then it is signed in still
    browser.refresh()
    shows(browser, seeded["report"]["name"])
    assert "token" not in browser.current_url
    # And no cookie holds the sign-in: no other port of 127.0.0.1 is sent it
    assert browser.get_cookies() == []
    # And a new tab without the printed URL is not signed in
    first = browser.current_window_handle
    browser.switch_to.new_window("tab")
    try:
        browser.get(console_url.split("/login")[0] + "/#/jobs")
        shows(browser, "Not signed in")
        assert seeded["report"]["name"] not in main_text(browser)
    finally:
        browser.close()
        browser.switch_to.window(first)


def test_two_consoles_on_two_ports_stay_signed_in_side_by_side(
    browser: WebDriver, console_url: str, bobs_console_url: str, seeded: dict[str, Any]
) -> None:
    # Given Alice's console signed in in one tab
    browser.get(console_url)
    shows(browser, seeded["report"]["name"])
    alices = browser.current_window_handle
    # When Bob's console, on another port, is signed in in another tab of the same browser
    browser.switch_to.new_window("tab")
    bobs = browser.current_window_handle
    try:
        browser.get(bobs_console_url)
        shows(browser, seeded["bobs"]["name"])
        # Then each tab, reloaded, shows its own owner's jobs: neither signed the other out
        for handle, own, other in (
            (alices, seeded["report"]["name"], seeded["bobs"]["name"]),
            (bobs, seeded["bobs"]["name"], seeded["report"]["name"]),
        ):
            browser.switch_to.window(handle)
            browser.refresh()
            assert other not in shows(browser, own)
    finally:
        browser.switch_to.window(bobs)
        browser.close()
        browser.switch_to.window(alices)


def test_a_double_click_neither_cancels_a_job_nor_sends_an_action_twice(
    browser: WebDriver, console_url: str, seeded: dict[str, Any], stack: Stack
) -> None:
    alice = stack.client("alice-token")
    yearly = alice.create_job(
        {
            "name": f"yearly-{uuid.uuid4().hex[:8]}",
            "task": {"type": "noop"},
            "schedule": {"type": "cron", "expression": "0 9 1 1 *"},
        }
    )

    def runs_by_hand() -> int:
        return sum(bool(e.get("manual")) for e in alice.list_executions(yearly["id"])["items"])

    go(browser, console_url, f"job/{yearly['id']}")
    shows(browser, "Next run")
    # When "Run now" is double-clicked, then one run is made
    ActionChains(browser).double_click(browser.find_element(By.ID, "run-now")).perform()
    eventually(lambda: runs_by_hand() >= 1, timeout=5, what="the run by hand")
    time.sleep(1.0)
    assert runs_by_hand() == 1
    # When "Cancel job" is double-clicked, then the job is not cancelled: the button asks again
    cancel = browser.find_element(By.ID, "cancel")
    ActionChains(browser).double_click(cancel).perform()
    time.sleep(1.0)
    assert alice.get_job(yearly["id"])["status"] == "ACTIVE"
    assert cancel.text == "Confirm: cancel this job"
    # And one more press, a moment later, confirms it; the keyboard's place is the notice
    cancel.click()
    wait_for_job_status(alice, yearly["id"], "CANCELLED", stack, timeout=5)
    eventually(
        lambda: browser.switch_to.active_element.get_attribute("id") == "notice",
        timeout=5,
        what="the focus on the notice",
    )
    # When a failed run's Retry is double-clicked in Failures, then one retry is made
    failing = alice.create_job(
        {
            "name": f"fails-twice-{uuid.uuid4().hex[:8]}",
            "task": {"type": "fail"},
            "schedule": {"type": "now"},
            "retry": {"max_attempts": 1},
        }
    )
    wait_for_job_status(alice, failing["id"], "COMPLETED", stack, timeout=15)

    def retries() -> int:
        return sum(bool(e["retry_of"]) for e in alice.list_executions(failing["id"])["items"])

    go(browser, console_url, "failures")
    shows(browser, failing["name"])
    retry = browser.find_element(By.CSS_SELECTOR, f'tr[data-job-id="{failing["id"]}"] button')
    ActionChains(browser).double_click(retry).perform()
    eventually(lambda: retries() >= 1, timeout=5, what="the retried run")
    time.sleep(1.0)
    assert retries() == 1


def test_a_malformed_address_says_so_and_a_refused_pause_keeps_its_note(
    browser: WebDriver, console_url: str, stack: Stack
) -> None:
    alice = stack.client("alice-token")
    job = alice.create_job(
        {
            "name": f"noted-{uuid.uuid4().hex[:8]}",
            "task": {"type": "noop"},
            "schedule": {"type": "cron", "expression": "0 9 1 1 *"},
        }
    )
    # Given an address whose job id is no percent-encoding, then the page says there is no such page
    go(browser, console_url, "job/%E0%A4%A")
    shows(browser, "No such page")
    # Given the job's page, when a pause with a note the API refuses (a control character) is sent
    go(browser, console_url, f"job/{job['id']}")
    shows(browser, "Next run")
    set_note = "document.getElementById('pause-note').value = arguments[0]"
    browser.execute_script(set_note, "ring \u0007 the bell")
    browser.find_element(By.ID, "pause").click()
    notice = browser.find_element(By.ID, "notice")
    eventually(
        lambda: "error" in (notice.get_attribute("class") or "") and notice.text.startswith("Pause:"),
        timeout=5,
        what="the refusal",
    )
    # Then the note typed is still there, to put right
    assert browser.find_element(By.ID, "pause-note").get_attribute("value") == "ring \u0007 the bell"
    # When a note holding a right-to-left override pauses the job, then the override stays in its quote
    mirrored = "stopped \u202egnp.exe"
    browser.execute_script(set_note, mirrored)
    browser.find_element(By.ID, "pause").click()
    wait_for_job_status(alice, job["id"], "PAUSED", stack, timeout=5)
    quoted = eventually(
        lambda: browser.execute_script(
            "const b = document.querySelector('main q > bdi'); return b && b.textContent"
        ),
        timeout=5,
        what="the note in its quote",
    )
    assert quoted == mirrored
    assert browser.find_element(By.ID, "pause-note").get_attribute("value") == ""


def test_more_than_a_page_of_failures_pages_on_to_the_rest(
    browser: WebDriver, bobs_console_url: str, seeded: dict[str, Any], stack: Stack
) -> None:
    # Given more than 100 of Bob's jobs whose last run failed
    bob = stack.client("bob-token")
    tag = uuid.uuid4().hex[:8]
    failing = {"task": {"type": "fail"}, "schedule": {"type": "now"}, "retry": {"max_attempts": 1}}
    made = set()
    for batch in range(2):
        jobs = bob.create_jobs([{**failing, "name": f"many-{tag}-{batch}-{i:02}"} for i in range(60)])
        made |= {job["id"] for job in jobs}

    def failed() -> set[str]:
        found, cursor = set(), None
        while True:
            page = bob.list_jobs(outcome="failed", limit=100, cursor=cursor)
            found |= {job["id"] for job in page["items"]}
            cursor = page["next_cursor"]
            if cursor is None:
                return found

    everyone = eventually(
        lambda: (ids := failed()) >= made and ids, timeout=60, what="the runs to fail", stack=stack
    )
    # When Bob's Failures view is opened (signed in by his URL in this tab)
    go(browser, bobs_console_url, "failures")

    def rows() -> set[str]:
        return set(
            browser.execute_script(
                "return [...document.querySelectorAll('section[aria-labelledby=\"h-failed\"] tbody tr')]"
                ".map((tr) => tr.dataset.jobId)"
            )
        )

    # Then it shows a page of 100, says more exist, and its next page shows the rest
    shows(browser, "more on the next", "Next page of failed jobs")
    first = rows()
    assert len(first) == 100
    browser.find_element(By.XPATH, "//button[text()='Next page of failed jobs']").click()
    shows(browser, "Previous page of failed jobs")
    rest = eventually(rendered(lambda: rows() - first or None), timeout=5, what="the next page")
    assert first | rest == everyone


UNNAMED_CONTROLS = """
return [...document.querySelectorAll('input, select, button, a[href]')]
  .filter((c) => !(c.labels && c.labels.length) && !c.getAttribute('aria-label') && !c.textContent.trim())
  .map((c) => c.outerHTML);
"""


def test_a_new_cron_expression_keeps_the_jobs_zone_and_the_skip_links_address_loads(
    browser: WebDriver, console_url: str, seeded: dict[str, Any], stack: Stack
) -> None:
    # (a new expression sent with the zone field left empty moved a Tokyo job to UTC)
    alice = stack.client("alice-token")
    tokyo = alice.create_job(
        {
            "name": f"tokyo-{uuid.uuid4().hex[:8]}",
            "task": {"type": "noop"},
            "schedule": {"type": "cron", "expression": "0 9 * * *", "timezone": "Asia/Tokyo"},
        }
    )
    go(browser, console_url, f"job/{tokyo['id']}")
    shows(browser, "Asia/Tokyo")
    # Given the job's page: Resume is offered only to a paused job
    assert not browser.find_element(By.ID, "resume").is_enabled()
    assert browser.find_element(By.ID, "reschedule-zone").get_attribute("placeholder") == "Asia/Tokyo"
    # When only a new expression is sent
    browser.find_element(By.ID, "reschedule-value").send_keys("30 9 * * *")
    browser.find_element(By.ID, "reschedule").click()
    # Then the job keeps its zone
    eventually(
        lambda: alice.get_job(tokyo["id"])["schedule"].get("expression") == "30 9 * * *",
        timeout=5,
        what="the new expression",
    )
    assert alice.get_job(tokyo["id"])["schedule"]["timezone"] == "Asia/Tokyo"
    # And a job in another name of the viewer's own zone shows its next runs once, with no zone beside
    viewer = browser.execute_script("return Intl.DateTimeFormat().resolvedOptions().timeZone")
    alias = {"UTC": "Etc/UTC", "Etc/UTC": "UTC"}.get(viewer)
    if alias is not None:
        twin = alice.create_job(
            {
                "name": f"twin-{uuid.uuid4().hex[:8]}",
                "task": {"type": "noop"},
                "schedule": {"type": "cron", "expression": "0 9 * * *", "timezone": alias},
            }
        )
        go(browser, console_url, f"job/{twin['id']}")
        runs = eventually(
            lambda: browser.execute_script(
                "return [...document.querySelectorAll('ol[aria-label=\"Next runs\"] li')].map((li) => li.textContent)"
            ),
            timeout=5,
            what="the next runs",
        )
        assert len(runs) == 5 and not any(alias in run for run in runs), runs
    # And the page loaded at the skip link's address shows its view, not "Loading…"
    browser.get(console_url.split("/login")[0] + "/#main")
    eventually(lambda: browser.find_elements(By.CSS_SELECTOR, "main h1"), timeout=5, what="a heading")


def test_a_refused_filter_shows_no_stale_jobs_and_an_actions_error_outlasts_the_refresh(
    browser: WebDriver, console_url: str, seeded: dict[str, Any], stack: Stack
) -> None:
    alice = stack.client("alice-token")
    mirrored = alice.create_job(
        {
            "name": "invoice-\u202egnp.exe",
            "task": {"type": "noop"},
            "schedule": {"type": "cron", "expression": "0 9 * * *"},
        }
    )
    go(browser, console_url, "jobs")
    shows(browser, seeded["napper"]["name"])
    # A name's right-to-left override turns that name only: it sits in its own <bdi>
    assert browser.execute_script(
        f"return document.querySelector('tr[data-job-id=\"{mirrored['id']}\"] a bdi') !== null"
    )
    # When a filter the API refuses is typed
    browser.find_element(By.ID, "filter-tag").send_keys("a\\=b")
    # Then the jobs of the filter before are gone, not shown as its answer
    shows(browser, "the filter was refused")
    assert seeded["napper"]["name"] not in main_text(browser)
    browser.find_element(By.ID, "filter-tag").clear()
    shows(browser, seeded["napper"]["name"])
    # And on a job's page, an action's error stays through the refreshes after it
    go(browser, console_url, f"job/{mirrored['id']}")
    shows(browser, "Schedule")
    browser.find_element(By.ID, "reschedule-value").send_keys("0 25 * * *")
    browser.find_element(By.ID, "reschedule").click()
    notice = browser.find_element(By.ID, "notice")
    eventually(lambda: "25 is out of range" in notice.text, timeout=5, what="the action's error")
    time.sleep(2.0)  # (a refresh, 1.5 s after the last)
    assert "25 is out of range" in notice.text
    # And a period is taken as people write it
    Select(browser.find_element(By.ID, "reschedule-kind")).select_by_value("rate")
    browser.find_element(By.ID, "reschedule-value").clear()
    browser.find_element(By.ID, "reschedule-value").send_keys("5m")
    browser.find_element(By.ID, "reschedule").click()
    eventually(
        lambda: alice.get_job(mirrored["id"])["schedule"].get("every_seconds") == 300, timeout=5, what="5m"
    )
    # And a job that is not there offers nothing to do
    go(browser, console_url, "job/job_doesnotexist0000")
    shows(browser, "No such job")
    assert not browser.find_element(By.ID, "run-now").is_enabled()


def test_every_control_is_named_and_the_keyboard_reaches_the_views(
    browser: WebDriver, console_url: str, seeded: dict[str, Any]
) -> None:
    for view in ("jobs", f"job/{seeded['report']['id']}", "failures", "tasks", "coming-up"):
        # Given each view, then every control has a label or a name a screen reader reads
        go(browser, console_url, view)
        eventually(lambda: browser.find_elements(By.CSS_SELECTOR, "main h1"), timeout=5, what="a heading")
        assert browser.execute_script(UNNAMED_CONTROLS) == [], view
    # And from the top of the page, Tab reaches the skip link, then the views' links, in order
    go(browser, console_url, "jobs")
    browser.refresh()
    body = browser.find_element(By.TAG_NAME, "body")
    reached = []
    for _ in range(5):
        body.send_keys("\ue004")  # Tab
        reached.append(browser.switch_to.active_element.text)
        body = browser.switch_to.active_element
    assert reached == ["Skip to the view", "Jobs", "Failures", "Named tasks", "Coming up"]


def test_the_views_fit_a_phone_width(browser: WebDriver, console_url: str, seeded: dict[str, Any]) -> None:
    # Given a phone's width, then no view is wider than the screen but its tables, which scroll
    browser.set_window_size(390, 844)
    try:
        for view in ("jobs", "failures", "tasks", "coming-up", f"job/{seeded['hostile']['id']}"):
            go(browser, console_url, view)
            eventually(lambda: browser.find_elements(By.CSS_SELECTOR, "main h1"), timeout=5, what="a heading")
            overflow = browser.execute_script(
                "return document.documentElement.scrollWidth - document.documentElement.clientWidth"
            )
            assert overflow <= 1, (view, overflow)
    finally:
        browser.set_window_size(1280, 800)


def test_the_stacks_banner_names_the_console_command(stack: Stack) -> None:
    # Given the local stack's banner (what `make run` prints), then it says how to open the console
    banner = stack.log_path.read_text(errors="replace")
    assert any(line.split("  (")[0].rstrip().endswith("punctual console") for line in banner.splitlines()), (
        banner
    )
