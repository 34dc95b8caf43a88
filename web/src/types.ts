// The API's objects as the UI reads them (docs/api.md); fields the UI does not
// use are left out.

// The one error body of the daemon, the deployments' front and lathe serve
// (docs/api.md#errors), also where an object carries an error (a pool's, a
// port's): {"error": English text, code, msg_id, args, en, zh}.
export interface ErrorBody {
  error: string;
  code?: string;
  msg_id?: string;              // with args, when the text is a catalog entry
  args?: Record<string, string>;
  en?: string;
  zh?: string;
}

export interface Run {
  id: string;
  name: string;
  user: string;
  uid: number;
  kind: string;                 // job | notebook | service
  state: string;
  priority: string;
  gpus: number[];               // held now
  created_at_ms: number;
  started_at_ms: number;
  finished_at_ms: number;
  redacted?: boolean;           // another user's run: no spec, no reason, no waiting
  shared?: { role: string; by: string };  // shared with you (docs/sharing.md): your role, by whom
  resources?: { gpus: number; cpus: number; memory: number };
  spec?: { gpus?: number; command?: string[]; pool?: string; [k: string]: unknown };
  waiting?: string;             // a queued run's reason (English)
  waiting_text?: { en?: string; zh?: string };  // … as a person reads it
  waiting_on?: string;          // quota, gpus, pool (held in its cluster's queue), …
  backend?: string;             // where it executes: a pool's name, or "local" (your own runs)
  handle?: { job_id?: string }; // a pool run its cluster accepted: the cluster's job id
  reason?: string;
  reason_text?: { en?: string; zh?: string };
  exit_code?: number | null;
}

export interface RunList {
  runs: Run[];
  total: number;                // matching the query
  total_all: number;            // every run
}

export interface Gpu {
  index: number;
  name: string;
  uuid: string;
  memory_total_bytes: number;
  memory_used_bytes: number;
  utilization_gpu_pct: number | null;
  temperature_c: number | null;
  error: string;
  allocated_to: string | null;  // the run holding it
}

export interface GpuInventory {
  source: string;               // nvml | simulated | none
  simulated?: boolean;
  note?: string;
  gpus: Gpu[];
}

// GET /api/v1/pools: every pool, local first (docs/api.md, docs/slurm.md).
export interface PoolPartition {
  name: string;
  default: boolean;
  state: string;                // up | down | drain | inact
  max_time_ms: number;          // -1: no limit
  nodes: { total: number; idle: number; allocated: number; down: number };
  cpus: { total: number; allocated: number };
  gpus: { total: number; used: number; types: string[] };
  memory_mb: number;
}

export interface PoolRunCount {
  count: number;
  ids: string[];
}

export interface Pool {
  name: string;
  type: string;                 // local | slurm
  default: boolean;
  partition: string;            // the pool's config ("" when unset)
  account: string;
  qos: string;
  partitions: PoolPartition[];
  error: ErrorBody | null;      // the cluster did not answer
  runs: { queued: PoolRunCount; starting: PoolRunCount; running: PoolRunCount };
}

export interface PoolList {
  default_pool: string;
  pools: Pool[];
}

// Where a run executes: its pool's name, "local" for this machine (a run not
// yet started has only its spec's pool, "" there for local); "" for another
// user's run, whose pool is not shown.
// How many GPUs it asked for, and which it holds now: "2 (0,1)".
export function gpuText(r: Run): string {
  const n = r.spec?.gpus ?? r.resources?.gpus ?? r.gpus.length;
  return r.gpus.length ? `${n} (${r.gpus.join(",")})` : String(n);
}

export function poolOf(r: Run): string {
  if (r.redacted || (!r.spec && !r.backend)) return "";
  return r.backend || (typeof r.spec?.pool === "string" ? r.spec.pool : "") || "local";
}

export const ACTIVE_STATES = ["starting", "running", "stopping"];

export function isActive(state: string) {
  return ACTIVE_STATES.includes(state);
}

// Runs that can still be stopped: queued or active.
export function isStoppable(state: string) {
  return state === "queued" || isActive(state);
}
