// Runs: every run, filtered by state, user and kind, sorted by a column and
// paged by the daemon (GET /api/v1/runs?all=1&state=…&sort=…&offset=…&limit=…);
// refetched, debounced, when GET /api/v1/runs?follow=1 says a run changed.
// The submit form and the stop button act for the signed-in user.
import { useEffect, useState } from "preact/hooks";
import { api, ApiError, events, query } from "../api";
import { Table, type Column } from "../components/table";
import { ErrorBox, StateBadge } from "../components/status";
import { RunForm } from "../components/run_form";
import { SharedMark } from "../components/shared";
import { useApi, useDebounced } from "../hooks";
import { t } from "../i18n";
import { time, word } from "../format";
import type { Page } from "../page";
import { Link, setQuery, useLocation } from "../router";
import { currentUser } from "../session";
import { gpuText as gpuCell, isStoppable, poolOf, type Run, type RunList } from "../types";

const PAGE_SIZE = 50;
const REFETCH_DEBOUNCE_MS = 250;
const POLL_WITHOUT_STREAM_MS = 10_000;  // while the change stream is down

// The state filter's choices: a value the API takes for `state`.
const STATE_FILTERS: { value: string; label: string }[] = [
  { value: "", label: "web.filter.any_state" },
  { value: "queued,starting,running,stopping", label: "web.filter.live" },
  { value: "queued", label: "web.state.queued" },
  { value: "running", label: "web.state.running" },
  { value: "succeeded", label: "web.state.succeeded" },
  { value: "failed", label: "web.state.failed" },
  { value: "stopped", label: "web.state.stopped" },
  { value: "preempted", label: "web.state.preempted" },
  { value: "lost", label: "web.state.lost" },
];
const KINDS = ["", "job", "notebook", "service"];

// Where it runs, compact: "local", or a pool's name and its cluster's job id.
function PoolCell({ run }: { run: Run }) {
  const pool = poolOf(run);
  if (!pool) return <>—</>;
  const job = run.handle?.job_id;
  return (
    <span data-pool={pool}>
      {pool}
      {job ? <> <span class="muted" data-job-id={job}>{t("web.runs.job", { id: job })}</span></> : null}
    </span>
  );
}

function StopButton({ run, onStopped }: { run: Run; onStopped: (e: ApiError | null) => void }) {
  const [busy, setBusy] = useState(false);
  const stop = async () => {
    setBusy(true);
    try {
      await api(`/runs/${encodeURIComponent(run.id)}/stop`, { method: "POST" });
      onStopped(null);
    } catch (e) {
      onStopped(e instanceof ApiError ? e : null);
    } finally {
      setBusy(false);
    }
  };
  return (
    <button type="button" class="small" disabled={busy} onClick={stop}
            aria-label={t("web.runs.stop_run", { run: run.name || run.id })}>
      {t("web.runs.stop")}
    </button>
  );
}

function RunsPage() {
  const { query: q } = useLocation();
  const state = q.get("state") ?? "";
  const user = q.get("user") ?? "";
  const kind = q.get("kind") ?? "";
  const text = q.get("q") ?? "";
  const sort = q.get("sort") ?? "-created";
  const offset = Number(q.get("offset") ?? 0) || 0;
  const filters = { state, user, kind, q: text, sort, offset: offset || undefined };
  const path = "/runs" + query({ all: 1, state, user, kind, q: text, sort, offset, limit: PAGE_SIZE });
  const list = useApi<RunList>(path);
  const [live, setLive] = useState(false);
  const [formOpen, setFormOpen] = useState(false);
  const [notice, setNotice] = useState("");
  const [actionError, setActionError] = useState<ApiError | null>(null);
  const refetch = useDebounced(list.reload, REFETCH_DEBOUNCE_MS);

  useEffect(() => events("/runs?follow=1", ["run", "removed"], refetch, setLive), [refetch]);
  useEffect(() => {
    if (live) return;
    const id = setInterval(list.reload, POLL_WITHOUT_STREAM_MS);
    return () => clearInterval(id);
  }, [live, list.reload]);

  const me = currentUser();
  const set = (k: string, v: string) => setQuery({ ...filters, [k]: v, offset: undefined });
  const columns: Column<Run>[] = [
    {
      id: "id", label: "web.col.id",
      cell: (r) => (r.redacted ? <code>{r.id}</code> : <Link href={`/runs/${r.id}`}><code>{r.id}</code></Link>),
    },
    { id: "name", label: "web.col.name", sortable: true, cell: (r) => r.name || "—" },
    {
      id: "user", label: "web.col.user", sortable: true,
      cell: (r) => <>{r.user}<SharedMark shared={r.shared} /></>,
    },
    { id: "kind", label: "web.col.kind", cell: (r) => word("kind", r.kind) },
    { id: "state", label: "web.col.state", sortable: true, cell: (r) => <StateBadge state={r.state} /> },
    {
      id: "gpus", label: "web.col.gpus", numeric: true,
      cell: (r) => gpuCell(r),
    },
    { id: "pool", label: "web.col.pool", cell: (r) => <PoolCell run={r} /> },
    { id: "priority", label: "web.col.priority", sortable: true, cell: (r) => word("priority", r.priority) },
    { id: "created", label: "web.col.created", sortable: true, cell: (r) => time(r.created_at_ms) },
    { id: "ended", label: "web.col.ended", cell: (r) => time(r.finished_at_ms) },
    {
      id: "actions", label: "web.col.actions",
      cell: (r) =>
        !r.redacted && (r.user === me || r.shared?.role === "manage") && isStoppable(r.state) ? (
          <StopButton run={r} onStopped={(e) => {
            setActionError(e);
            list.reload();
          }} />
        ) : null,
    },
  ];

  const total = list.data?.total ?? 0;
  const runs = list.data?.runs ?? [];
  return (
    <>
      <div class="toolbar">
        <button type="button" class="primary" aria-expanded={formOpen} aria-controls="run-form"
                onClick={() => setFormOpen(!formOpen)}>
          {t("web.runs.new")}
        </button>
        <span class="live" data-live={live ? "1" : "0"}>
          {live ? t("web.runs.live") : t("web.runs.not_live")}
        </span>
      </div>
      {notice ? <p class="notice" role="status">{notice}</p> : null}
      {formOpen ? (
        <div id="run-form">
          <RunForm onDone={(r) => {
            setFormOpen(false);
            setNotice(t("web.runs.submitted", { run: r.id }));
            list.reload();
          }} />
        </div>
      ) : null}
      <form class="filters" role="search" aria-label={t("web.filter.label")} onSubmit={(e) => e.preventDefault()}>
        <label>
          {t("web.filter.state")}
          <select id="filter-state" value={state} onChange={(e) => set("state", e.currentTarget.value)}>
            {STATE_FILTERS.map((s) => <option value={s.value} key={s.value}>{t(s.label)}</option>)}
          </select>
        </label>
        <label>
          {t("web.filter.kind")}
          <select id="filter-kind" value={kind} onChange={(e) => set("kind", e.currentTarget.value)}>
            {KINDS.map((k) => (
              <option value={k} key={k}>{k ? word("kind", k) : t("web.filter.any_kind")}</option>
            ))}
          </select>
        </label>
        <label>
          {t("web.filter.user")}
          <input id="filter-user" type="text" value={user} size={12}
                 onChange={(e) => set("user", e.currentTarget.value.trim())} />
        </label>
        <label>
          {t("web.filter.text")}
          <input id="filter-q" type="search" value={text} size={16}
                 onChange={(e) => set("q", e.currentTarget.value)} />
        </label>
      </form>
      <ErrorBox error={actionError} />
      <ErrorBox error={list.error} />
      <Table caption="web.runs.caption" columns={columns} rows={runs} rowKey={(r) => r.id}
             sort={sort} onSort={(s) => setQuery({ ...filters, sort: s, offset: undefined })}
             empty={list.loading ? "web.loading" : "web.runs.none"} />
      <div class="pager">
        <span aria-live="polite" id="runs-count">
          {total ? t("web.pager.range", { from: offset + 1, to: offset + runs.length, total })
                 : t("web.pager.none")}
        </span>
        <button type="button" disabled={offset === 0}
                onClick={() => setQuery({ ...filters, offset: Math.max(0, offset - PAGE_SIZE) || undefined })}>
          {t("web.pager.prev")}
        </button>
        <button type="button" disabled={offset + runs.length >= total}
                onClick={() => setQuery({ ...filters, offset: offset + PAGE_SIZE })}>
          {t("web.pager.next")}
        </button>
      </div>
    </>
  );
}

const page: Page = { path: "/runs", title: "web.runs.title", nav: "web.nav.runs", component: RunsPage };
export default page;
