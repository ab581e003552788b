// The console's browser test: the real admin server (console_host) and the
// built console, in Debian's chromium driven by playwright-core.
//
//   node console.test.mjs --host PATH/console_host --modules ADMIN_UI_DIR --out ARTIFACTS_DIR
//   node console.test.mjs --url http://127.0.0.1:PORT/ --token T ...   (a server already running)
//
// It reads the numbers on the page and checks them against GET
// /api/v1/caches (the graph transforms panel against GET /metrics), turns a
// switch off, lowers a capacity and flushes a cache
// through the page (checking what the confirmations say), changes a
// setting, sees the charts gain points, sees polling stop while the tab is
// hidden, and writes screenshots to ARTIFACTS_DIR.
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import fs from "node:fs";
import { createRequire } from "node:module";
import path from "node:path";
import readline from "node:readline";

const args = Object.fromEntries(
  process.argv.slice(2).reduce((pairs, a, i, all) => (a.startsWith("--") ? [...pairs, [a.slice(2), all[i + 1]]] : pairs), []),
);
const modules = args.modules ?? path.resolve(path.dirname(new URL(import.meta.url).pathname), "../../admin_ui");
const out = args.out ?? path.resolve("console-artifacts");
const CHROMIUM = "/usr/bin/chromium";

const require = createRequire(path.join(modules, "package.json"));
let chromium;
try {
  ({ chromium } = require("playwright-core"));
} catch {
  fail(`playwright-core is not installed under ${modules}/node_modules (build primcache_console_assets, which runs npm ci)`);
}
if (!fs.existsSync(CHROMIUM)) fail(`${CHROMIUM} is missing: scripts/install-deps installs Debian's chromium`);
fs.mkdirSync(out, { recursive: true });

function fail(message) {
  console.error(`console test: ${message}`);
  process.exit(1);
}

function log(message) {
  console.log(`[console] ${message}`);
}

// ---- the server ---------------------------------------------------------------
async function startHost(hostPath) {
  const child = spawn(hostPath, [], { stdio: ["pipe", "pipe", "inherit"] });
  const lines = readline.createInterface({ input: child.stdout });
  const info = {};
  await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error("console_host printed no url/token in 15 s")), 15000);
    child.on("exit", (code) => reject(new Error(`console_host exited early (${code})`)));
    lines.on("line", (line) => {
      const [key, value] = line.split(" ", 2);
      info[key] = value;
      if (info.url && info.token) {
        clearTimeout(timer);
        resolve();
      }
    });
  });
  return { child, url: info.url, token: info.token };
}

const host = args.url ? { child: null, url: args.url, token: args.token } : await startHost(args.host);
const base = host.url.replace(/\/$/, "");
log(`server ${host.url}`);

async function api(p, init) {
  const response = await fetch(base + p, init);
  const body = await response.json();
  if (!response.ok) throw new Error(`${p}: ${response.status} ${JSON.stringify(body)}`);
  return body;
}
const apiCache = async (name) => api(`/api/v1/caches/${name}`);

// ---- the browser ----------------------------------------------------------------
const browser = await chromium.launch({
  executablePath: CHROMIUM,
  headless: true,
  args: ["--no-sandbox", "--disable-background-networking"],
});
const page = await browser.newPage({ viewport: { width: 1440, height: 1100 } });
const pageErrors = [];
page.on("pageerror", (e) => pageErrors.push(e.message));
page.on("console", (m) => {
  // The wrong token on purpose is answered 401, which chromium logs.
  if (m.type() === "error" && !/status of 401/.test(m.text())) pageErrors.push(`console: ${m.text()}`);
});
let cacheRequests = 0;
page.on("request", (r) => {
  if (r.url().includes("/api/v1/caches")) cacheRequests++;
});

// Polls `check` (which returns true or throws) until it passes or time runs out.
async function eventually(what, check, timeoutMs = 8000) {
  const deadline = Date.now() + timeoutMs;
  let last;
  for (;;) {
    try {
      if ((await check()) !== false) return;
      last = new Error("condition false");
    } catch (e) {
      last = e;
    }
    if (Date.now() > deadline) throw new Error(`${what}: ${last?.message ?? last}`);
    await page.waitForTimeout(150);
  }
}

const card = (name) => page.locator(`[data-cache="${name}"]`);
const field = async (name, f) => (await card(name).locator(`[data-field="${f}"]`).textContent()).trim();
const number = (text) => Number(text.replace(/,/g, ""));
const shot = async (name) => {
  await page.evaluate(() => window.scrollTo(0, 0));
  await page.screenshot({ path: path.join(out, name), fullPage: true });
  log(`screenshot ${path.join(out, name)}`);
};

// Checks every number a cache card shows against GET /api/v1/caches.
async function pageMatchesApi() {
  const { caches } = await api("/api/v1/caches");
  const names = await page.locator("[data-cache]").evaluateAll((els) => els.map((e) => e.dataset.cache));
  assert.deepEqual(names, caches.map((c) => c.name), "one card per cache, in the API's order");
  for (const c of caches) {
    assert.equal(number(await field(c.name, "size")), c.size, `${c.name} size`);
    assert.equal(number(await field(c.name, "capacity")), c.capacity, `${c.name} capacity`);
    for (const k of ["hits", "misses", "waits", "evictions", "failures"]) {
      assert.equal(number(await field(c.name, k)), c.stats[k], `${c.name} ${k}`);
    }
    const lookups = c.stats.hits + c.stats.misses + c.stats.waits;
    assert.equal(await field(c.name, "hit-rate"), `${((c.stats.hits / lookups) * 100).toFixed(1)}%`, `${c.name} hit rate`);
  }
  return caches;
}

let exitCode = 0;
try {
  await page.goto(host.url);
  await eventually("the page goes live", async () => (await page.getByTestId("status").textContent()).startsWith("Live"));
  await eventually("five cache cards", async () => (await page.locator("[data-cache]").count()) === 5);
  assert.equal(await card("constant.cpu").count(), 1, "the CPU constant tensor cache has a card");
  await page.waitForTimeout(1500); // a couple of polls: points on the charts
  await shot("01-loaded.png");

  // Turn the host's traffic off through the page. The first change asks for
  // the token; a wrong one is refused (401) and asked for again.
  await page.getByTestId("switch-traffic").click();
  await page.getByTestId("token-dialog").waitFor();
  await page.getByTestId("token-input").fill("not-the-token");
  await page.getByTestId("token-ok").click();
  const again = page.getByTestId("token-dialog");
  await again.waitFor();
  assert.match(await again.textContent(), /refused/, "a 401 asks for the token again, saying why");
  await page.getByTestId("token-input").fill(host.token);
  await page.getByTestId("token-ok").click();
  await eventually("the switch is off on the server", async () => {
    const { switches } = await api("/api/v1/switches");
    return switches.find((s) => s.name === "traffic").on === false;
  });
  assert.equal(await page.evaluate(() => sessionStorage.getItem("primcache.token")), host.token, "the token is kept in session storage");
  log("switch flipped through the page; token asked once, again after a 401");

  // With no traffic the numbers hold still: the page must show the API's.
  await page.waitForTimeout(300);
  await eventually("the page shows the API's numbers", pageMatchesApi);
  log("cache cards match GET /api/v1/caches");

  // The graph executors' transforms, from GET /metrics, in their panel.
  const graphSeries = async () => {
    const text = await (await fetch(`${base}/metrics`)).text();
    const value = (name, graph) =>
      Number(text.split("\n").find((l) => l.startsWith(`${name}{`) && l.includes(`graph="${graph}"`)).split(" ").pop());
    return {
      executions: value("primcache_graph_transform_executions_total", "resnet50_bottleneck"),
      bytes: value("primcache_graph_transform_bytes_total", "resnet50_bottleneck"),
      mlpExecutions: value("primcache_graph_transform_executions_total", "mlp"),
    };
  };
  const transformRow = page.locator('[data-transform="resnet50_bottleneck cpu/f32/abcd/jit cpu/f32/acdb/jit"]');
  await eventually("the graph transforms panel shows /metrics' counts", async () => {
    const m = await graphSeries();
    assert.ok(m.executions > 0, "the host ran the bottleneck's transform");
    assert.equal(number(await transformRow.locator('[data-field="executions"]').textContent()), m.executions);
    assert.equal(await transformRow.locator('[data-field="bytes"]').getAttribute("title"), `${m.bytes.toLocaleString("en-US")} B`);
    assert.equal(await transformRow.locator('[data-field="steps"]').textContent(), "layout");
    const mlpRow = page.locator('[data-transform="mlp cpu/f32/ba/jit cpu/f32/ab/jit"]');
    assert.equal(number(await mlpRow.locator('[data-field="executions"]').textContent()), m.mlpExecutions);
    return true;
  });
  assert.match(await page.getByTestId("graph-summary").textContent(), /mlp: [\d,]+ runs, constants transformed 1, from cache/);
  await page.locator('[data-panel="graph-transforms"]').screenshot({ path: path.join(out, "02a-graph-transforms.png") });
  log("graph transforms panel matches GET /metrics");

  // Lower primitive's capacity by 10 below its size.
  const before = await apiCache("primitive");
  const lowered = before.size - 10;
  assert.ok(lowered > 0, `primitive holds ${before.size} entries`);
  await card("primitive").getByTestId("capacity-input").fill(String(lowered));
  await card("primitive").getByTestId("capacity-apply").click();
  const confirm = page.getByTestId("confirm-message");
  await confirm.waitFor();
  assert.match(await confirm.textContent(), /10 entries go/, "the confirmation says how many entries go");
  await shot("02-confirm-capacity.png");
  await page.getByTestId("confirm-ok").click();
  assert.equal(await page.getByTestId("token-dialog").count(), 0, "the kept token is used without asking");
  await eventually("the capacity changed on the server", async () => (await apiCache("primitive")).capacity === lowered);
  const afterLower = await apiCache("primitive");
  assert.equal(afterLower.size, lowered, "the excess was evicted");
  await eventually("the card shows the new capacity", async () => {
    assert.equal(number(await field("primitive", "capacity")), lowered);
    assert.equal(number(await field("primitive", "size")), lowered);
  });
  log(`primitive capacity ${before.capacity} -> ${lowered}`);

  // Lower constant.cpu: the confirmation gives the cache's own account (a
  // decrease flushes it: every tensor and byte goes), as the preview
  // endpoint gives it.
  const constantBefore = await apiCache("constant.cpu");
  assert.equal(constantBefore.extra.tensors, 3, "constant.cpu holds three tensors");
  const preview = await api("/api/v1/caches/constant.cpu/capacity/preview", {
    method: "POST",
    headers: { Authorization: `Bearer ${host.token}`, "Content-Type": "application/json" },
    body: JSON.stringify({ capacity: 32 }),
  });
  assert.deepEqual(
    [preview.known, preview.flushes, preview.entries, preview.bytes],
    [true, true, 3, 3 * 256 * 1024],
    "the preview: a decrease flushes all three tensors",
  );
  assert.equal((await apiCache("constant.cpu")).extra.tensors, 3, "a preview changes nothing");
  await card("constant.cpu").getByTestId("capacity-input").fill("32");
  await card("constant.cpu").getByTestId("capacity-apply").click();
  await confirm.waitFor();
  const constantMessage = await confirm.textContent();
  assert.match(constantMessage, /From 64 MB to 32 MB\./, "the confirmation names both capacities");
  assert.match(constantMessage, /A lower capacity empties it: 3 tensors \(768\.0 KiB\) go/, "tensors and bytes that go");
  await shot("02b-confirm-constant.png");
  // Cancel first: nothing changes.
  await page.getByTestId("confirm-cancel").click();
  await page.waitForTimeout(300);
  assert.equal((await apiCache("constant.cpu")).capacity, 64, "cancel changes nothing");
  await card("constant.cpu").getByTestId("capacity-apply").click();
  await confirm.waitFor();
  await page.getByTestId("confirm-ok").click();
  await eventually("constant.cpu was lowered and flushed", async () => {
    const c = await apiCache("constant.cpu");
    return c.capacity === 32 && c.extra.tensors === 0 && c.weight_bytes === 0;
  });
  // The page is done with that change (it clears the field once the POST
  // answers) before the next one is typed.
  await eventually("the constant.cpu card shows 32 MB and a cleared field", async () => {
    assert.equal(number(await field("constant.cpu", "capacity")), 32);
    assert.equal(await card("constant.cpu").getByTestId("capacity-input").inputValue(), "");
  });
  // An increase keeps the (empty) contents and asks nothing.
  await card("constant.cpu").getByTestId("capacity-input").fill("48");
  await card("constant.cpu").getByTestId("capacity-apply").click();
  await eventually("constant.cpu raised without a question", async () => (await apiCache("constant.cpu")).capacity === 48);
  assert.equal(await page.getByTestId("confirm-dialog").count(), 0, "no confirmation for an increase that drops nothing");
  log("constant.cpu: the confirmation said 3 tensors (768.0 KiB) go; lowered to 32 MB, raised to 48 MB");

  // Flush descriptor.
  const descriptor = await apiCache("descriptor");
  assert.ok(descriptor.size > 0);
  await card("descriptor").getByTestId("flush").click();
  await confirm.waitFor();
  assert.match(await confirm.textContent(), new RegExp(`All ${descriptor.size} entries go`), "the flush confirmation says how many go");
  await page.getByTestId("confirm-ok").click();
  await eventually("descriptor is empty on the server", async () => (await apiCache("descriptor")).size === 0);
  await eventually("the card shows it empty", async () => number(await field("descriptor", "size")) === 0);
  log(`descriptor flushed (${descriptor.size} entries)`);

  // The kernel store's health: healthy; then its remote tier goes away (the
  // host's switch "remote_down", set through the API) and the card says the
  // breaker is open; then the tier is back and the card is healthy again.
  const health = card("persistent").getByTestId("health");
  const healthDetail = card("persistent").getByTestId("health-detail");
  const setRemoteDown = (on) =>
    api("/api/v1/switches/remote_down", {
      method: "POST",
      headers: { Authorization: `Bearer ${host.token}`, "Content-Type": "application/json" },
      body: JSON.stringify({ on }),
    });
  await eventually("persistent is healthy", async () => {
    assert.equal(await health.textContent(), "Healthy");
    assert.equal(await health.getAttribute("data-level"), "ok");
  });
  assert.equal(await card("primitive").getByTestId("health").count(), 0, "caches that are not stores show no health");
  await setRemoteDown(true);
  await eventually("the card says the remote tier is unreachable", async () => {
    assert.equal(await health.textContent(), "Remote tier unreachable");
    assert.equal(await health.getAttribute("data-level"), "bad");
    assert.match(await healthDetail.textContent(), /Circuit breaker open: .*opened 1 time/);
  });
  await shot("02c-store-unreachable.png");
  await setRemoteDown(false);
  // The first reading after the tier is back may still count the last
  // errors (a warning); then there is nothing new: healthy.
  await eventually("the card is healthy again", async () => {
    assert.equal(await health.textContent(), "Healthy");
    assert.equal(await health.getAttribute("data-level"), "ok");
  });
  log("persistent: healthy, breaker open while the remote tier was down, healthy again");

  // A store with three Redis shards: shard 1 goes away (the host's switch
  // "shard1_down"). The combined breaker is then half-open (the shards
  // disagree); the card names the unreachable shard instead, lists each
  // shard's counters on a line of its own, and is healthy again once the
  // shard is back.
  const shardCard = card("persistent.shards");
  const shardHealth = shardCard.getByTestId("health");
  const shardDetail = shardCard.getByTestId("health-detail");
  const setShard1Down = (on) =>
    api("/api/v1/switches/shard1_down", {
      method: "POST",
      headers: { Authorization: `Bearer ${host.token}`, "Content-Type": "application/json" },
      body: JSON.stringify({ on }),
    });
  await eventually("persistent.shards is healthy", async () => {
    assert.equal(await shardHealth.textContent(), "Healthy");
    assert.equal(await shardHealth.getAttribute("data-level"), "ok");
  });
  await setShard1Down(true);
  await eventually("the card says shard 1 of 3 is unreachable", async () => {
    assert.equal((await apiCache("persistent.shards")).extra.breaker_state, 2, "the combined breaker is half-open");
    assert.equal(await shardHealth.textContent(), "1 of 3 Redis shards unreachable");
    assert.equal(await shardHealth.getAttribute("data-level"), "bad");
    assert.match(
      await shardDetail.textContent(),
      /^Circuit breaker open on shard 1: its keys skip Redis and fall back to the local directory or a compilation \(opened 1 time, \d+ requests? skipped\)\.$/,
    );
    // One compact line a shard, its breaker first; no shard<i>_* in the flat list.
    assert.equal(await shardCard.locator("[data-shard]").count(), 3);
    const shard1 = await shardCard.locator('[data-shard="1"]').textContent();
    assert.match(shard1, /^shard 1: breaker open · /);
    assert.match(shard1, / · breaker_opens 1 · /);
    assert.match(shard1, / · hits 10( · |$)/);
    assert.equal(await shardCard.locator('[data-shard="1"]').getAttribute("data-level"), "bad");
    assert.equal(await shardCard.locator('[data-shard="0"]').getAttribute("data-breaker"), "closed");
    assert.equal(await shardCard.locator('[data-extra^="shard"]').count(), 1, "only the shards count");
  });
  await shot("02d-store-shard-unreachable.png");
  await setShard1Down(false);
  await eventually("persistent.shards is healthy again", async () => {
    assert.equal(await shardHealth.textContent(), "Healthy");
    assert.equal(await shardHealth.getAttribute("data-level"), "ok");
  });
  log("persistent.shards: healthy, 1 of 3 Redis shards unreachable while shard 1 was down, healthy again");

  // A setting, through its editor.
  const threadsRow = page.locator('[data-setting="threads"]');
  await threadsRow.locator("input").fill("8");
  await threadsRow.getByRole("button", { name: "Save" }).click();
  await eventually("threads is 8 on the server", async () => {
    const { settings } = await api("/api/v1/settings");
    return settings.find((s) => s.name === "threads").value === 8;
  });
  log("setting changed through the page");

  // The charts move: each poll adds a point.
  const sizeChart = card("primitive").locator('[data-chart="size"]');
  const points0 = Number(await sizeChart.getAttribute("data-points"));
  await page.waitForTimeout(2500);
  const points1 = Number(await sizeChart.getAttribute("data-points"));
  assert.ok(points1 > points0, `the size chart gained points (${points0} -> ${points1})`);
  const hitPoints = Number(await card("primitive").locator('[data-chart="hit-rate"]').getAttribute("data-points"));
  assert.ok(hitPoints >= points1 - 1, "the hit-rate chart follows");
  const { events } = await api("/api/v1/events?since=0");
  const creationPoints = Number(await page.locator('[data-chart="creation"]').getAttribute("data-points"));
  assert.equal(creationPoints, events.length, "one creation-time point per event");
  const rows = await page.getByTestId("events").locator("tr").count();
  assert.equal(rows, Math.min(25, events.length), "recent creations are listed");
  log(`charts moved: ${points0} -> ${points1} points; ${creationPoints} creation points`);

  // Polling pauses while the tab is hidden and resumes when it shows.
  const setVisibility = (state) =>
    page.evaluate((s) => {
      Object.defineProperty(document, "visibilityState", { value: s, configurable: true });
      Object.defineProperty(document, "hidden", { value: s === "hidden", configurable: true });
      document.dispatchEvent(new Event("visibilitychange"));
    }, state);
  await setVisibility("hidden");
  await page.waitForTimeout(300);
  const requestsHidden = cacheRequests;
  await page.waitForTimeout(2500);
  assert.equal(cacheRequests, requestsHidden, "no polling while hidden");
  assert.match(await page.getByTestId("status").textContent(), /Paused/);
  await setVisibility("visible");
  await eventually("polling resumes", async () => cacheRequests > requestsHidden, 3000);
  log("polling paused while hidden, resumed when visible");

  await page.waitForTimeout(1200);
  await pageMatchesApi();
  await shot("03-after-changes.png");
  assert.deepEqual(pageErrors, [], "no script errors on the page");
  log("PASS");
} catch (e) {
  exitCode = 1;
  console.error(`[console] FAIL: ${e.stack ?? e}`);
  if (pageErrors.length) console.error(`[console] page errors: ${pageErrors.join("; ")}`);
  await shot("failure.png").catch(() => {});
} finally {
  await browser.close();
  if (host.child) {
    host.child.stdin.end();
    const code = await new Promise((resolve) => {
      const timer = setTimeout(() => {
        host.child.kill("SIGKILL");
        resolve("killed");
      }, 10000);
      host.child.on("exit", (c) => {
        clearTimeout(timer);
        resolve(c);
      });
    });
    if (code !== 0) {
      console.error(`[console] console_host exited with ${code}`);
      exitCode = 1;
    }
  }
}
process.exit(exitCode);
