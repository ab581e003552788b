// One card per registered cache: its numbers, two live charts (size against
// capacity, hit rate) and the operator's controls (capacity, flush).
import { Api, ApiError, Cache, CapacityPreview } from "./api";
import { LiveChart } from "./chart";
import { confirmAction, toast } from "./dialogs";
import { formatCount, formatPercent, formatQuantity, h, setText } from "./dom";
import { isStore, storeHealth } from "./store_health";

export class CacheCard {
  readonly element: HTMLElement;
  private cache: Cache;
  private previous: Cache | null = null;
  private readonly fields: Record<string, HTMLElement> = {};
  private readonly bar: HTMLElement;
  private readonly sizeChart: LiveChart;
  private readonly hitChart: LiveChart;
  private readonly capacityInput: HTMLInputElement;
  private readonly extraList: HTMLElement;
  // A sharded store's shards: a line each, under the extra statistics.
  private readonly shardList: HTMLElement;
  // Kernel stores only: a badge in the header and a line under the meter.
  private readonly healthBadge: HTMLElement | null = null;
  private readonly healthLine: HTMLElement | null = null;

  constructor(
    initial: Cache,
    private readonly api: Api,
    private readonly refresh: () => void,
  ) {
    this.cache = initial;
    const field = (name: string, cls = "stat-value") => {
      const el = h("span", { class: cls, "data-field": name });
      this.fields[name] = el;
      return el;
    };
    const stat = (label: string, name: string, hint?: string) =>
      h("div", { class: "stat" }, h("span", { class: "stat-label", title: hint }, label), field(name));

    this.bar = h("div", { class: "meter-fill" });
    const sizeHost = h("div", { class: "chart", "data-chart": "size" });
    const hitHost = h("div", { class: "chart", "data-chart": "hit-rate" });
    this.capacityInput = h("input", {
      class: "input",
      type: "number",
      min: 0,
      step: 1,
      inputmode: "numeric",
      "aria-label": `new capacity of ${initial.name}`,
      "data-testid": "capacity-input",
    });
    const capacityForm = h(
      "form",
      { class: "inline-form" },
      h("label", { class: "inline-label" }, "Capacity"),
      this.capacityInput,
      h("button", { class: "btn btn-primary", type: "submit", "data-testid": "capacity-apply" }, "Apply"),
    );
    capacityForm.addEventListener("submit", (e) => {
      e.preventDefault();
      void this.applyCapacity();
    });
    const flush = h("button", { class: "btn btn-danger-outline", type: "button", "data-testid": "flush" }, "Flush");
    flush.addEventListener("click", () => void this.flush());
    this.extraList = h("dl", { class: "extra" });
    this.shardList = h("div", { class: "shards", "data-testid": "shards" });
    if (isStore(initial)) {
      this.healthBadge = h("span", { class: "badge health", "data-testid": "health", "aria-live": "polite" });
      this.healthLine = h("p", { class: "health-detail", "data-testid": "health-detail" });
    }

    this.element = h(
      "article",
      { class: "card cache-card", "data-cache": initial.name },
      h(
        "header",
        { class: "card-header" },
        h(
          "div",
          { class: "card-title" },
          h("h3", {}, initial.name),
          h("span", { class: "badge" }, initial.unit),
          this.healthBadge,
        ),
        h(
          "div",
          { class: "card-usage" },
          field("size", "usage-size"),
          h("span", { class: "usage-sep" }, "of"),
          field("capacity", "usage-capacity"),
          field("used", "usage-used"),
        ),
      ),
      h("div", { class: "meter" }, this.bar),
      this.healthLine,
      h(
        "div",
        { class: "stats" },
        stat("Hit rate", "hit-rate-recent", "hits ÷ lookups since the previous poll"),
        stat("Since start", "hit-rate", "hits ÷ (hits + misses + waits) since start"),
        stat("Hits", "hits"),
        stat("Misses", "misses"),
        stat("Waits", "waits", "lookups that waited for another thread's creation"),
        stat("Evictions", "evictions"),
        stat("Failures", "failures"),
      ),
      h(
        "div",
        { class: "charts" },
        h(
          "figure",
          {},
          h(
            "figcaption",
            {},
            "Size vs capacity",
            h("span", { class: "key key-size" }, "size"),
            h("span", { class: "key key-capacity" }, "capacity"),
          ),
          sizeHost,
        ),
        h("figure", {}, h("figcaption", {}, "Hit rate", h("span", { class: "key key-hit" }, "% of lookups")), hitHost),
      ),
      this.extraList,
      this.shardList,
      h("footer", { class: "card-actions" }, capacityForm, flush),
    );

    this.sizeChart = new LiveChart(sizeHost, {
      series: [
        { label: "size", color: "#2563eb", fill: "rgba(37, 99, 235, 0.12)" },
        { label: "capacity", color: "#d97706", dash: [6, 4] },
      ],
      yRange: (_min, max) => [0, Math.max(1, max * 1.08)],
      yFormat: (v) => (this.cache.unit === "bytes" ? compactBytes(v) : compactCount(v)),
    });
    this.hitChart = new LiveChart(hitHost, {
      series: [{ label: "hit rate", color: "#059669", fill: "rgba(5, 150, 105, 0.10)" }],
      yRange: () => [0, 100],
      yFormat: (v) => `${v}%`,
    });
    this.render();
  }

  get name(): string {
    return this.cache.name;
  }

  // A new reading from GET /api/v1/caches; adds one point to each chart.
  update(cache: Cache, now: number): void {
    this.previous = this.cache;
    this.cache = cache;
    let recent: number | null = null;
    if (this.previous) {
      const d = (k: "hits" | "misses" | "waits") => cache.stats[k] - this.previous!.stats[k];
      const lookups = d("hits") + d("misses") + d("waits");
      // A flush or restart can make counters go back: no point then.
      if (lookups > 0 && d("hits") >= 0 && d("misses") >= 0 && d("waits") >= 0) recent = d("hits") / lookups;
    }
    this.sizeChart.push(now, [cache.size, isUnlimited(cache.capacity) ? null : cache.capacity]);
    this.hitChart.push(now, [recent === null ? null : recent * 100]);
    this.render(recent);
  }

  destroy(): void {
    this.sizeChart.destroy();
    this.hitChart.destroy();
    this.element.remove();
  }

  private render(recent: number | null = null): void {
    const c = this.cache;
    const s = c.stats;
    const lookups = s.hits + s.misses + s.waits;
    setText(this.fields["size"], formatQuantity(c.size, c.unit));
    const unlimited = isUnlimited(c.capacity);
    setText(this.fields["capacity"], unlimited ? "unlimited" : formatQuantity(c.capacity, c.unit));
    const used = unlimited ? 0 : c.capacity > 0 ? c.size / c.capacity : c.size > 0 ? 1 : 0;
    setText(
      this.fields["used"],
      unlimited ? "no limit" : c.capacity > 0 ? `${(used * 100).toFixed(0)}% full` : "capacity 0",
    );
    this.bar.style.width = `${Math.min(100, used * 100)}%`;
    this.bar.classList.toggle("meter-full", used >= 0.98);
    setText(this.fields["hit-rate"], formatPercent(lookups > 0 ? s.hits / lookups : null));
    setText(this.fields["hit-rate-recent"], formatPercent(recent));
    for (const k of ["hits", "misses", "waits", "evictions", "failures"] as const) {
      setText(this.fields[k], formatCount(s[k]));
    }
    this.fields["failures"].classList.toggle("stat-bad", s.failures > 0);
    if (document.activeElement !== this.capacityInput && this.capacityInput.dataset.dirty !== "1") {
      this.capacityInput.placeholder = unlimited ? "unlimited" : String(c.capacity);
    }
    const health = storeHealth(c, this.previous);
    if (health && this.healthBadge && this.healthLine) {
      setText(this.healthBadge, health.title);
      this.healthBadge.dataset.level = health.level;
      setText(this.healthLine, health.detail);
      this.healthLine.dataset.level = health.level;
    }
    // A sharded store's shard<i>_<stat> extras: one compact line a shard
    // (its breaker first, coloured as the health line), not in the list.
    const shardCount = c.extra?.["shards"] ?? 0;
    const shardStat = /^shard(\d+)_(.+)$/;
    const perShard: Array<Array<[string, number]>> = Array.from({ length: shardCount }, () => []);
    const extras: Array<[string, number]> = [];
    for (const [k, v] of Object.entries(c.extra ?? {})) {
      const m = shardStat.exec(k);
      const i = m ? Number(m[1]) : -1;
      if (m && i < shardCount) perShard[i].push([m[2], v]);
      else extras.push([k, v]);
    }
    const breakerWords = ["closed", "open", "half-open"];
    const shardLevels = ["ok", "bad", "warn"];
    const shardLines = perShard.map((stats, i) => {
      const state = stats.find(([k]) => k === "breaker_state")?.[1] ?? 0;
      const breaker = breakerWords[state] ?? String(state);
      const rest = stats.filter(([k]) => k !== "breaker_state").map(([k, v]) => `${k} ${formatCount(v)}`);
      const line = [`shard ${i}: breaker ${breaker}`, ...rest].join(" · ");
      const attrs = { class: "health-detail", "data-shard": i, "data-breaker": breaker };
      return h("p", { ...attrs, "data-level": shardLevels[state] ?? "warn" }, line);
    });
    this.shardList.hidden = shardLines.length === 0;
    this.shardList.replaceChildren(...shardLines);
    this.extraList.hidden = extras.length === 0;
    if (extras.length) {
      this.extraList.replaceChildren(
        ...extras.flatMap(([k, v]) => [h("dt", {}, k), h("dd", { "data-extra": k }, formatCount(v))]),
      );
    }
    if (c.weight_bytes !== null && c.weight_bytes !== undefined && c.unit !== "bytes") {
      if (!this.fields["weight"]) {
        const el = h("span", { class: "usage-weight", "data-field": "weight", title: "bytes held (weight_bytes)" });
        this.fields["weight"] = el;
        this.element.querySelector(".card-usage")!.append(el);
      }
      setText(this.fields["weight"], `weight ${formatQuantity(c.weight_bytes, "bytes")}`);
    }
  }

  private async applyCapacity(): Promise<void> {
    const text = this.capacityInput.value.trim();
    const capacity = Number(text);
    if (text === "" || !Number.isSafeInteger(capacity) || capacity < 0) {
      toast("Capacity must be a whole number, 0 or more", "error");
      return;
    }
    const c = this.cache;
    // The cache's own account of what goes, where it has one (the constant
    // caches flush on their first setting and on any decrease); else the
    // excess over the new capacity.
    let preview: CapacityPreview;
    try {
      preview = await this.api.previewCapacity(c.name, capacity);
    } catch (e) {
      report(e, `Could not preview the capacity of ${c.name}`);
      return;
    }
    const message = dropMessage(c, capacity, preview);
    if (message !== null) {
      const ok = await confirmAction({
        title: capacity < c.capacity ? `Lower the capacity of ${c.name}?` : `Set the capacity of ${c.name}?`,
        message: message.text,
        confirm: capacity < c.capacity ? "Lower capacity" : "Set capacity",
        danger: message.drops,
      });
      if (!ok) return;
    }
    try {
      const updated = await this.api.setCapacity(c.name, capacity);
      this.cache = updated;
      this.capacityInput.value = "";
      this.render();
      toast(`${c.name}: capacity ${formatQuantity(updated.capacity, updated.unit)}`);
      this.refresh();
    } catch (e) {
      report(e, `Could not set the capacity of ${c.name}`);
    }
  }

  private async flush(): Promise<void> {
    const c = this.cache;
    const ok = await confirmAction({
      title: `Flush ${c.name}?`,
      message: flushMessage(c),
      confirm: "Flush",
      danger: true,
    });
    if (!ok) return;
    try {
      const result = await this.api.flush(c.name);
      this.cache = result.cache;
      this.render();
      toast(`${c.name}: flushed ${formatCount(result.flushed_entries)} entries`);
      this.refresh();
    } catch (e) {
      report(e, `Could not flush ${c.name}`);
    }
  }
}

// "All 17 entries go", or, for a constant tensor cache, its tensors and bytes.
function flushMessage(c: Cache): string {
  const tensors = c.extra?.["tensors"];
  if (c.name.startsWith("constant.") && tensors !== undefined && c.weight_bytes !== null) {
    if (tensors === 0) return "It is empty: nothing goes.";
    return `All ${formatCount(tensors)} ${tensors === 1 ? "tensor" : "tensors"} (${formatQuantity(
      c.weight_bytes,
      "bytes",
    )}) ${tensors === 1 ? "goes" : "go"}. They are computed again on their next use.`;
  }
  return c.size > 0
    ? `All ${amount(c.size, c.unit)} ${goes(c.size, c.unit)}. They are created again on their next use.`
    : "It is empty: nothing goes.";
}

// The capacity a cache reports when it has no limit (2^64 − 1, which JSON
// numbers read as 2^64).
function isUnlimited(capacity: number): boolean {
  return capacity >= 2 ** 64 - 2 ** 12;
}

// What the confirmation says before a capacity change, or null when the
// change drops nothing and is not a decrease (no question then).
function dropMessage(c: Cache, capacity: number, p: CapacityPreview): { text: string; drops: boolean } | null {
  const from = `From ${isUnlimited(c.capacity) ? "unlimited" : formatQuantity(c.capacity, c.unit)} ${
    c.unit === "entries" ? "" : c.unit + " "
  }to ${formatQuantity(capacity, c.unit)}${c.unit === "entries" ? "" : " " + c.unit}. `;
  const noun = c.name.startsWith("constant.") ? ["tensor", "tensors"] : ["entry", "entries"];
  if (p.known) {
    const n = p.entries ?? 0;
    if (p.flushes && n > 0) {
      const what = `${formatCount(n)} ${n === 1 ? noun[0] : noun[1]} (${formatQuantity(p.bytes ?? 0, "bytes")})`;
      const why = capacity === 0 ? "Capacity 0 empties and disables it" : capacity < c.capacity ? "A lower capacity empties it" : "The first capacity set on it empties it";
      return { text: `${from}${why}: ${what} ${n === 1 ? "goes" : "go"}.`, drops: true };
    }
    if (capacity < c.capacity) {
      return { text: `${from}Nothing goes: it holds no ${noun[1]}.`, drops: false };
    }
    return null;
  }
  if (capacity >= c.capacity) return null;
  const evicted = Math.max(0, c.size - capacity);
  return {
    text:
      from +
      (evicted > 0
        ? `${amount(evicted, c.unit)} ${goes(evicted, c.unit)}: it holds ${amount(c.size, c.unit)} now.`
        : `No entries go: it holds ${amount(c.size, c.unit)}.`),
    drops: evicted > 0,
  };
}

export function report(e: unknown, what: string): void {
  if (e instanceof ApiError && e.status === 0) return; // the operator cancelled
  toast(`${what}: ${e instanceof Error ? e.message : String(e)}`, "error");
}

function compactBytes(v: number): string {
  const units = ["B", "K", "M", "G", "T"];
  let i = 0;
  while (Math.abs(v) >= 1024 && i < units.length - 1) {
    v /= 1024;
    i++;
  }
  return `${+v.toFixed(v < 10 && i > 0 ? 1 : 0)}${units[i]}`;
}

function compactCount(v: number): string {
  if (v >= 1e6) return `${+(v / 1e6).toFixed(1)}M`;
  if (v >= 1e4) return `${+(v / 1e3).toFixed(0)}k`;
  if (v >= 1e3) return `${+(v / 1e3).toFixed(1)}k`;
  return `${v}`;
}

// "17 entries", "1 entry", "1.50 MiB".
function amount(n: number, unit: string): string {
  const q = formatQuantity(n, unit);
  if (unit === "MB") return `${q} MB`;
  return unit === "bytes" ? q : `${q} ${n === 1 ? "entry" : "entries"}`;
}

function goes(n: number, unit: string): string {
  return unit !== "bytes" && n === 1 ? "goes" : "go";
}
