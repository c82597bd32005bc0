// Jobs: the owner's jobs through GET /jobs and its filters, counts by outcome, next runs.

import { api, query } from "../api.js";
import { pager } from "../controls.js";
import { el, jobLink, replace, status, table, when } from "../dom.js";
import { describeSchedule } from "./words.js";

export function mount(container, _arg, ctx) {
  const filters = { status: "", outcome: "", tag: "", name_prefix: "" };
  let shown = "";
  const pages = pager("jobs", () => { shown = ""; ctx.refresh(); });

  const field = (label, control) => el("label", {}, label, control);
  const statusSelect = el("select", { name: "status", id: "filter-status" },
    ["", "ACTIVE", "PAUSED", "COMPLETED", "CANCELLED"].map((v) => el("option", { value: v }, v || "any")));
  const outcomeSelect = el("select", { name: "outcome", id: "filter-outcome" },
    [["", "any"], ["succeeded", "succeeded"], ["failed", "failed"]].map(([v, t]) => el("option", { value: v }, t)));
  const tagInput = el("input", { name: "tag", id: "filter-tag", placeholder: "team:billing", autocomplete: "off" });
  const prefixInput = el("input", { name: "name_prefix", id: "filter-name", placeholder: "nightly-", autocomplete: "off" });
  const form = el("form", { class: "filters", role: "search", "aria-label": "Filter jobs" },
    field("Status", statusSelect), field("Outcome", outcomeSelect), field("Tag (key or key:value)", tagInput),
    field("Name starts with", prefixInput));
  let timer = null;
  const apply = () => {
    filters.status = statusSelect.value;
    filters.outcome = outcomeSelect.value;
    filters.tag = tagInput.value.trim();
    filters.name_prefix = prefixInput.value;
    pages.reset();
    ctx.refresh();
  };
  form.addEventListener("submit", (event) => { event.preventDefault(); apply(); });
  form.addEventListener("change", apply);
  form.addEventListener("input", () => { clearTimeout(timer); timer = setTimeout(apply, 300); });

  const counts = el("ul", { class: "counts", "aria-label": "Jobs on this page by outcome" });
  const results = el("div", { id: "jobs-table" });
  container.append(el("h1", {}, "Jobs"), form, counts, results, pages.node);

  async function refresh() {
    let page;
    try {
      page = await api("GET", "/jobs" + query({ ...filters, limit: 100, cursor: pages.cursor }));
    } catch (error) {
      // (a refused filter matches nothing shown: the jobs of the filter before are not its answer)
      if (error.status >= 400 && error.status < 500 && error.status !== 401) {
        shown = "";
        replace(counts);
        replace(results, el("p", { class: "muted" }, "No jobs shown: the filter was refused (see above)."));
        replace(pages.node);
      }
      throw error;
    }
    const key = JSON.stringify(page);
    if (key === shown) return;
    shown = key;
    const items = page.items;
    const tally = { succeeded: 0, failed: 0, none: 0 };
    for (const job of items) {
      const outcome = job.outcome ? job.outcome.status : null;
      if (outcome === "SUCCEEDED") tally.succeeded += 1;
      else if (outcome === "FAILED") tally.failed += 1;
      else tally.none += 1;
    }
    replace(counts,
      el("li", {}, `${items.length} job${items.length === 1 ? "" : "s"} shown`),
      el("li", {}, status("SUCCEEDED"), ` last run succeeded: ${tally.succeeded}`),
      el("li", {}, status("FAILED"), ` last run failed: ${tally.failed}`),
      el("li", {}, `not run yet: ${tally.none}`));
    const rows = items.map((job) => el("tr", { "data-job-id": job.id },
      el("td", { class: "name" }, jobLink(job.id, job.name)),
      el("td", {}, status(job.status)),
      el("td", {}, job.outcome ? status(job.outcome.status) : el("span", { class: "muted" }, "—")),
      el("td", {}, when(job.next_run_at)),
      el("td", {}, describeSchedule(job.schedule)),
      el("td", {}, Object.entries(job.tags || {}).map(([k, v]) => el("span", { class: "tag" }, v ? `${k}:${v}` : k)))));
    replace(results, items.length
      ? table(filters.name_prefix ? "Your jobs, by name" : "Your jobs, newest first", ["Name", "Status", "Last run", "Next run", "Schedule", "Tags"], rows)
      : el("p", { class: "muted" }, page.next_cursor ? "None on this page: go on to the next." : "No job matches."));
    pages.show(page.next_cursor);
  }

  return { title: "Jobs", refresh };
}
