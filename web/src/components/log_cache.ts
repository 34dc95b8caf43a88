// The log viewer's pages of lines: PAGE lines each, read with the API's
// ranged reads (GET /runs/{run}/logs?offset=K&limit=PAGE&numbers=1), kept in
// a bounded least-recently-used cache so that scrolling through a
// 1,000,000-line log holds a few thousand lines, never all of them.
export const PAGE = 500;
export const MAX_PAGES = 40;  // 20,000 lines at most

export class PageCache {
  private pages = new Map<number, string[]>();  // page index -> its lines, in LRU order (oldest first)

  constructor(private readonly max = MAX_PAGES) {}

  // The text of line n, or undefined when its page is not here (marks the page used).
  line(n: number): string | undefined {
    const p = Math.floor(n / PAGE);
    const page = this.pages.get(p);
    if (!page) return undefined;
    this.touch(p, page);
    return page[n - p * PAGE];
  }

  // Whether page p holds every line it can: PAGE lines, or those up to `total`.
  complete(p: number, total: number): boolean {
    const page = this.pages.get(p);
    return !!page && page.length >= Math.min(PAGE, total - p * PAGE);
  }

  put(p: number, lines: string[]) {
    this.pages.delete(p);
    this.pages.set(p, lines);
    while (this.pages.size > this.max) {
      const oldest = this.pages.keys().next().value as number;
      this.pages.delete(oldest);
    }
  }

  // Line n arrived by the follow stream: appended when it continues its page
  // (or starts one); otherwise its page is read again when it is shown.
  append(n: number, text: string) {
    const p = Math.floor(n / PAGE);
    const page = this.pages.get(p);
    if (page && page.length === n - p * PAGE) page.push(text);
    else if (!page && n === p * PAGE) this.put(p, [text]);
  }

  get size(): number {
    return this.pages.size;
  }

  clear() {
    this.pages.clear();
  }

  private touch(p: number, page: string[]) {
    // Map keeps insertion order: re-inserting makes p the newest.
    if (this.pages.size > 1) {
      this.pages.delete(p);
      this.pages.set(p, page);
    }
  }
}

// "N\tTEXT" lines (numbers=1) into [n, text] pairs; a line without a number
// (the last, empty one after the final newline) is left out.
export function parseNumbered(body: string): [number, string][] {
  const out: [number, string][] = [];
  let at = 0;
  while (at < body.length) {
    let end = body.indexOf("\n", at);
    if (end < 0) end = body.length;
    const tab = body.indexOf("\t", at);
    if (tab > at && tab < end) {
      const n = Number(body.slice(at, tab));
      if (Number.isInteger(n)) out.push([n, body.slice(tab + 1, end)]);
    }
    at = end + 1;
  }
  return out;
}

// The browser's limit on an element's height is about 33,554,428 px in
// Chromium (and lower in Firefox): a spacer for more lines than fit is
// scaled down, and the scroll position maps onto the lines.
export const MAX_SPACER_PX = 15_000_000;

export interface Geometry {
  spacer: number;       // the spacer's height, px
  first: number;        // the first line (partly) in view
  offset: number;       // px of the first line above the top of the view
}

// Where the view is, for `lines` lines of `row` px in a view of `view` px
// scrolled to `scrollTop` (of the scaled spacer).
export function geometry(lines: number, row: number, view: number, scrollTop: number): Geometry {
  const content = lines * row;
  const spacer = Math.min(content, MAX_SPACER_PX);
  const maxScroll = Math.max(0, spacer - view);
  const virtualMax = Math.max(0, content - view);
  const top = maxScroll > 0 ? (Math.min(scrollTop, maxScroll) * virtualMax) / maxScroll : 0;
  const first = Math.min(Math.max(0, lines - 1), Math.floor(top / row));
  return { spacer, first, offset: top - first * row };
}

// The scrollTop that puts line n at the top of the view (or as near as the end allows).
export function scrollTopFor(n: number, lines: number, row: number, view: number): number {
  const content = lines * row;
  const spacer = Math.min(content, MAX_SPACER_PX);
  const maxScroll = Math.max(0, spacer - view);
  const virtualMax = Math.max(0, content - view);
  if (virtualMax === 0) return 0;
  const top = Math.min(n * row, virtualMax);
  return (top * maxScroll) / virtualMax;
}
