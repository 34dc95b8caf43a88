// Deployments: the caller's served models and commands (GET /api/v1/deployments),
// and for the one chosen (?name=NAME) what GET /api/v1/deployments/{name}
// says: URL and curl line, health, replicas (state, healthy, in flight), the
// traffic split, requests per second and latency, and its events.
import { DeployManage } from "../components/deploy_manage";
import { ErrorBox, Loading, Section, StateBadge } from "../components/status";
import { Table, type Column } from "../components/table";
import { useApi } from "../hooks";
import { time } from "../format";
import { has, langStore, t, useLang } from "../i18n";
import type { Page } from "../page";
import { Link, setQuery, useLocation } from "../router";

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
  owner: string;
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

function Detail({ name }: { name: string }) {
  useLang();
  const d = useApi<Deployment>(`/deployments/${encodeURIComponent(name)}`, 3000);
  const ev = useApi<{ events: DeployEvent[] }>(`/deployments/${encodeURIComponent(name)}/events`, 5000);
  const x = d.data;
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
    { id: "reason", label: "web.run.reason", cell: (r) => bi(r.reason_text, r.reason) || "—" },
  ];
  return (
    <Section title="web.deploy.detail" id="deploy-detail">
      <ErrorBox error={d.error} />
      <Loading when={d.loading && !x}>
        {x ? (
          <>
            <dl class="facts" data-deployment={x.name}>
              <dt>{t("web.col.name")}</dt><dd>{x.name}</dd>
              <dt>{t("web.deploy.serves")}</dt><dd><code>{x.model || x.command?.join(" ") || "—"}</code></dd>
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
            <DeployManage name={x.name} replicas={x.replicas?.wanted ?? 1} onChanged={d.reload} />
            <h3>{t("web.deploy.replica_list")}</h3>
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
          </>
        ) : null}
      </Loading>
    </Section>
  );
}

function Deployments() {
  const loc = useLocation();
  const chosen = loc.query.get("name") ?? "";
  const d = useApi<{ deployments: Deployment[] }>("/deployments", 5000);
  const columns: Column<Deployment>[] = [
    { id: "name", label: "web.col.name",
      cell: (x) => (
        <button type="button" class="link" aria-pressed={x.name === chosen} data-deployment={x.name}
                onClick={() => setQuery({ name: x.name === chosen ? undefined : x.name })}>{x.name}</button>
      ) },
    { id: "owner", label: "web.col.user", cell: (x) => x.owner },
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
      <ErrorBox error={d.error} />
      <Table caption="web.deployments.title" columns={columns} rows={d.data?.deployments ?? []}
             rowKey={(x) => x.name} empty={d.loading ? "web.loading" : "web.deploy.none"} />
      {chosen ? <Detail name={chosen} /> : null}
    </>
  );
}

const page: Page = {
  path: "/deployments", title: "web.deployments.title", nav: "web.nav.deployments", component: Deployments,
};
export default page;
