// Small SVG charts, drawn from data; every label is text.

import { duration, el, svg } from "../dom.js";

export function latenessChart(executions) {
  const started = executions.filter((e) => e.lateness_ms !== null && e.lateness_ms !== undefined).slice(0, 50).reverse();
  if (!started.length) return el("p", { class: "muted" }, "No lateness to chart yet.");
  const width = 600, height = 140, pad = 24;
  const most = Math.max(1000, ...started.map((e) => e.lateness_ms));
  const bar = Math.min(24, (width - pad * 2) / started.length);
  const worst = Math.max(...started.map((e) => e.lateness_ms));
  const chart = svg("svg", { viewBox: `0 0 ${width} ${height}`, class: "chart", role: "img",
    "aria-label": `Lateness of the last ${started.length} runs, oldest first; the worst ${duration(worst)}` },
  svg("line", { x1: pad, y1: height - pad, x2: width - pad, y2: height - pad, class: "axis" }),
  svg("text", { x: 2, y: 12 }, duration(most)),
  svg("text", { x: 2, y: height - pad + 14 }, "oldest"),
  svg("text", { x: width - pad - 30, y: height - pad + 14 }, "newest"));
  started.forEach((e, i) => {
    const h = Math.max(1, ((height - pad * 2) * e.lateness_ms) / most);
    chart.append(svg("rect", { x: pad + i * bar + 1, y: height - pad - h, width: Math.max(1, bar - 2), height: h,
      class: e.lateness_ms > 2000 ? "bar late" : "bar" }, svg("title", {}, `${e.scheduled_at}: ${duration(e.lateness_ms)}`)));
  });
  return el("figure", {}, chart, el("figcaption", { class: "muted" }, "Lateness (start minus scheduled time) over recent runs; red: over 2 s."));
}

export function minuteChart(minutes) {
  const width = 720, height = 160, pad = 24;
  const most = Math.max(1, ...minutes.map((m) => m.count));
  const bar = (width - pad * 2) / Math.max(1, minutes.length);
  const total = minutes.reduce((sum, m) => sum + m.count, 0);
  const chart = svg("svg", { viewBox: `0 0 ${width} ${height}`, class: "chart", role: "img",
    "aria-label": `Runs due per minute over the coming hour: ${total} in all, at most ${most} in one minute` },
  svg("line", { x1: pad, y1: height - pad, x2: width - pad, y2: height - pad, class: "axis" }),
  svg("text", { x: 2, y: 12 }, String(most)),
  svg("text", { x: pad, y: height - pad + 14 }, "now"),
  svg("text", { x: width - pad - 40, y: height - pad + 14 }, "+60 min"));
  minutes.forEach((m, i) => {
    if (!m.count) return;
    const h = Math.max(1, ((height - pad * 2) * m.count) / most);
    chart.append(svg("rect", { x: pad + i * bar + 1, y: height - pad - h, width: Math.max(1, bar - 2), height: h, class: "bar" },
      svg("title", {}, `${m.at}: ${m.count}`)));
  });
  return chart;
}
