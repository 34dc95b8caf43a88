// Pools in the web UI in a real browser (Debian's chromium, headless, driven by
// playwright-core), against the daemon tests/integ/test_web_pools.py started
// with fake Slurm commands.
//   node pools.spec.mjs CONFIG.json
// CONFIG: {login_url, user, artifacts, catalog, chromium, node_modules,
//          hold (a file whose existence makes the fake sinfo wait),
//          local_run (a run on this machine), pool_run (a run held in the
//          cluster pool's queue), job_id (its Slurm job id)}
// Prints one line per step; exits 1 with the failed step's message.
import fs from "node:fs";
import path from "node:path";
import { createRequire } from "node:module";

const cfg = JSON.parse(fs.readFileSync(process.argv[2], "utf8"));
const require = createRequire(path.join(cfg.node_modules, "noop.js"));
const { chromium } = require("playwright-core");
const axeSource = fs.readFileSync(require.resolve("axe-core/axe.min.js"), "utf8");

const WAIT = { timeout: 30_000 };
const REUSE_MS = 2500;  // the daemon reuses a cluster's answer for 2 s
let step = "start";
const problems = [];

function log(msg) {
  console.log(`[pools] ${msg}`);
}

function check(cond, msg) {
  if (!cond) throw new Error(msg);
}

async function axe(page, name) {
  await page.evaluate(axeSource);
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

// No catalog id shown, and no text of the other language.
async function checkLanguage(page, lang, name) {
  const other = lang === "zh" ? "en" : "zh";
  const foreign = new Set(Object.values(cfg.catalog)
    .filter((e) => e.en !== e.zh && !/\{\w+\}/.test(e[other]) && e[other].length > 3).map((e) => e[other]));
  const texts = await page.evaluate(() => {
    const out = [];
    const w = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
    for (let n = w.nextNode(); n; n = w.nextNode()) {
      const s = n.textContent.trim();
      if (s && n.parentElement.closest("option, script, style, code, pre") === null) out.push(s);
    }
    return out;
  });
  const ids = texts.filter((s) => /\bweb\.[a-z_]+\.[a-z_.]+/.test(s));
  check(ids.length === 0, `${name}: catalog ids shown: ${ids.join(" | ")}`);
  const wrong = texts.filter((s) => foreign.has(s));
  check(wrong.length === 0, `${name} in ${lang}: texts of the other language: ${wrong.join(" | ")}`);
}

function go(page, url) {
  return page.goto(new URL(url, cfg.login_url).href);
}

async function cellText(page, table, key, col) {
  return (await page.locator(`${table} tr[data-key="${key}"] td[data-col="${col}"]`).textContent()).trim();
}

async function overview(page, lang, api) {
  await go(page, "/ui/");
  await page.waitForSelector('.pools[data-loaded="1"]', WAIT);
  const pools = '.pools [data-pools="list"]';
  const names = await page.$$eval(`${pools} tbody tr`, (rows) => rows.map((r) => r.dataset.key));
  check(JSON.stringify(names) === JSON.stringify(api.pools.map((p) => p.name)), `pools listed: ${names}`);
  const tr = (id) => cfg.catalog[id][lang];
  check((await cellText(page, pools, "local", "pool")) === tr("web.pools.default").replace("{name}", "local"),
    "local is not marked the default");
  check((await cellText(page, pools, "cluster", "type")) === "Slurm", "the cluster's type");
  const submits = await cellText(page, pools, "cluster", "submits");
  check(submits.includes("debug") && submits.includes("lab"), `the cluster submits to: ${submits}`);
  const runs = await page.getAttribute(`${pools} tr[data-key="cluster"] [data-runs]`, "data-runs");
  check(runs === "0/1/0", `your runs in the cluster: ${runs}`);
  check((await cellText(page, pools, "broken", "status")) === tr("web.pools.no_answer"), "broken answers?");
  check((await cellText(page, pools, "cluster", "status")) === tr("web.pools.answers"), "cluster does not answer?");
  // The broken pool's error, the API's text in the page's language.
  const broken = api.pools.find((p) => p.name === "broken");
  const err = page.locator('p.pool-error[data-pool="broken"][data-error-id="slurm.sinfo_failed"]');
  check((await err.textContent()) === broken.error[lang], `the error shown: ${await err.textContent()}`);
  check((await page.locator("p.pool-error").count()) === 1, "an error for a pool that answered");
  // The partitions.
  const parts = '.pools [data-pools="partitions"]';
  check((await cellText(page, parts, "cluster/debug", "partition")) ===
    tr("web.pools.default").replace("{name}", "debug"), "debug is not marked the default");
  check((await page.getAttribute(`${parts} tr[data-key="cluster/debug"] [data-state]`, "data-state")) === "up", "debug up");
  check((await cellText(page, parts, "cluster/debug", "nodes")) === "0/1/0/1", "debug's nodes");
  check((await cellText(page, parts, "cluster/debug", "gpus")) === "1/2 (fake)", "debug's GPUs");
  check((await cellText(page, parts, "cluster/debug", "max_time")) === tr("web.pools.no_limit"), "debug's MaxTime");
  check((await cellText(page, parts, "cluster/long", "max_time")) === "2d", "long's MaxTime");
  check((await page.getAttribute(`${parts} tr[data-key="cluster/long"] [data-state]`, "data-state")) === "down", "long down");
  // Your run there, linked.
  check((await page.locator(`.pool-runs li[data-pool="cluster"] a[href="/ui/runs/${cfg.pool_run}"]`).count()) === 1,
    "the pool run is not listed under the cluster");
  await checkLanguage(page, lang, `overview (${lang})`);
  await axe(page, `overview with pools (${lang})`);
  await shot(page, `pools-${lang}`);
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
    step = "sign in";
    await page.goto(cfg.login_url);
    await page.waitForSelector(".user", WAIT);
    const api = await page.evaluate(async () => (await fetch("/api/v1/pools")).json());

    step = "while the clusters are asked, the pools say so and the rest of the page is there";
    fs.writeFileSync(cfg.hold, "");
    await new Promise((r) => setTimeout(r, REUSE_MS));  // past the answer the daemon reuses
    await go(page, "/ui/");
    await page.waitForSelector(".pools-loading", WAIT);
    await page.waitForSelector('main table tbody tr[data-key="0"]', WAIT);  // the GPU
    await page.waitForSelector(".doctor-summary", WAIT);
    check(await page.locator(".pools-loading").isVisible(), "the loading state went away while sinfo waits");
    check((await page.locator(".pools table").count()) === 0, "a pools table before the answer");
    await axe(page, "overview, pools loading");
    await shot(page, "pools-loading-en");
    fs.unlinkSync(cfg.hold);
    await page.waitForSelector('.pools[data-loaded="1"]', WAIT);
    log(step);

    step = "the Overview's pools (en)";
    await overview(page, "en", api);
    log(step);

    step = "a pool run's page: its pool, Slurm job id and what its cluster said";
    await go(page, `/ui/runs/${cfg.pool_run}`);
    const facts = page.locator(`dl[data-run="${cfg.pool_run}"]`);
    await facts.waitFor(WAIT);
    check((await facts.locator("[data-pool]").getAttribute("data-pool")) === "cluster", "the run's pool");
    check((await facts.locator("[data-pool]").textContent()) === "cluster", "the pool shown");
    check((await facts.locator(`[data-job-id="${cfg.job_id}"]`).textContent()) === cfg.job_id, "the job id");
    const waiting = await facts.locator('[data-waiting-on="pool"]').textContent();
    check(waiting.includes("PENDING (Resources)"), `why it waits: ${waiting}`);
    await axe(page, "a pool run's page");
    await shot(page, "run-pool-en");
    log(`${step}: job ${cfg.job_id}, "${waiting}"`);

    step = "the runs list: each run's pool, the job id beside a pool run's";
    await go(page, "/ui/runs");
    const pooled = page.locator(`tr[data-key="${cfg.pool_run}"] td[data-col="pool"]`);
    await pooled.waitFor(WAIT);
    check((await pooled.locator("[data-pool]").getAttribute("data-pool")) === "cluster", "the list's pool");
    check((await pooled.locator(`[data-job-id="${cfg.job_id}"]`).count()) === 1, "the list's job id");
    const here = page.locator(`tr[data-key="${cfg.local_run}"] td[data-col="pool"] [data-pool]`);
    check((await here.getAttribute("data-pool")) === "local", "the local run's pool in the list");
    await axe(page, "runs with pools");
    log(step);

    step = "switch to 中文";
    await page.selectOption("#lang", "zh");
    await page.waitForSelector("main h1 >> text=运行", WAIT);

    step = "the Overview's pools (zh)";
    await overview(page, "zh", api);
    log(step);

    step = "a local run's page says local, in 中文";
    await go(page, `/ui/runs/${cfg.local_run}`);
    const pool = page.locator(`dl[data-run="${cfg.local_run}"] [data-pool="local"]`);
    await pool.waitFor(WAIT);
    check((await pool.textContent()) === cfg.catalog["web.run.pool_local"].zh, `shown: ${await pool.textContent()}`);
    check((await page.locator("[data-job-id]").count()) === 0, "a job id for a local run");
    await checkLanguage(page, "zh", "run (zh)");
    await axe(page, "a local run's page (zh)");
    await shot(page, "run-local-zh");
    log(step);

    step = "no CSP violation or script error";
    check(problems.length === 0, problems.join("\n"));
    log("all passed");
  } catch (e) {
    console.error(`[pools] FAILED at "${step}": ${e.message}`);
    await shot(page, "pools-failure").catch(() => {});
    process.exitCode = 1;
  } finally {
    if (fs.existsSync(cfg.hold)) fs.unlinkSync(cfg.hold);
    await browser.close();
  }
}

await main();
