// Models: the registry's models the caller may see (GET /api/v1/models).
import { ErrorBox } from "../components/status";
import { Table, type Column } from "../components/table";
import { useApi } from "../hooks";
import { time } from "../format";
import { t } from "../i18n";
import type { Page } from "../page";

interface Model {
  name: string;
  owner: string;
  public: boolean;
  versions: number;
  latest: number;
  aliases: Record<string, number>;
  created_at_ms: number;
}

function Models() {
  const m = useApi<{ models: Model[] }>("/models", 10_000);
  const columns: Column<Model>[] = [
    { id: "name", label: "web.col.name", cell: (x) => x.name },
    { id: "owner", label: "web.col.user", cell: (x) => x.owner },
    { id: "versions", label: "web.model.versions", numeric: true, cell: (x) => x.versions },
    { id: "latest", label: "web.model.latest", numeric: true, cell: (x) => x.latest },
    { id: "aliases", label: "web.model.aliases",
      cell: (x) => Object.entries(x.aliases ?? {}).map(([a, v]) => `${a}→${v}`).join(", ") || "—" },
    { id: "public", label: "web.model.public", cell: (x) => t(x.public ? "web.yes" : "web.no") },
    { id: "created", label: "web.col.created", cell: (x) => time(x.created_at_ms) },
  ];
  return (
    <>
      <ErrorBox error={m.error} />
      <Table caption="web.models.title" columns={columns} rows={m.data?.models ?? []}
             rowKey={(x) => x.name} empty={m.loading ? "web.loading" : "web.model.none"} />
    </>
  );
}

const page: Page = { path: "/models", title: "web.models.title", nav: "web.nav.models", component: Models };
export default page;
