// A run's log, virtualized: only the lines in view (and OVERSCAN on each
// side) are elements, over a spacer as tall as the log (scaled past the
// browser's height limit, log_cache.ts). Lines come in pages from the API's
// ranged reads, cached (bounded LRU) and fetched as the view settles; a live
// run's new lines arrive by GET /logs?follow=1 and keep the view at the end
// while it is there. Search is the server's (grep=RE): a list of hits, next
// and previous, a jump that scrolls to the line and marks it.
// Keys, with the log focused: Home / End (start, end), PageUp / PageDown and
// the arrows (scroll), n / N (next / previous hit), / (the search box).
import { useEffect, useLayoutEffect, useRef, useState } from "preact/hooks";
import { api, apiText, ApiError } from "../api";
import { ErrorBox } from "./status";
import { t } from "../i18n";
import { geometry, PAGE, PageCache, parseNumbered, scrollTopFor } from "./log_cache";

export const ROW_PX = 20;       // the CSS's .log-line height
const OVERSCAN = 20;            // lines drawn beyond each edge of the view
const FETCH_DEBOUNCE_MS = 60;   // a fling through the log fetches where it stops
const MAX_FETCHES = 2;          // pages read at once (a user may read 16 logs at once)
const HITS_PAGE = 100;
const SHORT_LOG = 20;           // fewer lines: the view is only as tall as the log

interface Stats {
  lines: number;
  bytes: number;
  finished: boolean;
}

function enc(s: string) {
  return encodeURIComponent(s);
}

export function LogViewer({ run, live }: { run: string; live: boolean }) {
  const base = `/runs/${enc(run)}/logs`;
  const scroller = useRef<HTMLDivElement>(null);
  const search = useRef<HTMLInputElement>(null);
  const cache = useRef(new PageCache());
  const inFlight = useRef(new Set<number>());
  const atBottom = useRef(true);
  const [total, setTotal] = useState<number | null>(null);
  const [scrollTop, setScrollTop] = useState(0);
  const [view, setView] = useState(480);
  const [, setPagesSeen] = useState(0);  // a page arrived: draw again
  const [error, setError] = useState<ApiError | null>(null);
  const [following, setFollowing] = useState(false);
  const [highlight, setHighlight] = useState<number | null>(null);
  const totalRef = useRef(0);
  totalRef.current = total ?? 0;

  // The size of the log, then the view at its end (as tail does).
  useEffect(() => {
    let gone = false;
    cache.current.clear();
    api<Stats>(`${base}/stats`)
      .then((s) => {
        if (gone) return;
        atBottom.current = true;
        setTotal(s.lines);
      })
      .catch((e) => !gone && setError(e instanceof ApiError ? e : null));
    return () => { gone = true; };
  }, [base]);

  // Follow a live run from the end: each line arrives numbered (numbers=1).
  const followFrom = total !== null && live ? true : false;
  useEffect(() => {
    if (!followFrom) return;
    let es: EventSource | null = null;
    let retry: ReturnType<typeof setTimeout> | null = null;
    let closed = false;
    const open = () => {
      es = new EventSource(`/api/v1${base}?follow=1&numbers=1&offset=${totalRef.current}`);
      es.addEventListener("log", (ev) => {
        let line = "";
        try {
          line = (JSON.parse((ev as MessageEvent).data) as { line: string }).line;
        } catch {
          return;
        }
        const tab = line.indexOf("\t");
        const n = tab > 0 ? Number(line.slice(0, tab)) : NaN;
        if (!Number.isInteger(n)) return;
        cache.current.append(n, line.slice(tab + 1));
        if (n + 1 > totalRef.current) {
          totalRef.current = n + 1;
          setTotal(n + 1);
        }
      });
      es.addEventListener("end", () => {
        closed = true;
        es?.close();
        setFollowing(false);
      });
      es.onopen = () => setFollowing(true);
      es.onerror = () => {
        // Reopened from where the log is now, not from where it began.
        es?.close();
        setFollowing(false);
        if (!closed) retry = setTimeout(open, 2000);
      };
    };
    open();
    return () => {
      closed = true;
      es?.close();
      if (retry) clearTimeout(retry);
      setFollowing(false);
    };
  }, [base, followFrom]);

  // The view's height.
  useEffect(() => {
    const el = scroller.current;
    if (!el) return;
    const ro = new ResizeObserver(() => setView(el.clientHeight));
    ro.observe(el);
    setView(el.clientHeight);
    return () => ro.disconnect();
  }, [total !== null]);

  const lines = total ?? 0;
  const g = geometry(lines, ROW_PX, view, scrollTop);
  const visible = Math.ceil(view / ROW_PX) + 1;
  const start = Math.max(0, g.first - OVERSCAN);
  const end = Math.min(lines, g.first + visible + OVERSCAN);

  // New lines while at the end: stay at the end.
  useLayoutEffect(() => {
    const el = scroller.current;
    if (el && atBottom.current && lines > 0) {
      el.scrollTop = el.scrollHeight;
      setScrollTop(el.scrollTop);
    }
  }, [lines, view]);

  // The pages the view needs, read at most every FETCH_DEBOUNCE_MS (a fling
  // through the log reads where it is when the timer fires, not every page
  // it passed).
  const want = useRef({ start, end });
  want.current = { start, end };
  const timer = useRef<ReturnType<typeof setTimeout> | null>(null);
  const frame = useRef(0);
  const pausedUntil = useRef(0);  // after a failed read, wait before the next
  useEffect(() => () => {
    if (timer.current) clearTimeout(timer.current);
    if (frame.current) cancelAnimationFrame(frame.current);
  }, []);
  useEffect(() => {
    if (total === null || lines === 0 || timer.current) return;
    const wait = Math.max(FETCH_DEBOUNCE_MS, pausedUntil.current - Date.now());
    timer.current = setTimeout(() => {
      timer.current = null;
      const { start: a, end: b } = want.current;
      const needed: number[] = [];
      for (let p = Math.floor(a / PAGE); p <= Math.floor(Math.max(a, b - 1) / PAGE); p++) {
        if (!cache.current.complete(p, totalRef.current) && !inFlight.current.has(p)) needed.push(p);
      }
      for (const p of needed.slice(0, Math.max(0, MAX_FETCHES - inFlight.current.size))) {
        inFlight.current.add(p);
        apiText(`${base}?offset=${p * PAGE}&limit=${PAGE}&numbers=1`)
          .then(({ text }) => {
            cache.current.put(p, parseNumbered(text).map(([, line]) => line));
            setError(null);
          })
          .catch((e) => {
            pausedUntil.current = Date.now() + 2000;
            setError(e instanceof ApiError ? e : null);
          })
          .finally(() => {
            inFlight.current.delete(p);
            setPagesSeen((n) => n + 1);
          });
      }
    }, wait);
  });

  const onScroll = () => {
    const el = scroller.current;
    if (!el) return;
    atBottom.current = el.scrollTop + el.clientHeight >= el.scrollHeight - ROW_PX / 2;
    if (frame.current) return;
    frame.current = requestAnimationFrame(() => {
      frame.current = 0;
      setScrollTop(el.scrollTop);
    });
  };

  const toStart = () => {
    const el = scroller.current;
    if (!el) return;
    atBottom.current = false;
    el.scrollTop = 0;
    setScrollTop(0);
  };
  const toEnd = () => {
    const el = scroller.current;
    if (!el) return;
    atBottom.current = true;
    el.scrollTop = el.scrollHeight;
    setScrollTop(el.scrollTop);
  };
  const jump = (n: number) => {
    const el = scroller.current;
    if (!el) return;
    setHighlight(n);
    const top = scrollTopFor(Math.max(0, n - 3), lines, ROW_PX, el.clientHeight);
    atBottom.current = false;
    el.scrollTop = top;
    setScrollTop(el.scrollTop);
  };

  const hits = useHits(base, jump);

  const onKey = (e: KeyboardEvent) => {
    if (e.ctrlKey || e.metaKey || e.altKey) return;
    if (e.key === "Home") { e.preventDefault(); toStart(); }
    else if (e.key === "End") { e.preventDefault(); toEnd(); }
    else if (e.key === "/") { e.preventDefault(); search.current?.focus(); }
    else if (e.key === "n") { e.preventDefault(); hits.step(1); }
    else if (e.key === "N") { e.preventDefault(); hits.step(-1); }
  };

  const rows = [];
  for (let i = start; i < end; i++) {
    const text = cache.current.line(i);
    rows.push(
      <div
        key={i}
        class={`log-line${text === undefined ? " pending" : ""}${i === highlight ? " hit" : ""}`}
        data-line={i}
        aria-current={i === highlight ? "true" : undefined}
      >
        <span class="ln" aria-hidden="true">{i + 1}</span>
        <span class="tx">{text ?? ""}</span>
      </div>,
    );
  }
  // The rows' block sits where the first drawn line is, in the spacer's pixels.
  const blockTop = Math.max(0, Math.min(scrollTop, Math.max(0, g.spacer - view))) - g.offset -
    (g.first - start) * ROW_PX;

  return (
    <div class="log-viewer">
      <div class="toolbar log-tools">
        <button type="button" onClick={toStart} aria-keyshortcuts="Home">{t("web.log.start")}</button>
        <button type="button" onClick={toEnd} aria-keyshortcuts="End">{t("web.log.end")}</button>
        <span class="live" data-live={following ? "1" : "0"} data-following={following ? "1" : "0"}>
          {t(following ? "web.log.following" : live ? "web.log.not_following" : "web.log.ended")}
        </span>
        <span class="muted" data-lines={lines}>{t("web.log.lines", { lines: lines.toLocaleString() })}</span>
        <a href={`/api/v1${base}`} download={`${run}.log`}>{t("web.log.download")}</a>
      </div>
      <form class="toolbar log-search" role="search" onSubmit={(e) => { e.preventDefault(); hits.run(search.current?.value ?? ""); }}>
        <label for="log-grep">{t("web.log.search")}</label>
        <input id="log-grep" ref={search} type="search" spellcheck={false}
               aria-describedby="log-grep-hint" aria-invalid={hits.error ? "true" : undefined} />
        <button type="submit">{t("web.log.find")}</button>
        <button type="button" onClick={() => hits.step(-1)} disabled={!hits.list.length}
                aria-keyshortcuts="Shift+N">{t("web.log.prev")}</button>
        <button type="button" onClick={() => hits.step(1)} disabled={!hits.list.length}
                aria-keyshortcuts="N">{t("web.log.next")}</button>
        <span id="log-grep-hint" class="muted">{t("web.log.search_hint")}</span>
      </form>
      {hits.error ? <p class="error field-error" role="alert" data-error-id={hits.error.id}>{hits.error.text()}</p> : null}
      {hits.searched !== null ? (
        <div class="log-hits">
          <p class="muted" aria-live="polite" data-hits={hits.list.length}>
            {hits.list.length === 0
              ? t("web.log.no_hits")
              : t("web.log.hits", {
                  count: hits.list.length, at: hits.index >= 0 ? hits.index + 1 : 0,
                })}
          </p>
          {hits.list.length ? (
            <ol aria-label={t("web.log.hits_label")}>
              {hits.list.map(([n, text], k) => (
                <li key={n}>
                  <button type="button" class={`link hit-link${k === hits.index ? " current" : ""}`}
                          data-hit={n} onClick={() => hits.go(k)}>
                    {t("web.log.hit_line", { line: n + 1 })}
                  </button>{" "}
                  <code>{text.length > 160 ? text.slice(0, 160) + "…" : text}</code>
                </li>
              ))}
            </ol>
          ) : null}
          {hits.more ? <button type="button" onClick={hits.loadMore}>{t("web.log.more_hits")}</button> : null}
        </div>
      ) : null}
      <ErrorBox error={error} />
      <div
        class="log-scroll"
        ref={scroller}
        tabIndex={0}
        role="region"
        aria-label={t("web.log.region")}
        aria-keyshortcuts="Home End PageUp PageDown n N /"
        onScroll={onScroll}
        onKeyDown={onKey}
        style={lines < SHORT_LOG ? { height: `${(Math.max(lines, 2) + 1) * ROW_PX + 2}px` } : undefined}
      >
        {total === null ? (
          <p class="muted">{t("web.loading")}</p>
        ) : lines === 0 ? (
          <p class="muted">{t("web.log.empty")}</p>
        ) : (
          <div class="log-spacer" style={{ height: `${g.spacer}px` }}>
            <div class="log-rows" style={{ top: `${blockTop}px` }}>{rows}</div>
          </div>
        )}
      </div>
    </div>
  );
}

// The server's search: the first HITS_PAGE hits from line 0, more on request.
function useHits(base: string, jump: (n: number) => void) {
  const [list, setList] = useState<[number, string][]>([]);
  const [index, setIndex] = useState(-1);
  const [searched, setSearched] = useState<string | null>(null);
  const [next, setNext] = useState<number | null>(null);
  const [more, setMore] = useState(false);
  const [error, setError] = useState<ApiError | null>(null);
  const seq = useRef(0);

  const fetchHits = async (pattern: string, offset: number, append: boolean) => {
    const mine = ++seq.current;
    try {
      const r = await apiText(`${base}?grep=${enc(pattern)}&numbers=1&offset=${offset}&limit=${HITS_PAGE}`);
      if (mine !== seq.current) return;
      const got = parseNumbered(r.text);
      setError(null);
      setSearched(pattern);
      setNext(r.next);
      setMore(got.length === HITS_PAGE);
      const all = append ? [...list, ...got] : got;
      setList(all);
      if (!append && got.length) {
        setIndex(0);
        jump(got[0][0]);
      } else if (!append) setIndex(-1);
    } catch (e) {
      if (mine !== seq.current) return;
      setError(e instanceof ApiError ? e : null);
      setSearched(null);
      setList([]);
      setIndex(-1);
      setMore(false);
    }
  };

  return {
    list, index, searched, more, error,
    run(pattern: string) {
      if (!pattern) {
        seq.current++;
        setSearched(null);
        setList([]);
        setError(null);
        return;
      }
      void fetchHits(pattern, 0, false);
    },
    loadMore() {
      if (searched !== null && next !== null) void fetchHits(searched, next, true);
    },
    go(k: number) {
      if (k < 0 || k >= list.length) return;
      setIndex(k);
      jump(list[k][0]);
    },
    step(d: number) {
      if (!list.length) return;
      const k = index < 0 ? 0 : (index + d + list.length) % list.length;
      setIndex(k);
      jump(list[k][0]);
    },
  };
}
