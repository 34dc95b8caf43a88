// The UI's one way to the daemon: its REST API under /api/v1 (docs/api.md),
// with the browser session's cookie. A request that changes state carries the
// session's CSRF token (X-Lathe-CSRF, from GET /api/v1/session).
import { has, langStore, t } from "./i18n";
import type { ErrorBody } from "./types";

const BASE = "/api/v1";

// An error as the API sends it (an ErrorBody), or one of the UI's own (no
// answer at all: web.error.network).
export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly id: string,
    readonly args: Record<string, string>,
    readonly en: string,
    readonly zh: string,
  ) {
    super(en);
  }
  // The text in the UI's language.
  text(): string {
    if (!this.en && has(this.id)) return t(this.id, this.args);
    return (langStore.get() === "zh" ? this.zh : this.en) || this.en || this.id;
  }
  // The spec field it names (error.args.field), for forms.
  get field(): string {
    return this.args.field ?? "";
  }
}

let csrf = "";
let onSignedOut: () => void = () => {};

export function setCsrf(token: string) {
  csrf = token;
}

// Called when a request is refused for want of a live session (401).
export function onUnauthenticated(fn: () => void) {
  onSignedOut = fn;
}

// The ApiError of an error body (the HTTP layer's own carry only `error`).
function errorFromBody(status: number, b: ErrorBody): ApiError {
  const en = b.en ?? b.error;
  return new ApiError(status, b.msg_id ?? "", b.args ?? {}, en, b.zh ?? en);
}

function uiError(status: number, id: string, args: Record<string, string> = {}) {
  return new ApiError(status, id, args, "", "");  // text() finds it in the catalog
}

async function errorOf(res: Response): Promise<ApiError> {
  let body: unknown = null;
  try {
    body = await res.json();
  } catch {
    // not JSON: a proxy's page, a cut connection
  }
  const e = (body as { error?: unknown } | null)?.error;
  if (typeof e === "string") return errorFromBody(res.status, body as ErrorBody);
  return uiError(res.status, "web.error.http", { status: String(res.status) });
}

export interface RequestOptions {
  method?: "GET" | "POST" | "PUT" | "PATCH" | "DELETE";
  body?: unknown;
  signal?: AbortSignal;
}

// fetch(BASE + path): the answer when it is 2xx, else the API's error as an
// ApiError (a network failure too; an abort is passed on). A 401 signs the
// UI out, unless `signOut` is false (a sign-in that failed).
async function send(path: string, init: RequestInit, signOut = true): Promise<Response> {
  let res: Response;
  try {
    res = await fetch(BASE + path, init);
  } catch (e) {
    if ((e as Error).name === "AbortError") throw e;
    throw uiError(0, "web.error.network");
  }
  if (!res.ok) {
    const err = await errorOf(res);
    if (res.status === 401 && signOut) onSignedOut();
    throw err;
  }
  return res;
}

// GET (or `method`) BASE + path; the parsed JSON answer, or throws ApiError.
export async function api<T>(path: string, opts: RequestOptions = {}): Promise<T> {
  const method = opts.method ?? "GET";
  const headers: Record<string, string> = { Accept: "application/json" };
  if (opts.body !== undefined) headers["Content-Type"] = "application/json";
  if (method !== "GET" && csrf) headers["X-Lathe-CSRF"] = csrf;
  const res = await send(path, {
    method,
    headers,
    body: opts.body === undefined ? undefined : JSON.stringify(opts.body),
    credentials: "same-origin",
    signal: opts.signal,
  });
  return (await res.json()) as T;
}

// An API token (lathe token create) traded for a browser session: the token
// asks POST /sessions/code for a one-time code of its own user, whose link
// (/ui/login?code=…) sets the session's cookie. The token is sent once, in a
// header, and kept nowhere.
export async function signInWithToken(token: string): Promise<string> {
  const res = await send("/sessions/code", {
    method: "POST",
    headers: { Accept: "application/json", "Content-Type": "application/json",
      Authorization: `Bearer ${token.trim()}` },
    body: "{}",
    credentials: "omit",
  }, false);
  const body = (await res.json()) as { url?: string };
  const url = new URL(body.url ?? "", location.href);
  // This origin's own login page, whatever host name the daemon's answer used.
  if (url.pathname !== "/ui/login") throw uiError(0, "web.error.network");
  return url.pathname + url.search;
}

// GET BASE + path as text (a log's page): the body and the header
// X-Lathe-Next-Offset (null when the answer has none); throws ApiError.
export async function apiText(path: string, signal?: AbortSignal): Promise<{ text: string; next: number | null }> {
  const res = await send(path, { headers: { Accept: "text/plain" }, credentials: "same-origin", signal });
  const next = res.headers.get("X-Lathe-Next-Offset");
  return { text: await res.text(), next: next === null ? null : Number(next) };
}

// A query string from the set values of `params` ("" when none is set).
export function query(params: Record<string, string | number | undefined | null>): string {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) {
    if (v !== undefined && v !== null && v !== "") q.set(k, String(v));
  }
  const s = q.toString();
  return s ? "?" + s : "";
}

// Server-sent events from BASE + path: fn(event type, parsed data) per event
// of `types`; onState(open) when the stream opens or drops (the browser
// reconnects by itself). Returns the function that closes it.
export function events(
  path: string,
  types: string[],
  fn: (type: string, data: unknown) => void,
  onState: (open: boolean) => void = () => {},
): () => void {
  const es = new EventSource(BASE + path);
  for (const type of types) {
    es.addEventListener(type, (ev) => {
      let data: unknown = null;
      try {
        data = JSON.parse((ev as MessageEvent).data);
      } catch {
        // a payload that is not JSON is passed on as null
      }
      fn(type, data);
    });
  }
  es.onopen = () => onState(true);
  es.onerror = () => onState(false);
  return () => es.close();
}

// The error's text in the UI's language, whatever was thrown.
export function errorText(e: unknown): string {
  if (e instanceof ApiError) return e.text();
  return t("web.error.unknown");
}

// An action's request: `call`, then `done` (the page's data again), or its
// ApiError kept for an ErrorBox through `setError`.
export async function apiAction(call: () => Promise<unknown>, done: () => void,
                                setError: (e: ApiError | null) => void): Promise<void> {
  try {
    await call();
    setError(null);
    done();
  } catch (err) {
    setError(err instanceof ApiError ? err : null);
  }
}
