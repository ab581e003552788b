// The health of a kernel store (the "persistent" cache: a directory, a Redis
// tier, or both), read from the extra statistics it registers in control —
// breaker_state (0 closed, 1 open, 2 half-open), the error counters and
// read_only — and from how they moved since the previous reading.
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

// The store's health now, or null for caches that are not stores.
export function storeHealth(current: Cache, previous: Cache | null): Health | null {
  if (!isStore(current)) return null;
  const now = current.extra ?? {};
  const before = previous?.extra ?? null;
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
