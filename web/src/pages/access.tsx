// Access: the signed-in user's API tokens (GET/POST /api/v1/tokens, DELETE
// /tokens/{id}) and secrets (GET/POST /api/v1/secrets, DELETE /secrets/{name}).
// A new token is shown once, when it is made, and never again (the daemon
// keeps only its hash); a secret's value is typed into a password field,
// sent, and cleared: no page ever shows it (the API has no way to read it).
import { useState } from "preact/hooks";
import { api, apiAction as act, ApiError } from "../api";
import { ErrorBox, Section, ShownOnce } from "../components/status";
import { Table, type Column } from "../components/table";
import { useApi } from "../hooks";
import { time } from "../format";
import { t } from "../i18n";
import type { Page } from "../page";

interface Token {
  id: string;
  name: string;
  created_at_ms: number;
  expires_at_ms: number | null;
  last_used_at_ms: number | null;
  expired: boolean;
}

interface Secret {
  name: string;
  created_at_ms: number;
  updated_at_ms: number;
}

function Tokens() {
  const r = useApi<{ tokens: Token[] }>("/tokens", 0);
  const [error, setError] = useState<ApiError | null>(null);
  const [name, setName] = useState("");
  const [expires, setExpires] = useState("");
  const [made, setMade] = useState("");  // the whole token, this once
  const create = async (e: Event) => {
    e.preventDefault();
    try {
      const body: Record<string, string> = {};
      if (name.trim()) body.name = name.trim();
      if (expires.trim()) body.expires = expires.trim();
      const tok = await api<{ token: string }>("/tokens", { method: "POST", body });
      setMade(tok.token);
      setName("");
      setExpires("");
      setError(null);
      r.reload();
    } catch (err) {
      setError(err instanceof ApiError ? err : null);
    }
  };
  const revoke = (id: string) =>
    act(() => api(`/tokens/${encodeURIComponent(id)}`, { method: "DELETE" }), r.reload, setError);
  const columns: Column<Token>[] = [
    { id: "id", label: "web.col.id", cell: (x) => <code>{x.id}</code> },
    { id: "name", label: "web.col.name", cell: (x) => x.name || "—" },
    { id: "created", label: "web.col.created", cell: (x) => time(x.created_at_ms) },
    { id: "expires", label: "web.token.expires",
      cell: (x) => (x.expires_at_ms ? time(x.expires_at_ms) : t("web.token.never")) },
    { id: "used", label: "web.token.last_used", cell: (x) => (x.last_used_at_ms ? time(x.last_used_at_ms) : "—") },
    { id: "act", label: "web.col.actions",
      cell: (x) => (
        <button type="button" class="small" data-revoke={x.id} onClick={() => revoke(x.id)}
                aria-label={t("web.token.revoke_named", { id: x.id })}>{t("web.token.revoke")}</button>
      ) },
  ];
  return (
    <Section title="web.token.title" id="tokens">
      <ErrorBox error={r.error ?? error} />
      <Table caption="web.token.title" columns={columns} rows={r.data?.tokens ?? []} rowKey={(x) => x.id}
             empty={r.loading ? "web.loading" : "web.token.none"} />
      <form class="run-form" onSubmit={create} aria-labelledby="token-form-title">
        <h3 id="token-form-title">{t("web.token.create_title")}</h3>
        <div class="fields">
          <div class="field">
            <label for="token-name">{t("web.col.name")}</label>
            <input type="text" id="token-name" value={name} onInput={(e) => setName((e.currentTarget as HTMLInputElement).value)} />
          </div>
          <div class="field">
            <label for="token-expires">{t("web.token.expires")}</label>
            <input type="text" id="token-expires" value={expires} aria-describedby="token-expires-hint"
                   onInput={(e) => setExpires((e.currentTarget as HTMLInputElement).value)} />
            <small id="token-expires-hint" class="muted">{t("web.token.expires_hint")}</small>
          </div>
        </div>
        <button type="submit" class="primary" data-create-token="1">{t("web.token.create")}</button>
      </form>
      <ShownOnce note="web.token.shown_once" value={made} mark="new-token" />
    </Section>
  );
}

function Secrets() {
  const r = useApi<{ secrets: Secret[] }>("/secrets", 0);
  const [error, setError] = useState<ApiError | null>(null);
  const [name, setName] = useState("");
  const [value, setValue] = useState("");
  const [saved, setSaved] = useState("");
  const save = async (e: Event) => {
    e.preventDefault();
    try {
      await api("/secrets", { method: "POST", body: { name: name.trim(), value } });
      setSaved(name.trim());
      setName("");
      setValue("");  // never kept on the page
      setError(null);
      r.reload();
    } catch (err) {
      setValue("");
      setError(err instanceof ApiError ? err : null);
    }
  };
  const remove = (n: string) =>
    act(() => api(`/secrets/${encodeURIComponent(n)}`, { method: "DELETE" }), r.reload, setError);
  const columns: Column<Secret>[] = [
    { id: "name", label: "web.col.name", cell: (x) => <code>{x.name}</code> },
    { id: "updated", label: "web.secret.updated", cell: (x) => time(x.updated_at_ms) },
    { id: "act", label: "web.col.actions",
      cell: (x) => (
        <button type="button" class="small" data-remove-secret={x.name} onClick={() => remove(x.name)}
                aria-label={t("web.secret.remove_named", { name: x.name })}>{t("web.secret.remove")}</button>
      ) },
  ];
  return (
    <Section title="web.secret.title" id="secrets">
      <ErrorBox error={r.error ?? error} />
      <Table caption="web.secret.title" columns={columns} rows={r.data?.secrets ?? []} rowKey={(x) => x.name}
             empty={r.loading ? "web.loading" : "web.secret.none"} />
      <form class="run-form" onSubmit={save} aria-labelledby="secret-form-title" autocomplete="off">
        <h3 id="secret-form-title">{t("web.secret.set_title")}</h3>
        <div class="fields">
          <div class="field">
            <label for="secret-name">{t("web.col.name")}</label>
            <input type="text" id="secret-name" value={name} onInput={(e) => setName((e.currentTarget as HTMLInputElement).value)} />
          </div>
          <div class="field">
            <label for="secret-value">{t("web.secret.value")}</label>
            <input type="password" id="secret-value" value={value} autocomplete="new-password" aria-describedby="secret-value-hint"
                   onInput={(e) => setValue((e.currentTarget as HTMLInputElement).value)} />
            <small id="secret-value-hint" class="muted">{t("web.secret.value_hint")}</small>
          </div>
        </div>
        <button type="submit" class="primary" data-set-secret="1">{t("web.secret.set")}</button>
      </form>
      {saved ? <p class="notice" role="status" data-secret-saved={saved}>{t("web.secret.saved", { name: saved })}</p> : null}
    </Section>
  );
}

function Access() {
  return (
    <>
      <Tokens />
      <Secrets />
    </>
  );
}

const page: Page = { path: "/access", title: "web.access.title", nav: "web.nav.access", component: Access };
export default page;
