// Coming up: the owner's runs due in the next hour, per minute (GET /coming-up), so that a burst
// shows before it comes.

import { api } from "../api.js";
import { el, jobLink, replace, table, when } from "../dom.js";
import { minuteChart } from "./charts.js";

export function mount(container) {
  const body = el("div", {});
  container.append(el("h1", {}, "Coming up"), body);
  let shown = "";

  async function refresh() {
    const answer = await api("GET", "/coming-up");
    const key = JSON.stringify(answer.minutes) + answer.complete;
    if (key === shown) return;
    shown = key;
    const total = answer.minutes.reduce((sum, m) => sum + m.count, 0);
    const busy = answer.minutes.filter((m) => m.count);
    const peak = busy.reduce((top, m) => (m.count > (top ? top.count : 0) ? m : top), null);
    replace(body,
      el("p", {}, `${total} run(s) due in the next hour`, peak ? [", the busiest minute ", when(peak.at), ` with ${peak.count}`] : "", "."),
      answer.complete ? "" : el("p", { class: "muted" }, `Counted from your newest ${answer.jobs_read} ACTIVE jobs only.`),
      minuteChart(answer.minutes),
      busy.length
        ? table("Minutes with runs due", ["Minute", "Runs", "Jobs"], busy.map((m) => el("tr", {},
          el("td", {}, when(m.at)), el("td", {}, String(m.count)),
          el("td", { class: "name" }, m.jobs.map((j, i) => [i ? ", " : "", jobLink(j.id, j.name), j.count > 1 ? ` ×${j.count}` : ""]),
            more(m)))))
        : el("p", { class: "muted" }, "Nothing is due in the next hour."));
  }

  // (the API names a minute's ten busiest jobs; its count covers them all)
  function more(minute) {
    const named = minute.jobs.reduce((sum, j) => sum + j.count, 0);
    return minute.count > named ? el("span", { class: "muted" }, ` and ${minute.count - named} more run(s)`) : "";
  }

  return { title: "Coming up", refresh };
}
