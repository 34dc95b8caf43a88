// Notebooks: the signed-in user's notebook runs and those shared with them
// (GET /api/v1/runs?kind=notebook; a shared one is marked with who shared it
// and the role), each with its state and, while it runs, Open: a one-time sign-in
// link to the notebook's origin (POST /api/v1/runs/{run}/open) in a new tab;
// Stop while it runs, Restart once it ended (the same run, its files kept),
// each shown only where the caller's role allows it (use opens, manage stops);
// and the form that starts one (components/notebook_form.tsx).
import { useState } from "preact/hooks";
import { api, ApiError } from "../api";
import { NotebookForm } from "../components/notebook_form";
import { atLeast, roleOn, SharedMark } from "../components/shared";
import { ErrorBox, StateBadge } from "../components/status";
import { Table, type Column } from "../components/table";
import { useApi } from "../hooks";
import { time } from "../format";
import { t } from "../i18n";
import type { Page } from "../page";
import { Link } from "../router";
import { currentUser } from "../session";
import { gpuText, isActive, type Run, type RunList } from "../types";

function Notebooks() {
  const me = currentUser();
  const r = useApi<RunList>(`/runs?all=1&kind=notebook&limit=200`, 5000);
  // Stop (POST …/stop) or restart (POST …/restart) a notebook, then the list again.
  const act = async (id: string, what: "stop" | "restart") => {
    try {
      await api(`/runs/${encodeURIComponent(id)}/${what}`, { method: "POST", body: {} });
      setError(null);
      r.reload();
    } catch (e) {
      setError(e instanceof ApiError ? e : null);
    }
  };
  const [error, setError] = useState<ApiError | null>(null);
  // One's own and those shared with one (an admin sees every run: the others' are on Runs).
  const rows = (r.data?.runs ?? []).filter((x) => x.kind === "notebook" && (x.user === me || x.shared));
  const open = async (id: string) => {
    const tab = window.open("about:blank", "_blank");
    try {
      const o = await api<{ login_url: string }>(`/runs/${encodeURIComponent(id)}/open`, { method: "POST", body: {} });
      setError(null);
      if (tab) {
        tab.opener = null;
        tab.location.href = o.login_url;
      }
    } catch (e) {
      tab?.close();
      setError(e instanceof ApiError ? e : null);
    }
  };
  const columns: Column<Run>[] = [
    { id: "id", label: "web.col.id", cell: (x) => <Link href={`/runs/${x.id}`}><code>{x.id}</code></Link> },
    { id: "name", label: "web.col.name", cell: (x) => x.name || "—" },
    { id: "user", label: "web.col.user", cell: (x) => <>{x.user}<SharedMark shared={x.shared} /></> },
    { id: "state", label: "web.col.state", cell: (x) => <StateBadge state={x.state} /> },
    // How many it has, and which: "1 (3)", not the index 3 alone.
    { id: "gpus", label: "web.col.gpus", numeric: true, cell: (x) => gpuText(x) },
    { id: "created", label: "web.col.created", cell: (x) => time(x.created_at_ms) },
    { id: "open", label: "web.port.link",
      cell: (x) => (isActive(x.state) && atLeast(roleOn(x), "use") ? (
        <button type="button" class="small" data-open={x.id} onClick={() => open(x.id)}
                aria-label={t("web.notebook.open_named", { name: x.name || x.id })}>{t("web.port.open")}</button>
      ) : "—") },
    { id: "act", label: "web.col.actions",
      cell: (x) => (!atLeast(roleOn(x), "manage") ? "—" : isActive(x.state) ? (
        <button type="button" class="small" data-stop={x.id} onClick={() => act(x.id, "stop")}
                aria-label={t("web.notebook.stop_named", { name: x.name || x.id })}>{t("web.notebook.stop")}</button>
      ) : (
        <button type="button" class="small" data-restart={x.id} onClick={() => act(x.id, "restart")}
                aria-label={t("web.notebook.restart_named", { name: x.name || x.id })}>{t("web.notebook.restart")}</button>
      )) },
  ];
  return (
    <>
      <ErrorBox error={r.error ?? error} />
      <Table caption="web.notebooks.title" columns={columns} rows={rows} rowKey={(x) => x.id}
             empty={r.loading ? "web.loading" : "web.notebook.none"} />
      <NotebookForm onStarted={() => r.reload()} />
    </>
  );
}

const page: Page = { path: "/notebooks", title: "web.notebooks.title", nav: "web.nav.notebooks", component: Notebooks };
export default page;
