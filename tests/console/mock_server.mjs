// A stand-in admin server for developing the console without a C++ build:
// the API of ADMIN_API.md over made-up caches with simulated traffic.
//   node tests/console/mock_server.mjs [DIST_DIR] [PORT]   (token: "mock")
// The CTest test never uses it: it runs against the real admin server.
import http from "node:http";
import fs from "node:fs";
import path from "node:path";

const dist = process.argv[2];
const port = Number(process.argv[3] ?? 8089);
const token = "mock";
const started = Date.now();

// The same registrations as console_host.cpp, so console.test.mjs runs
// against either: --url http://127.0.0.1:PORT/ --token mock.
const caches = [
  { name: "descriptor", unit: "entries", capacity: 16, size: 10, weight_bytes: null, extra: {} },
  { name: "primitive", unit: "entries", capacity: 64, size: 40, weight_bytes: null, extra: {} },
].map((c) => ({ ...c, stats: { hits: 0, misses: c.size, waits: 0, evictions: 0, failures: 0 } }));
caches[0].stats.hits = 5;
// MOCK_BYTES=1 adds a cache counted in bytes, to look at its card.
if (process.env.MOCK_BYTES) {
  caches.push({ name: "constant.cpu", unit: "bytes", capacity: 64 << 20, size: 41 << 20, weight_bytes: null, extra: { tensors: 12 },
                stats: { hits: 900, misses: 12, waits: 1, evictions: 0, failures: 0 } });
}
caches[1].stats.hits = 30;
// A kernel store, as console_host's "persistent": the switch remote_down opens its breaker.
const store = { name: "persistent", unit: "MB", capacity: 256, size: 3, weight_bytes: null,
                extra: { breaker_state: 0, breaker_opens: 0, remote_errors: 0, timeouts: 0, corrupt_entries: 0 },
                stats: { hits: 20, misses: 6, waits: 0, evictions: 0, failures: 0 } };
caches.push(store);
// A store with three Redis shards, as console_host's "persistent.shards": the
// switch shard1_down opens shard 1's breaker (the combined one is then half-open).
const shardExtra = { breaker_state: 0, breaker_opens: 0, breaker_rejections: 0, remote_errors: 0, timeouts: 0, corrupt_entries: 0, shards: 3 };
for (let i = 0; i < 3; i++) {
  Object.assign(shardExtra, { [`shard${i}_hits`]: 10, [`shard${i}_remote_errors`]: 0, [`shard${i}_timeouts`]: 0,
                              [`shard${i}_breaker_state`]: 0, [`shard${i}_breaker_opens`]: 0, [`shard${i}_breaker_rejections`]: 0 });
}
const sharded = { name: "persistent.shards", unit: "MB", capacity: 256, size: 9, weight_bytes: null, extra: shardExtra,
                  stats: { hits: 30, misses: 9, waits: 0, evictions: 0, failures: 0 } };
caches.push(sharded);
const switches = [
  { name: "traffic", description: "Simulated lookups and creations", on: true, initial: true },
  { name: "tune", description: "Tune kernels on first use", on: false, initial: false },
  { name: "remote_down", description: "Simulate an unreachable Redis tier for the persistent card", on: false, initial: false },
  { name: "shard1_down", description: "Simulate an unreachable Redis shard 1 for the persistent.shards card", on: false, initial: false },
];
const settings = [
  { name: "jit_mode", description: "How kernels are compiled", type: "enum", value: "tiered", choices: ["tiered", "sync"] },
  { name: "threads", description: "Worker threads", type: "int", value: 4, min: 1, max: 64 },
];
const events = [];
let seq = 0;
const kinds = ["matmul", "convolution", "reorder", "eltwise"];
const event = (source, duration_ms, detail) =>
  events.push({ seq: ++seq, time_unix_ms: Date.now(), kind: "create", name: kinds[seq % 4], source, duration_ms, detail });
for (let i = 0; i < 5; i++) event(i % 2 ? "memory" : "compile", i % 2 ? 0.2 + 0.05 * i : 12.5 + i, "f32 64x64 (start-up)");

let tick = 0;
setInterval(() => {
  if (switches[2].on) {
    if (store.extra.breaker_state !== 1) store.extra.breaker_opens++;
    store.extra.breaker_state = 1;
    store.extra.remote_errors++;
  } else store.extra.breaker_state = 0;
  if (switches[3].on) {
    if (shardExtra.shard1_breaker_state !== 1) {
      shardExtra.shard1_breaker_opens++;
      shardExtra.shard1_remote_errors++;
    } else shardExtra.shard1_breaker_rejections++;
    shardExtra.shard1_breaker_state = 1;
  } else shardExtra.shard1_breaker_state = 0;
  shardExtra.breaker_opens = shardExtra.shard0_breaker_opens + shardExtra.shard1_breaker_opens + shardExtra.shard2_breaker_opens;
  shardExtra.breaker_rejections =
    shardExtra.shard0_breaker_rejections + shardExtra.shard1_breaker_rejections + shardExtra.shard2_breaker_rejections;
  shardExtra.remote_errors = shardExtra.shard0_remote_errors + shardExtra.shard1_remote_errors + shardExtra.shard2_remote_errors;
  const open = [0, 1, 2].filter((i) => shardExtra[`shard${i}_breaker_state`] === 1).length;
  shardExtra.breaker_state = open === 0 ? 0 : open === 3 ? 1 : 2;
  if (!switches[0].on) return;
  const c = caches[1];
  // 48 keys looked up at random: a miss while fewer than 48 are in.
  if (Math.random() * 48 >= c.size && c.size < 48) {
    c.stats.misses++;
    if (c.size < c.capacity) c.size++;
    else c.stats.evictions++;
  } else c.stats.hits++;
  if (++tick % 50 === 0) {
    const compiled = tick % 100 === 0;
    event(compiled ? "compile" : "memory", compiled ? 8 + Math.random() * 20 : 0.1, "f32 128x128 (traffic)");
  }
  if (events.length > 256) events.splice(0, events.length - 256);
}, 20);

// The primcache_graph_* series of two graph executors (the only part of
// /metrics the console reads), moving with the traffic, as console_host's.
const graphExposition = () => {
  const runs = tick;
  const series = [
    ["primcache_graph_runs_total", { graph: "mlp" }, runs + 1],
    ["primcache_graph_runs_total", { graph: "resnet50_bottleneck" }, runs],
    ["primcache_graph_constant_transforms_total", { graph: "mlp" }, 1],
    ["primcache_graph_constant_cache_hits_total", { graph: "mlp" }, runs],
    ["primcache_graph_transform_executions_total", { from: "cpu/f32/ba/jit", graph: "mlp", steps: "layout", to: "cpu/f32/ab/jit" }, 1],
    ["primcache_graph_transform_bytes_total", { from: "cpu/f32/ba/jit", graph: "mlp", steps: "layout", to: "cpu/f32/ab/jit" }, 512 * 256 * 8],
    ["primcache_graph_transform_executions_total", { from: "cpu/f32/abcd/jit", graph: "resnet50_bottleneck", steps: "layout", to: "cpu/f32/acdb/jit" }, runs],
    ["primcache_graph_transform_bytes_total", { from: "cpu/f32/abcd/jit", graph: "resnet50_bottleneck", steps: "layout", to: "cpu/f32/acdb/jit" }, runs * 256 * 56 * 56 * 8],
  ];
  return series
    .map(([name, labels, v]) => `${name}{${Object.entries(labels).map(([k, x]) => `${k}="${x}"`).join(",")}} ${v}`)
    .join("\n") + "\n";
};

const send = (res, status, body, type = "application/json") => {
  res.writeHead(status, { "Content-Type": type, "Cache-Control": "no-store" });
  res.end(typeof body === "string" || Buffer.isBuffer(body) ? body : JSON.stringify(body));
};

http.createServer((req, res) => {
  const url = new URL(req.url, "http://x");
  let body = "";
  req.on("data", (d) => (body += d));
  req.on("end", () => {
    const p = url.pathname;
    const find = (list, name) => list.find((x) => x.name === decodeURIComponent(name));
    if (req.method === "POST") {
      if (req.headers.authorization !== `Bearer ${token}`) return send(res, 401, { error: "missing or wrong bearer token" });
      let json;
      try { json = JSON.parse(body || "{}"); } catch { return send(res, 400, { error: "malformed JSON" }); }
      let m;
      if ((m = p.match(/^\/api\/v1\/caches\/([^/]+)\/capacity$/))) {
        const c = find(caches, m[1]);
        if (!c) return send(res, 404, { error: "no such cache" });
        if (!Number.isSafeInteger(json.capacity) || json.capacity < 0) return send(res, 400, { error: "capacity must be an integer >= 0" });
        c.capacity = json.capacity;
        if (c.size > c.capacity) { c.stats.evictions += c.size - c.capacity; c.size = c.capacity; }
        return send(res, 200, c);
      }
      if ((m = p.match(/^\/api\/v1\/caches\/([^/]+)\/flush$/))) {
        const c = find(caches, m[1]);
        if (!c) return send(res, 404, { error: "no such cache" });
        const n = c.size; c.size = 0;
        return send(res, 200, { flushed_entries: n, cache: c });
      }
      if ((m = p.match(/^\/api\/v1\/switches\/([^/]+)$/))) {
        const s = find(switches, m[1]);
        if (!s) return send(res, 404, { error: "no such switch" });
        s.on = Boolean(json.on);
        return send(res, 200, s);
      }
      if ((m = p.match(/^\/api\/v1\/settings\/([^/]+)$/))) {
        const s = find(settings, m[1]);
        if (!s) return send(res, 404, { error: "no such setting" });
        if (s.type === "int" && (json.value < s.min || json.value > s.max)) return send(res, 400, { error: `${s.name} must be in [${s.min}, ${s.max}]` });
        s.value = json.value;
        return send(res, 200, s);
      }
      return send(res, 404, { error: "no such route" });
    }
    if (p === "/healthz") return send(res, 200, { status: "ok", version: "0.1.0", uptime_seconds: (Date.now() - started) / 1000 });
    if (p === "/api/v1/caches") return send(res, 200, { caches: [...caches].sort((a, b) => a.name.localeCompare(b.name)) });
    const one = p.match(/^\/api\/v1\/caches\/([^/]+)$/);
    if (one) {
      const c = find(caches, one[1]);
      return c ? send(res, 200, c) : send(res, 404, { error: "no such cache" });
    }
    if (p === "/api/v1/switches") return send(res, 200, { switches });
    if (p === "/api/v1/settings") return send(res, 200, { settings });
    if (p === "/api/v1/events") {
      const since = Number(url.searchParams.get("since") ?? 0);
      return send(res, 200, { events: events.filter((e) => e.seq > since), next: seq });
    }
    if (p === "/metrics") return send(res, 200, graphExposition(), "text/plain; version=0.0.4");
    if (dist) {
      const file = p === "/" ? "index.html" : p.startsWith("/assets/") ? p.slice(1) : null;
      if (file && !file.includes("..")) {
        const full = path.join(dist, file);
        if (fs.existsSync(full)) {
          const type = { ".html": "text/html", ".js": "text/javascript", ".css": "text/css" }[path.extname(full)] ?? "application/octet-stream";
          return send(res, 200, fs.readFileSync(full), type);
        }
      }
    }
    send(res, 404, { error: "no such route" });
  });
}).listen(port, "127.0.0.1", () => console.log(`mock admin server: http://127.0.0.1:${port}/ (token: ${token})`));
