// One job: its schedule and next runs, policies, task, notification rules, its runs with their
// lateness, and the actions of docs/api.md (run now, pause, resume, reschedule, cancel, retry).

import { api, jobPath, query } from "../api.js";
import { actions } from "../controls.js";
import { duration, el, replace, status, table, viewerWallClock, when } from "../dom.js";
import { latenessChart } from "./charts.js";
import { describeSchedule } from "./words.js";

const FINAL_NOT_SUCCEEDED = new Set(["FAILED", "SKIPPED", "CANCELLED"]);
// Cancel is pressed twice: the second press counts from this long after the first (a double-click's
// second click is sooner, and confirms nothing) and until this long after it (then it arms again).
const CONFIRM_AFTER_MS = 500;
const CONFIRM_WITHIN_MS = 5000;

// A period as people write it: 90, 90s, 5m, 2h or 1d (seconds when no unit). Anything else is sent
// as written, for the API to say what is wrong with it.
function seconds(text) {
  const match = /^(\d+)\s*([smhd]?)$/i.exec(text);
  if (!match) return text;
  return Number(match[1]) * { "": 1, s: 1, m: 60, h: 3600, d: 86400 }[match[2].toLowerCase()];
}

export function mount(container, jobId, ctx) {
  const heading = el("h1", {}, "Job");
  const summary = el("p", {});
  const schedule = el("section", { "aria-labelledby": "h-schedule" });
  const setup = el("div", { class: "grid" });
  const runs = el("section", { "aria-labelledby": "h-runs" });
  let shown = "";
  let previewFor = "";
  let previewRuns = [];
  let job = null;

  // Which of the job's actions its status allows (a run's Retry always is).
  const open = {
    "run-now": () => ["ACTIVE", "COMPLETED"].includes(job.status),
    resume: () => job.status === "PAUSED",
    pause: () => ["ACTIVE", "PAUSED"].includes(job.status),
    cancel: () => job.status !== "CANCELLED",
    reschedule: () => job.status !== "CANCELLED",
  };
  const { act, settle } = actions(container, ctx, {
    allowed: (key) => job !== null && (!open[key] || open[key]()),
    changed: () => { shown = ""; },
  });

  // Actions are built once (a refresh does not take the focus or a half-typed note away).
  const note = el("input", { id: "pause-note", name: "note", maxlength: 500, autocomplete: "off" });
  const pauseForm = el("form", { class: "actions", "aria-label": "Pause" },
    el("label", { for: "pause-note" }, "Pause note (optional)", note),
    el("button", { type: "submit", id: "pause", "data-action": "pause" }, "Pause"));
  pauseForm.addEventListener("submit", async (event) => {
    event.preventDefault();
    const body = note.value.trim() ? { note: note.value.trim() } : undefined;
    // (a refused pause keeps the note typed, to send again)
    if (await act("pause", "Pause", () => api("POST", jobPath(jobId) + "/pause", body))) note.value = "";
  });
  const runNow = el("button", { type: "button", id: "run-now", "data-action": "run-now", onclick: () => act("run-now", "Run now", () => api("POST", jobPath(jobId) + "/run")) }, "Run now");
  const resume = el("button", { type: "button", id: "resume", "data-action": "resume", onclick: () => act("resume", "Resume", () => api("POST", jobPath(jobId) + "/resume")) }, "Resume");
  let armedAt = null;
  let disarming = null;
  const cancel = el("button", { type: "button", id: "cancel", class: "danger", "data-action": "cancel" }, "Cancel job");
  const disarm = () => {
    armedAt = null;
    clearTimeout(disarming);
    cancel.textContent = "Cancel job";
  };
  cancel.addEventListener("click", () => {
    const since = armedAt === null ? Infinity : performance.now() - armedAt;
    if (since < CONFIRM_AFTER_MS) return;
    if (since > CONFIRM_WITHIN_MS) {
      armedAt = performance.now();
      cancel.textContent = "Confirm: cancel this job";
      clearTimeout(disarming);
      disarming = setTimeout(disarm, CONFIRM_WITHIN_MS);
      return;
    }
    disarm();
    act("cancel", "Cancel", () => api("DELETE", jobPath(jobId)));
  });
  cancel.addEventListener("blur", disarm);

  const kind = el("select", { id: "reschedule-kind", name: "kind" },
    el("option", { value: "cron" }, "cron"), el("option", { value: "rate" }, "every N seconds"), el("option", { value: "at" }, "once at"));
  const value = el("input", { id: "reschedule-value", name: "value", autocomplete: "off", placeholder: "0 10 * * *", required: true });
  // (left empty, a cron job keeps its own zone: the placeholder shows it)
  const zone = el("input", { id: "reschedule-zone", name: "timezone", autocomplete: "off", placeholder: "UTC" });
  const rescheduleForm = el("form", { class: "actions", "aria-label": "Reschedule" },
    el("label", { for: "reschedule-kind" }, "New schedule", kind),
    el("label", { for: "reschedule-value" }, "Expression, period (90s, 5m) or instant", value),
    el("label", { for: "reschedule-zone" }, "Time zone (cron)", zone),
    el("button", { type: "submit", id: "reschedule", "data-action": "reschedule" }, "Reschedule"));
  rescheduleForm.addEventListener("submit", (event) => {
    event.preventDefault();
    const text = value.value.trim();
    let next;
    if (kind.value === "cron") next = { ...keptOfCron(), type: "cron", expression: text, ...(zone.value.trim() ? { timezone: zone.value.trim() } : {}) };
    else if (kind.value === "rate") next = { type: "rate", every_seconds: seconds(text) };
    else next = { type: "at", at: text };
    act("reschedule", "Reschedule", () => api("PATCH", jobPath(jobId), { schedule: next }));
  });

  container.append(
    el("p", {}, el("a", { href: "#/jobs" }, "← Jobs")),
    heading, summary,
    el("section", { "aria-labelledby": "h-actions" }, el("h2", { id: "h-actions" }, "Actions"),
      el("div", { class: "actions" }, runNow, resume, cancel), pauseForm, rescheduleForm),
    runs, schedule, setup);
  settle(); // (nothing to act on before the job is read)

  function keptOfCron() {
    // A new expression for a cron job keeps its zone and window, as `punctual jobs update --cron` does.
    const s = job && job.schedule;
    if (!s || s.type !== "cron") return {};
    return Object.fromEntries(["timezone", "start_at", "end_at"].filter((k) => s[k]).map((k) => [k, s[k]]));
  }

  function facts(pairs) {
    return el("dl", { class: "facts" }, pairs.flatMap(([k, v]) => [el("dt", {}, k), el("dd", {}, v)]));
  }

  // A cron job's run on its own zone's wall clock too, when the viewer's differs: "09:30 on
  // weekdays in Paris" reads as such there, not as 08:30 or 07:30 here. Compared by the clocks, not
  // the names: UTC and Etc/UTC, or Paris and Berlin, show the same time.
  function onWallClock(run, s) {
    const zoneOf = s.type === "cron" ? s.timezone || "UTC" : null;
    if (!run.local || !zoneOf) return "";
    const [date, time] = run.local.split("T");
    const there = `${date} ${time.slice(0, 5)}`;
    return there === viewerWallClock(run.at) ? "" : ` · ${there} ${zoneOf}`;
  }

  async function nextRuns(current) {
    if (current.status !== "ACTIVE" || !current.next_run_at) return [];
    const s = current.schedule;
    if (s.type === "rate") {
      // (counted from the job's next run: a preview would count from now; none at or after end_at)
      const first = new Date(current.next_run_at).getTime();
      const end = s.end_at ? new Date(s.end_at).getTime() : Infinity;
      return Array.from({ length: 5 }, (_, i) => first + i * s.every_seconds * 1000)
        .filter((at) => at < end).map((at) => ({ at: new Date(at).toISOString(), dst: null }));
    }
    if (s.type !== "cron") return [{ at: current.next_run_at, dst: null }];
    // (read again once the next run moves on: the list starts from the run to come)
    const key = JSON.stringify([s, current.next_run_at]);
    if (key !== previewFor) {
      previewRuns = (await api("POST", "/schedules/preview", { schedule: s, count: 5 })).runs;
      previewFor = key;
    }
    return previewRuns;
  }

  async function refresh() {
    let current, history;
    try {
      [current, history] = await Promise.all([
        api("GET", jobPath(jobId)),
        api("GET", jobPath(jobId) + "/executions" + query({ limit: 50 })),
      ]);
    } catch (error) {
      if (error.status === 404) {
        // (no such job of yours: nothing here to act on)
        replace(heading, "No such job");
        job = null;
        for (const control of container.querySelectorAll("button, input, select")) control.disabled = true;
      }
      throw error;
    }
    const coming = await nextRuns(current);
    const key = JSON.stringify([current, history, coming]);
    if (key === shown) return;
    shown = key;
    job = current;
    replace(heading, el("bdi", {}, job.name));
    replace(summary, status(job.status), " ", el("code", {}, job.id),
      job.outcome ? [" · last run ", status(job.outcome.status), " ", when(job.outcome.at),
        job.outcome.consecutive_failures ? ` · ${job.outcome.consecutive_failures} failure(s) in a row` : ""] : " · not run yet",
      // (a note in its own direction, as a name is: a right-to-left override stays inside the quote)
      job.pause_note ? [" · paused: ", el("q", {}, el("bdi", {}, job.pause_note))] : "");
    note.disabled = !open.pause();
    zone.placeholder = job.schedule.type === "cron" ? job.schedule.timezone || "UTC" : "UTC";

    replace(schedule, el("h2", { id: "h-schedule" }, "Schedule"),
      facts([["In words", describeSchedule(job.schedule)], ["As stored", el("code", {}, JSON.stringify(job.schedule))],
        ["Next run", when(job.next_run_at)]]),
      coming.length
        ? el("ol", { "aria-label": "Next runs" }, coming.map((run) => el("li", {}, when(run.at), onWallClock(run, job.schedule),
          run.dst === "moved" ? " — moved by a spring-forward gap" : run.dst === "repeated" ? " — in a repeated hour (fall back)" : "")))
        : el("p", { class: "muted" }, "No run to come while the job is " + job.status.toLowerCase() + "."));

    const policy = job.policy || {};
    const task = typeof job.task === "string" ? `named task ${job.task}` : job.task.type;
    const params = typeof job.task === "string" ? job.params : job.task.params;
    replace(setup,
      el("section", {}, el("h2", {}, "Policies"), facts([
        ["Retry", job.retry ? `${job.retry.max_attempts} attempts, backoff ${job.retry.backoff_seconds} s up to ${job.retry.max_backoff_seconds} s` : "the named task's"],
        ["Timeout", job.timeout_seconds ? `${job.timeout_seconds} s` : "the named task's"],
        ["Catch-up window", policy.max_lateness_seconds ? `${policy.max_lateness_seconds} s` : "none"],
        ["Overlap", policy.overlap || "allow"],
        ["Flexible window", `${policy.flexible_window_seconds || 0} s`],
        ["Run limit", policy.max_runs ?? "none"],
        ["Pause after failures", policy.pause_after_failures ?? "never"],
        ["Tags", Object.entries(job.tags || {}).map(([k, v]) => el("span", { class: "tag" }, `${k}:${v}`))],
      ])),
      el("section", {}, el("h2", {}, "Task"), facts([["Task", task]]),
        el("pre", { "aria-label": "Parameters" }, JSON.stringify(params ?? {}, null, 2))),
      el("section", {}, el("h2", {}, "Notifications"),
        job.notify && job.notify.length
          ? el("ul", {}, job.notify.map((rule) => el("li", {}, `on ${rule.on.join(", ")}`,
            rule.late_after_seconds ? ` (late after ${rule.late_after_seconds} s)` : "", " → ", el("code", {}, withoutQuery(rule.to)))))
          : el("p", { class: "muted" }, "No rules."),
        el("p", { class: "muted" }, job.signing && job.signing.enabled ? "Requests are signed (the secret is never shown)." : "Requests are not signed.")));

    const rows = history.items.map((run) => el("tr", {},
      el("td", {}, status(run.status), run.manual ? el("span", { class: "muted" }, " extra") : "", run.dead_lettered ? el("span", { class: "muted" }, " dead-lettered") : ""),
      el("td", {}, when(run.scheduled_at)),
      el("td", {}, when(run.started_at)),
      el("td", {}, duration(run.lateness_ms)),
      el("td", {}, String(run.attempts)),
      el("td", { class: "error" }, run.error || ""),
      el("td", {}, FINAL_NOT_SUCCEEDED.has(run.status)
        ? el("button", { type: "button", "data-action": `retry:${run.id}`, "aria-label": `Retry the run of ${run.scheduled_at}`,
          onclick: () => act(`retry:${run.id}`, "Retry", () => api("POST", `${jobPath(jobId)}/executions/${encodeURIComponent(run.id)}/retry`)) }, "Retry")
        : "")));
    replace(runs, el("h2", { id: "h-runs" }, "Runs"),
      latenessChart(history.items),
      history.items.length
        ? table("Recent runs, newest first", ["Status", "Scheduled", "Started", "Lateness", "Attempts", "Error", ""], rows)
        : el("p", { class: "muted" }, "No run yet."));
    settle();
  }

  return { title: "Job", refresh };
}

function withoutQuery(target) {
  // A webhook's query string may carry a token: it is not shown.
  const at = target.indexOf("?");
  return at < 0 ? target : target.slice(0, at) + "?…";
}
