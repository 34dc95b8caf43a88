// Unit tests of the log viewer's paging and geometry (web/src/components/log_cache.ts),
// compiled with the web build's esbuild and run by node's test runner:
//   node --test tests/web/log_cache.test.mjs
import test from "node:test";
import assert from "node:assert/strict";
import path from "node:path";
import { createRequire } from "node:module";
import { fileURLToPath } from "node:url";

const here = path.dirname(fileURLToPath(import.meta.url));
const web = path.join(here, "..", "..", "web");
const require = createRequire(path.join(web, "node_modules", "noop.js"));
const esbuild = require("esbuild");
const out = await esbuild.build({
  entryPoints: [path.join(web, "src", "components", "log_cache.ts")],
  bundle: true, format: "esm", write: false, logLevel: "error",
});
const m = await import("data:text/javascript;base64," + Buffer.from(out.outputFiles[0].text).toString("base64"));
const { PageCache, PAGE, parseNumbered, geometry, scrollTopFor, MAX_SPACER_PX } = m;

test("the cache holds at most its bound of pages and drops the least recently used", () => {
  const c = new PageCache(3);
  for (let p = 0; p < 3; p++) c.put(p, [`page ${p}`]);
  assert.equal(c.line(0), "page 0");         // page 0 is now the newest
  c.put(3, ["page 3"]);                        // drops page 1, the least recently used
  assert.equal(c.size, 3);
  assert.equal(c.line(1 * PAGE), undefined);
  assert.equal(c.line(0), "page 0");
  assert.equal(c.line(3 * PAGE), "page 3");
});

test("a page is complete with PAGE lines, or with every line up to the end of the log", () => {
  const c = new PageCache();
  c.put(0, new Array(PAGE).fill("x"));
  c.put(1, ["a", "b"]);
  assert.ok(c.complete(0, 10 * PAGE));
  assert.ok(c.complete(1, PAGE + 2));
  assert.ok(!c.complete(1, PAGE + 3));         // the log grew past it: read it again
  assert.ok(!c.complete(2, 10 * PAGE));
});

test("followed lines extend their page only where they continue it", () => {
  const c = new PageCache();
  c.put(1, ["a", "b"]);
  c.append(PAGE + 2, "c");
  assert.equal(c.line(PAGE + 2), "c");
  c.append(PAGE + 5, "gap");                   // lines 3 and 4 are missing: not appended
  assert.equal(c.line(PAGE + 5), undefined);
  c.append(2 * PAGE, "new page");
  assert.equal(c.line(2 * PAGE), "new page");
  c.append(3 * PAGE + 1, "mid page");          // no page to continue
  assert.equal(c.line(3 * PAGE + 1), undefined);
});

test("numbered lines are parsed; a text with tabs keeps them", () => {
  assert.deepEqual(parseNumbered("7\tone\n8\ttwo\tthree\n"), [[7, "one"], [8, "two\tthree"]]);
  assert.deepEqual(parseNumbered("9\t\n"), [[9, ""]]);
  assert.deepEqual(parseNumbered(""), []);
});

test("a small log's geometry is one pixel of spacer per pixel of lines", () => {
  const g = geometry(1000, 20, 400, 2000);
  assert.equal(g.spacer, 20000);
  assert.equal(g.first, 100);
  assert.equal(g.offset, 0);
  assert.equal(scrollTopFor(100, 1000, 20, 400), 2000);
  assert.equal(scrollTopFor(999, 1000, 20, 400), 20000 - 400);  // as near as the end allows
});

test("a 1,000,000-line log's spacer is scaled under the browser's limit and still reaches every line", () => {
  const lines = 1_000_000, row = 20, view = 600;
  const top = geometry(lines, row, view, 0);
  assert.equal(top.spacer, MAX_SPACER_PX);
  assert.ok(top.spacer < 33_000_000);
  assert.equal(top.first, 0);
  const end = geometry(lines, row, view, MAX_SPACER_PX - view);
  // At the end, the last line ends at the bottom of the view.
  assert.equal(end.first, lines - view / row);
  assert.equal(end.offset, 0);
  for (const n of [1, 123_456, 500_000, 777_777, 999_000]) {
    const g = geometry(lines, row, view, scrollTopFor(n, lines, row, view));
    assert.ok(Math.abs(g.first - n) <= 1, `line ${n}: the view starts at ${g.first}`);
  }
});
