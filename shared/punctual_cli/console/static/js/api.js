// The page's one way to the API: the console server forwards /api/... to Punctual's API.
//
// Signed in by the session's secret in a header, kept in this tab's sessionStorage: a reload keeps
// it, another port's page (another console, any local server) never sees it, and no cookie is sent.

const STORED = "punctual-console-session";
const SECRET_HEADER = "X-Console-Session";
let session = null;

export class ApiError extends Error {
  constructor(status, body) {
    super((body && body.message) || `HTTP ${status}`);
    this.status = status;
    this.body = body;
  }
}

async function answerOf(response) {
  const text = await response.text();
  let parsed = null;
  try {
    parsed = text ? JSON.parse(text) : null;
  } catch {
    parsed = { message: text };
  }
  if (!response.ok) {
    // (a console started again has a new secret: the old one is dropped, the printed URL asked for)
    if (response.status === 401) sessionStorage.removeItem(STORED);
    throw new ApiError(response.status, parsed);
  }
  return parsed;
}

function send(method, path, headers = {}, body = undefined) {
  const secret = sessionStorage.getItem(STORED);
  const sent = { Accept: "application/json", ...headers };
  if (secret) sent[SECRET_HEADER] = secret;
  if (body !== undefined) sent["Content-Type"] = "application/json";
  return fetch(path, {
    method,
    headers: sent,
    credentials: "omit",
    body: body === undefined ? undefined : JSON.stringify(body),
  });
}

// Opened at the printed URL (/login?token=...): the token leaves the address bar and this tab's
// history first, then is exchanged for the session's secret.
export async function signIn() {
  if (location.pathname !== "/login") return;
  const token = new URLSearchParams(location.search).get("token") || "";
  history.replaceState(null, "", "/" + location.hash);
  const answer = await answerOf(await send("POST", "/session", {}, { token }));
  sessionStorage.setItem(STORED, answer.session);
  session = null;
}

export async function currentSession() {
  if (!session) session = await answerOf(await send("GET", "/session"));
  return session;
}

export async function api(method, path, body) {
  const headers = {};
  if (method !== "GET") headers["X-Console-Token"] = (await currentSession()).action_token;
  return answerOf(await send(method, `/api${path}`, headers, body));
}

export function query(params) {
  const pairs = Object.entries(params).filter(([, v]) => v !== "" && v !== null && v !== undefined);
  return pairs.length ? "?" + new URLSearchParams(pairs).toString() : "";
}

export const jobPath = (id) => `/jobs/${encodeURIComponent(id)}`;
