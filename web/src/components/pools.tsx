// The Overview's pools (GET /api/v1/pools): each pool with its type, what its
// config submits to, the signed-in user's own runs there and whether its
// cluster answered; each cluster partition's state, nodes, GPUs and MaxTime;
// a cluster that did not answer shown with the daemon's error. The answer asks
// each cluster (sinfo), so it may take a while: the rest of the page does not
// wait for it, and the next request goes out only once the last one settled.
import { ErrorBox } from "./status";
import { Table, type Column } from "./table";
import { useApiSlow } from "../hooks";
import { has, langStore, t } from "../i18n";
import { duration } from "../format";
import { Link } from "../router";
import type { Pool, PoolList, PoolPartition } from "../types";

const POLL_MS = 15_000;
const RUN_STATES = ["queued", "starting", "running"] as const;

// The pool's name, marked when it is where a job without `pool:` goes.
function poolName(p: Pool) {
  return p.default ? t("web.pools.default", { name: p.name }) : p.name;
}

// "partition gpu, account lab": what the pool's config asks of its cluster.
function submitsTo(p: Pool): string {
  if (p.type === "local") return t("web.pools.local_target");
  const parts = (["partition", "account", "qos"] as const)
    .filter((k) => p[k])
    .map((k) => t(`web.pools.setting.${k}`, { value: p[k] }));
  return parts.length ? parts.join(", ") : t("web.pools.cluster_default");
}

function errorText(p: Pool): string {
  const e = p.error;
  if (!e) return "";
  return (langStore.get() === "zh" ? e.zh : e.en) || e.en || e.error || e.msg_id || "";
}

function typeWord(type: string): string {
  return has(`web.pools.type.${type}`) ? t(`web.pools.type.${type}`) : type;
}

function stateWord(state: string): string {
  return has(`web.partition_state.${state}`) ? t(`web.partition_state.${state}`) : state;
}

type PartitionRow = PoolPartition & { pool: string };

export function Pools() {
  const q = useApiSlow<PoolList>("/pools", POLL_MS);
  const pools = q.data?.pools ?? [];
  const columns: Column<Pool>[] = [
    { id: "pool", label: "web.pools.col.pool", cell: (p) => poolName(p) },
    { id: "type", label: "web.pools.col.type", cell: (p) => typeWord(p.type) },
    { id: "submits", label: "web.pools.col.submits", cell: (p) => submitsTo(p) },
    {
      id: "runs", label: "web.pools.col.runs", numeric: true,
      cell: (p) => (
        <span data-runs={RUN_STATES.map((s) => p.runs?.[s]?.count ?? 0).join("/")}>
          {RUN_STATES.map((s) => p.runs?.[s]?.count ?? 0).join(" / ")}
        </span>
      ),
    },
    {
      id: "status", label: "web.pools.col.status",
      cell: (p) => (p.error ? <span class="error">{t("web.pools.no_answer")}</span>
        : p.type === "local" ? "—"
          : t("web.pools.answers")),
    },
  ];
  const partitions: PartitionRow[] = pools.flatMap((p) => (p.partitions ?? []).map((x) => ({ ...x, pool: p.name })));
  const partColumns: Column<PartitionRow>[] = [
    { id: "pool", label: "web.pools.col.pool", cell: (x) => x.pool },
    { id: "partition", label: "web.pools.col.partition",
      cell: (x) => (x.default ? t("web.pools.default", { name: x.name }) : x.name) },
    { id: "state", label: "web.pools.col.state",
      cell: (x) => <span class={`badge partition-${x.state}`} data-state={x.state}>{stateWord(x.state)}</span> },
    { id: "nodes", label: "web.pools.col.nodes", numeric: true,
      cell: (x) => `${x.nodes.idle}/${x.nodes.allocated}/${x.nodes.down}/${x.nodes.total}` },
    { id: "gpus", label: "web.pools.col.gpus", numeric: true,
      cell: (x) => `${x.gpus.used}/${x.gpus.total}${x.gpus.types.length ? ` (${x.gpus.types.join(", ")})` : ""}` },
    { id: "max_time", label: "web.pools.col.max_time", numeric: true,
      cell: (x) => (x.max_time_ms < 0 ? t("web.pools.no_limit") : duration(x.max_time_ms)) },
  ];
  const failed = pools.filter((p) => p.error);
  const mine = pools.filter((p) => RUN_STATES.some((s) => p.runs?.[s]?.ids?.length));
  return (
    <div class="pools" data-loaded={q.data ? "1" : "0"}>
      <ErrorBox error={q.error} />
      {q.loading && !q.data ? (
        <p class="muted pools-loading" aria-live="polite">{t("web.pools.asking")}</p>
      ) : null}
      {q.data ? (
        <>
          <div data-pools="list">
            <Table caption="web.overview.pools" columns={columns} rows={pools} rowKey={(p) => p.name}
                   empty="web.pools.none" />
          </div>
          {failed.map((p) => (
            <p class="error pool-error" key={p.name} data-pool={p.name} data-error-id={p.error?.msg_id ?? ""}>
              {errorText(p)}
            </p>
          ))}
          {mine.length ? (
            <ul class="pool-runs">
              {mine.map((p) => (
                <li key={p.name} data-pool={p.name}>
                  {t("web.pools.your_runs", { pool: p.name })}{" "}
                  {RUN_STATES.filter((s) => p.runs[s].ids.length).map((s, i) => (
                    <span key={s}>
                      {i ? "; " : ""}{t(`web.state.${s}`)}:{" "}
                      {p.runs[s].ids.map((id, j) => (
                        <span key={id}>{j ? ", " : ""}<Link href={`/runs/${id}`}><code>{id}</code></Link></span>
                      ))}
                    </span>
                  ))}
                </li>
              ))}
            </ul>
          ) : null}
          {partitions.length ? (
            <div data-pools="partitions">
              <Table caption="web.pools.partitions" columns={partColumns} rows={partitions}
                     rowKey={(x) => `${x.pool}/${x.name}`} />
            </div>
          ) : null}
        </>
      ) : null}
    </div>
  );
}
