// The client-side router: the UI's pages live at /ui/<path> (the daemon answers
// every such path with index.html), history.pushState moves between them, and
// a page's own state (filters, sort, offset) lives in the query string so that
// a link or a reload shows the same thing.
import { h, type AnchorHTMLAttributes } from "preact";
import { createStore, useStore } from "./store";

export const BASE = "/ui";

interface Location {
  path: string;  // under BASE: "/", "/runs", "/runs/r1"
  query: URLSearchParams;
}

function current(): Location {
  let p = location.pathname.startsWith(BASE) ? location.pathname.slice(BASE.length) : "/";
  if (p === "") p = "/";
  return { path: p, query: new URLSearchParams(location.search) };
}

const locStore = createStore<Location>(current());
addEventListener("popstate", () => locStore.set(current()));

export function useLocation(): Location {
  return useStore(locStore);
}

// Goes to `to` (a path under BASE, with or without a query).
export function navigate(to: string, replace = false) {
  const url = BASE + (to === "/" ? "/" : to);
  if (replace) history.replaceState(null, "", url);
  else history.pushState(null, "", url);
  locStore.set(current());
}

// Replaces the query string of the current page (no new history entry);
// empty values are left out.
export function setQuery(params: Record<string, string | number | undefined>) {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) {
    if (v !== undefined && v !== "") q.set(k, String(v));
  }
  const s = q.toString();
  navigate(locStore.get().path + (s ? "?" + s : ""), true);
}

// The params of `path` matched against `pattern` ("/runs/:id"), or null.
export function match(pattern: string, path: string): Record<string, string> | null {
  const a = pattern.split("/").filter(Boolean);
  const b = path.split("/").filter(Boolean);
  if (a.length !== b.length) return null;
  const params: Record<string, string> = {};
  for (let i = 0; i < a.length; i++) {
    if (a[i].startsWith(":")) params[a[i].slice(1)] = decodeURIComponent(b[i]);
    else if (a[i] !== b[i]) return null;
  }
  return params;
}

type LinkProps = AnchorHTMLAttributes<HTMLAnchorElement> & { href: string };

// An <a> to a page of the UI: a plain click moves without a reload; a middle
// or modified click opens it in a new tab as any link does.
export function Link(props: LinkProps) {
  const { href, ...rest } = props;
  const onClick = (e: MouseEvent) => {
    if (e.button !== 0 || e.metaKey || e.ctrlKey || e.shiftKey || e.altKey) return;
    e.preventDefault();
    navigate(href);
  };
  return h("a", { ...rest, href: BASE + (href === "/" ? "/" : href), onClick });
}
