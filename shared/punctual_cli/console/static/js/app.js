// The console's shell: hash routes, one view at a time, each refreshed every 1.5 s so that changes
// show within 2 s without a reload.

import { currentSession, signIn } from "./api.js";
import { el, replace } from "./dom.js";
import * as jobs from "./views/jobs.js";
import * as job from "./views/job.js";
import * as failures from "./views/failures.js";
import * as tasks from "./views/tasks.js";
import * as comingUp from "./views/coming_up.js";

const POLL_MS = 1500;
const main = document.getElementById("main");
const notice = document.getElementById("notice");
const updated = document.getElementById("updated");
let current = null;
let generation = 0;

// `fromPoll`: an error of a refresh, which the next good refresh clears; an action's error stays
// until the next action or view.
export function say(message, isError = false, fromPoll = false) {
  notice.textContent = message;
  notice.classList.toggle("error", isError);
  notice.dataset.fromPoll = fromPoll ? "1" : "";
}

// After an action the keyboard's place is the control pressed; where that is gone or disabled
// (Resume on a job now ACTIVE, Cancel on a CANCELLED one), the notice saying what happened, not the
// page's top. A place the user moved to meanwhile is kept.
function keepFocus(from) {
  if (document.activeElement && document.activeElement !== document.body) return;
  if (from && from !== document.body && from.isConnected && !from.disabled) from.focus();
  else notice.focus();
}

// An address no view has (a job id that is no percent-encoding, `#/job/%E0%A4%A`): said so.
const nowhere = {
  mount(container) {
    container.append(el("h1", {}, "No such page"), el("p", {}, el("a", { href: "#/jobs" }, "Go to your jobs")));
    return { title: "No such page", refresh: async () => {} };
  },
};

function route() {
  const hash = location.hash.startsWith("#/") ? location.hash.slice(2) : "jobs";
  const [name, ...rest] = hash.split("/");
  let arg = null;
  try {
    arg = rest.length ? decodeURIComponent(rest.join("/")) : null;
  } catch {
    return { view: nowhere, name: "", arg: null };
  }
  const views = { jobs, job, failures, tasks, "coming-up": comingUp };
  return { view: views[name] || jobs, name: views[name] ? name : "jobs", arg };
}

async function show() {
  // (the skip link: it moves the focus, not the view; loaded with it, the page shows its first view)
  if (location.hash && !location.hash.startsWith("#/") && current !== null) return;
  const { view, name, arg } = route();
  generation += 1;
  const mine = generation;
  for (const link of document.querySelectorAll("nav a")) {
    const active = link.dataset.view === name || (name === "job" && link.dataset.view === "jobs");
    if (active) link.setAttribute("aria-current", "page");
    else link.removeAttribute("aria-current");
  }
  replace(main);
  say("");
  current = view.mount(main, arg, { say, keepFocus, refresh: () => poll(mine, false) });
  document.title = `${current.title} · Punctual console`;
  await poll(mine, true);
}

async function poll(mine, loop) {
  if (mine !== generation) return;
  try {
    await current.refresh();
    updated.textContent = `Updated ${new Date().toLocaleTimeString()} · every ${POLL_MS / 1000} s`;
    if (notice.classList.contains("error") && notice.dataset.fromPoll) say("");
  } catch (error) {
    // (an action's error is not covered by the refresh's: it says what the user's own click did)
    const actionError = notice.classList.contains("error") && !notice.dataset.fromPoll;
    if (!actionError) say(error.status === 401 ? "Not signed in: open the URL `punctual console` printed." : `Could not refresh: ${error.message}`, true, true);
  }
  if (loop && mine === generation) setTimeout(() => poll(mine, true), POLL_MS);
}

async function start() {
  try {
    await signIn();
    const session = await currentSession();
    document.getElementById("where").textContent = `API: ${session.endpoint} · times in ${Intl.DateTimeFormat().resolvedOptions().timeZone}`;
  } catch (error) {
    replace(main, el("h1", {}, "Not signed in"),
      error.status === 403 ? el("p", { class: "error" }, error.message) : "",
      el("p", {}, "Open the URL that `punctual console` printed: it signs this tab in, and a reload keeps it. Another tab needs the URL again."));
    return;
  }
  window.addEventListener("hashchange", show);
  await show();
}

start();
