// Snapshots: the caller's checkpoints captured by the daemon (GET /api/v1/snapshots).
import { snapshotList, type Snapshot } from "../components/checkpoints";
import { ErrorBox } from "../components/status";
import { Table, type Column } from "../components/table";
import { useApi } from "../hooks";
import { bytes, time } from "../format";
import { has, t } from "../i18n";
import type { Page } from "../page";

const POLL_MS = 10_000;

function Snapshots() {
  const s = useApi<unknown>("/snapshots", POLL_MS);
  const columns: Column<Snapshot>[] = [
    { id: "id", label: "web.col.id", cell: (x) => <code>{x.id.slice(0, 12)}</code> },
    { id: "run", label: "web.snap.run", cell: (x) => x.tags?.run ?? "—" },
    { id: "time", label: "web.snap.time", cell: (x) => time(x.time_ms) },
    { id: "source", label: "web.snap.source", cell: (x) => <code>{x.source}</code> },
    { id: "files", label: "web.snap.files", numeric: true, cell: (x) => x.files },
    { id: "bytes", label: "web.snap.bytes", numeric: true, cell: (x) => bytes(x.bytes) },
    { id: "new", label: "web.snap.new_bytes", numeric: true, cell: (x) => bytes(x.new_bytes) },
    { id: "status", label: "web.snap.status",
      cell: (x) => (has(`web.snap.status.${x.status}`) ? t(`web.snap.status.${x.status}`) : x.status) },
  ];
  return (
    <>
      <ErrorBox error={s.error} />
      <Table caption="web.snapshots.title" columns={columns} rows={snapshotList(s.data)}
             rowKey={(x) => x.id + x.time_ms} empty={s.loading ? "web.loading" : "web.snap.none"} />
    </>
  );
}

const page: Page = { path: "/snapshots", title: "web.snapshots.title", nav: "web.nav.snapshots", component: Snapshots };
export default page;
