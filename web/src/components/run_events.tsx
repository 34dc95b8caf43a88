// A run's events as a timeline (GET /api/v1/runs/{run}/events?follow=1: the
// stream ends with `end` once the run has finished), and the diagnosis the
// daemon attached to a failed run (events of type `diagnosis`: what the
// knowledge base recognised in its log, as `lathe explain` tells it).
import { useEffect, useRef, useState } from "preact/hooks";
import { events as sse } from "../api";
import { has, t, useLang } from "../i18n";
import { time } from "../format";
import { StateBadge } from "./status";

export interface RunEvent {
  id: number;
  ts_ms: number;
  type: string;
  message: string;
  text?: { en?: string; zh?: string };  // what a person reads, in each language
  data?: Record<string, unknown>;
}

const TYPES = ["state", "info", "warning", "checkpoint", "diagnosis"];

// The run's events, live: those it came with, then the stream's. onEvent is
// called for each new one (the page refetches the run on a state change).
export function useRunEvents(run: string, initial: RunEvent[] | undefined, onEvent: (e: RunEvent) => void) {
  const [list, setList] = useState<RunEvent[]>([]);
  const [live, setLive] = useState(false);
  const seen = useRef(new Set<number>());
  const latest = useRef(onEvent);
  latest.current = onEvent;
  const started = initial !== undefined;
  useEffect(() => {
    if (!started) return;
    seen.current = new Set((initial ?? []).map((e) => e.id));
    setList([...(initial ?? [])]);
    const after = Math.max(0, ...(initial ?? []).map((e) => e.id));
    let close = () => {};
    close = sse(`/runs/${encodeURIComponent(run)}/events?follow=1&after=${after}`, [...TYPES, "end"],
      (type, data) => {
        if (type === "end") {
          close();
          setLive(false);
          return;
        }
        const e = data as RunEvent | null;
        if (!e || typeof e.id !== "number" || seen.current.has(e.id)) return;
        seen.current.add(e.id);
        setList((l) => [...l, e]);
        latest.current(e);
      }, setLive);
    return () => close();
  }, [run, started]);
  return { list, live };
}

function typeLabel(type: string) {
  return has(`web.event_type.${type}`) ? t(`web.event_type.${type}`) : type;
}

export function Timeline({ list }: { list: RunEvent[] }) {
  const lang = useLang();
  if (!list.length) return <p class="muted">{t("web.run.no_events")}</p>;
  return (
    <ol class="timeline">
      {list.map((e) => {
        const to = e.type === "state" && typeof e.data?.to === "string" ? (e.data.to as string) : "";
        return (
          <li key={e.id} class={`ev ev-${e.type}`} data-event={e.type} data-id={e.id}>
            <time dateTime={new Date(e.ts_ms).toISOString()}>{time(e.ts_ms)}</time>
            {to ? <StateBadge state={to} /> : <span class={`badge ev-type ev-${e.type}`}>{typeLabel(e.type)}</span>}
            <span class="ev-msg" lang={e.text?.[lang] ? (lang === "zh" ? "zh-CN" : "en") : "en"}>
              {e.text?.[lang] || e.message}
            </span>
          </li>
        );
      })}
    </ol>
  );
}

interface Bi {
  en?: string;
  zh?: string;
}

interface Match {
  id: string;
  line_no?: number;
  line?: string;
  title?: Bi;
  scenario?: Bi;
  cause?: Bi;
  fix?: Bi;
  verify?: string;
}

function pick(b: Bi | undefined, lang: string): string {
  if (!b) return "";
  return (lang === "zh" ? b.zh : b.en) || b.en || "";
}

// What the daemon recognised in the log of a run that failed, shown first.
export function Diagnosis({ list }: { list: RunEvent[] }) {
  const lang = useLang();
  const matches: Match[] = [];
  for (const e of list) {
    if (e.type !== "diagnosis") continue;
    const m = e.data?.matches;
    if (Array.isArray(m)) matches.push(...(m as Match[]));
  }
  if (!matches.length) return null;
  return (
    <section class="diagnosis" aria-labelledby="diagnosis-h" data-diagnosis={matches[0].id}>
      <h2 id="diagnosis-h">{t("web.run.diagnosis")}</h2>
      {matches.map((m, i) => (
        <article key={m.id + i} class="diag" data-kb={m.id}>
          <h3>{pick(m.title, lang) || m.id} <code class="muted">{m.id}</code></h3>
          {m.line ? (
            <p>
              {t("web.run.diag_line")}{" "}
              <code>{m.line}</code>
            </p>
          ) : null}
          <dl class="facts">
            {m.cause ? (<><dt>{t("web.run.diag_cause")}</dt><dd>{pick(m.cause, lang)}</dd></>) : null}
            {m.fix ? (<><dt>{t("web.run.diag_fix")}</dt><dd>{pick(m.fix, lang)}</dd></>) : null}
            {m.verify ? (<><dt>{t("web.run.diag_verify")}</dt><dd><code>{m.verify}</code></dd></>) : null}
          </dl>
        </article>
      ))}
    </section>
  );
}
