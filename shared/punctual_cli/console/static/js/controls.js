// What views share of their controls: actions sent once a click, and a list's pages.

import { el, replace } from "./dom.js";

// One click, one request: every control of an action (data-action="<key>") is disabled while that
// action's request is in flight, so a double-click on "Run now" or "Retry" sends one, not two; a
// control built again meanwhile (a refresh) is built disabled by `settle`. `allowed(key)` is whether
// the action is open at all (Resume on a job that is not paused is not). `changed` runs after an
// action went through, before the view is refreshed.
export function actions(container, ctx, { allowed = () => true, changed = () => {} } = {}) {
  const pending = new Set();

  function settle() {
    for (const control of container.querySelectorAll("[data-action]")) {
      control.disabled = pending.has(control.dataset.action) || !allowed(control.dataset.action);
    }
  }

  // The action's call answers what to say after its label ("done." when it answers nothing);
  // whether it went through.
  async function act(key, label, call) {
    if (pending.has(key)) return false;
    const from = document.activeElement;
    pending.add(key);
    settle();
    let done = false;
    try {
      const said = await call();
      ctx.say(`${label}: ${said || "done."}`);
      done = true;
    } catch (error) {
      ctx.say(`${label}: ${error.message}`, true);
    } finally {
      pending.delete(key);
    }
    if (done) {
      changed();
      await ctx.refresh();
    }
    settle();
    ctx.keepFocus(from);
    return done;
  }

  return { act, settle };
}

// A list's pages by cursor, as GET /jobs and GET /dead-letters answer them: "Previous" and "Next"
// buttons, and a line saying more exist. `turn` runs when a button is pressed; the keyboard's place
// stays on the button pressed (or the other) when the buttons are built again.
export function pager(noun, turn) {
  let cursors = [null];
  let turned = null;
  const node = el("div", { class: "actions pager" });

  function go(label, change) {
    change();
    turned = label;
    turn();
  }

  return {
    node,
    get cursor() {
      return cursors[cursors.length - 1];
    },
    reset() {
      cursors = [null];
    },
    show(nextCursor) {
      const previous = `Previous page of ${noun}`;
      const next = `Next page of ${noun}`;
      const buttons = [];
      if (cursors.length > 1) buttons.push(el("button", { type: "button", onclick: () => go(previous, () => cursors.pop()) }, previous));
      if (nextCursor) buttons.push(el("button", { type: "button", onclick: () => go(next, () => cursors.push(nextCursor)) }, next));
      replace(node, buttons.length ? el("span", { class: "muted" }, nextCursor ? `Page ${cursors.length}; more on the next.` : `Page ${cursors.length}, the last.`) : "", buttons);
      if (turned) {
        const again = buttons.find((b) => b.textContent === turned) || buttons[0];
        if (again) again.focus();
        turned = null;
      }
    },
  };
}
