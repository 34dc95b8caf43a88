// The web UI in a real browser (Debian's chromium, headless, driven by
// playwright-core), against a real daemon that tests/integ/test_web.py started.
//   node ui.spec.mjs CONFIG.json
// CONFIG: {login_url, lathe: [argv prefix that runs the CLI as the signed-in user],
//          other_run (another user's run id), artifacts (dir), catalog ({id: {en, zh}}),
//          chromium, node_modules,
//          big_run (a finished run with big_lines lines: first_text, middle_text at
//          middle_line, needle_text at needle_line, last_text), ckpt_run (a run with a
//          checkpoint), restore_to (a directory to restore it into), failed_run (a run the
//          daemon diagnosed: CUDA out of memory), model (registered from ckpt_run's
//          checkpoint as version 1, alias prod), deployment (a command deployment, one replica),
//          served_model (a model whose versions 1 and 2 serve {"v": N} and 3 cannot load),
//          user2 and lathe2 (a third user, unprivileged, and the CLI as it: it signs in
//          in a second browser context to see what is shared with it), lathe_admin (the
//          CLI as root, an admin: it signs in to manage another's project),
//          project_limits (the daemon's quotas.projects.webproj: {gpus, gpu_hours, period})}
// Prints one line per step; exits 1 with the failed step's message.
import fs from "node:fs";
import path from "node:path";
import { execFileSync } from "node:child_process";
import { createRequire } from "node:module";

const cfg = JSON.parse(fs.readFileSync(process.argv[2], "utf8"));
const require = createRequire(path.join(cfg.node_modules, "noop.js"));
const { chromium } = require("playwright-core");
const axeSource = fs.readFileSync(require.resolve("axe-core/axe.min.js"), "utf8");

const PAGES = [
  ["overview", "/ui/", ".doctor-summary"], ["runs", "/ui/runs"], ["snapshots", "/ui/snapshots"],
  ["models", "/ui/models"], ["deployments", "/ui/deployments"], ["notebooks", "/ui/notebooks"],
  ["access", "/ui/access", 'section[aria-labelledby="tokens"] table'],
  ["run-log", `/ui/runs/${cfg.big_run}`, ".log-line:not(.pending)"],
  ["run-checkpoint", `/ui/runs/${cfg.ckpt_run}`, "[data-restore]"],
  ["run-failed", `/ui/runs/${cfg.failed_run}`, ".diagnosis"],
  // Shared by then (sharing()): the Sharing sections with their grants, the role words.
  ["model-shared", `/ui/models?model=${cfg.model}`, `[data-sharing] tr[data-key="user:${cfg.user2}"]`],
  ["deployment-sharing", `/ui/deployments?name=${cfg.served_model}`, "[data-sharing] table"],
];
// The most line elements the log viewer may have in the DOM at once.
const MAX_LINE_ELEMENTS = 300;
const WAIT = { timeout: 30_000 };
let step = "start";
const problems = [];  // CSP violations and script errors seen on the way

function log(msg) {
  console.log(`[ui] ${msg}`);
}

function check(cond, msg) {
  if (!cond) throw new Error(msg);
}

function cliAs(argv, ...args) {
  const [cmd, ...pre] = argv;
  return execFileSync(cmd, [...pre, ...args], { encoding: "utf8" }).trim();
}

function cli(...args) {
  return cliAs(cfg.lathe, ...args);
}

async function axe(page, name) {
  await page.evaluate(axeSource);  // evaluated by the test, not loaded by the page: the CSP stays
  const r = await page.evaluate(async () =>
    // eslint-disable-next-line no-undef
    (await axe.run(document, { resultTypes: ["violations"] })).violations.map((v) => ({
      id: v.id, impact: v.impact, nodes: v.nodes.slice(0, 3).map((n) => n.target.join(" ")),
    })));
  const bad = r.filter((v) => v.impact === "serious" || v.impact === "critical");
  check(bad.length === 0, `axe on ${name}: ${JSON.stringify(bad)}`);
}

async function shot(page, name) {
  await page.screenshot({ path: path.join(cfg.artifacts, `${name}.png`), fullPage: true });
}

// Texts of the catalog that must not be on a page in the other language: those
// that differ between en and zh and have no {placeholder}.
function foreignTexts(lang) {
  const other = lang === "zh" ? "en" : "zh";
  return Object.values(cfg.catalog)
    .filter((e) => e.en !== e.zh && !/\{\w+\}/.test(e[other]) && e[other].length > 3)
    .map((e) => e[other]);
}

async function checkLanguage(page, lang, name) {
  const texts = await page.evaluate(() => {
    const out = [];
    const w = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
    for (let n = w.nextNode(); n; n = w.nextNode()) {
      const s = n.textContent.trim();
      if (s && n.parentElement.closest("option, script, style, code, pre") === null) out.push(s);
    }
    for (const el of document.querySelectorAll("[aria-label]")) out.push(el.getAttribute("aria-label"));
    return out;
  });
  const ids = texts.filter((s) => /\bweb\.[a-z_]+\.[a-z_.]+/.test(s));
  check(ids.length === 0, `${name}: catalog ids shown instead of texts: ${ids.join(" | ")}`);
  const foreign = new Set(foreignTexts(lang));
  const wrong = texts.filter((s) => foreign.has(s));
  check(wrong.length === 0, `${name} in ${lang}: texts of the other language: ${wrong.join(" | ")}`);
  const htmlLang = await page.evaluate(() => document.documentElement.lang);
  check(htmlLang === (lang === "zh" ? "zh-CN" : "en"), `${name}: <html lang=${htmlLang}>`);
}

async function visitAll(page, lang) {
  for (const [name, url, ready] of PAGES) {
    step = `${name} (${lang})`;
    await page.goto(new URL(url, cfg.login_url).href);
    await page.waitForSelector("main h1", WAIT);
    await page.waitForSelector("table tbody tr", WAIT);
    if (ready) await page.waitForSelector(ready, WAIT);
    await page.waitForFunction(() => !document.querySelector("td.empty")?.textContent?.match(/Loading|加载中/), null, WAIT);
    await checkLanguage(page, lang, name);
    await axe(page, `${name} (${lang})`);
    await shot(page, `${name}-${lang}`);
    log(`${step}: translated, axe clean, screenshot`);
  }
}

// A model's or deployment's ref ("owner/name", where the daemon gives one) by
// its name: what the UI puts into its links, its addresses and its marks.
const refs = {};
async function loadRefs(page) {
  const [m, d] = await page.evaluate(async () => Promise.all(
    ["/api/v1/models", "/api/v1/deployments"].map(async (u) => (await fetch(u)).json())));
  for (const x of [...m.models, ...d.deployments]) if (x.owner === cfg.user) refs[x.name] = x.ref ?? x.name;
}
const ref = (name) => refs[name] ?? name;

function row(page, id) {
  return page.locator(`tr[data-key="${id}"]`);
}


function go(page, url) {
  return page.goto(new URL(url, cfg.login_url).href);
}

// The log viewer's line elements: how many, and the text of line n (null when not drawn).
function lineCount(page) {
  return page.locator(".log-line").count();
}

async function waitLine(page, n, text) {
  const row = page.locator(`.log-line[data-line="${n}"] .tx`);
  await row.waitFor(WAIT);
  await page.waitForFunction(([k, want]) =>
    document.querySelector(`.log-line[data-line="${k}"] .tx`)?.textContent === want, [n, text], WAIT);
}

async function logFollowsLive(page) {
  step = "a run's log follows live";
  // 100 lines at once (enough to scroll), then one every 0.2 s.
  const id = cli("run", "--name", "ticks", "--workdir", "/tmp", "--", "sh", "-c",
    "seq 1 100 | sed 's/^/pre /'; i=0; while [ $i -lt 3000 ]; do echo tick $i; i=$((i+1)); sleep 0.2; done");
  await go(page, `/ui/runs/${id}`);
  await page.waitForSelector('.log-tools [data-following="1"]', WAIT);
  await page.evaluate(() => { window.__noReload = true; });
  const ticks = () => page.evaluate(() => Math.max(-1, ...[...document.querySelectorAll(".log-line .tx")]
    .map((e) => Number((e.textContent.match(/^tick (\d+)$/) ?? [])[1] ?? -1))));
  const tickShown = (k) => page.waitForFunction((n) => [...document.querySelectorAll(".log-line .tx")]
    .some((e) => e.textContent === `tick ${n}`), k, WAIT);
  await tickShown(1);
  const before = await ticks();
  // Five more lines (a second of the run's time) arrive without a reload, at the end of the view.
  await tickShown(before + 5);
  const after = await ticks();
  check(await page.evaluate(() => window.__noReload === true), "the page was reloaded");
  const atEnd = () => page.evaluate(() => {
    const el = document.querySelector(".log-scroll");
    return el.scrollTop > 0 && el.scrollTop + el.clientHeight >= el.scrollHeight - 10;
  });
  check(await atEnd(), "the view did not stay at the end");

  step = "scrolled up, the view stays where it is while lines arrive";
  await page.focus(".log-scroll");
  await page.keyboard.press("Home");
  await waitLine(page, 0, "pre 1");
  const lines = Number(await page.getAttribute("[data-lines]", "data-lines"));
  await page.waitForFunction((n) => Number(document.querySelector("[data-lines]").dataset.lines) >= n + 3, lines, WAIT);
  check(await page.evaluate(() => document.querySelector(".log-scroll").scrollTop) === 0, "the view moved");
  await waitLine(page, 0, "pre 1");
  await page.keyboard.press("End");
  const last = await ticks();
  await tickShown(last + 2);
  check(await atEnd(), "after End the view does not follow");

  step = "stop the run from its page";
  await page.click("button.stop");
  await page.waitForSelector('dl.facts [data-state="stopped"]', WAIT);
  await page.waitForSelector('.log-tools [data-following="0"]', WAIT);
  log(`a run's log follows live: tick ${before} then tick ${after} without a reload; scrolled up it stays; ` +
      "End follows again; stopped from its page");
}

async function bigLog(page) {
  step = "a 1,000,000-line log opens at its end";
  const t0 = Date.now();
  await go(page, `/ui/runs/${cfg.big_run}`);
  const last = cfg.big_lines - 1;
  await waitLine(page, last, cfg.last_text);
  const firstPaintMs = Date.now() - t0;
  const lines = Number(await page.getAttribute("[data-lines]", "data-lines"));
  check(lines === cfg.big_lines, `the viewer counts ${lines} lines`);
  let n = await lineCount(page);
  check(n > 0 && n <= MAX_LINE_ELEMENTS, `${n} line elements in the DOM`);
  let most = n;
  const spacer = await page.evaluate(() => document.querySelector(".log-spacer").getBoundingClientRect().height);
  check(spacer < 33_000_000, `the spacer is ${spacer}px (above the browser's limit)`);

  step = "Home shows the first line, End the last";
  await page.focus(".log-scroll");
  await page.keyboard.press("Home");
  await waitLine(page, 0, cfg.first_text);
  await page.keyboard.press("End");
  await waitLine(page, last, cfg.last_text);
  step = "a scroll to the middle reads that page";
  await page.evaluate(() => {
    const el = document.querySelector(".log-scroll");
    el.scrollTop = (el.scrollHeight - el.clientHeight) / 2;
  });
  await page.waitForFunction((k) => {
    const rows = [...document.querySelectorAll(".log-line:not(.pending)")].map((e) => Number(e.dataset.line));
    return rows.length > 10 && Math.abs(rows[0] - k) < 1000;
  }, cfg.middle_line, WAIT);
  n = await lineCount(page);
  check(n <= MAX_LINE_ELEMENTS, `${n} line elements after scrolling`);
  most = Math.max(most, n);

  step = "a server-side search finds the needle and jumps to it";
  await page.fill("#log-grep", "(unclosed");
  await page.press("#log-grep", "Enter");
  const bad = page.locator('.log-viewer [data-error-id="logs.bad_grep"]');
  await bad.waitFor(WAIT);
  check((await page.getAttribute("#log-grep", "aria-invalid")) === "true", "the bad pattern is not marked invalid");
  await page.fill("#log-grep", "^NEEDLE");
  const t1 = Date.now();
  await page.press("#log-grep", "Enter");
  await page.waitForSelector('[data-hits="1"]', WAIT);
  const hit = page.locator(`.log-line.hit[data-line="${cfg.needle_line}"] .tx`);
  await hit.waitFor(WAIT);
  await page.waitForFunction((k) => document.querySelector(`.log-line.hit[data-line="${k}"]:not(.pending)`), cfg.needle_line, WAIT);
  const searchMs = Date.now() - t1;
  check((await hit.textContent()) === cfg.needle_text, `the hit shows: ${await hit.textContent()}`);
  check(await hit.isVisible(), "the hit's line is not in view");
  check(await page.locator(`[data-hit="${cfg.needle_line}"]`).count() === 1, "the hit is not listed");
  await axe(page, "the log with a search hit");
  await shot(page, "run-log-search-en");
  // Back to the end and to the hit again with the keys.
  await page.focus(".log-scroll");
  await page.keyboard.press("End");
  await waitLine(page, last, cfg.last_text);
  await page.keyboard.press("n");
  await hit.waitFor(WAIT);

  step = "the page still answers evaluate()";
  const t2 = Date.now();
  const answer = await page.evaluate(() => document.querySelectorAll(".log-line").length);
  const evalMs = Date.now() - t2;
  check(answer > 0 && answer <= MAX_LINE_ELEMENTS, `evaluate() answered ${answer}`);
  most = Math.max(most, answer);
  log(`1,000,000-line log: last line painted ${firstPaintMs} ms after navigation, at most ${most} line elements ` +
      `in the DOM, search hit shown in ${searchMs} ms, evaluate() answered in ${evalMs} ms`);
}

async function restoreCheckpoint(page) {
  step = "restore a checkpoint from the run's page";
  await go(page, `/ui/runs/${cfg.ckpt_run}`);
  await page.waitForSelector("[data-restore]", WAIT);
  await page.click("[data-restore]");
  check(await page.evaluate(() => document.activeElement?.id) === "restore-to", "the choice does not move to the field");
  await page.fill("#restore-to", "relative/dir");
  await page.click(".restore-form button[type=submit]");
  const err = page.locator(".field-to .error");
  await err.waitFor(WAIT);
  const errText = await err.textContent();
  check(errText.includes("relative/dir"), `the field's error: ${errText}`);
  check((await page.getAttribute("#restore-to", "aria-invalid")) === "true", "the field is not marked invalid");
  await page.fill("#restore-to", cfg.restore_to);
  await page.click(".restore-form button[type=submit]");
  await page.waitForSelector(".restore-form .notice[data-restored]", WAIT);
  const restored = fs.readFileSync(path.join(cfg.restore_to, "model.pt"), "utf8");
  check(restored === "weights-v1", `restored: ${restored}`);
  // Again, into the same directory: refused unless told to overwrite.
  await page.click(".restore-form button[type=submit]");
  await err.waitFor(WAIT);
  const again = await err.textContent();
  await page.check("#restore-force");
  await page.click(".restore-form button[type=submit]");
  await page.waitForSelector(".restore-form .notice[data-restored]", WAIT);
  log(`${step}: "${errText}"; restored into ${cfg.restore_to}; again: "${again}", then with overwrite`);

  step = "the Snapshots page lists the run's checkpoint";
  await go(page, "/ui/snapshots");
  await page.waitForSelector(`td[data-col="run"] >> text=${cfg.ckpt_run}`, WAIT);
  log(step);
}

async function diagnosis(page) {
  step = "a failed run shows its diagnosis first";
  await go(page, `/ui/runs/${cfg.failed_run}`);
  const d = page.locator('.diagnosis[data-diagnosis="cuda.out_of_memory"]');
  await d.waitFor(WAIT);
  const before = await page.evaluate(() => {
    const diag = document.querySelector(".diagnosis"), log = document.querySelector(".log-viewer");
    return !!(diag.compareDocumentPosition(log) & Node.DOCUMENT_POSITION_FOLLOWING);
  });
  check(before, "the diagnosis is not above the log");
  const text = await d.textContent();
  check(text.includes("CUDA out of memory") && text.includes("batch size"), `the diagnosis: ${text}`);
  await page.waitForSelector('.timeline [data-event="diagnosis"]', WAIT);
  log(step);
}

async function doctor(page) {
  step = "the overview shows the doctor's findings";
  await go(page, "/ui/");
  await page.waitForSelector(".doctor-summary", WAIT);
  const api = await page.evaluate(async () => (await (await fetch("/api/v1/doctor")).json()).en);
  const shown = JSON.parse(await page.getAttribute(".doctor-summary", "data-summary"));
  check(JSON.stringify(shown) === JSON.stringify(api.summary), `summary ${JSON.stringify(shown)}`);
  const text = await page.textContent(".doctor-summary");
  check(text.includes(`${api.summary.ok} ok`), `the summary line: ${text}`);
  const problems = api.checks.filter((c) => c.severity === "fail" || c.severity === "warn");
  const listed = await page.$$eval("ul.findings > li", (els) => els.map((e) => e.dataset.check));
  check(JSON.stringify(listed.sort()) === JSON.stringify(problems.map((c) => c.id).sort()),
    `problems listed ${listed} of ${problems.map((c) => c.id)}`);
  for (const c of problems.slice(0, 3)) {
    const li = await page.textContent(`ul.findings > li[data-check="${c.id}"]`);
    check(li.includes(c.finding) && (!c.fix || li.includes(c.fix)), `${c.id} shows: ${li}`);
  }
  log(`${step}: ${JSON.stringify(api.summary)}, problems ${listed.join(", ") || "none"}`);
}

// A daemon without pools: the Overview lists `local` alone (the default, your
// runs there counted), with no partition; a run's page says it ran here.
async function localPool(page) {
  step = "the overview's pools: local alone";
  await go(page, "/ui/");
  await page.waitForSelector('.pools[data-loaded="1"]', WAIT);
  const api = await page.evaluate(async () => (await fetch("/api/v1/pools")).json());
  check(JSON.stringify(api.pools.map((p) => p.name)) === '["local"]', `the API's pools: ${JSON.stringify(api)}`);
  const rows = await page.$$eval('.pools [data-pools="list"] tbody tr', (trs) => trs.map((r) => r.dataset.key));
  check(JSON.stringify(rows) === '["local"]', `pools listed: ${rows}`);
  const runs = await page.getAttribute('.pools tr[data-key="local"] [data-runs]', "data-runs");
  const want = ["queued", "starting", "running"].map((s) => api.pools[0].runs[s].count).join("/");
  check(runs === want, `your runs here: ${runs}, the API ${want}`);
  check((await page.locator('.pools [data-pools="partitions"], .pools p.error').count()) === 0,
    "partitions or an error for local");

  step = "a run's page: its pool, local";
  await go(page, `/ui/runs/${cfg.ckpt_run}`);
  const pool = page.locator(`dl[data-run="${cfg.ckpt_run}"] [data-pool="local"]`);
  await pool.waitFor(WAIT);
  check((await pool.textContent()) === cfg.catalog["web.run.pool_local"].en, `shown: ${await pool.textContent()}`);
  check((await page.locator("[data-job-id]").count()) === 0, "a job id for a local run");
  log(`the overview lists local alone (your runs ${runs}); a run's page says local`);
}

// The charts of a run on a simulated GPU whose load the test scripted (87 %,
// then 55 %, 12 GB), read from the real daemon's telemetry; a run that held
// no GPU says it has no GPU series.
async function charts(page) {
  step = "a run without telemetry says so";
  await go(page, `/ui/runs/${cfg.big_run}`);
  await page.waitForSelector("[data-no-metrics]", WAIT);
  step = "the charts draw the scripted load";
  await go(page, `/ui/runs/${cfg.gpu_run}`);
  await page.waitForSelector('figure[data-chart="gpu-util"] canvas', WAIT);
  const util = page.locator('figure[data-chart="gpu-util"] li[data-series]').first();
  check((await util.getAttribute("data-max")) === "87", `GPU utilization max: ${await util.textContent()}`);
  // The run keeps running, so its last value is the latest sample: still the scripted 55.
  check((await util.getAttribute("data-last")) === "55", `GPU utilization last: ${await util.textContent()}`);
  const mem = page.locator('figure[data-chart="gpu-mem"] li[data-series]').first();
  check((await mem.getAttribute("data-max")) === "12000000000", `GPU memory: ${await mem.textContent()}`);
  check((await mem.textContent()).includes("12.0GB"), `GPU memory shown: ${await mem.textContent()}`);
  check((await page.locator("main [data-simulated]").count()) === 1, "the simulated label");
  await axe(page, "run charts");
  await shot(page, "run-charts-en");
  log(`${step}: GPU utilization up to 87 %, last 55 %, memory 12 GB, from the daemon`);
}

async function models(page) {
  step = "a model's versions: alias and lineage";
  await go(page, "/ui/models");
  await page.click(`[data-model="${ref(cfg.model)}"]`);
  const v1 = page.locator('#model-versions ~ * tr[data-key="1"], section[aria-labelledby="model-versions"] tr[data-key="1"]');
  await v1.waitFor(WAIT);
  check((await v1.locator('[data-col="aliases"]').textContent()).includes("prod"), "the alias prod");
  const href = await v1.locator('[data-col="run"] a').getAttribute("href");
  check(href === `/ui/runs/${cfg.ckpt_run}`, `the lineage's run: ${href}`);
  check(new URL(page.url()).searchParams.get("model") === ref(cfg.model), "the choice is not in the address");
  // The size `lathe model show` has, and the owner's actions: a version registered from the run, an alias moved.
  const size = (await v1.locator('[data-col="size"]').textContent()).trim();
  check(size !== "—" && /\d/.test(size), `version 1's size: ${size}`);
  await page.fill("#register-run", cfg.ckpt_run);
  await page.click("[data-register]");
  const v2 = page.locator('section[aria-labelledby="model-versions"] tr[data-key="2"]');
  await v2.waitFor(WAIT);
  await page.fill("#alias-name", "canary");
  await page.selectOption("#alias-version", "2");
  await page.click("[data-move-alias]");
  await page.waitForFunction(() => document.querySelector('section[aria-labelledby="model-versions"] tr[data-key="2"] [data-col="aliases"]')?.textContent?.includes("canary"), null, WAIT);
  await axe(page, "models with versions");
  await shot(page, "models-versions-en");
  log(`${step}: ${cfg.model}/1 from ${cfg.ckpt_run}, alias prod, ${size}; /2 registered and aliased canary from the page`);
}

async function openPort(page) {
  step = "a run's port opens in a new tab through its one-time link";
  const dir = fs.mkdtempSync("/tmp/lathe-web-port-");
  fs.writeFileSync(path.join(dir, "index.html"), "<!doctype html><title>served</title><p>hello from the run</p>\n");
  fs.chmodSync(dir, 0o755);
  const id = cli("run", "--name", "serves", "--workdir", dir, "--port", "8080", "--", "sh", "-c",
    'exec python3 -m http.server --bind 127.0.0.1 "$LATHE_PORT_8080"');
  await go(page, `/ui/runs/${id}`);
  const row = page.locator('tr[data-key="p8080"]');
  await row.waitFor(WAIT);
  await page.waitForFunction(() => document.querySelector('tr[data-key="p8080"]')?.textContent?.includes("listening") &&
    !document.querySelector('tr[data-key="p8080"]')?.textContent?.includes("not listening"), null, WAIT);
  const redeemed = page.context().waitForEvent("response",
    { predicate: (r) => r.url().includes(`//${id}.localhost:`) && r.url().includes("/_lathe/login?code="), ...WAIT });
  const [tab] = await Promise.all([page.context().waitForEvent("page", WAIT), row.locator("[data-open]").click()]);
  // The tab goes to the one-time link on the run's origin, which the daemon redeems, setting the origin's
  // SameSite=Strict cookie. The navigation was started by another site (the UI's), so the answer is a page of
  // the run's origin that moves on by itself, and the request for / carries the cookie: the run's page shows.
  const login = await redeemed;
  check(login.status() === 200, `the login answered ${login.status()} to a cross-site navigation`);
  check((await login.headerValue("set-cookie") ?? "").startsWith("lathe_run="), "no cookie for the run's origin");
  await tab.waitForURL((u) => u.pathname === "/", WAIT);
  await tab.waitForSelector("text=hello from the run", WAIT);
  const host = new URL(tab.url()).hostname;
  check(host === `${id}.localhost`, `the tab is on ${tab.url()}`);
  await page.waitForSelector(".notice >> text=Opened in a new tab", WAIT);
  await tab.close();
  await page.click("button.stop");
  await page.waitForSelector('dl.facts [data-state="stopped"]', WAIT);
  fs.rmSync(dir, { recursive: true, force: true });
  log(`${step}: ${host}, the code redeemed`);
}

// A notebook started from the Notebooks page: the form submits it, waits while
// it starts and opens Jupyter in a new tab through its one-time link; the tab
// reaches Jupyter's own API on the notebook's origin; Stop ends it and Restart
// brings it back.
async function notebookFromUi(page) {
  step = "a notebook started from the UI opens Jupyter in a new tab";
  await go(page, "/ui/notebooks");
  await page.fill("#nb-name", "from-the-ui");
  await page.fill("#nb-workdir", cfg.notebook_dir);
  const [tab] = await Promise.all([page.context().waitForEvent("page", WAIT), page.click("[data-start-notebook]")]);
  await tab.waitForURL((u) => u.hostname.endsWith(".localhost") && u.pathname.startsWith("/tree"), { timeout: 90_000 });
  const run = new URL(tab.url()).hostname.split(".")[0];
  const status = await tab.evaluate(async () => (await fetch("/api/status")).status);
  check(status === 200, `Jupyter's /api/status from its own tab: ${status}`);
  await page.waitForSelector("[data-notebook-status] >> text=is open in a new tab", WAIT);
  await tab.close();
  const stop = page.locator(`[data-stop="${run}"]`);
  await stop.waitFor(WAIT);
  await stop.click();
  const restart = page.locator(`[data-restart="${run}"]`);
  await restart.waitFor({ timeout: 60_000 });
  await axe(page, "notebooks with the form");
  await shot(page, "notebooks-form-en");
  await restart.click();
  await page.locator(`[data-stop="${run}"]`).waitFor({ timeout: 60_000 });
  await page.locator(`[data-stop="${run}"]`).click();
  await restart.waitFor({ timeout: 60_000 });
  log(`${step}: ${run} opened, stopped, restarted, stopped`);
  return run;
}

// Tokens and secrets from the Access page: a token made there is shown once and
// opens the API; revoked there, it does not any more. A secret's value is typed,
// saved and never on the page again; removed, it is gone.
async function accessPage(page) {
  step = "a token and a secret made and revoked from the UI";
  await go(page, "/ui/access");
  await page.fill("#token-name", "from-the-ui");
  await page.fill("#token-expires", "1d");
  await page.click("[data-create-token]");
  const shown = page.locator("[data-new-token]");
  await shown.waitFor(WAIT);
  const token = (await shown.textContent()).trim();
  check(token.startsWith("lathe_t"), `the new token: ${token.slice(0, 12)}…`);
  const base = new URL(cfg.login_url).origin;
  const status = async () => (await fetch(`${base}/api/v1/status`, { headers: { Authorization: `Bearer ${token}` } })).status;
  check((await status()) === 200, "the new token opens the API");
  const id = token.split("_")[1];
  await page.click(`[data-revoke="${id}"]`);
  await page.locator(`[data-revoke="${id}"]`).waitFor({ state: "detached", ...WAIT });
  check((await status()) === 401, "the revoked token still opens the API");
  await page.fill("#secret-name", "UI_SECRET");
  await page.fill("#secret-value", "s3cret-value-typed-once");
  await page.click("[data-set-secret]");
  await page.waitForSelector('[data-secret-saved="UI_SECRET"]', WAIT);
  await page.waitForSelector('[data-remove-secret="UI_SECRET"]', WAIT);
  const html = await page.content();
  check(!html.includes("s3cret-value-typed-once"), "the secret's value is on the page");
  check((await page.inputValue("#secret-value")) === "", "the value field keeps the secret");
  await axe(page, "access");
  await page.click('[data-remove-secret="UI_SECRET"]');
  await page.locator('[data-remove-secret="UI_SECRET"]').waitFor({ state: "detached", ...WAIT });
  log(`${step}: token ${id} worked then was refused; the secret never shown`);
}

async function deployment(page) {
  step = "a deployment's detail: URL, curl, health, replicas, events";
  await go(page, "/ui/deployments");
  await page.click(`[data-deployment="${ref(cfg.deployment)}"]`);
  const facts = page.locator(`dl[data-deployment="${cfg.deployment}"]`);
  await facts.waitFor(WAIT);
  const api = await page.evaluate(async (n) => (await fetch(`/api/v1/deployments/${n}`)).json(), cfg.deployment);
  check((await facts.textContent()).includes(api.url), `the URL ${api.url}`);
  check((await page.textContent("[data-curl]")) === api.curl, "the curl line");
  const replica = page.locator(`#deploy-detail ~ * tr[data-key="${api.replicas.list[0].run}"], section[aria-labelledby="deploy-detail"] tr[data-key="${api.replicas.list[0].run}"]`);
  await replica.waitFor(WAIT);
  // (rev-1's replica, drained after the rollout to rev-2, may still be listed first.)
  await page.waitForFunction(() => [...document.querySelectorAll('section[aria-labelledby="deploy-detail"] td[data-col="healthy"]')]
    .some((td) => td.textContent === "yes"), null, WAIT);
  await page.waitForSelector('section[aria-labelledby="deploy-detail"] .timeline li', WAIT);
  // The owner's actions: a key made there works at once and is refused once revoked; scaled to 2.
  await page.click("[data-create-key]");
  const keyShown = page.locator("[data-new-key]");
  await keyShown.waitFor(WAIT);
  const key = (await keyShown.textContent()).trim();
  check(key.startsWith("lathe_dk_"), `the new key: ${key.slice(0, 14)}…`);
  const callWith = async (k) => (await fetch(`${api.url}health`, { headers: { Authorization: `Bearer ${k}` } })).status;
  check((await callWith(key)) === 200, "the key made in the UI does not open the endpoint at once");
  const kid = key.split("_")[2];
  await page.click(`[data-revoke-key="${kid}"]`);
  await page.locator(`[data-revoke-key="${kid}"]`).waitFor({ state: "detached", ...WAIT });
  check((await callWith(key)) === 401, "the key revoked in the UI still opens the endpoint");
  // A command deployment rolls back to the revision it served before: rev-1's program, as rev-3.
  await page.click('[data-rollback="rev-1"]');
  await page.waitForSelector('section[aria-labelledby="deploy-detail"] dd[data-serving="rev-3"]:not(:has([data-rolling-to]))',
    { timeout: 90_000 });
  const back = await page.evaluate(async (n) => (await fetch(`/api/v1/deployments/${n}`)).json(), cfg.deployment);
  check(back.spec.command.at(-1) === "v1", `rolled back to: ${JSON.stringify(back.spec.command.slice(-1))}`);
  await page.fill("#deploy-replicas", "2");
  await page.click("[data-scale]");
  await page.waitForFunction(() => document.querySelectorAll('section[aria-labelledby="deploy-detail"] td[data-col="healthy"]').length >= 2, null, { timeout: 60_000 });
  await axe(page, "a deployment's detail");
  await shot(page, "deployment-detail-en");
  log(`${step}: ${api.health}, ${api.replicas.list.length} replica, ${api.url}; rev-2 rolled back to rev-1's program (rev-3)`);
}

// A deployment created from the Deployments page's form: the daemon's refusal at
// its field, then created and shown; autoscaled and back to a fixed count;
// rolled out to version 2 and back to 1 (the endpoint answers each); rolled out
// to version 3, which cannot load: the daemon rolls it back, the page says why
// and shows the failed replica's reason, and the owner rolls the spec back too.
async function deploymentFromUi(page) {
  const name = cfg.served_model;
  const detail = 'section[aria-labelledby="deploy-detail"]';
  const serving = (v) => page.waitForSelector(`${detail} dd[data-serving="${v}"]:not(:has([data-rolling-to]))`, { timeout: 90_000 });
  step = "the deployment form shows the daemon's refusal at its field";
  await go(page, "/ui/deployments");
  await page.click("[data-new-deployment]");
  await page.fill("#dep-name", name);
  await page.selectOption("#dep-model_name", ref(name));
  // (Preact sets an option's value as a property: no attribute to select on.)
  await page.waitForFunction((v) => [...document.querySelectorAll("#dep-model option")].some((o) => o.value === v),
    `${name}/1`, WAIT);
  const offered = await page.$$eval("#dep-model option", (os) => os.map((o) => o.value).filter(Boolean));
  check(offered.includes(`${name}@latest`) && offered.includes(`${name}/3`), `offered: ${offered}`);
  await page.selectOption("#dep-model", `${name}/1`);
  await page.fill("#dep-replicas", "0");
  await page.click("[data-create-deployment]");
  const err = page.locator(".deploy-form .field-replicas .error");
  await err.waitFor(WAIT);
  const errText = await err.textContent();
  check(errText.includes("replicas") && errText.includes("64"), `the field's error: ${errText}`);
  check((await page.getAttribute("#dep-replicas", "aria-invalid")) === "true", "replicas not marked invalid");
  await checkLanguage(page, "en", "the deployment form");
  await axe(page, "the deployment form with an error");
  await shot(page, "deployment-form-en");

  step = "created from the form, shown on its detail";
  await page.fill("#dep-replicas", "1");
  await page.check("#dep-public");
  await page.click("[data-create-deployment]");
  await page.waitForSelector(`${detail} dl[data-deployment="${name}"]`, WAIT);
  check(new URL(page.url()).searchParams.get("name") === ref(name), `after the form: ${page.url()}`);
  await page.waitForSelector(`[data-created="${ref(name)}"]`, WAIT);
  const api = async () => page.evaluate(async (n) => (await fetch(`/api/v1/deployments/${n}`)).json(), name);
  const made = await api();
  check(made.spec.model === `${name}/1` && made.spec.public === true && made.spec.replicas === 1 &&
        made.spec.gpus === 0, `the spec: ${JSON.stringify(made.spec)}`);
  await page.waitForFunction((sel) => document.querySelector(`${sel} td[data-col="healthy"]`)?.textContent === "yes",
    detail, { timeout: 90_000 });
  await serving(`${ref(name)}/1`);
  const answers = async () => {
    const r = await fetch(`${made.url}predict`, { method: "POST", body: "{}", headers: { "Content-Type": "application/json" } });
    return `${r.status} ${r.headers.get("lathe-model-version")}`;
  };
  check((await answers()) === `200 ${ref(name)}/1`, `the endpoint: ${await answers()}`);

  step = "autoscaling set from the detail, its bounds shown; then a fixed count again";
  await page.fill("#deploy-min", "1");
  await page.fill("#deploy-max", "3");
  await page.fill("#deploy-target", "4");
  await page.click("[data-autoscale]");
  const bounds = page.locator(`${detail} dd[data-scaling="auto"]`);
  await bounds.waitFor(WAIT);
  const boundsText = await bounds.textContent();
  check(/\b1\b.*\b3\b.*\b4\b/.test(boundsText), `the bounds: ${boundsText}`);
  const auto = (await api()).spec;
  check(auto.autoscale?.min === 1 && auto.autoscale?.max === 3 && auto.autoscale?.target === 4 && !("replicas" in auto),
        `autoscale: ${JSON.stringify(auto)}`);
  await page.fill("#deploy-replicas", "1");
  await page.click("[data-scale]");
  await page.waitForSelector(`${detail} dd[data-scaling="fixed"]`, WAIT);
  check(!("autoscale" in (await api()).spec), "autoscale kept after a fixed count");

  step = "rolled out to version 2 from the detail, and back";
  await page.selectOption("#deploy-rollout-to", `${name}/2`);
  await page.click("[data-rollout]");
  await serving(`${ref(name)}/2`);
  check((await answers()) === `200 ${ref(name)}/2`, `after the rollout: ${await answers()}`);
  await page.click(`[data-rollback="${ref(name)}/1"]`);
  await serving(`${ref(name)}/1`);
  check((await answers()) === `200 ${ref(name)}/1`, `after the rollback: ${await answers()}`);

  step = "a version that cannot load: rolled back by the daemon, the failed replica's reason shown";
  await page.selectOption("#deploy-rollout-to", `${name}/3`);
  await page.click("[data-rollout]");
  const rolledBack = page.locator(`${detail} [data-rolled-back="${ref(name)}/3"]`);
  await rolledBack.waitFor({ timeout: 90_000 });
  const failed = page.locator(`${detail} [data-replica-failed]`);
  await failed.waitFor(WAIT);
  // The replica's last line comes with the deployment's events, which the
  // page may read a poll after the rollback itself.
  await page.waitForFunction(
      (sel) => (document.querySelector(sel)?.textContent ?? "").includes("cannot load"),
      `${detail} [data-replica-failed]`, WAIT).catch(() => {});
  const why = await failed.textContent();
  check(why.includes("this version cannot load") && why.includes(`${name}/3`), `the failed replica: ${why}`);
  check((await answers()) === `200 ${ref(name)}/1`, `while rolled back: ${await answers()}`);
  await axe(page, "a deployment rolled back");
  await shot(page, "deployment-rolled-back-en");
  await checkLanguage(page, "en", "a deployment rolled back");
  step = "why it was rolled back, in 中文";
  const now = await api();
  const ended = now.replicas.list.find((r) => r.reason &&
    (now.rolled_back.reason === r.reason || now.rolled_back.reason.startsWith(r.reason + ": ")));
  check(ended, `no replica with the rollback's reason: ${JSON.stringify(now.rolled_back)}`);
  await page.selectOption("#lang", "zh");
  await page.waitForFunction(([sel, zh]) => (document.querySelector(sel)?.textContent ?? "").includes(zh),
    [`${detail} [data-rolled-back]`, ended.reason_text.zh], WAIT);
  const whyZh = await rolledBack.textContent();
  check(ended.reason_text.zh === ended.reason || !whyZh.includes(ended.reason), `the reason in English: ${whyZh}`);
  await checkLanguage(page, "zh", "a deployment rolled back");
  await page.selectOption("#lang", "en");
  await page.waitForSelector("main h1 >> text=Deployments", WAIT);
  await page.click(`[data-rollback="${ref(name)}/1"]`);
  await rolledBack.waitFor({ state: "detached", ...WAIT });
  check((await api()).spec.model.endsWith(`${name}/1`), "the spec does not name version 1 again");
  log(`a deployment from the form: refused "${errText}"; created; autoscaled (${boundsText}), then fixed; ` +
      `/2 rolled out and back; /3 rolled back by the daemon: "${why}"; the spec back on /1`);
}

// The owner's Sharing section on a page: share with `who` as `role`, and wait
// for the grant's row.
async function shareFrom(page, target, who, role) {
  await page.waitForSelector(`[data-sharing="${target}"]`, WAIT);
  await page.fill("#share-grantee", who);
  await page.selectOption("#share-role", role);
  await page.click("[data-share]");
  await page.waitForSelector(`[data-sharing="${target}"] tr[data-key="user:${who}"] [data-role="${role}"]`, WAIT);
}

async function count(page, sel) {
  return page.locator(sel).count();
}

// What a user with role manage sees of an object's Sharing: the grants (its
// own among them), read-only — sharing and taking back stay the owner's.
async function readOnlySharing(p, target, name) {
  await p.waitForSelector(`[data-sharing="${target}"][data-read-only="1"] tr[data-key="user:${cfg.user2}"] [data-role="manage"]`, WAIT);
  for (const sel of ["[data-share]", "[data-unshare]", ".share-form"]) {
    check((await count(p, sel)) === 0, `${name}: manage offers ${sel} (the owner's)`);
  }
  await checkLanguage(p, "en", `${name}: its sharing`);
}

// The second user's browser, signed in with its own one-time link.
async function secondUser(browser) {
  const ctx = await browser.newContext({ locale: "en-US", viewport: { width: 1280, height: 800 } });
  const p2 = await ctx.newPage();
  p2.on("pageerror", (e) => problems.push(`script error (${cfg.user2}): ${e.message}`));
  await p2.goto(cliAs(cfg.lathe2, "ui", "--print"));
  await p2.waitForSelector(".user", WAIT);
  check((await p2.textContent(".user")).includes(cfg.user2), "the second user is not signed in");
  return { ctx, p2 };
}

// Sharing from the owner's pages (a deployment, a model, a run), and what the
// second user sees of each: the mark "shared with you: ROLE, by WHO" and only
// the actions the role allows; raised to manage, it scales the deployment;
// taken back, the deployment is gone at its next request.
async function sharing(page, browser, notebook) {
  const detail = 'section[aria-labelledby="deploy-detail"]';
  const dep = `deployment:${ref(cfg.deployment)}`;
  step = "share a deployment from its page: an unknown user refused at the field";
  await go(page, `/ui/deployments?name=${cfg.deployment}`);
  await page.waitForSelector(`[data-sharing="${dep}"]`, WAIT);
  await page.fill("#share-grantee", "nobody-such-user");
  await page.click("[data-share]");
  const err = page.locator(".share-form .field-share-grantee .error");
  await err.waitFor(WAIT);
  const errText = await err.textContent();
  check(errText.includes("nobody-such-user"), `the field's error: ${errText}`);
  check((await page.getAttribute("#share-grantee", "aria-invalid")) === "true", "the grantee is not marked invalid");
  step = "shared with view, with manage on a model, a run with view";
  await shareFrom(page, dep, cfg.user2, "view");
  const grant = page.locator(`[data-sharing="${dep}"] tr[data-key="user:${cfg.user2}"]`);
  check((await grant.locator('[data-col="by"]').textContent()) === cfg.user, "the grant's 'by'");
  check((await grant.locator('[data-col="kind"]').textContent()) === "user", "the grant's kind");
  await axe(page, "a deployment's sharing");
  await go(page, `/ui/models?model=${cfg.model}`);
  await shareFrom(page, `model:${ref(cfg.model)}`, cfg.user2, "manage");
  await go(page, `/ui/runs/${cfg.ckpt_run}`);
  await shareFrom(page, `run:${cfg.ckpt_run}`, cfg.user2, "view");
  await go(page, `/ui/runs/${notebook}`);
  await shareFrom(page, `run:${notebook}`, cfg.user2, "view");
  const listed = await page.evaluate(async (t) => (await (await fetch(`/api/v1/shares?target=${t}`)).json()).shares, `run:${cfg.ckpt_run}`);
  check(listed.length === 1 && listed[0].user === cfg.user2 && listed[0].role === "view", `the API: ${JSON.stringify(listed)}`);

  step = "the second user sees each share as its role says";
  const { ctx, p2 } = await secondUser(browser);
  await go(p2, "/ui/deployments");
  const mark = p2.locator(`tr[data-key="${ref(cfg.deployment)}"] [data-shared="view"]`);
  await mark.waitFor(WAIT);
  const markText = await mark.textContent();
  check(markText.includes("view") && markText.includes(cfg.user), `the list's mark: ${markText}`);
  await p2.click(`[data-deployment="${ref(cfg.deployment)}"]`);
  await p2.waitForSelector(`${detail} dl[data-deployment] [data-shared="view"]`, WAIT);
  for (const sel of ["[data-scale]", "[data-autoscale]", "[data-create-key]", "[data-rollout]", "[data-sharing]"]) {
    check((await count(p2, sel)) === 0, `view offers ${sel}`);
  }
  await checkLanguage(p2, "en", "a deployment shared with view");
  await go(p2, `/ui/models?model=${encodeURIComponent(ref(cfg.model))}`);
  await p2.waitForSelector('section[aria-labelledby="model-versions"] [data-shared="manage"]', WAIT);
  await p2.waitForSelector("[data-move-alias]", WAIT);
  check((await count(p2, "[data-register]")) === 0, "manage offers registering a version (the owner's)");
  await readOnlySharing(p2, `model:${ref(cfg.model)}`, "a model shared with manage");
  await go(p2, `/ui/runs/${cfg.ckpt_run}`);
  await p2.waitForSelector(`dl[data-run="${cfg.ckpt_run}"] [data-shared="view"]`, WAIT);
  for (const sel of ["button.stop", "[data-sharing]", "[data-restore]"]) {
    check((await count(p2, sel)) === 0, `a shared run offers ${sel}`);
  }
  await checkLanguage(p2, "en", "a run shared with view");
  await axe(p2, "a run shared with view");
  step = "a notebook shared with view is on the second user's Notebooks, marked, without Open, Stop or Restart";
  await go(p2, "/ui/notebooks");
  const nbMark = p2.locator(`tr[data-key="${notebook}"] [data-shared="view"]`);
  await nbMark.waitFor(WAIT);
  check((await nbMark.textContent()).includes(cfg.user), `the notebook's mark: ${await nbMark.textContent()}`);
  for (const sel of [`[data-open="${notebook}"]`, `[data-stop="${notebook}"]`, `[data-restart="${notebook}"]`]) {
    check((await count(p2, sel)) === 0, `a notebook shared with view offers ${sel}`);
  }
  await shot(p2, "shared-with-user2-en");

  step = "raised to manage: the second user scales the deployment";
  await go(page, `/ui/deployments?name=${cfg.deployment}`);
  await shareFrom(page, dep, cfg.user2, "manage");
  await go(p2, `/ui/deployments?name=${encodeURIComponent(ref(cfg.deployment))}`);
  await p2.waitForSelector(`${detail} [data-shared="manage"]`, WAIT);
  await p2.waitForSelector("[data-scale]", WAIT);
  await readOnlySharing(p2, dep, "a deployment shared with manage");
  await p2.fill("#deploy-replicas", "1");
  await p2.click("[data-scale]");
  await p2.waitForFunction(() => document.querySelector('dd[data-scaling="fixed"]')?.textContent?.startsWith("1 "), null, WAIT);

  step = "taken back: the deployment is gone for the second user at its next request";
  await page.click(`[data-unshare="${cfg.user2}"]`);
  await page.locator(`[data-sharing="${dep}"] tr[data-key="user:${cfg.user2}"]`).waitFor({ state: "detached", ...WAIT });
  await p2.reload();
  await p2.waitForSelector(`${detail} p.error[data-error-id]`, WAIT);
  const gone = await p2.getAttribute(`${detail} p.error`, "data-error-id");
  check(gone === "deploy.not_found", `after unsharing: ${gone}`);
  check((await count(p2, `tr[data-key="${ref(cfg.deployment)}"]`)) === 0, "the deployment is still listed");
  log(`${step}: refused "${errText}"; ${cfg.user2} saw "${markText.trim()}", no actions with view; ` +
      `scaled with manage; ${gone} once taken back`);
  return { ctx, p2 };
}

// Projects from the Overview: created (a bad member refused at its field),
// a member's role changed; the member sees only what its role lets it do, and
// the daemon's refusal at the field when it tries something it may not.
async function projects(page, p2, browser) {
  const proj = "webproj";
  step = "a project created from the Overview: a bad member refused at its field";
  await go(page, "/ui/");
  await page.waitForSelector('.projects[data-loaded="1"]', WAIT);
  await page.fill("#project-name", proj);
  await page.fill("#project-members", "nobody-such-user:view");
  await page.click("[data-create-project]");
  const err = page.locator(".project-form .field-project-members .error");
  await err.waitFor(WAIT);
  const errText = await err.textContent();
  check(errText.includes("nobody-such-user"), `the field's error: ${errText}`);
  await page.fill("#project-members", `${cfg.user2}:view`);
  await page.click("[data-create-project]");
  await page.waitForSelector(`[data-project-notice="${proj}"]`, WAIT);
  const roleSelect = page.locator(`.project-members[data-project="${proj}"] [data-member-role="${cfg.user2}"]`);
  await roleSelect.waitFor(WAIT);
  check((await roleSelect.inputValue()) === "view", `the member's role: ${await roleSelect.inputValue()}`);
  await axe(page, "projects");

  step = "the member with view sees the project and no control";
  await go(p2, "/ui/");
  await p2.click(`[data-project="${proj}"]`);
  await p2.waitForSelector(`.project-members[data-project="${proj}"][data-can-edit="0"]`, WAIT);
  for (const sel of ["[data-add-member]", "[data-remove-member]", "[data-remove-project]", "[data-member-role]"]) {
    check((await count(p2, sel)) === 0, `view offers ${sel}`);
  }

  step = "the owner makes the member a manager; it adds members, never removes the project";
  await page.selectOption(`[data-member-role="${cfg.user2}"]`, "manage");
  await page.waitForFunction(async ([n, u]) => {
    const p = await (await fetch(`/api/v1/projects/${n}`)).json();
    return p.members?.some((m) => m.user === u && m.role === "manage");
  }, [proj, cfg.user2], WAIT);
  await p2.reload();
  await p2.click(`[data-project="${proj}"]`);
  await p2.waitForSelector(`.project-members[data-project="${proj}"][data-can-edit="1"]`, WAIT);
  check((await count(p2, "[data-remove-project]")) === 0, "a manager offered to remove the project");
  await p2.fill("#project-member", "nobody-such-user");
  await p2.click("[data-add-member]");
  const refused = p2.locator(".project-add .field-project-member .error");
  await refused.waitFor(WAIT);
  const refusedText = await refused.textContent();
  check(refusedText.includes("nobody-such-user"), `the member field's error: ${refusedText}`);
  await checkLanguage(p2, "en", "projects (a manager)");
  await axe(p2, "projects (a manager)");
  await shot(p2, "projects-user2-en");
  log(`${step}: "${errText}"; ${cfg.user2} saw no control with view, added members with manage: "${refusedText}"`);

  step = "the project's limits beside its usage, as `lathe project show`";
  const lim = cfg.project_limits;
  await go(page, "/ui/");
  const projRow = page.locator(`.projects tr[data-key="${proj}"]`);
  await projRow.locator(`[data-limit="gpus:${lim.gpus}"]`).waitFor(WAIT);
  const limits = {};
  for (const k of ["gpus", "runs", "notebooks", "quota"]) {
    limits[k] = (await projRow.locator(`td[data-col="${k}"]`).textContent()).trim();
  }
  check(limits.gpus === `0 of ${lim.gpus}`, `the GPUs: ${limits.gpus}`);
  check(limits.runs === "0 (no limit)" && limits.notebooks === "0 (no limit)", `runs, notebooks: ${limits.runs}, ${limits.notebooks}`);
  check(limits.quota === `0.0 of ${lim.gpu_hours} per ${lim.period}`, `the GPU-hours: ${limits.quota}`);
  await checkLanguage(page, "en", "a project's limits");
  await axe(page, "a project's limits");

  step = "an admin has the owner's controls on another user's project";
  const adminCtx = await browser.newContext({ locale: "en-US", viewport: { width: 1280, height: 800 } });
  const p3 = await adminCtx.newPage();
  p3.on("pageerror", (e) => problems.push(`script error (admin): ${e.message}`));
  await p3.goto(cliAs(cfg.lathe_admin, "ui", "--print"));
  await p3.waitForSelector(".user", WAIT);
  await p3.waitForSelector(`.projects tr[data-key="${proj}"]`, WAIT);
  await p3.click(`[data-project="${proj}"]`);
  await p3.waitForSelector(`.project-members[data-project="${proj}"][data-can-edit="1"] [data-as-admin]`, WAIT);
  for (const sel of [`[data-remove-project="${proj}"]`, "[data-add-member]", `[data-member-role="${cfg.user2}"]`]) {
    check((await count(p3, sel)) === 1, `the admin is not offered ${sel}`);
  }
  await checkLanguage(p3, "en", "projects (an admin)");
  await adminCtx.close();
  log(`${step}; limits: GPUs ${limits.gpus}, runs ${limits.runs}, GPU-hours ${limits.quota}`);
}

// In 中文: what the daemon says of a deployment (its events, its replicas' states,
// its health) and what the charts draw (legends) are Chinese too, not the daemon's English.
async function inChinese(page) {
  step = "a deployment's events, replica states and health in 中文";
  await go(page, "/ui/deployments");
  await page.click(`[data-deployment="${ref(cfg.deployment)}"]`);
  await page.waitForSelector('section[aria-labelledby="deploy-detail"] .timeline li', WAIT);
  const cjk = /[\u4e00-\u9fff]/;
  const events = await page.locator('section[aria-labelledby="deploy-detail"] .timeline li').allTextContents();
  check(events.length > 0 && events.every((e) => cjk.test(e)), `events not in 中文: ${events.join(" | ")}`);
  const state = await page.locator('section[aria-labelledby="deploy-detail"] td[data-col="state"]').first().textContent();
  check(cjk.test(state), `a replica's state not in 中文: ${state}`);
  // (A replica scaled away earlier may still be listed, not healthy: each says so in 中文.)
  const healthyAll = await page.locator('section[aria-labelledby="deploy-detail"] td[data-col="healthy"]').allTextContents();
  const healthy = healthyAll.join(", ");
  check(healthyAll.includes(cfg.catalog["web.yes"].zh) &&
        healthyAll.every((h) => h === cfg.catalog["web.yes"].zh || h === cfg.catalog["web.no"].zh), `healthy: ${healthy}`);
  step = "the deployment form and a model deployment's detail in 中文";
  await go(page, `/ui/deployments?name=${cfg.served_model}`);
  await page.waitForSelector('section[aria-labelledby="deploy-detail"] [data-rollout]', WAIT);
  await page.click("[data-new-deployment]");
  await page.waitForSelector(".deploy-form", WAIT);
  await page.check("#dep-autoscale");
  await page.waitForSelector("#dep-max", WAIT);
  await checkLanguage(page, "zh", "the deployment form and detail");
  const scalingZh = await page.textContent('section[aria-labelledby="deploy-detail"] dd[data-scaling]');
  check(cjk.test(scalingZh), `the scaling not in 中文: ${scalingZh}`);
  await shot(page, "deployment-form-zh");
  log(`${step}: ${scalingZh}`);
  step = "a model's sharing and a project's members in 中文";
  await go(page, `/ui/models?model=${cfg.model}`);
  await page.waitForSelector(`[data-sharing] tr[data-key="user:${cfg.user2}"]`, WAIT);
  await checkLanguage(page, "zh", "a model's sharing");
  const roleZh = await page.textContent(`[data-sharing] tr[data-key="user:${cfg.user2}"] [data-role]`);
  check(roleZh === cfg.catalog["web.role.manage"].zh, `the role: ${roleZh}`);
  await shot(page, "model-shared-zh");
  await go(page, "/ui/");
  await page.click('[data-project="webproj"]');
  await page.waitForSelector('.project-members[data-project="webproj"]', WAIT);
  await checkLanguage(page, "zh", "a project's members");
  const quotaZh = await page.textContent('.projects tr[data-key="webproj"] td[data-col="quota"]');
  const lim = cfg.project_limits;
  check(quotaZh === `0.0/${lim.gpu_hours}（每 ${lim.period}）`, `the project's GPU-hours in 中文: ${quotaZh}`);
  log(`${step}: ${roleZh}`);
  step = "a run's chart legends and spec fields in 中文";
  await go(page, `/ui/runs/${cfg.gpu_run}`);
  await page.waitForSelector('figure[data-chart="gpu-util"] canvas', WAIT);
  const summary = await page.locator('figure[data-chart="gpu-util"] li[data-series]').first().textContent();
  check(summary.startsWith("GPU "), `the GPU series: ${summary}`);
  const fields = await page.locator("dl.spec dt").allTextContents();
  const english = fields.filter((f) => /^[a-z_]+$/.test(f));
  check(english.length === 0, `spec fields shown by their YAML names: ${english.join(", ")}`);
  await shot(page, "deployment-run-zh");
  log(`${step}: ${events.length} events, the replica ${state}, ${fields.length} spec fields`);
}

async function main() {
  fs.mkdirSync(cfg.artifacts, { recursive: true });
  const browser = await chromium.launch({ executablePath: cfg.chromium, args: ["--no-sandbox"] });
  const context = await browser.newContext({ locale: "en-US", viewport: { width: 1280, height: 800 } });
  const page = await context.newPage();
  page.on("console", (m) => {
    if (/Content Security Policy/i.test(m.text())) problems.push(m.text());
  });
  page.on("pageerror", (e) => problems.push(`script error: ${e.message}`));
  try {
    step = "sign in with the one-time code";
    await page.goto(cfg.login_url);
    await page.waitForSelector(".user", WAIT);
    check(new URL(page.url()).pathname === "/ui/", `after the login: ${page.url()}`);
    const who = await page.textContent(".user");
    check(who.includes(cfg.user), `signed in as: ${who}`);
    await page.waitForSelector("[data-simulated]", WAIT);
    await loadRefs(page);
    log(`${step}: ${who}; the GPUs are labelled simulated`);

    step = "sign in with an API token instead, in a fresh browser";
    {
      const other = await browser.newContext({ locale: "en-US" });
      const p2 = await other.newPage();
      await p2.goto(new URL("/ui/", cfg.login_url).href);
      await p2.fill("#api-token", "lathe_wrong_token");
      await p2.click("form.token-signin button[type=submit]");
      await p2.waitForSelector("form.token-signin .error", WAIT);
      check((await p2.getAttribute("#api-token", "aria-invalid")) === "true", "a wrong token is not marked");
      await p2.fill("#api-token", cfg.api_token);
      await p2.click("form.token-signin button[type=submit]");
      await p2.waitForSelector(".user", WAIT);
      const who2 = await p2.textContent(".user");
      check(who2.includes(cfg.user), `signed in with the token as: ${who2}`);
      await axe(p2, "signed in with a token");
      await other.close();
      log(`${step}: ${who2}`);
    }

    step = "a run submitted from the CLI appears, live, and moves to running";
    await page.click("nav >> text=Runs");
    await page.waitForSelector("table tbody tr[data-key]", WAIT);
    await page.waitForSelector('.live[data-live="1"]', WAIT);  // GET /runs?follow=1 is open
    await page.evaluate(() => { window.__noReload = true; });
    const mine = cli("run", "--name", "from-cli", "--workdir", "/tmp", "--", "sleep", "300");
    await row(page, mine).waitFor(WAIT);
    await row(page, mine).locator('[data-state="running"]').waitFor(WAIT);
    check(await page.evaluate(() => window.__noReload === true), "the page was reloaded");
    log(`${step}: ${mine}`);

    step = "another user's run offers neither stop nor a link";
    const theirs = row(page, cfg.other_run);
    await theirs.waitFor(WAIT);
    check((await theirs.locator("button").count()) === 0, "a button on another user's run");
    check((await theirs.locator("a").count()) === 0, "a link on another user's run");
    check((await row(page, mine).locator("button").count()) === 1, "no stop button on my own run");
    log(step);

    step = "the form shows the API's error at the field, then submits";
    await page.click("text=New run");
    await page.fill("#run-command", "sleep 300");
    await page.fill("#run-name", "from-form");
    await page.fill("#run-workdir", "/tmp");
    await page.fill("#run-memory", "16X");
    await page.click("button[type=submit]");
    const fieldError = page.locator(".field-memory .error");
    await fieldError.waitFor(WAIT);
    const errText = await fieldError.textContent();
    check(errText.includes("memory") && errText.includes("16X"), `the field's error: ${errText}`);
    check((await page.getAttribute("#run-memory", "aria-invalid")) === "true", "memory not marked invalid");
    await axe(page, "the form with an error");
    await shot(page, "runs-form-error-en");
    await page.fill("#run-memory", "");
    await page.click("button[type=submit]");
    await page.waitForSelector(".notice", WAIT);
    const notice = await page.textContent(".notice");
    const formRun = notice.match(/\br[0-9a-z]{6,}\b/)?.[0];
    check(formRun, `the notice: ${notice}`);
    await row(page, formRun).waitFor(WAIT);
    log(`${step}: "${errText}", then ${formRun}`);

    if (cfg.image) {
      step = "the form runs the command in one of the user's images";
      await page.click("text=New run");
      await page.waitForSelector(`#run-image option[value="${cfg.image}"]`, { ...WAIT, state: "attached" });
      const offered = await page.locator("#run-image option").allTextContents();
      check(offered.some((o) => o.startsWith(cfg.image)), `the image list: ${offered}`);
      await page.fill("#run-command", "true");
      await page.fill("#run-name", "from-form-image");
      await page.fill("#run-workdir", "/tmp");
      await page.selectOption("#run-image", cfg.image);
      await page.click("button[type=submit]");
      await page.waitForFunction(() => /from-form-image|\br[0-9a-z]{6,}\b/.test(document.querySelector(".notice")?.textContent ?? ""), null, WAIT);
      const spec = await page.evaluate(async () => {
        const r = await fetch("/api/v1/runs?all=1&q=from-form-image");
        const runs = (await r.json()).runs;
        return runs.length ? runs[0].spec : null;
      });
      check(spec && spec.image === cfg.image && /^[0-9a-f]{64}$/.test(spec.image_id ?? ""),
            `the form's run in an image: ${JSON.stringify(spec)}`);
      log(`${step}: ${spec.image} ${spec.image_id.slice(0, 12)}`);
    }

    step = "stop a run";
    await row(page, mine).locator("button").click();
    await row(page, mine).locator('[data-state="stopped"]').waitFor(WAIT);
    check((await row(page, mine).locator("button").count()) === 0, "a stop button on a stopped run");
    log(`${step}: ${mine} stopped`);

    step = "another user's run is the API's 403";
    await page.goto(new URL(`/ui/runs/${cfg.other_run}`, cfg.login_url).href);
    const forbidden = page.locator("main p.error");
    await forbidden.waitFor(WAIT);
    const api = await page.evaluate(async (id) => {
      const r = await fetch(`/api/v1/runs/${id}`);
      return { status: r.status, error: await r.json() };
    }, cfg.other_run);
    check(api.status === 403, `GET /runs/${cfg.other_run}: ${api.status}`);
    check((await forbidden.textContent()) === api.error.en, `shown: ${await forbidden.textContent()}`);
    log(`${step}: ${api.error.msg_id}`);

    await logFollowsLive(page);
    await bigLog(page);
    await restoreCheckpoint(page);
    await diagnosis(page);
    await doctor(page);
    await localPool(page);
    await charts(page);
    await models(page);
    await openPort(page);
    await deployment(page);
    await deploymentFromUi(page);
    const notebook = await notebookFromUi(page);
    await accessPage(page);
    const { ctx: second, p2 } = await sharing(page, browser, notebook);
    await projects(page, p2, browser);
    await second.close();

    await visitAll(page, "en");

    step = "switch to 中文";
    await page.goto(new URL("/ui/runs", cfg.login_url).href);
    await page.selectOption("#lang", "zh");
    await page.waitForSelector("main h1 >> text=运行", WAIT);
    check((await page.textContent("nav")).includes("概览"), "the navigation is not translated");
    await page.reload();  // the choice is remembered
    await page.waitForSelector("main h1 >> text=运行", WAIT);
    log(step);
    await visitAll(page, "zh");
    await inChinese(page);

    step = "the 403 in 中文";
    await page.goto(new URL(`/ui/runs/${cfg.other_run}`, cfg.login_url).href);
    await forbidden.waitFor(WAIT);
    check((await forbidden.textContent()) === api.error.zh, `shown: ${await forbidden.textContent()}`);
    await axe(page, "run (zh)");
    await shot(page, "run-forbidden-zh");

    step = "the doctor's findings in 中文";
    await go(page, "/ui/");
    await page.waitForSelector(".doctor-summary", WAIT);
    const zhSummary = await page.textContent(".doctor-summary");
    check(zhSummary.includes("项正常"), `the summary in 中文: ${zhSummary}`);

    step = "dark";
    await page.goto(new URL("/ui/runs", cfg.login_url).href);
    await page.selectOption("#theme", "dark");
    await page.waitForSelector("html[data-theme=dark]", WAIT);
    await page.waitForSelector("table tbody tr[data-key]", WAIT);
    await axe(page, "runs (dark)");
    await shot(page, "runs-zh-dark");

    step = "no CSP violation or script error";
    check(problems.length === 0, problems.join("\n"));
    log("all passed");
  } catch (e) {
    console.error(`[ui] FAILED at "${step}": ${e.message}`);
    await shot(page, "failure").catch(() => {});
    process.exitCode = 1;
  } finally {
    await browser.close();
  }
}

await main();
