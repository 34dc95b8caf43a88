// Notebooks: the runs of kind notebook (GET /api/v1/runs?kind=notebook).
import { ErrorBox, StateBadge } from "../components/status";
import { Table, type Column } from "../components/table";
import { useApi } from "../hooks";
import { time } from "../format";
import type { Page } from "../page";
import { Link } from "../router";
import type { Run, RunList } from "../types";

function Notebooks() {
  const r = useApi<RunList>("/runs?all=1&kind=notebook&limit=200", 5000);
  const rows = (r.data?.runs ?? []).filter((x) => x.kind === "notebook");
  const columns: Column<Run>[] = [
    { id: "id", label: "web.col.id",
      cell: (x) => (x.redacted ? <code>{x.id}</code> : <Link href={`/runs/${x.id}`}><code>{x.id}</code></Link>) },
    { id: "name", label: "web.col.name", cell: (x) => x.name || "—" },
    { id: "user", label: "web.col.user", cell: (x) => x.user },
    { id: "state", label: "web.col.state", cell: (x) => <StateBadge state={x.state} /> },
    { id: "gpus", label: "web.col.gpus", numeric: true, cell: (x) => x.gpus.join(",") || "0" },
    { id: "created", label: "web.col.created", cell: (x) => time(x.created_at_ms) },
  ];
  return (
    <>
      <ErrorBox error={r.error} />
      <Table caption="web.notebooks.title" columns={columns} rows={rows} rowKey={(x) => x.id}
             empty={r.loading ? "web.loading" : "web.notebook.none"} />
    </>
  );
}

const page: Page = { path: "/notebooks", title: "web.notebooks.title", nav: "web.nav.notebooks", component: Notebooks };
export default page;
