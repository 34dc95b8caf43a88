// Deployments: the caller's served models and commands (GET /api/v1/deployments),
// the form that creates one of a model version, and for the one chosen
// (?name=NAME) what GET /api/v1/deployments/{name} says: URL and curl line,
// health, what serves and what it rolls out to (or rolled back from, and why),
// its scaling, replicas (state, healthy, in flight, why one failed), the
// traffic split, requests per second and latency, and its events; with the
// actions the caller's role allows (docs/sharing.md): scale, autoscale, roll
// out and roll back with manage, keys with use (one's own) or manage (all),
// sharing for the owner alone (whom it is shared with, read-only, with
// manage). A deployment is named in paths by its ref where the API gives one
// (components/shared.tsx).
import { useState } from "preact/hooks";
import { DeployForm } from "../components/deploy_form";
import { DeployManage, type Autoscale } from "../components/deploy_manage";
import { DeployRevisionBack, DeployRollout } from "../components/deploy_rollout";
import { atLeast, refOf, roleOn, SharedMark, shownName, type SharedInfo } from "../components/shared";
import { Sharing } from "../components/sharing";
import { ErrorBox, Loading, Section, StateBadge } from "../components/status";
import { Table, type Column } from "../components/table";
import { useApi } from "../hooks";
import { time } from "../format";
import { has, langStore, t, useLang } from "../i18n";
import type { Page } from "../page";
import { Link, setQuery, useLocation } from "../router";
import { currentUser } from "../session";

interface Replica {
  run: string;
  name?: string;
  version?: string;
  state: string;
  healthy: boolean;
  draining?: boolean;
  gpus?: number[];
  reason?: string;
  reason_text?: { en?: string; zh?: string };  // the reason in both languages
  in_flight?: number;
  requests?: number;
  errors?: number;
}

interface Deployment {
  name: string;
  ref?: string;                 // "owner/name", unique machine-wide (name is unique per owner)
  owner: string;
  shared?: SharedInfo;          // shared with the caller: their role, by whom
  model?: string;
  command?: string[];
  version: string;
  health: string;
  reason?: string;
  reason_text?: { en?: string; zh?: string };  // the reason in both languages
  url: string;
  curl?: string;
  routed?: boolean;
  traffic?: Record<string, number>;
  replicas: { wanted: number; ready: number; list?: Replica[] };
  wanted?: string;                                  // the version the spec names now
  rolled_back?: { version: string; reason: string };  // that version, rolled back by the daemon
  spec?: { replicas?: number; autoscale?: Autoscale };
  requests?: number;
  errors?: number;
  in_flight?: number;
  rps?: number;
  p50_ms?: number | null;
  p99_ms?: number | null;
  created_at_ms?: number;
}

interface DeployEvent {
  id: number;
  ts_ms: number;
  level: string;
  msg_id?: string;
  args?: Record<string, string>;
  message: string;
  text?: { en?: string; zh?: string };  // the message in both languages
}

// A daemon's text in the reader's language ({en, zh}), else its English.
function bi(b: { en?: string; zh?: string } | undefined, fallback = ""): string {
  return (b ? (langStore.get() === "zh" ? b.zh : b.en) || b.en : "") || fallback;
}

function health(h: string) {
  return has(`web.deploy.health.${h}`) ? t(`web.deploy.health.${h}`) : h || "—";
}

function num(v: number | null | undefined, digits = 1) {
  return v === null || v === undefined ? "—" : String(Math.round(v * 10 ** digits) / 10 ** digits);
}

// How many replicas it keeps: a fixed count, or autoscaling's range and target.
function scaling(x: Deployment): string {
  const a = x.spec?.autoscale;
  if (a) return t("web.deploy.scaling_auto", { min: a.min ?? 1, max: a.max, target: a.target ?? 2 });
  return t("web.deploy.scaling_fixed", { n: x.spec?.replicas ?? x.replicas?.wanted ?? 1 });
}

// A replica's end as the daemon wrote it (its run's reason, then ": " and the
// last line it printed) in the reader's language: the reason part from the
// replica that has it, the printed line as it is.
function localReason(reason: string, list: Replica[]): string {
  for (const r of list) {
    if (r.reason && (reason === r.reason || reason.startsWith(r.reason + ": "))) {
      return bi(r.reason_text, r.reason) + reason.slice(r.reason.length);
    }
  }
  return has(`web.state.${reason}`) ? t(`web.state.${reason}`) : reason;
}

// Why the daemon rolled `version` back, in the reader's language: its event
// (deploy.rolled_back: a new replica ended before it was ready, with that
// replica's end; deploy.rolled_back_not_ready: not ready in time), else the
// reason the deployment carries.
export function rollbackReason(version: string, reason: string, events: DeployEvent[], list: Replica[]): string {
  const e = [...events].reverse().find((x) => x.args?.version === version &&
    (x.msg_id === "deploy.rolled_back" || x.msg_id === "deploy.rolled_back_not_ready"));
  if (e?.msg_id === "deploy.rolled_back_not_ready" && e.args?.duration) {
    return t("web.deploy.rolled_back_not_ready", { duration: e.args.duration });
  }
  return localReason(e?.args?.reason || reason, list);
}

// What serves, and what the deployment wants instead: a rollout under way, or
// a version the daemon rolled back (with why).
function Serving({ x, events }: { x: Deployment; events: DeployEvent[] }) {
  return (
    <dd data-serving={x.version}>
      <code>{x.version || "—"}</code>{" "}
      {x.rolled_back ? (
        <span class="error" data-rolled-back={x.rolled_back.version}>
          {t("web.deploy.rolled_back", {
            version: x.rolled_back.version,
            reason: rollbackReason(x.rolled_back.version, x.rolled_back.reason, events, x.replicas?.list ?? []),
          })}
        </span>
      ) : x.wanted && x.wanted !== x.version ? (
        <span data-rolling-to={x.wanted}>{t("web.deploy.rolling_to", { version: x.wanted })}</span>
      ) : null}
    </dd>
  );
}

// Why a replica ended, in the reader's language: its run's reason, and the
// last line it printed when it failed, which the deployment's event of its end
// adds (deploy.replica_ended, deploy.replica_crashed: "exited with code 2: …").
function whyEnded(r: Replica, events: DeployEvent[]): string {
  const why = bi(r.reason_text, r.reason);
  const ended = [...events].reverse().find((e) => e.args?.run === r.run &&
    (e.msg_id === "deploy.replica_ended" || e.msg_id === "deploy.replica_crashed"));
  const full = ended?.args?.reason ?? "";
  return r.reason && full.startsWith(r.reason + ": ") ? why + full.slice(r.reason.length) : why;
}

// The last replica that failed, and why.
function FailedReplica({ list, events }: { list: Replica[]; events: DeployEvent[] }) {
  const failed = list.filter((r) => r.state === "failed");
  const r = failed[failed.length - 1];
  if (!r) return null;
  return (
    <p class="error" data-replica-failed={r.run}>
      {t("web.deploy.replica_failed", { run: r.run, version: r.version || "—", reason: whyEnded(r, events) || "—" })}
    </p>
  );
}

function Detail({ name }: { name: string }) {
  useLang();
  const d = useApi<Deployment>(`/deployments/${encodeURIComponent(name)}`, 3000);
  const ev = useApi<{ events: DeployEvent[] }>(`/deployments/${encodeURIComponent(name)}/events`, 5000);
  const x = d.data;
  const role = x ? roleOn(x) : "view";
  const events = ev.data?.events ?? [];
  const replicas: Column<Replica>[] = [
    { id: "run", label: "web.col.id", cell: (r) => <Link href={`/runs/${r.run}`}><code>{r.run}</code></Link> },
    { id: "version", label: "web.deploy.version", cell: (r) => r.version || "—" },
    // A replica is a run: its state is a run's.
    { id: "state", label: "web.col.state", cell: (r) => <StateBadge state={r.state} /> },
    { id: "healthy", label: "web.deploy.healthy", cell: (r) => t(r.healthy ? "web.yes" : "web.no") },
    { id: "in_flight", label: "web.deploy.in_flight", numeric: true, cell: (r) => r.in_flight ?? 0 },
    { id: "requests", label: "web.deploy.requests", numeric: true, cell: (r) => r.requests ?? 0 },
    { id: "errors", label: "web.deploy.errors", numeric: true, cell: (r) => r.errors ?? 0 },
    { id: "gpus", label: "web.col.gpus", cell: (r) => r.gpus?.join(",") || "—" },
    { id: "reason", label: "web.run.reason", cell: (r) => whyEnded(r, events) || "—" },
  ];
  return (
    <Section title="web.deploy.detail" id="deploy-detail">
      <ErrorBox error={d.error} />
      <Loading when={d.loading && !x}>
        {x ? (
          <>
            <dl class="facts" data-deployment={x.name}>
              <dt>{t("web.col.name")}</dt><dd>{shownName(x, currentUser())}</dd>
              <dt>{t("web.col.user")}</dt><dd data-owner={x.owner}>{x.owner}<SharedMark shared={x.shared} /></dd>
              <dt>{t("web.deploy.serves")}</dt><dd><code>{x.model || x.command?.join(" ") || "—"}</code></dd>
              <dt>{t("web.deploy.version")}</dt><Serving x={x} events={events} />
              <dt>{t("web.deploy.scaling")}</dt><dd data-scaling={x.spec?.autoscale ? "auto" : "fixed"}>{scaling(x)}</dd>
              <dt>{t("web.deploy.health")}</dt>
              <dd><span class={`badge health-${x.health}`}>{health(x.health)}</span> {x.reason ? <span>{bi(x.reason_text, x.reason)}</span> : null}</dd>
              <dt>{t("web.deploy.url")}</dt><dd>{x.url ? <code>{x.url}</code> : "—"}</dd>
              {x.curl ? (<><dt>{t("web.deploy.curl")}</dt><dd><code class="pre" data-curl="1">{x.curl}</code></dd></>) : null}
              <dt>{t("web.deploy.traffic")}</dt>
              <dd>{Object.entries(x.traffic ?? {}).map(([v, p]) => `${v}: ${p}%`).join(", ") || "—"}</dd>
              <dt>{t("web.deploy.load")}</dt>
              <dd>{t("web.deploy.load_value", { rps: num(x.rps), p50: num(x.p50_ms), p99: num(x.p99_ms) })}</dd>
              <dt>{t("web.deploy.totals")}</dt>
              <dd>{t("web.deploy.totals_value", { requests: x.requests ?? 0, errors: x.errors ?? 0, in_flight: x.in_flight ?? 0 })}</dd>
            </dl>
            {atLeast(role, "use") ? (
              <DeployManage key={refOf(x)} name={refOf(x)} replicas={x.spec?.replicas ?? x.replicas?.wanted ?? 1}
                            autoscale={x.spec?.autoscale} onChanged={d.reload} scale={atLeast(role, "manage")} />
            ) : null}
            {x.model && atLeast(role, "manage") ? (
              <DeployRollout key={refOf(x)} name={refOf(x)} state={x} events={events}
                             onChanged={() => { d.reload(); ev.reload(); }} />
            ) : null}
            {!x.model && atLeast(role, "manage") ? (
              <DeployRevisionBack key={refOf(x)} name={refOf(x)} state={x} events={events}
                                  onChanged={() => { d.reload(); ev.reload(); }} />
            ) : null}
            <h3>{t("web.deploy.replica_list")}</h3>
            <FailedReplica list={x.replicas?.list ?? []} events={events} />
            <Table caption="web.deploy.replica_list" columns={replicas} rows={x.replicas?.list ?? []}
                   rowKey={(r) => r.run} empty="web.deploy.no_replicas" />
            <h3>{t("web.deploy.events")}</h3>
            <ErrorBox error={ev.error} />
            <ol class="timeline">
              {[...(ev.data?.events ?? [])].reverse().slice(0, 100).map((e) => (
                <li key={e.id} class={`ev ev-${e.level}`} data-event={e.level}>
                  <time>{time(e.ts_ms)}</time>
                  <span class={`badge ev-type ev-${e.level}`}>{has(`web.event_type.${e.level}`) ? t(`web.event_type.${e.level}`) : e.level}</span>
                  <span>{bi(e.text, e.message)}</span>
                </li>
              ))}
            </ol>
            {atLeast(role, "manage") ? (
              <Sharing key={refOf(x)} target={`deployment:${refOf(x)}`} readOnly={role !== "owner"} />
            ) : null}
          </>
        ) : null}
      </Loading>
    </Section>
  );
}

function Deployments() {
  useLang();
  const loc = useLocation();
  const chosen = loc.query.get("name") ?? "";
  const me = currentUser();
  const d = useApi<{ deployments: Deployment[] }>("/deployments", 5000);
  const [formOpen, setFormOpen] = useState(false);
  const [created, setCreated] = useState("");
  const columns: Column<Deployment>[] = [
    { id: "name", label: "web.col.name",
      cell: (x) => (
        <button type="button" class="link" aria-pressed={refOf(x) === chosen} data-deployment={refOf(x)}
                onClick={() => setQuery({ name: refOf(x) === chosen ? undefined : refOf(x) })}>{shownName(x, me)}</button>
      ) },
    { id: "owner", label: "web.col.user", cell: (x) => <>{x.owner}<SharedMark shared={x.shared} /></> },
    { id: "version", label: "web.deploy.version", cell: (x) => x.version || "—" },
    { id: "health", label: "web.deploy.health", cell: (x) => health(x.health) },
    { id: "replicas", label: "web.deploy.replicas", numeric: true,
      cell: (x) => `${x.replicas?.ready ?? 0}/${x.replicas?.wanted ?? 0}` },
    { id: "rps", label: "web.deploy.rps", numeric: true, cell: (x) => num(x.rps) },
    { id: "p99", label: "web.deploy.p99", numeric: true, cell: (x) => num(x.p99_ms) },
    { id: "url", label: "web.deploy.url", cell: (x) => (x.url ? <code>{x.url}</code> : "—") },
  ];
  return (
    <>
      <div class="toolbar">
        <button type="button" class="primary" aria-expanded={formOpen} aria-controls="deploy-form"
                data-new-deployment="1" onClick={() => setFormOpen(!formOpen)}>
          {t("web.deploy.new")}
        </button>
      </div>
      {created && created === chosen ? <p class="notice" role="status" data-created={created}>{t("web.deploy.created", { name: created })}</p> : null}
      {formOpen ? (
        <div id="deploy-form">
          <DeployForm onCreated={(n) => {
            setFormOpen(false);
            setCreated(n);
            d.reload();
            setQuery({ name: n });
          }} />
        </div>
      ) : null}
      <ErrorBox error={d.error} />
      <Table caption="web.deployments.title" columns={columns} rows={d.data?.deployments ?? []}
             rowKey={(x) => refOf(x)} empty={d.loading ? "web.loading" : "web.deploy.none"} />
      {chosen ? <Detail key={chosen} name={chosen} /> : null}
    </>
  );
}

const page: Page = {
  path: "/deployments", title: "web.deployments.title", nav: "web.nav.deployments", component: Deployments,
};
export default page;
