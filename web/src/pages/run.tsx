// One run: GET /api/v1/runs/{run} — what it asked for (its spec, as its owner
// sees it), its state timeline (the run's events, live), the diagnosis of a
// failed run, its log (virtualized, live), its GPU/CPU/memory charts, its
// checkpoints with a restore form, its ports and notebook, and for its owner
// whom it is shared with (components/sharing.tsx; read-only with role
// manage). A run shared with the caller says so (Stop with role manage);
// another user's run not shared is the API's 403, shown as it says.
import { Fragment } from "preact";
import { useEffect, useState } from "preact/hooks";
import { api, ApiError } from "../api";
import { Checkpoints } from "../components/checkpoints";
import { RunCharts } from "../components/charts";
import { LogViewer } from "../components/log_viewer";
import { Diagnosis, Timeline, useRunEvents, type RunEvent } from "../components/run_events";
import { Ports, type NotebookInfo, type Port } from "../components/run_ports";
import { atLeast, roleOn, SharedMark } from "../components/shared";
import { Sharing } from "../components/sharing";
import { ErrorBox, Loading, Section, StateBadge } from "../components/status";
import { useApi } from "../hooks";
import { has, langStore, t } from "../i18n";
import { bytes, time, word } from "../format";
import type { Page, PageProps } from "../page";
import { Link } from "../router";
import { isActive, isStoppable, poolOf, type Run } from "../types";

type RunDetail = Run & {
  events?: RunEvent[];
  spec?: Record<string, unknown>;
  ports?: Port[];
  url?: string;
  notebook?: NotebookInfo;
  attempt?: number;
  signal?: number | null;
  oom_killed?: boolean;
};

const POLL_MS = 5000;
const SIZE_FIELDS = new Set(["memory", "shm_size", "shm"]);
const HIDDEN_SPEC = new Set(["type"]);

function specValue(k: string, v: unknown): string {
  if (v === null || v === undefined || v === "") return "—";
  if (SIZE_FIELDS.has(k) && typeof v === "number") return bytes(v);
  if (Array.isArray(v)) return v.map((x) => (typeof x === "object" ? JSON.stringify(x) : String(x))).join(" ");
  if (typeof v === "object") {
    return Object.entries(v as Record<string, unknown>)
      .map(([a, b]) => `${a}=${typeof b === "object" ? JSON.stringify(b) : String(b)}`).join("\n");
  }
  return String(v);
}

function Spec({ spec }: { spec: Record<string, unknown> }) {
  const keys = Object.keys(spec).filter((k) => !HIDDEN_SPEC.has(k)).sort((a, b) =>
    a === "command" ? -1 : b === "command" ? 1 : a.localeCompare(b));
  return (
    <dl class="facts spec">
      {keys.map((k) => (
        <Fragment key={k}>
          {/* The field in the reader's language; its YAML name on hover. */}
          <dt title={k} data-key={k}>{has(`web.spec.${k}`) ? t(`web.spec.${k}`) : <code>{k}</code>}</dt>
          <dd data-spec={k}><code class="pre">{specValue(k, spec[k])}</code></dd>
        </Fragment>
      ))}
    </dl>
  );
}

// A page of its own per run: nothing of one run's state (its log's pages, its
// events, the last answer) is shown for the next one opened.
function RunPage({ params }: PageProps) {
  return <RunDetails key={params.id} id={params.id} />;
}

function RunDetails({ id }: { id: string }) {
  const active = (s: string | undefined) => !!s && (s === "queued" || isActive(s));
  const [ended, setEnded] = useState(false);
  const r = useApi<RunDetail>(`/runs/${encodeURIComponent(id)}`, ended ? 0 : POLL_MS);
  const [stopError, setStopError] = useState<ApiError | null>(null);
  const [checkpointTick, setCheckpointTick] = useState(0);
  const run = r.data;
  const done = !!run && !active(run.state);
  useEffect(() => setEnded(done), [done]);
  const ev = useRunEvents(id, run?.events, (e) => {
    if (e.type === "state" || e.type === "diagnosis") r.reload();
    if (e.type === "checkpoint") setCheckpointTick((n) => n + 1);
  });
  const stop = async () => {
    try {
      await api(`/runs/${encodeURIComponent(id)}/stop`, { method: "POST" });
      setStopError(null);
    } catch (e) {
      setStopError(e instanceof ApiError ? e : null);
    }
    r.reload();
  };
  const spec = (run?.spec ?? {}) as Record<string, unknown>;
  const failed = run?.state === "failed" || run?.state === "lost";
  const live = !!run && active(run.state);
  const role = run ? roleOn(run) : "view";
  return (
    <>
      <p><Link href="/runs">{t("web.run.back")}</Link></p>
      <ErrorBox error={r.error} />
      <ErrorBox error={stopError} />
      <Loading when={r.loading && !run && !r.error}>
        {run ? (
          <>
            {failed ? <Diagnosis list={ev.list} /> : null}
            <dl class="facts" data-run={run.id}>
              <dt>{t("web.col.id")}</dt><dd><code>{run.id}</code></dd>
              <dt>{t("web.col.name")}</dt><dd>{run.name || "—"}</dd>
              <dt>{t("web.col.user")}</dt><dd>{run.user}<SharedMark shared={run.shared} /></dd>
              <dt>{t("web.col.kind")}</dt><dd>{word("kind", run.kind)}</dd>
              <dt>{t("web.col.state")}</dt><dd><StateBadge state={run.state} /></dd>
              {run.reason ? (<><dt>{t("web.run.reason")}</dt><dd>{run.reason_text?.[langStore.get()] || run.reason}</dd></>) : null}
              <dt>{t("web.col.pool")}</dt>
              <dd data-pool={poolOf(run)}>{poolOf(run) === "local" ? t("web.run.pool_local") : poolOf(run) || "—"}</dd>
              {run.handle?.job_id ? (
                <><dt>{t("web.run.job_id")}</dt><dd data-job-id={run.handle.job_id}><code>{run.handle.job_id}</code></dd></>
              ) : null}
              {run.waiting ? (
                <><dt>{t("web.queue.waiting")}</dt>
                  <dd data-waiting-on={run.waiting_on ?? ""}>{run.waiting_text?.[langStore.get()] || run.waiting}</dd></>
              ) : null}
              {run.exit_code !== null && run.exit_code !== undefined ? (
                <><dt>{t("web.run.exit_code")}</dt><dd>{run.exit_code}</dd></>
              ) : null}
              <dt>{t("web.col.gpus")}</dt><dd>{run.gpus.length ? run.gpus.join(",") : String(spec.gpus ?? 0)}</dd>
              <dt>{t("web.col.created")}</dt><dd>{time(run.created_at_ms)}</dd>
              <dt>{t("web.run.started")}</dt><dd>{time(run.started_at_ms)}</dd>
              <dt>{t("web.col.ended")}</dt><dd>{time(run.finished_at_ms)}</dd>
            </dl>
            {atLeast(role, "manage") && isStoppable(run.state) ? (
              <button type="button" class="stop" onClick={stop}>{t("web.runs.stop")}</button>
            ) : null}
            {run.ports?.length || run.notebook ? (
              <Section title="web.run.ports">
                <Ports run={run.id} ports={run.ports ?? []} notebook={run.notebook} active={isActive(run.state)} />
              </Section>
            ) : null}
            <Section title="web.run.log">
              <LogViewer run={run.id} live={live} />
            </Section>
            <Section title="web.run.charts">
              <RunCharts run={run.id} active={live} />
            </Section>
            <Section title="web.run.events">
              <p class="live" data-live={ev.live ? "1" : "0"}>
                {t(ev.live ? "web.run.events_live" : "web.run.events_done")}
              </p>
              <Timeline list={ev.list} />
            </Section>
            {role === "owner" ? (  // its snapshots are the owner's alone (docs/sharing.md)
              <Section title="web.run.checkpoints">
                <Checkpoints run={run.id} events={ev.list} reload={checkpointTick} />
              </Section>
            ) : null}
            <Section title="web.run.spec">
              <Spec spec={spec} />
            </Section>
            {atLeast(role, "manage") ? <Sharing target={`run:${run.id}`} readOnly={role !== "owner"} /> : null}
          </>
        ) : null}
      </Loading>
    </>
  );
}

const page: Page = { path: "/runs/:id", title: "web.run.title", component: RunPage };
export default page;
