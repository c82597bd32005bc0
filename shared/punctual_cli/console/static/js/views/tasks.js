// Named tasks: each one's type, version, defaults, parameter schema and the jobs using it.

import { api, query } from "../api.js";
import { el, jobLink, replace, status, when } from "../dom.js";

const JOBS_LISTED = 100;

export function mount(container, _arg) {
  const list = el("div", {});
  const types = el("p", { class: "muted" });
  container.append(el("h1", {}, "Named tasks"), types, list);
  const open = new Set();
  let shown = "";

  async function refresh() {
    const page = await api("GET", "/tasks" + query({ limit: 100 }));
    const using = await Promise.all(page.items.map((task) => api("GET", "/jobs" + query({ task: task.name, limit: JOBS_LISTED }))));
    const key = JSON.stringify([page, using]);
    if (key === shown) return;
    shown = key;
    replace(types, "Built-in types: ", (page.types || []).map((t) => t.type || t.name || String(t)).join(", "));
    if (!page.items.length) {
      replace(list, el("p", { class: "muted" }, "No named task yet (`punctual tasks create`)."));
      return;
    }
    replace(list, page.items.map((task, i) => {
      const jobs = using[i].items;
      const details = el("details", { "data-task": task.name },
        el("summary", {}, el("strong", {}, task.name), ` · ${task.type} · version ${task.version} · ${jobs.length}${using[i].next_cursor ? "+" : ""} job(s)`),
        task.description ? el("p", {}, task.description) : "",
        el("dl", { class: "facts" },
          el("dt", {}, "Updated"), el("dd", {}, when(task.updated_at)),
          el("dt", {}, "Created"), el("dd", {}, when(task.created_at)),
          el("dt", {}, "Retry"), el("dd", {}, task.retry ? JSON.stringify(task.retry) : "the defaults"),
          el("dt", {}, "Timeout"), el("dd", {}, task.timeout_seconds ? `${task.timeout_seconds} s` : "the default")),
        el("h3", {}, "Default parameters"), el("pre", {}, JSON.stringify(task.params ?? {}, null, 2)),
        el("h3", {}, "Parameters schema"), el("pre", {}, task.params_schema ? JSON.stringify(task.params_schema, null, 2) : "none"),
        el("h3", {}, "Jobs using it (ACTIVE and PAUSED)"),
        jobs.length ? el("ul", {}, jobs.map((job) => el("li", {}, jobLink(job.id, job.name), " ", status(job.status)))) : el("p", { class: "muted" }, "None."));
      if (open.has(task.name)) details.open = true;
      details.addEventListener("toggle", () => (details.open ? open.add(task.name) : open.delete(task.name)));
      return details;
    }));
  }

  return { title: "Named tasks", refresh };
}
