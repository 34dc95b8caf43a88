// Models: the registry's models the caller may see (GET /api/v1/models), and
// for the one chosen (?model=NAME) its versions (GET /api/v1/models/{model}):
// aliases, lineage (run, step, snapshot) and the deployments that use each;
// a model shared with the caller says so, and offers what the role allows
// (moving an alias and reading whom it is shared with with manage;
// registering a version and sharing are the owner's). A model is named in paths by its ref where the API gives one.
import { ModelManage } from "../components/model_manage";
import { refOf, roleOn, SharedMark, shownName, atLeast, type SharedInfo } from "../components/shared";
import { Sharing } from "../components/sharing";
import { ErrorBox, Loading, Section } from "../components/status";
import { Table, type Column } from "../components/table";
import { useApi } from "../hooks";
import { bytes, time } from "../format";
import { t } from "../i18n";
import type { Page } from "../page";
import { Link, setQuery, useLocation } from "../router";
import { currentUser } from "../session";

interface Model {
  name: string;
  ref?: string;                 // "owner/name", unique machine-wide (name is unique per owner)
  owner: string;
  shared?: SharedInfo;          // shared with the caller (or public): their role, by whom
  public: boolean;
  versions: number;
  latest: number;
  aliases: Record<string, number>;
  created_at_ms: number;
}

interface Version {
  version: number;
  ref?: string;
  snapshot?: string;
  backend?: string;
  file?: string;
  note?: string;
  size?: number;
  created_at_ms: number;
  aliases?: string[];
  deployments?: string[];
  lineage?: { run?: string; run_name?: string; attempt?: number; step?: number | null; snapshot?: string; source_dir?: string };
}

interface ModelDetail extends Omit<Model, "versions"> {
  versions: Version[];
}

function Detail({ name }: { name: string }) {
  const m = useApi<ModelDetail>(`/models/${encodeURIComponent(name)}`, 10_000);
  const role = m.data ? roleOn(m.data) : "view";
  const aliasesOf = (v: Version) => {
    if (v.aliases?.length) return v.aliases;
    return Object.entries(m.data?.aliases ?? {}).filter(([, n]) => n === v.version).map(([a]) => a);
  };
  const columns: Column<Version>[] = [
    { id: "version", label: "web.model.version", numeric: true, cell: (v) => v.version },
    { id: "aliases", label: "web.model.aliases", cell: (v) => aliasesOf(v).join(", ") || "—" },
    { id: "run", label: "web.model.run",
      cell: (v) => (v.lineage?.run ? <Link href={`/runs/${v.lineage.run}`}><code>{v.lineage.run_name || v.lineage.run}</code></Link>
        : v.lineage?.source_dir ? <code>{v.lineage.source_dir}</code> : "—") },
    { id: "step", label: "web.snap.step", numeric: true, cell: (v) => v.lineage?.step ?? "—" },
    { id: "snapshot", label: "web.snap.snapshot",
      cell: (v) => { const s = v.lineage?.snapshot || v.snapshot; return s ? <code title={s}>{s.slice(0, 12)}</code> : "—"; } },
    { id: "backend", label: "web.model.backend", cell: (v) => v.backend || "—" },
    { id: "size", label: "web.snap.bytes", numeric: true, cell: (v) => (v.size ? bytes(v.size) : "—") },
    { id: "deployments", label: "web.model.deployments",
      cell: (v) => (v.deployments?.length ? v.deployments.map((d) => {
        const dep = d.split(" ")[0];
        return <Link key={d} href={`/deployments?name=${encodeURIComponent(dep)}`}>{d}</Link>;
      }) : "—") },
    { id: "created", label: "web.col.created", cell: (v) => time(v.created_at_ms) },
  ];
  return (
    <Section title="web.model.versions_of" id="model-versions">
      <p class="muted">
        {t("web.model.detail", { name: m.data ? shownName(m.data, currentUser()) : name })}
        {m.data ? <SharedMark shared={m.data.shared} /> : null}
      </p>
      <ErrorBox error={m.error} />
      <Loading when={m.loading && !m.data}>
        <Table caption="web.model.versions_of" columns={columns}
               rows={[...(m.data?.versions ?? [])].sort((a, b) => b.version - a.version)}
               rowKey={(v) => String(v.version)} empty="web.model.no_versions" />
      </Loading>
      {m.data && atLeast(role, "manage") ? (
        <ModelManage key={name} name={name} short={m.data.name} versions={m.data.versions.map((v) => v.version)}
                     register={role === "owner"} onChanged={m.reload} />
      ) : null}
      {m.data && atLeast(role, "manage") ? (
        <Sharing key={name} target={`model:${refOf(m.data)}`} readOnly={role !== "owner"} />
      ) : null}
    </Section>
  );
}

function Models() {
  const loc = useLocation();
  const chosen = loc.query.get("model") ?? "";
  const me = currentUser();
  const m = useApi<{ models: Model[] }>("/models", 10_000);
  const columns: Column<Model>[] = [
    { id: "name", label: "web.col.name",
      cell: (x) => (
        <button type="button" class="link" aria-pressed={refOf(x) === chosen} data-model={refOf(x)}
                onClick={() => setQuery({ model: refOf(x) === chosen ? undefined : refOf(x) })}>{shownName(x, me)}</button>
      ) },
    { id: "owner", label: "web.col.user", cell: (x) => <>{x.owner}<SharedMark shared={x.shared} /></> },
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
             rowKey={(x) => refOf(x)} empty={m.loading ? "web.loading" : "web.model.none"} />
      {chosen ? <Detail key={chosen} name={chosen} /> : m.data?.models.length ? <p class="muted">{t("web.model.choose")}</p> : null}
    </>
  );
}

const page: Page = { path: "/models", title: "web.models.title", nav: "web.nav.models", component: Models };
export default page;
