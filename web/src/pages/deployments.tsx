// Deployments: the caller's served models and commands (GET /api/v1/deployments).
import { ErrorBox } from "../components/status";
import { Table, type Column } from "../components/table";
import { useApi } from "../hooks";
import type { Page } from "../page";

interface Deployment {
  name: string;
  owner: string;
  version: string;
  health: string;
  url: string;
  replicas: { wanted: number; ready: number };
}

function Deployments() {
  const d = useApi<{ deployments: Deployment[] }>("/deployments", 5000);
  const columns: Column<Deployment>[] = [
    { id: "name", label: "web.col.name", cell: (x) => x.name },
    { id: "owner", label: "web.col.user", cell: (x) => x.owner },
    { id: "version", label: "web.deploy.version", cell: (x) => x.version || "—" },
    { id: "health", label: "web.deploy.health", cell: (x) => x.health || "—" },
    { id: "replicas", label: "web.deploy.replicas", numeric: true,
      cell: (x) => `${x.replicas?.ready ?? 0}/${x.replicas?.wanted ?? 0}` },
    { id: "url", label: "web.deploy.url", cell: (x) => (x.url ? <code>{x.url}</code> : "—") },
  ];
  return (
    <>
      <ErrorBox error={d.error} />
      <Table caption="web.deployments.title" columns={columns} rows={d.data?.deployments ?? []}
             rowKey={(x) => x.name} empty={d.loading ? "web.loading" : "web.deploy.none"} />
    </>
  );
}

const page: Page = {
  path: "/deployments", title: "web.deployments.title", nav: "web.nav.deployments", component: Deployments,
};
export default page;
