// The shell around every page: the navigation, who is signed in, the language
// and theme switches, and the page the path names (pages/index.ts).
import { useEffect, useRef, useState } from "preact/hooks";
import { ApiError, signInWithToken } from "./api";
import { pages } from "./pages";
import type { Page } from "./page";
import { Link, match, useLocation } from "./router";
import { setLang, t, useLang, type Lang } from "./i18n";
import { sessionStore, type SessionState } from "./session";
import { setTheme, themeStore, type Theme } from "./theme";
import { useStore } from "./store";
import { ErrorBox } from "./components/status";

function findPage(path: string): { page: Page; params: Record<string, string> } | null {
  for (const page of pages) {
    const params = match(page.path, path);
    if (params) return { page, params };
  }
  return null;
}

function Nav({ path }: { path: string }) {
  return (
    <nav aria-label={t("web.nav.label")}>
      <ul>
        {pages
          .filter((p) => p.nav)
          .map((p) => {
            const here = p.path === "/" ? path === "/" : path === p.path || path.startsWith(p.path + "/");
            return (
              <li key={p.path}>
                <Link href={p.path} aria-current={here ? "page" : undefined}>
                  {t(p.nav!)}
                </Link>
              </li>
            );
          })}
      </ul>
    </nav>
  );
}

function Switches() {
  const lang = useLang();
  const theme = useStore(themeStore);
  return (
    <div class="switches">
      <label>
        <span class="sr-only">{t("web.lang.label")}</span>
        <select id="lang" value={lang} onChange={(e) => setLang(e.currentTarget.value as Lang)}>
          <option value="en" lang="en">English</option>
          <option value="zh" lang="zh-CN">中文</option>
        </select>
      </label>
      <label>
        <span class="sr-only">{t("web.theme.label")}</span>
        <select id="theme" value={theme} onChange={(e) => setTheme(e.currentTarget.value as Theme)}>
          <option value="system">{t("web.theme.system")}</option>
          <option value="light">{t("web.theme.light")}</option>
          <option value="dark">{t("web.theme.dark")}</option>
        </select>
      </label>
    </div>
  );
}

function SignIn({ state }: { state: SessionState }) {
  return (
    <main id="main" class="signin">
      <h1>{t("web.signin.title")}</h1>
      {state.kind === "signed_out" && state.error && state.error.status !== 401 ? (
        <ErrorBox error={state.error} />
      ) : null}
      <p>{t("web.signin.how")}</p>
      <pre><code>lathe ui</code></pre>
      <p>{t("web.signin.remote")}</p>
      <TokenSignIn />
    </main>
  );
}

// Or an API token of the user's (lathe token create), pasted once.
function TokenSignIn() {
  const [token, setToken] = useState("");
  const [error, setError] = useState<ApiError | null>(null);
  const [busy, setBusy] = useState(false);
  const submit = async (e: Event) => {
    e.preventDefault();
    setBusy(true);
    setError(null);
    try {
      location.assign(await signInWithToken(token));
    } catch (err) {
      setError(err instanceof ApiError ? err : null);
      setBusy(false);
    }
  };
  return (
    <form class="token-signin" onSubmit={submit}>
      <h2>{t("web.signin.token_title")}</h2>
      <p>{t("web.signin.token_how")}</p>
      <label for="api-token">{t("web.signin.token_label")}</label>
      <input id="api-token" type="password" autocomplete="off" value={token} required
        aria-invalid={error ? "true" : undefined}
        onInput={(e) => setToken(e.currentTarget.value)} />
      <button type="submit" disabled={busy || !token.trim()}>{t("web.signin.token_submit")}</button>
      {error ? <ErrorBox error={error} /> : null}
    </form>
  );
}

export function App() {
  useLang();  // every text below re-renders in the new language
  const session = useStore(sessionStore);
  const { path } = useLocation();
  const found = findPage(path);
  const heading = useRef<HTMLHeadingElement>(null);
  const title = found ? t(found.page.title) : t("web.notfound.title");
  useEffect(() => {
    document.title = `${title} · Lathe`;
  }, [title]);
  useEffect(() => {
    // A new page: focus its heading, as a page load would put the reader at the top.
    heading.current?.focus();
  }, [path]);

  const user = session.kind === "signed_in" ? session.session.user : "";
  return (
    <>
      <a class="skip" href="#main">{t("web.skip")}</a>
      <header class="top">
        <Link href="/" class="brand">Lathe</Link>
        {session.kind === "signed_in" ? <Nav path={path} /> : null}
        <div class="spacer" />
        {user ? (
          <span class="user" data-user={user}>
            {t("web.user.signed_in", { user })}
          </span>
        ) : null}
        <Switches />
      </header>
      {session.kind === "loading" ? (
        <main id="main"><p class="muted">{t("web.loading")}</p></main>
      ) : session.kind === "signed_out" ? (
        <SignIn state={session} />
      ) : (
        <main id="main">
          <h1 tabIndex={-1} ref={heading}>{title}</h1>
          {found ? (
            // Keyed by the path: another run's page is a fresh page, not the
            // last one's state (its charts, its log) under a new id.
            <found.page.component key={path} params={found.params} />
          ) : (
            <p>{t("web.notfound.text")}</p>
          )}
        </main>
      )}
    </>
  );
}
