// The health of a kernel store (the "persistent" cache: a directory, a Redis
// tier, or both), read from the extra statistics it registers in control —
// breaker_state (0 closed, 1 open, 2 half-open), the error counters and
// read_only — and from how they moved since the previous reading. A sharded
// Redis tier also reports `shards` and each shard's shard<i>_breaker_state,
// shard<i>_breaker_opens, ...: its combined breaker_state is half-open as
// soon as the shards disagree, so the shards' own breakers name the
// unreachable ones.
import { Cache } from "./api";
import { formatCount } from "./dom";

export type HealthLevel = "ok" | "warn" | "bad";

export interface Health {
  level: HealthLevel;
  title: string;
  detail: string;
}

// Counters whose growth since the previous reading means trouble, with the
// words for one and for several.
const troubleCounters: ReadonlyArray<[string, string, string]> = [
  ["remote_errors", "remote error", "remote errors"],
  ["timeouts", "timeout", "timeouts"],
  ["errors", "I/O error", "I/O errors"],
  ["corrupt_entries", "corrupt entry removed", "corrupt entries removed"],
  ["dropped_writes", "write dropped", "writes dropped"],
];

// Whether the cache is a kernel store (it reports the store's counters).
export function isStore(c: Cache): boolean {
  const extra = c.extra ?? {};
  return "breaker_state" in extra || "corrupt_entries" in extra;
}

// "shard 1", "shards 0 and 2", "shards 0, 1 and 3".
function shardList(indexes: number[]): string {
  const names = indexes.map(String);
  const last = names.pop();
  return names.length === 0 ? `shard ${last}` : `shards ${names.join(", ")} and ${last}`;
}

// With a sharded remote tier whose breakers are not all closed: which shards
// are unreachable (open) or recovering (half-open). Null without shards
// (a single Redis server, or none) or when every shard's breaker is closed.
function shardHealth(now: Record<string, number>): Health | null {
  const count = now["shards"] ?? 0;
  const open: number[] = [];
  const halfOpen: number[] = [];
  let opens = 0;
  let skipped = 0;
  for (let i = 0; i < count; ++i) {
    const state = now[`shard${i}_breaker_state`] ?? 0;
    if (state === 1) {
      open.push(i);
      opens += now[`shard${i}_breaker_opens`] ?? 0;
      skipped += now[`shard${i}_breaker_rejections`] ?? 0;
    } else if (state === 2) {
      halfOpen.push(i);
    }
  }
  const probes = halfOpen.length === 1 ? "it" : "each";
  const recovering =
    halfOpen.length === 0
      ? ""
      : `Circuit breaker half-open on ${shardList(halfOpen)} (recovering: one probe is out on ${probes}).`;
  if (open.length > 0) {
    const title =
      open.length === count
        ? `All ${count} Redis shards unreachable`
        : `${open.length} of ${count} Redis shards unreachable`;
    const counts = [
      `opened ${formatCount(opens)} ${opens === 1 ? "time" : "times"}`,
      `${formatCount(skipped)} ${skipped === 1 ? "request" : "requests"} skipped`,
    ];
    const detail =
      `Circuit breaker open on ${shardList(open)}: ${open.length === 1 ? "its" : "their"} keys skip Redis ` +
      `and fall back to the local directory or a compilation (${counts.join(", ")}).` +
      (recovering ? ` ${recovering}` : "");
    return { level: "bad", title, detail };
  }
  if (halfOpen.length > 0) {
    return { level: "warn", title: `${halfOpen.length} of ${count} Redis shards recovering`, detail: recovering };
  }
  return null;
}

// The store's health now, or null for caches that are not stores.
export function storeHealth(current: Cache, previous: Cache | null): Health | null {
  if (!isStore(current)) return null;
  const now = current.extra ?? {};
  const before = previous?.extra ?? null;
  const sharded = shardHealth(now);
  if (sharded) return sharded;
  const breaker = now["breaker_state"] ?? 0;
  if (breaker === 1) {
    const opens = now["breaker_opens"] ?? 0;
    const skipped = now["breaker_rejections"];
    const counts = [`opened ${formatCount(opens)} ${opens === 1 ? "time" : "times"}`];
    if (skipped !== undefined) counts.push(`${formatCount(skipped)} ${skipped === 1 ? "request" : "requests"} skipped`);
    return {
      level: "bad",
      title: "Remote tier unreachable",
      detail:
        "Circuit breaker open: lookups skip Redis and fall back to the local directory or a compilation " +
        `(${counts.join(", ")}).`,
    };
  }
  if (breaker === 2) {
    return { level: "warn", title: "Remote tier recovering", detail: "Circuit breaker half-open: one probe is out." };
  }
  const growth: string[] = [];
  if (before) {
    for (const [name, one, many] of troubleCounters) {
      const d = (now[name] ?? 0) - (before[name] ?? 0);
      if (d > 0) growth.push(`${formatCount(d)} ${d === 1 ? one : many}`);
    }
  }
  if (growth.length > 0) {
    return { level: "warn", title: "Errors", detail: `Since the previous reading: ${growth.join(", ")}.` };
  }
  if ((now["read_only"] ?? 0) !== 0) {
    return { level: "ok", title: "Read-only", detail: "Entries are read from the store; nothing is written to it." };
  }
  return { level: "ok", title: "Healthy", detail: "No errors since the previous reading." };
}
