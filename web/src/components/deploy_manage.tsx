// The actions on a deployment's detail: with role manage (or as its owner)
// scale it to N replicas
// (PATCH /api/v1/deployments/{name} {replicas}) or let it autoscale
// (PATCH {autoscale: {min, max, target}}; the two replace each other), and
// its keys, with role use one's own, with manage every one (GET/POST
// /deployments/{name}/keys, DELETE …/keys/{key}): a new key is shown once,
// when it is made, and works at once (the daemon answers only when the front
// has it); a revoked one is refused from the next request.
import { Fragment } from "preact";
import { useState } from "preact/hooks";
import { api, apiAction, ApiError } from "../api";
import { ErrorBox, ShownOnce } from "./status";
import { Table, type Column } from "./table";
import { useApi } from "../hooks";
import { time } from "../format";
import { t } from "../i18n";

interface DeployKey {
  id: string;
  name: string;
  created_at_ms: number;
  expires_at_ms: number | null;
  last_used_at_ms: number | null;
}

export interface Autoscale {
  min?: number;
  max: number;
  target?: number;
}

// A whole number where the text is one; else the text, for the daemon to name.
function countOr(s: string): number | string {
  return /^\d+(\.\d+)?$/.test(s.trim()) ? Number(s.trim()) : s.trim();
}

// `name`: the deployment's ref (or name) as the API's paths take it; `scale`:
// the caller may scale it (role manage or the owner).
export function DeployManage({ name, replicas, autoscale, onChanged, scale: canScale }:
  { name: string; replicas: number; autoscale?: Autoscale; onChanged: () => void; scale: boolean }) {
  const path = `/deployments/${encodeURIComponent(name)}`;
  const keys = useApi<{ keys: DeployKey[] }>(`${path}/keys`, 0);
  const [error, setError] = useState<ApiError | null>(null);
  const [count, setCount] = useState(String(replicas));
  const [range, setRange] = useState<Record<string, string>>({
    min: String(autoscale?.min ?? ""), max: String(autoscale?.max ?? ""), target: String(autoscale?.target ?? ""),
  });
  const [made, setMade] = useState("");
  const run = (call: () => Promise<unknown>, done: () => void) => apiAction(call, done, setError);
  const scale = (e: Event) => {
    e.preventDefault();
    void run(() => api(path, { method: "PATCH", body: { replicas: countOr(count) } }), onChanged);
  };
  const setAutoscale = (e: Event) => {
    e.preventDefault();
    const body: Record<string, number | string> = {};
    for (const k of ["min", "max", "target"]) if (range[k]?.trim()) body[k] = countOr(range[k]);
    void run(() => api(path, { method: "PATCH", body: { autoscale: body } }), onChanged);
  };
  const create = () =>
    run(async () => setMade((await api<{ key: string }>(`${path}/keys`, { method: "POST", body: {} })).key),
        keys.reload);
  const revoke = (id: string) =>
    run(() => api(`${path}/keys/${encodeURIComponent(id)}`, { method: "DELETE" }), keys.reload);
  const columns: Column<DeployKey>[] = [
    { id: "id", label: "web.col.id", cell: (k) => <code>{k.id}</code> },
    { id: "created", label: "web.col.created", cell: (k) => time(k.created_at_ms) },
    { id: "expires", label: "web.token.expires", cell: (k) => (k.expires_at_ms ? time(k.expires_at_ms) : t("web.token.never")) },
    { id: "used", label: "web.token.last_used", cell: (k) => (k.last_used_at_ms ? time(k.last_used_at_ms) : "—") },
    { id: "act", label: "web.col.actions",
      cell: (k) => (
        <button type="button" class="small" data-revoke-key={k.id} onClick={() => revoke(k.id)}
                aria-label={t("web.token.revoke_named", { id: k.id })}>{t("web.token.revoke")}</button>
      ) },
  ];
  return (
    <div class="deploy-manage">
      <ErrorBox error={error ?? keys.error} />
      {canScale ? (<>
      <form class="inline-form" onSubmit={scale} aria-labelledby="scale-title">
        <h3 id="scale-title">{t("web.deploy.scale_title")}</h3>
        <label for="deploy-replicas">{t("web.deploy.replicas_wanted")}</label>
        <input type="text" inputMode="numeric" id="deploy-replicas" value={count}
               onInput={(e) => setCount((e.currentTarget as HTMLInputElement).value)} />
        <button type="submit" class="small" data-scale="1">{t("web.deploy.scale")}</button>
        <small class="muted">{t("web.deploy.scale_hint")}</small>
      </form>
      <form class="inline-form" onSubmit={setAutoscale} aria-labelledby="autoscale-title">
        <h3 id="autoscale-title">{t("web.deploy.autoscale_title")}</h3>
        {["min", "max", "target"].map((k) => (
          <Fragment key={k}>
            <label for={`deploy-${k}`}>{t(`web.deploy.${k}`)}</label>
            <input type="text" inputMode={k === "target" ? "decimal" : "numeric"} id={`deploy-${k}`}
                   value={range[k]} onInput={(e) => setRange({ ...range, [k]: (e.currentTarget as HTMLInputElement).value })} />
          </Fragment>
        ))}
        <button type="submit" class="small" data-autoscale="1">{t("web.deploy.autoscale_set")}</button>
      </form>
      </>) : null}
      <h3>{t("web.deploy.keys")}</h3>
      <Table caption="web.deploy.keys" columns={columns} rows={keys.data?.keys ?? []} rowKey={(k) => k.id}
             empty={keys.loading ? "web.loading" : "web.deploy.no_keys"} />
      <button type="button" class="small" data-create-key="1" onClick={create}>{t("web.deploy.create_key")}</button>
      <ShownOnce note="web.deploy.key_shown_once" value={made} mark="new-key" />
    </div>
  );
}
