// The web UI in a real browser (Debian's chromium, headless, driven by
// playwright-core), against a real daemon that tests/integ/test_web.py started.
//   node ui.spec.mjs CONFIG.json
// CONFIG: {login_url, lathe: [argv prefix that runs the CLI as the signed-in user],
//          other_run (another user's run id), artifacts (dir), catalog ({id: {en, zh}}),
//          chromium, node_modules}
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
  ["overview", "/ui/"], ["runs", "/ui/runs"], ["snapshots", "/ui/snapshots"], ["models", "/ui/models"],
  ["deployments", "/ui/deployments"], ["notebooks", "/ui/notebooks"],
];
const WAIT = { timeout: 30_000 };
let step = "start";
const problems = [];  // CSP violations and script errors seen on the way

function log(msg) {
  console.log(`[ui] ${msg}`);
}

function check(cond, msg) {
  if (!cond) throw new Error(msg);
}

function cli(...args) {
  const [cmd, ...pre] = cfg.lathe;
  return execFileSync(cmd, [...pre, ...args], { encoding: "utf8" }).trim();
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
  for (const [name, url] of PAGES) {
    step = `${name} (${lang})`;
    await page.goto(new URL(url, cfg.login_url).href);
    await page.waitForSelector("main h1", WAIT);
    await page.waitForSelector("table tbody tr", WAIT);
    await page.waitForFunction(() => !document.querySelector("td.empty")?.textContent?.match(/Loading|加载中/), null, WAIT);
    await checkLanguage(page, lang, name);
    await axe(page, `${name} (${lang})`);
    await shot(page, `${name}-${lang}`);
    log(`${step}: translated, axe clean, screenshot`);
  }
}

function row(page, id) {
  return page.locator(`tr[data-key="${id}"]`);
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
    log(`${step}: ${who}; the GPUs are labelled simulated`);

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
      return { status: r.status, error: (await r.json()).error };
    }, cfg.other_run);
    check(api.status === 403, `GET /runs/${cfg.other_run}: ${api.status}`);
    check((await forbidden.textContent()) === api.error.en, `shown: ${await forbidden.textContent()}`);
    log(`${step}: ${api.error.id}`);

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

    step = "the 403 in 中文";
    await page.goto(new URL(`/ui/runs/${cfg.other_run}`, cfg.login_url).href);
    await forbidden.waitFor(WAIT);
    check((await forbidden.textContent()) === api.error.zh, `shown: ${await forbidden.textContent()}`);
    await axe(page, "run (zh)");
    await shot(page, "run-forbidden-zh");

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
