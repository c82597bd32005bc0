// Building the page: every string goes in as text (textContent, attributes by setAttribute), never
// as markup, so that a name a user wrote shows as those characters.

export function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (value === null || value === undefined || value === false) continue;
    if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else node.setAttribute(key, value === true ? "" : String(value));
  }
  append(node, children);
  return node;
}

const SVG = "http://www.w3.org/2000/svg";

export function svg(tag, attrs = {}, ...children) {
  const node = document.createElementNS(SVG, tag);
  for (const [key, value] of Object.entries(attrs)) node.setAttribute(key, String(value));
  append(node, children);
  return node;
}

function append(node, children) {
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
}

export function replace(node, ...children) {
  node.replaceChildren();
  append(node, children);
}

export const viewerZone = Intl.DateTimeFormat().resolvedOptions().timeZone;

const viewerWall = new Intl.DateTimeFormat("en-CA", {
  year: "numeric", month: "2-digit", day: "2-digit", hour: "2-digit", minute: "2-digit", hourCycle: "h23",
});

// "YYYY-MM-DD HH:MM" of an instant on the viewer's wall clock (to compare with another zone's).
export function viewerWallClock(iso) {
  const parts = Object.fromEntries(viewerWall.formatToParts(new Date(iso)).map((p) => [p.type, p.value]));
  return `${parts.year}-${parts.month}-${parts.day} ${parts.hour}:${parts.minute}`;
}

const local = new Intl.DateTimeFormat(undefined, { dateStyle: "medium", timeStyle: "medium" });

export function utcText(iso) {
  return iso.replace("T", " ").replace(/\.\d+Z$/, "").replace(/Z$/, "") + " UTC";
}

// An instant in the viewer's zone, UTC on hover.
export function when(iso) {
  if (!iso) return el("span", { class: "muted" }, "—");
  return el("time", { datetime: iso, title: utcText(iso) }, local.format(new Date(iso)));
}

export function status(value) {
  if (!value) return el("span", { class: "muted" }, "—");
  return el("span", { class: `status ${value}` }, value);
}

export function duration(ms) {
  if (ms === null || ms === undefined) return "—";
  if (Math.abs(ms) < 1000) return `${ms} ms`;
  if (Math.abs(ms) < 60000) return `${(ms / 1000).toFixed(1)} s`;
  return `${(ms / 60000).toFixed(1)} min`;
}

export function table(caption, headers, rows) {
  return el("div", { class: "scroll" },
    el("table", {},
      el("caption", { class: "muted" }, caption),
      el("thead", {}, el("tr", {}, headers.map((h) => el("th", { scope: "col" }, h)))),
      el("tbody", {}, rows)));
}

// A name in its own direction (<bdi>): a right-to-left override in one job's name reorders that name
// only, never the text around it.
export function jobLink(id, name) {
  return el("a", { href: `#/job/${encodeURIComponent(id)}` }, el("bdi", {}, name || id));
}
