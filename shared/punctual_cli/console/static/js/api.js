// The page's one way to the API: the console server forwards /api/... to Punctual's API.

let session = null;

export class ApiError extends Error {
  constructor(status, body) {
    super((body && body.message) || `HTTP ${status}`);
    this.status = status;
    this.body = body;
  }
}

export async function currentSession() {
  if (!session) {
    const answer = await fetch("/session", { credentials: "same-origin" });
    const body = await answer.json();
    if (!answer.ok) throw new ApiError(answer.status, body);
    session = body;
  }
  return session;
}

export async function api(method, path, body) {
  const headers = { Accept: "application/json" };
  if (method !== "GET") headers["X-Console-Token"] = (await currentSession()).action_token;
  if (body !== undefined) headers["Content-Type"] = "application/json";
  const answer = await fetch(`/api${path}`, {
    method,
    headers,
    credentials: "same-origin",
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await answer.text();
  let parsed = null;
  try {
    parsed = text ? JSON.parse(text) : null;
  } catch {
    parsed = { message: text };
  }
  if (!answer.ok) throw new ApiError(answer.status, parsed);
  return parsed;
}

export function query(params) {
  const pairs = Object.entries(params).filter(([, v]) => v !== "" && v !== null && v !== undefined);
  return pairs.length ? "?" + new URLSearchParams(pairs).toString() : "";
}

export const jobPath = (id) => `/jobs/${encodeURIComponent(id)}`;
