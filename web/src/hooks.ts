// Data from the API for a component: fetched when its path changes, again
// every `pollMs` (when given) and on reload(). An answer that comes after a
// newer request started is dropped.
import { useCallback, useEffect, useRef, useState } from "preact/hooks";
import { api, ApiError } from "./api";

export interface Fetched<T> {
  data: T | null;  // the last good answer (kept while a refetch is under way or failed)
  error: ApiError | null;
  loading: boolean;
  reload: () => void;
}

export function useApi<T>(path: string | null, pollMs = 0): Fetched<T> {
  const [data, setData] = useState<T | null>(null);
  const [error, setError] = useState<ApiError | null>(null);
  const [loading, setLoading] = useState(true);
  const seq = useRef(0);
  const reload = useCallback(() => {
    if (path === null) return;
    const mine = ++seq.current;
    api<T>(path)
      .then((d) => {
        if (mine !== seq.current) return;
        setData(d);
        setError(null);
      })
      .catch((e) => {
        if (mine !== seq.current) return;
        setError(e instanceof ApiError ? e : null);
      })
      .finally(() => {
        if (mine === seq.current) setLoading(false);
      });
  }, [path]);
  useEffect(() => {
    setLoading(true);
    reload();
    if (!pollMs) return;
    const id = setInterval(reload, pollMs);
    return () => clearInterval(id);
  }, [reload, pollMs]);
  return { data, error, loading, reload };
}

// Like useApi, for an answer that may be slow (GET /pools asks each cluster):
// the next request starts `pollMs` after the last one settled, never while one
// is under way, so a slow answer is not dropped for a newer request.
export function useApiSlow<T>(path: string, pollMs: number): Fetched<T> {
  const [data, setData] = useState<T | null>(null);
  const [error, setError] = useState<ApiError | null>(null);
  const [loading, setLoading] = useState(true);
  const [tick, setTick] = useState(0);
  useEffect(() => {
    let live = true;
    let timer: ReturnType<typeof setTimeout> | null = null;
    setLoading(true);
    api<T>(path)
      .then((d) => {
        if (!live) return;
        setData(d);
        setError(null);
      })
      .catch((e) => {
        if (live) setError(e instanceof ApiError ? e : null);
      })
      .finally(() => {
        if (!live) return;
        setLoading(false);
        timer = setTimeout(() => setTick((n) => n + 1), pollMs);
      });
    return () => {
      live = false;
      if (timer) clearTimeout(timer);
    };
  }, [path, pollMs, tick]);
  const reload = useCallback(() => setTick((n) => n + 1), []);
  return { data, error, loading, reload };
}

// fn, called at most once per `ms` after the last call (trailing edge).
export function useDebounced(fn: () => void, ms: number): () => void {
  const timer = useRef<ReturnType<typeof setTimeout> | null>(null);
  const latest = useRef(fn);
  latest.current = fn;
  useEffect(() => () => {
    if (timer.current) clearTimeout(timer.current);
  }, []);
  return useCallback(() => {
    if (timer.current) clearTimeout(timer.current);
    timer.current = setTimeout(() => latest.current(), ms);
  }, [ms]);
}
