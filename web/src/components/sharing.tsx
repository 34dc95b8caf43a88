// The "Sharing" section of a run's (a notebook's), a deployment's and a
// model's page (docs/sharing.md), for its owner (an admin too) and, read-only,
// a user with role manage on it (the API lets both read the list): whom it is
// shared with (GET /api/v1/shares?target=T: grantee, user or group, role, by
// whom, since when); a form that shares it with a user or a group (POST
// /api/v1/shares; sharing again changes the role) and Remove per grant
// (DELETE /api/v1/shares?target=T&user=U or &group=G, refused from the
// grantee's next request), the owner's alone. The daemon's refusal is shown at the field it is about.
import { useState } from "preact/hooks";
import { api, apiAction, ApiError, query } from "../api";
import { useApi } from "../hooks";
import { time } from "../format";
import { t, useLang } from "../i18n";
import { roleWord } from "./shared";
import { ErrorBox, Section } from "./status";
import { Table, type Column } from "./table";

export interface Share {
  kind: string;
  object: string;
  user?: string;
  group?: string;
  role: string;
  shared_by: string;
  created_at_ms: number;
}

export const ROLES = ["view", "use", "manage"];

// The form's field an error is about ("" for the box above the form).
const FIELD_OF_ID: Record<string, string> = {
  "share.unknown_user": "grantee",
  "share.unknown_group": "grantee",
  "share.self": "grantee",
  "share.no_grantee": "grantee",
  "share.bad_role": "role",
};

// A form field with its label, and the daemon's error under it when the error
// is about it (aria-invalid and aria-describedby say so to a screen reader).
export function FormField({ id, label, error, children }:
  { id: string; label: string; error: ApiError | null; children: (aria: Record<string, string | undefined>) => preact.ComponentChildren }) {
  const bad = !!error;
  return (
    <div class={`field field-${id}${bad ? " invalid" : ""}`}>
      <label for={id}>{t(label)}</label>
      {children({ "aria-invalid": bad ? "true" : undefined, "aria-describedby": bad ? `${id}-error` : undefined })}
      {bad ? <small id={`${id}-error`} class="error" role="alert" data-error-id={error.id}>{error.text()}</small> : null}
    </div>
  );
}

function grantee(s: Share): string {
  return s.user ?? s.group ?? "";
}

// `readOnly`: the caller manages the object but does not own it — the list
// without the form or Remove.
export function Sharing({ target, readOnly = false }: { target: string; readOnly?: boolean }) {
  useLang();
  const path = "/shares" + query({ target });
  const list = useApi<{ shares: Share[] }>(path, 10_000);
  const [kind, setKind] = useState<"user" | "group">("user");
  const [name, setName] = useState("");
  const [role, setRole] = useState("view");
  const [error, setError] = useState<ApiError | null>(null);
  const [busy, setBusy] = useState(false);
  const at = error ? FIELD_OF_ID[error.id] ?? "" : "";
  const share = async (e: Event) => {
    e.preventDefault();
    setBusy(true);
    await apiAction(() => api("/shares", { method: "POST", body: { target, [kind]: name.trim(), role } }),
                    () => { setName(""); list.reload(); }, setError);
    setBusy(false);
  };
  const remove = (s: Share) =>
    apiAction(() => api("/shares" + query({ target, [s.user !== undefined ? "user" : "group"]: grantee(s) }),
                        { method: "DELETE" }), list.reload, setError);
  const columns: Column<Share>[] = [
    { id: "grantee", label: "web.sharing.grantee", cell: (s) => grantee(s) },
    { id: "kind", label: "web.sharing.kind", cell: (s) => t(s.user !== undefined ? "web.sharing.kind_user" : "web.sharing.kind_group") },
    { id: "role", label: "web.sharing.role", cell: (s) => <span data-role={s.role}>{roleWord(s.role)}</span> },
    { id: "by", label: "web.sharing.by", cell: (s) => s.shared_by || "—" },
    { id: "since", label: "web.sharing.since", cell: (s) => time(s.created_at_ms) },
  ];
  if (!readOnly) columns.push(
    { id: "act", label: "web.col.actions",
      cell: (s) => (
        <button type="button" class="small" data-unshare={grantee(s)} onClick={() => void remove(s)}
                aria-label={t("web.sharing.remove_named", { grantee: grantee(s) })}>{t("web.sharing.remove")}</button>
      ) });
  return (
    <Section title="web.sharing.title" id="sharing">
      <div class="sharing" data-sharing={target} data-read-only={readOnly ? "1" : "0"}>
        <p class="muted">{t(readOnly ? "web.sharing.read_only" : "web.sharing.hint")}</p>
        <ErrorBox error={list.error} />
        {error && !at ? <ErrorBox error={error} /> : null}
        <Table caption="web.sharing.title" columns={columns} rows={list.data?.shares ?? []}
               rowKey={(s) => `${s.user !== undefined ? "user" : "group"}:${grantee(s)}`}
               empty={list.loading ? "web.loading" : "web.sharing.none"} />
        {readOnly ? null : <form class="run-form share-form" onSubmit={share} noValidate aria-labelledby="share-form-title">
          <h3 id="share-form-title">{t("web.sharing.add_title")}</h3>
          <div class="fields">
            <fieldset class="field field-kind">
              <legend>{t("web.sharing.kind")}</legend>
              <label><input type="radio" name="share-kind" id="share-kind-user" checked={kind === "user"}
                            onChange={() => setKind("user")} /> {t("web.sharing.kind_user")}</label>
              <label><input type="radio" name="share-kind" id="share-kind-group" checked={kind === "group"}
                            onChange={() => setKind("group")} /> {t("web.sharing.kind_group")}</label>
            </fieldset>
            <FormField id="share-grantee" label="web.sharing.name" error={at === "grantee" ? error : null}>
              {(aria) => <input type="text" id="share-grantee" value={name} autocomplete="off" {...aria}
                                onInput={(e) => setName((e.currentTarget as HTMLInputElement).value)} />}
            </FormField>
            <FormField id="share-role" label="web.sharing.role" error={at === "role" ? error : null}>
              {(aria) => (
                <select id="share-role" value={role} {...aria}
                        onInput={(e) => setRole((e.currentTarget as HTMLSelectElement).value)}>
                  {ROLES.map((r) => <option value={r} key={r}>{roleWord(r)}</option>)}
                </select>
              )}
            </FormField>
          </div>
          <button type="submit" class="primary" disabled={busy} data-share="1">{t("web.sharing.share")}</button>
        </form>}
      </div>
    </Section>
  );
}
