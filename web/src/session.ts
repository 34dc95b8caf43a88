// Who is signed in: GET /api/v1/session (the cookie's session, with its CSRF
// token). No session — never signed in, expired, revoked: the sign-in page.
import { api, ApiError, onUnauthenticated, setCsrf } from "./api";
import { createStore } from "./store";

export interface Session {
  id: string;
  uid: number;
  user: string;
  expires_at_ms: number;
  csrf: string;
}

export type SessionState =
  | { kind: "loading" }
  | { kind: "signed_in"; session: Session }
  | { kind: "signed_out"; error?: ApiError };

export const sessionStore = createStore<SessionState>({ kind: "loading" });

export async function loadSession() {
  try {
    const s = await api<Session>("/session");
    setCsrf(s.csrf);
    sessionStore.set({ kind: "signed_in", session: s });
  } catch (e) {
    // 401: no cookie, or one that ended; 404 (session.not_session) cannot come
    // from a browser but means the same here.
    sessionStore.set({ kind: "signed_out", error: e instanceof ApiError ? e : undefined });
  }
}

onUnauthenticated(() => {
  if (sessionStore.get().kind === "signed_in") sessionStore.set({ kind: "signed_out" });
});

// The signed-in user's name ("" when none).
export function currentUser(): string {
  const s = sessionStore.get();
  return s.kind === "signed_in" ? s.session.user : "";
}
