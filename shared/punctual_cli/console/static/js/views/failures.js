// Failures: the jobs whose last run FAILED (GET /jobs?outcome=failed), and dead-lettered runs
// (GET /dead-letters), with retry and redrive. Each list pages as the Jobs view does: 100 a page.

import { api, jobPath, query } from "../api.js";
import { actions, pager } from "../controls.js";
import { el, jobLink, replace, status, table, when } from "../dom.js";

const PAGE = 100;

export function mount(container, _arg, ctx) {
  let shown = "";
  const again = () => { shown = ""; ctx.refresh(); };
  const failedPages = pager("failed jobs", again);
  const letterPages = pager("dead-lettered runs", again);
  const failed = el("div", {});
  const letters = el("div", {});
  container.append(el("h1", {}, "Failures"),
    el("section", { "aria-labelledby": "h-failed" }, el("h2", { id: "h-failed" }, "Jobs whose last run failed"), failed, failedPages.node),
    el("section", { "aria-labelledby": "h-letters" }, el("h2", { id: "h-letters" }, "Dead-lettered runs"), letters, letterPages.node));
  const { act, settle } = actions(container, ctx, { changed: () => { shown = ""; } });

  async function refresh() {
    const [jobs, dead] = await Promise.all([
      api("GET", "/jobs" + query({ outcome: "failed", limit: PAGE, cursor: failedPages.cursor })),
      api("GET", "/dead-letters" + query({ limit: PAGE, cursor: letterPages.cursor })),
    ]);
    const key = JSON.stringify([jobs, dead]);
    if (key === shown) return;
    shown = key;
    const rows = jobs.items.map((job) => {
      const last = job.last_execution;
      const retry = last && ["ACTIVE", "COMPLETED"].includes(job.status)
        ? el("button", { type: "button", "data-action": `retry:${last.id}`, "aria-label": `Retry the failed run of ${job.name}`,
          onclick: () => act(`retry:${last.id}`, "Retry", async () => { await api("POST", `${jobPath(job.id)}/executions/${encodeURIComponent(last.id)}/retry`); return "queued"; }) }, "Retry")
        : "";
      return el("tr", { "data-job-id": job.id },
        el("td", { class: "name" }, jobLink(job.id, job.name)),
        el("td", {}, status(job.status)),
        el("td", {}, when(job.outcome && job.outcome.at)),
        el("td", {}, String(job.outcome ? job.outcome.consecutive_failures : "")),
        el("td", { class: "error" }, (last && last.error) || ""),
        el("td", {}, retry));
    });
    replace(failed,
      rows.length ? table("Jobs whose latest finished run FAILED", ["Job", "Status", "Failed at", "In a row", "Error", ""], rows)
        : el("p", { class: "muted" }, jobs.next_cursor ? "None on this page: go on to the next." : "None: every job's last run succeeded or none has run."));
    failedPages.show(jobs.next_cursor);

    const ids = dead.items.map((d) => d.execution_id);
    const redrive = (key, list) => act(key, "Redrive", async () => {
      const answer = await api("POST", "/dead-letters/redrive", { execution_ids: list });
      return answer.items.map((i) => `${i.execution_id}: ${i.result}`).join("; ");
    });
    const letterRows = dead.items.map((d) => el("tr", {},
      el("td", { class: "name" }, jobLink(d.job_id, d.job_name || d.job_id)),
      el("td", {}, when(d.scheduled_at)),
      el("td", {}, when(d.dead_lettered_at)),
      el("td", { class: "error" }, d.error || ""),
      el("td", {}, el("button", { type: "button", "data-action": `redrive:${d.execution_id}`, "aria-label": `Redrive the run of ${d.scheduled_at}`,
        onclick: () => redrive(`redrive:${d.execution_id}`, [d.execution_id]) }, "Redrive"))));
    // (with more pages, "all" would claim runs it does not send: the button says it is this page's)
    const all = dead.next_cursor || letterPages.cursor ? `Redrive the ${ids.length} on this page` : `Redrive all ${ids.length}`;
    replace(letters,
      letterRows.length
        ? [el("div", { class: "actions" }, el("button", { type: "button", "data-action": "redrive-page", onclick: () => redrive("redrive-page", ids) }, all)),
          table("Runs whose message exhausted its deliveries", ["Job", "Scheduled", "Dead-lettered", "Error", ""], letterRows)]
        : el("p", { class: "muted" }, dead.next_cursor ? "None on this page: go on to the next." : "None."));
    settle();
  }

  return { title: "Failures", refresh };
}
