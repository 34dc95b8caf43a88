// The run's telemetry as charts: GET /api/v1/runs/{run}/metrics (columnar
// arrays per GPU, and the run's CPU and memory; docs/telemetry.md) turned
// into what a chart draws. This adapter is the one place that knows the
// API's shape: the charts take Chart values only.
export interface GpuSeries {
  index: number;
  name?: string;
  t: number[];                              // sample times, ms since the epoch
  utilization_pct: (number | null)[];
  memory_used_bytes: (number | null)[];
  process_memory_bytes?: (number | null)[];
  temperature_c?: (number | null)[];
  power_w?: (number | null)[];
  throttled?: (number | null)[];            // share of the interval throttled, 0..1
}

export interface RunMetrics {
  run: string;
  simulated?: boolean;
  interval_ms?: number;
  gpus: GpuSeries[];
  cpu?: { t: number[]; usage_cores: (number | null)[] };
  memory?: { t: number[]; bytes: (number | null)[] };
  summary?: Record<string, unknown>;
}

export type Unit = "percent" | "bytes" | "cores";

export interface Chart {
  id: string;              // gpu-util, gpu-mem, cpu, mem
  title: string;           // catalog id
  unit: Unit;
  x: number[];             // seconds since the epoch (uPlot's time axis)
  series: { label: string; values: (number | null)[] }[];
}

// Series sampled at different times are put on one time axis: the union of
// the times, a gap (null) where a series has no sample.
function align(parts: { label: string; t: number[]; v: (number | null)[] }[]) {
  const times = [...new Set(parts.flatMap((p) => p.t))].sort((a, b) => a - b);
  const at = new Map(times.map((x, i) => [x, i]));
  const series = parts.map((p) => {
    const values: (number | null)[] = new Array(times.length).fill(null);
    p.t.forEach((x, i) => {
      values[at.get(x)!] = p.v[i] ?? null;
    });
    return { label: p.label, values };
  });
  return { x: times.map((ms) => ms / 1000), series };
}

export function charts(m: RunMetrics): Chart[] {
  const out: Chart[] = [];
  const gpus = m.gpus ?? [];
  if (gpus.length) {
    out.push({
      id: "gpu-util", title: "web.chart.gpu_util", unit: "percent",
      ...align(gpus.map((g) => ({ label: `GPU ${g.index}`, t: g.t, v: g.utilization_pct }))),
    });
    out.push({
      id: "gpu-mem", title: "web.chart.gpu_mem", unit: "bytes",
      ...align(gpus.map((g) => ({ label: `GPU ${g.index}`, t: g.t, v: g.memory_used_bytes }))),
    });
  }
  if (m.cpu?.t?.length) {
    out.push({ id: "cpu", title: "web.chart.cpu", unit: "cores",
      ...align([{ label: "CPU", t: m.cpu.t, v: m.cpu.usage_cores }]) });
  }
  if (m.memory?.t?.length) {
    out.push({ id: "mem", title: "web.chart.mem", unit: "bytes",
      ...align([{ label: "RAM", t: m.memory.t, v: m.memory.bytes }]) });
  }
  return out;
}

// The last value and the largest of each series: the chart's text for those
// who do not see the canvas (and for the browser test).
export function summary(c: Chart): { label: string; last: number | null; max: number | null }[] {
  return c.series.map((s) => {
    let last: number | null = null;
    let max: number | null = null;
    for (const v of s.values) {
      if (v === null || v === undefined) continue;
      last = v;
      if (max === null || v > max) max = v;
    }
    return { label: s.label, last, max };
  });
}
