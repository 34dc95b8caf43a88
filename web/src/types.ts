// The API's objects as the UI reads them (docs/api.md); fields the UI does not
// use are left out.
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
  resources?: { gpus: number; cpus: number; memory: number };
  spec?: { gpus?: number; command?: string[]; [k: string]: unknown };
  waiting?: string;             // a queued run's reason (English)
  waiting_text?: { en?: string; zh?: string };  // … as a person reads it
  waiting_on?: string;
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

export const ACTIVE_STATES = ["starting", "running", "stopping"];

export function isActive(state: string) {
  return ACTIVE_STATES.includes(state);
}

// Runs that can still be stopped: queued or active.
export function isStoppable(state: string) {
  return state === "queued" || isActive(state);
}
