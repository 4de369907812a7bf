// Drives the dashboard's web page in headless Chromium against a running
// dashboard: the token prompt, the overview, nodes grouped by TPU slice, a
// job's logs, a training run's plot growing, and a page of another origin
// that must neither read the State API nor stop a job with the browser's
// session cookie.
//
//   MANTA_DASHBOARD_URL=http://127.0.0.1:8265 MANTA_TOKEN=... MANTA_EXPECT_NODES=9 \
//   MANTA_EXPECT_SLICES=2 MANTA_JOB_ID=raysubmit_... MANTA_ARTIFACT_DIR=/tmp/shots \
//     node tests/web/dashboard_page_test.mjs
//
// Needs playwright-core in $MANTA_NODE_TOOLS (default ~/.cache/manta/node_tools,
// see scripts/install_deps.sh) and /usr/bin/chromium (MANTA_CHROMIUM to
// override). Prints one line per check; exits 1 on the first failure.
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import {createRequire} from 'node:module';

const STEP_TIMEOUT_MS = 30000;
const TRAIN_TIMEOUT_MS = 60000;
const CHROMIUM_ARGS = ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
  '--disable-background-networking', '--disable-component-update', '--disable-sync'];

class CheckFailed extends Error {}

function setting(name, fallback) {
  const v = process.env[name] || fallback;
  if (!v) throw new CheckFailed(`${name} is not set`);
  return v;
}

function count(name) {
  const n = Number(setting(name));
  if (!Number.isInteger(n) || n < 0) throw new CheckFailed(`${name} must be a count, not '${process.env[name]}'`);
  return n;
}

function loadConfig() {
  return {
    url: setting('MANTA_DASHBOARD_URL').replace(/\/+$/, ''),
    token: setting('MANTA_TOKEN'),
    nodes: count('MANTA_EXPECT_NODES'),
    slices: count('MANTA_EXPECT_SLICES'),
    jobId: setting('MANTA_JOB_ID'),
    artifacts: setting('MANTA_ARTIFACT_DIR'),
    tools: setting('MANTA_NODE_TOOLS', path.join(os.homedir(), '.cache/manta/node_tools')),
    chromium: setting('MANTA_CHROMIUM', '/usr/bin/chromium'),
  };
}

function loadPlaywright(tools) {
  try {
    return createRequire(path.join(tools, 'node_modules', 'index.js'))('playwright-core');
  } catch (e) {
    throw new CheckFailed(`playwright-core is not installed in ${tools} (run scripts/install_deps.sh): ${e.message}`);
  }
}

function pass(step, what) { console.log(`ok ${step} - ${what}`); }

// Waits on `fn(arg)` in the page; on timeout fails with `what` and the
// state `explain(arg)` reads from the page.
async function waitFor(page, what, fn, arg, explain, timeout = STEP_TIMEOUT_MS) {
  try {
    await page.waitForFunction(fn, arg, {timeout, polling: 250});
  } catch (e) {
    let seen = '';
    try { seen = explain ? await page.evaluate(explain, arg) : ''; } catch { /* page gone */ }
    const status = await page.locator('#status').textContent({timeout: 1000}).catch(() => '');
    throw new CheckFailed(`${what}: not within ${timeout / 1000} s${seen ? `; saw ${seen}` : ''}` +
      `${status ? `; status line: '${status}'` : ''} (${e.message.split('\n')[0]})`);
  }
}

async function shot(page, cfg, name) {
  await page.screenshot({path: path.join(cfg.artifacts, name), fullPage: true});
}

async function openView(page, view) {
  await page.click(`#nav a[data-view="${view}"]`);
  await page.waitForSelector(`#view-${view}`, {state: 'visible', timeout: STEP_TIMEOUT_MS});
}

async function checkLoginPrompt(page, cfg) {
  await page.goto(cfg.url + '/', {waitUntil: 'domcontentloaded', timeout: STEP_TIMEOUT_MS});
  await waitFor(page, 'the token prompt (#login-form) shows', () => {
    const f = document.getElementById('login-form');
    return f && !f.hidden && document.getElementById('token-input');
  }, null, () => `status '${document.getElementById('status')?.textContent}'`);
  await shot(page, cfg, '01-login.png');
  pass(1, 'the token prompt shows (01-login.png)');
}

async function checkOverview(page, cfg) {
  await page.fill('#token-input', cfg.token);
  await page.click('#login-form button[type="submit"]');
  await waitFor(page, 'the overview shows after signing in', () => {
    const v = document.getElementById('view-overview');
    return (v && !v.hidden && document.querySelector('#overview-body [data-resource]')) ||
      document.getElementById('login-error').textContent !== '';
  }, null, null);
  const refused = await page.textContent('#login-error');
  if (refused) throw new CheckFailed(`signing in with MANTA_TOKEN failed: ${refused}`);
  const kept = await page.evaluate((token) => {
    const stores = [localStorage, sessionStorage].flatMap((s) => Object.keys(s).map((k) => s.getItem(k)));
    return stores.some((v) => v.includes(token)) || document.cookie.includes(token);
  }, cfg.token);
  if (kept) throw new CheckFailed('the page kept the token in web storage or a script-readable cookie');
  const cookies = await page.context().cookies(cfg.url);
  if (!cookies.some((c) => c.httpOnly && c.sameSite === 'Strict')) {
    throw new CheckFailed(`no HttpOnly SameSite=Strict session cookie after signing in: ${JSON.stringify(cookies)}`);
  }
  await shot(page, cfg, '02-overview.png');
  pass(2, 'signed in with an HttpOnly SameSite=Strict cookie; the overview shows resources (02-overview.png)');
}

async function checkNodes(page, cfg) {
  await openView(page, 'nodes');
  const expect = {nodes: cfg.nodes, slices: cfg.slices};
  await waitFor(page, `${cfg.nodes} nodes in ${cfg.slices} TPU slices`, (e) =>
    document.querySelectorAll('#view-nodes [data-node-id]').length === e.nodes &&
    document.querySelectorAll('#view-nodes [data-slice]:not([data-slice=""])').length === e.slices,
  expect, () => `${document.querySelectorAll('#view-nodes [data-node-id]').length} nodes, ` +
    `${document.querySelectorAll('#view-nodes [data-slice]:not([data-slice=""])').length} slices`);
  // Every TPU host shows its chips in use (the training run holds them).
  await waitFor(page, 'chips used on every TPU host', () => {
    const rows = [...document.querySelectorAll('#view-nodes tbody[data-slice]:not([data-slice=""]) tr[data-node-id]')];
    const cells = rows.map((r) => (r.children[4] ? r.children[4].textContent.trim() : ''));
    return cells.length > 0 && cells.every((t) => /^\d+(\.\d+)? \/ 4$/.test(t));
  }, null, () => [...document.querySelectorAll('#view-nodes tr[data-node-id]')]
    .map((r) => (r.children[4] ? r.children[4].textContent.trim() : '')).join(', '));
  await shot(page, cfg, '03-nodes.png');
  pass(3, `${cfg.nodes} nodes, ${cfg.slices} slices, chips in use shown (03-nodes.png)`);
}

async function checkJob(page, cfg) {
  await openView(page, 'jobs');
  const row = page.locator(`#view-jobs tr[data-submission-id=${JSON.stringify(cfg.jobId)}]`);
  await row.waitFor({state: 'visible', timeout: STEP_TIMEOUT_MS}).catch(() => {
    throw new CheckFailed(`job ${cfg.jobId} is not listed in the jobs view`);
  });
  await row.click();
  await waitFor(page, `the logs of ${cfg.jobId} show in #job-logs`, (id) => {
    const pre = document.getElementById('job-logs');
    return pre && pre.getAttribute('data-job-id') === id && pre.textContent.trim().length > 0;
  }, cfg.jobId, () => `#job-logs '${document.getElementById('job-logs')?.textContent.slice(0, 80)}'`);
  await shot(page, cfg, '04-job.png');
  pass(4, `job ${cfg.jobId} is listed and its logs show (04-job.png)`);
}

// The point count of every loss plot, by run id.
function lossPoints() {
  const out = {};
  for (const el of document.querySelectorAll('.loss-plot[data-points]')) {
    out[el.getAttribute('data-run-id') || el.getAttribute('data-run')] = Number(el.getAttribute('data-points'));
  }
  return out;
}

async function checkTraining(page, cfg) {
  await openView(page, 'train');
  await waitFor(page, 'a loss plot (.loss-plot) is drawn', () =>
    document.querySelector('.loss-plot[data-points] canvas') !== null, null, lossPoints);
  const before = await page.evaluate(lossPoints);
  await waitFor(page, 'a loss plot gets new points', (b) => {
    for (const el of document.querySelectorAll('.loss-plot[data-points]')) {
      const key = el.getAttribute('data-run-id') || el.getAttribute('data-run');
      if (key in b && Number(el.getAttribute('data-points')) > b[key]) return true;
    }
    return false;
  }, before, lossPoints, TRAIN_TIMEOUT_MS);
  const after = await page.evaluate(lossPoints);
  await shot(page, cfg, '05-train.png');
  pass(5, `loss plot points grew: ${JSON.stringify(before)} -> ${JSON.stringify(after)} (05-train.png)`);
}

// A page of another origin that tries to read the State API and to stop
// the job with whatever cookie the browser holds for the dashboard.
function foreignPage(cfg) {
  const stop = `${cfg.url}/api/jobs/${encodeURIComponent(cfg.jobId)}/stop`;
  return `<!doctype html><title>Another site</title><h1>Another site</h1><pre id="out">running</pre>
<iframe name="sink" id="sink"></iframe><form id="form" method="POST" action="${stop}" target="sink"></form>
<script>
const DASHBOARD = ${JSON.stringify(cfg.url)}, STOP = ${JSON.stringify(stop)}, out = {};
async function read() {
  try {
    const r = await fetch(DASHBOARD + '/api/v0/nodes', {credentials: 'include'});
    out.readStatus = r.status; out.readBody = (await r.text()).slice(0, 2000); out.readable = true;
  } catch (e) { out.readable = false; out.readError = String(e); }
}
async function post(mode) {
  try {
    const r = await fetch(STOP, {method: 'POST', mode, credentials: 'include', body: ''});
    out['post_' + mode] = r.type === 'opaque' ? 'sent, answer opaque' : r.status;
  } catch (e) { out['post_' + mode] = String(e); }
}
function submitForm() {
  return new Promise((done) => {
    document.getElementById('sink').addEventListener('load', () => done('loaded'), {once: true});
    setTimeout(() => done('no load event'), 10000);
    document.getElementById('form').submit();
  });
}
Promise.all([read(), post('no-cors'), post('cors'), submitForm().then((v) => { out.form = v; })]).then(() => {
  document.getElementById('out').textContent = JSON.stringify(out, null, 1);
  window.__result = out;
});
</script>`;
}

async function startForeignServer(cfg) {
  const html = foreignPage(cfg);
  const server = http.createServer((req, res) => {
    res.writeHead(200, {'Content-Type': 'text/html; charset=utf-8', 'Cache-Control': 'no-store'});
    res.end(html);
  });
  await new Promise((ok, bad) => server.once('error', bad).listen(0, '127.0.0.1', ok));
  return server;
}

async function jobStatus(cfg) {
  const url = `${cfg.url}/api/jobs/${encodeURIComponent(cfg.jobId)}`;
  const r = await fetch(url, {headers: {Authorization: `Bearer ${cfg.token}`}});
  if (!r.ok) throw new CheckFailed(`GET ${url} answered ${r.status}: ${(await r.text()).trim()}`);
  return (await r.json()).status;
}

// The job must stay running or pending while the requests it was sent
// settle: read its status until `ms` have passed.
async function expectJobAlive(cfg, ms) {
  const deadline = Date.now() + ms;
  for (;;) {
    const status = await jobStatus(cfg);
    if (status !== 'RUNNING' && status !== 'PENDING') {
      throw new CheckFailed(`job ${cfg.jobId} is ${status} after the cross-site POSTs: a foreign page stopped it`);
    }
    if (Date.now() >= deadline) return status;
    await new Promise((r) => setTimeout(r, 250));
  }
}

async function checkCrossSite(context, cfg) {
  const before = await jobStatus(cfg);
  if (before !== 'RUNNING' && before !== 'PENDING') {
    throw new CheckFailed(`job ${cfg.jobId} is ${before} before the cross-site check; it must be running`);
  }
  const server = await startForeignServer(cfg);
  try {
    const page = await context.newPage();
    await page.goto(`http://127.0.0.1:${server.address().port}/`, {timeout: STEP_TIMEOUT_MS});
    await waitFor(page, 'the foreign page finishes its requests', () => window.__result !== undefined, null, null);
    const out = await page.evaluate(() => window.__result);
    if (out.readable && /node_id|"result"/.test(out.readBody || '')) {
      throw new CheckFailed(`a foreign page read the State API: ${out.readBody.slice(0, 200)}`);
    }
    const status = await expectJobAlive(cfg, 2000);
    await shot(page, cfg, '06-cross-site.png');
    await page.close();
    pass(6, `a foreign origin could not read state (${out.readable ? 'status ' + out.readStatus : 'blocked'}) ` +
      `and its POSTs left job ${cfg.jobId} ${status} (06-cross-site.png)`);
  } finally {
    server.close();
  }
}

async function run(cfg, context) {
  const page = await context.newPage();
  const pageErrors = [];
  page.on('pageerror', (e) => pageErrors.push(e.message));
  const steps = [checkLoginPrompt, checkOverview, checkNodes, checkJob, checkTraining];
  try {
    for (const step of steps) {
      await step(page, cfg);
      if (pageErrors.length) throw new CheckFailed(`the page threw: ${pageErrors.join('; ')}`);
    }
  } catch (e) {
    await shot(page, cfg, 'failure.png').catch(() => {});
    throw e;
  }
  await checkCrossSite(context, cfg);
}

async function main() {
  const cfg = loadConfig();
  const {chromium} = loadPlaywright(cfg.tools);
  if (!fs.existsSync(cfg.chromium)) throw new CheckFailed(`${cfg.chromium} is missing (apt-get install chromium)`);
  fs.mkdirSync(cfg.artifacts, {recursive: true});
  const profile = fs.mkdtempSync(path.join(os.tmpdir(), 'manta-chromium-'));
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: cfg.chromium, headless: true, args: CHROMIUM_ARGS, viewport: {width: 1400, height: 900},
  });
  try {
    await run(cfg, context);
  } finally {
    await context.close().catch(() => {});
    fs.rmSync(profile, {recursive: true, force: true});
  }
  console.log('all dashboard page checks passed');
}

main().catch((e) => {
  console.error(`FAIL: ${e instanceof CheckFailed ? e.message : e.stack || e}`);
  process.exit(1);
});
