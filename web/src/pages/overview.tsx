// Overview: the machine's GPUs (GET /api/v1/gpus: utilization, memory, the run
// holding each), the queue with each waiting run's reason, polled, the pools
// (GET /api/v1/pools: each cluster's partitions, your runs there), your
// projects (components/projects.tsx) and the doctor's latest findings (GET
// /api/v1/doctor).
import { DoctorFindings } from "../components/doctor";
import { Pools } from "../components/pools";
import { Projects } from "../components/projects";
import { ErrorBox, Loading, Section } from "../components/status";
import { Table, type Column } from "../components/table";
import { useApi } from "../hooks";
import { langStore, t } from "../i18n";
import { bytes, percent, time, word } from "../format";
import type { Page } from "../page";
import { Link } from "../router";
import { poolOf, type Gpu, type GpuInventory, type Run, type RunList } from "../types";

const POLL_MS = 3000;
const QUEUE_LIMIT = 100;

function Meter({ value, max, label }: { value: number | null; max: number; label: string }) {
  if (value == null || !max) return <>—</>;
  return <meter min={0} max={max} value={value} aria-label={label} title={label} />;
}

function Gpus() {
  const inv = useApi<GpuInventory>("/gpus", POLL_MS);
  const active = useApi<RunList>("/runs?all=1&state=starting,running,stopping&limit=1000", POLL_MS);
  const holder = new Map<string, Run>((active.data?.runs ?? []).map((r) => [r.id, r]));
  const columns: Column<Gpu>[] = [
    { id: "index", label: "web.gpu.index", numeric: true, cell: (g) => g.index },
    { id: "name", label: "web.gpu.name", cell: (g) => g.name },
    {
      id: "util", label: "web.gpu.utilization",
      cell: (g) => (
        <span class="metric">
          <Meter value={g.utilization_gpu_pct} max={100}
                 label={t("web.gpu.utilization_of", { gpu: g.index, value: percent(g.utilization_gpu_pct) })} />
          {percent(g.utilization_gpu_pct)}
        </span>
      ),
    },
    {
      id: "mem", label: "web.gpu.memory",
      cell: (g) => (
        <span class="metric">
          <Meter value={g.memory_used_bytes} max={g.memory_total_bytes}
                 label={t("web.gpu.memory_of", { gpu: g.index, used: bytes(g.memory_used_bytes) })} />
          {t("web.gpu.memory_used", { used: bytes(g.memory_used_bytes), total: bytes(g.memory_total_bytes) })}
        </span>
      ),
    },
    { id: "temp", label: "web.gpu.temperature", numeric: true,
      cell: (g) => (g.temperature_c == null ? "—" : `${g.temperature_c} °C`) },
    {
      id: "holder", label: "web.gpu.held_by",
      cell: (g) => {
        if (g.error) return <span class="error">{g.error}</span>;
        if (!g.allocated_to) return <span class="muted">{t("web.gpu.free")}</span>;
        const r = holder.get(g.allocated_to);
        return r ? t("web.gpu.holder", { run: r.name || r.id, user: r.user }) : <code>{g.allocated_to}</code>;
      },
    },
  ];
  return (
    <Section title="web.overview.gpus">
      {inv.data?.simulated || inv.data?.source === "simulated" ? (
        <p class="badge simulated" data-simulated="1">{t("web.gpu.simulated")}</p>
      ) : null}
      <ErrorBox error={inv.error} />
      <Loading when={inv.loading && !inv.data}>
        <Table caption="web.overview.gpus" columns={columns} rows={inv.data?.gpus ?? []}
               rowKey={(g) => String(g.index)} empty="web.gpu.none" />
      </Loading>
    </Section>
  );
}

function Queue() {
  const q = useApi<RunList>(`/runs?all=1&state=queued&sort=created&limit=${QUEUE_LIMIT}`, POLL_MS);
  const rows = (q.data?.runs ?? []).filter((r) => r.state === "queued");
  const columns: Column<Run>[] = [
    { id: "id", label: "web.col.id",
      cell: (r) => (r.redacted ? <code>{r.id}</code> : <Link href={`/runs/${r.id}`}><code>{r.id}</code></Link>) },
    { id: "name", label: "web.col.name", cell: (r) => r.name || "—" },
    { id: "user", label: "web.col.user", cell: (r) => r.user },
    { id: "pool", label: "web.col.pool", cell: (r) => poolOf(r) || "—" },
    { id: "priority", label: "web.col.priority", cell: (r) => word("priority", r.priority) },
    { id: "gpus", label: "web.col.gpus", numeric: true, cell: (r) => String(r.spec?.gpus ?? r.resources?.gpus ?? 0) },
    { id: "created", label: "web.col.created", cell: (r) => time(r.created_at_ms) },
    {
      id: "waiting", label: "web.queue.waiting",
      cell: (r) => (r.redacted ? <span class="muted">{t("web.queue.redacted")}</span>
        : r.waiting_text?.[langStore.get()] || r.waiting || "—"),
    },
  ];
  return (
    <Section title="web.overview.queue">
      <ErrorBox error={q.error} />
      <Table caption="web.overview.queue" columns={columns} rows={rows} rowKey={(r) => r.id}
             empty="web.queue.empty" />
    </Section>
  );
}

function Overview() {
  return (
    <>
      <Gpus />
      <Queue />
      <Projects />
      <Section title="web.overview.pools">
        <Pools />
      </Section>
      <Section title="web.overview.doctor">
        <DoctorFindings />
      </Section>
    </>
  );
}

const page: Page = { path: "/", title: "web.overview.title", nav: "web.nav.overview", component: Overview };
export default page;
