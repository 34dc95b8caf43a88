// The run's GPU, CPU and memory over time, drawn by uPlot (one canvas per
// chart) from GET /api/v1/runs/{run}/metrics through the adapter in
// metrics.ts. A daemon without telemetry (404) or a run without samples
// shows a line saying so. Each chart has a text summary (last and largest
// value of each series) beside its canvas.
import { useEffect, useRef } from "preact/hooks";
import uPlot from "uplot";
import "uplot/dist/uPlot.min.css";
import { useApi } from "../hooks";
import { bytes } from "../format";
import { t, useLang } from "../i18n";
import { themeStore } from "../theme";
import { useStore } from "../store";
import { charts, summary, type Chart, type RunMetrics, type Unit } from "./metrics";

const PALETTE = ["#2f81f7", "#e5534b", "#3fb950", "#d29922", "#a371f7", "#39c5cf", "#db61a2", "#768390"];

function fmt(unit: Unit, v: number | null): string {
  if (v === null || v === undefined) return "—";
  if (unit === "bytes") return bytes(v);
  if (unit === "percent") return `${Math.round(v * 10) / 10}%`;
  return (Math.round(v * 100) / 100).toString();
}

// A series' name in the reader's language ("GPU 0", "CPU", "RAM" are metrics.ts's).
function seriesName(label: string): string {
  if (label.startsWith("GPU ")) return t("web.chart.series_gpu", { index: label.slice(4) });
  if (label === "CPU") return t("web.chart.series_cpu");
  if (label === "RAM") return t("web.chart.series_ram");
  return label;
}

// The time axis' ticks in the reader's language (uPlot's own are English).
function timeTicks(lang: string, ticks: number[]): string[] {
  const f = new Intl.DateTimeFormat(lang === "zh" ? "zh-CN" : "en-GB",
                                    { hour: "2-digit", minute: "2-digit", second: "2-digit" });
  return ticks.map((v) => f.format(new Date(v * 1000)));
}

function css(name: string): string {
  return getComputedStyle(document.documentElement).getPropertyValue(name).trim() || "#888";
}

function Plot({ chart }: { chart: Chart }) {
  const box = useRef<HTMLDivElement>(null);
  const plot = useRef<uPlot | null>(null);
  const theme = useStore(themeStore);
  const lang = useLang();
  useEffect(() => {
    const el = box.current;
    if (!el) return;
    const fg = css("--fg"), line = css("--line");
    const axis = {
      stroke: fg, grid: { stroke: line, width: 1 }, ticks: { stroke: line, width: 1 },
      values: (_u: uPlot, ticks: number[]) => ticks.map((v) => fmt(chart.unit, v)),
      size: 70,
    };
    const opts: uPlot.Options = {
      width: Math.max(280, el.clientWidth || 600),
      height: 200,
      scales: { x: { time: true }, y: chart.unit === "percent" ? { range: [0, 100] } : { auto: true } },
      axes: [{ stroke: fg, grid: { stroke: line, width: 1 }, ticks: { stroke: line, width: 1 },
               values: (_u: uPlot, ticks: number[]) => timeTicks(lang, ticks) }, axis],
      series: [
        {},
        ...chart.series.map((s, i) => ({
          label: seriesName(s.label),
          stroke: PALETTE[i % PALETTE.length],
          width: 2,
          spanGaps: false,
          value: (_u: uPlot, v: number | null) => fmt(chart.unit, v),
        })),
      ],
      legend: { show: true },
    };
    const data = [chart.x, ...chart.series.map((s) => s.values)] as unknown as uPlot.AlignedData;
    plot.current?.destroy();
    plot.current = new uPlot(opts, data, el);
    const ro = new ResizeObserver(() => {
      if (plot.current && el.clientWidth) plot.current.setSize({ width: el.clientWidth, height: 200 });
    });
    ro.observe(el);
    return () => {
      ro.disconnect();
      plot.current?.destroy();
      plot.current = null;
    };
  }, [chart, theme, lang]);
  const sum = summary(chart);
  return (
    <figure class="chart" data-chart={chart.id} aria-labelledby={`chart-${chart.id}`}>
      <figcaption id={`chart-${chart.id}`}>{t(chart.title)}</figcaption>
      <div ref={box} class="chart-canvas" aria-hidden="true" />
      <ul class="chart-summary">
        {sum.map((s) => (
          <li key={s.label} data-series={s.label} data-last={s.last ?? ""} data-max={s.max ?? ""}>
            {t("web.chart.summary", { series: seriesName(s.label), last: fmt(chart.unit, s.last), max: fmt(chart.unit, s.max) })}
          </li>
        ))}
      </ul>
    </figure>
  );
}

export function RunCharts({ run, active }: { run: string; active: boolean }) {
  const m = useApi<RunMetrics>(`/runs/${encodeURIComponent(run)}/metrics`, active ? 10_000 : 0);
  if (m.error?.status === 404 && !m.data) {
    // No telemetry on this daemon (or none kept for the run).
    return <p class="muted" data-no-metrics="1">{t("web.chart.none")}</p>;
  }
  if (!m.data) return m.loading ? <p class="muted">{t("web.loading")}</p> : null;
  const list = charts(m.data);
  if (!list.length) return <p class="muted" data-no-metrics="1">{t("web.chart.no_samples")}</p>;
  return (
    <>
      {m.data.simulated ? <p class="badge simulated" data-simulated="1">{t("web.gpu.simulated")}</p> : null}
      <div class="charts">
        {list.map((c) => <Plot key={c.id} chart={c} />)}
      </div>
    </>
  );
}
