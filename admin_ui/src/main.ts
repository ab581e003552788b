// The primcache console: polls the admin API once a second (not while the
// tab is hidden) and shows every registered cache, recent creations, the
// graph executors' transforms, switches and settings. See docs/console.md.
import "./style.css";
import { Api, Cache, CreationEvent, Setting, Switch } from "./api";
import { CacheCard, report } from "./cache_card";
import { LiveChart } from "./chart";
import { promptToken, toast } from "./dialogs";
import { formatClock, formatDuration, h, setText } from "./dom";
import { GraphTransformsPanel } from "./graph_transforms";

const POLL_MS = 1000;
const RECENT_ROWS = 25;

const api = new Api(promptToken);
const cards = new Map<string, CacheCard>();
const events: CreationEvent[] = [];
let eventsNext = 0;
let timer: number | undefined;
let inFlight = false;

// ---- layout -------------------------------------------------------------
const statusPill = h("span", { class: "pill pill-wait", "data-testid": "status" }, "Connecting…");
const serverInfo = h("span", { class: "server-info" });
const tokenButton = h("button", { class: "btn btn-ghost", type: "button", "data-testid": "token-button" });
const cacheGrid = h("div", { class: "cache-grid", "data-testid": "caches" });
const noCaches = h("p", { class: "empty", hidden: true }, "No cache is registered in this process.");
const creationHost = h("div", { class: "chart", "data-chart": "creation" });
const eventRows = h("tbody", { "data-testid": "events" });
const eventsEmpty = h("p", { class: "empty" }, "No creations yet.");
const sourceKeys = h("span", { class: "keys" });
// Shown once there is a creation to plot.
const creationFigure = h("figure", { hidden: true }, h("figcaption", {}, "Creation time", sourceKeys), creationHost);
const switchList = h("ul", { class: "rows", "data-testid": "switches" });
const settingList = h("ul", { class: "rows", "data-testid": "settings" });
const graphPanel = new GraphTransformsPanel();

document.querySelector("#app")!.append(
  h(
    "header",
    { class: "topbar" },
    h(
      "div",
      { class: "brand" },
      h("span", { class: "logo", "aria-hidden": "true" }, "p"),
      h("span", { class: "brand-name" }, "primcache"),
      h("span", { class: "brand-sub" }, "console"),
    ),
    h("div", { class: "topbar-right" }, serverInfo, statusPill, tokenButton),
  ),
  h(
    "main",
    { class: "page" },
    h("section", {}, h("h2", { class: "section-title" }, "Caches"), noCaches, cacheGrid),
    h(
      "section",
      { class: "card wide" },
      h(
        "header",
        { class: "card-header" },
        h("div", { class: "card-title" }, h("h3", {}, "Creations")),
        h("span", { class: "muted" }, "each point is one primitive created: how long it took, by source (log scale)"),
      ),
      creationFigure,
      h(
        "div",
        { class: "table-wrap" },
        h(
          "table",
          { class: "table" },
          h(
            "thead",
            {},
            h(
              "tr",
              {},
              h("th", {}, "Time"),
              h("th", {}, "Primitive"),
              h("th", {}, "Source"),
              h("th", { class: "num" }, "Took"),
              h("th", {}, "Detail"),
            ),
          ),
          eventRows,
        ),
        eventsEmpty,
      ),
    ),
    graphPanel.element,
    h(
      "div",
      { class: "two-col" },
      h("section", { class: "card" }, h("header", { class: "card-header" }, h("h3", {}, "Switches")), switchList),
      h("section", { class: "card" }, h("header", { class: "card-header" }, h("h3", {}, "Settings")), settingList),
    ),
  ),
);

// Creation time: one scatter series per source, in a fixed palette; a new
// source rebuilds the chart with one more series.
const PALETTE = ["#7c3aed", "#0891b2", "#ea580c", "#db2777", "#65a30d"];
let creationChart: LiveChart | null = null;
let chartSources: string[] = [];

function ensureCreationChart(sources: string[]): void {
  const wanted = chartSources.length ? [...chartSources] : ["compile", "memory"];
  for (const s of sources) if (!wanted.includes(s)) wanted.push(s);
  if (creationChart && wanted.length === chartSources.length) return;
  creationChart?.destroy();
  chartSources = wanted;
  creationChart = new LiveChart(
    creationHost,
    {
      series: chartSources.map((s, i) => ({ label: s, color: PALETTE[i % PALETTE.length], points: true })),
      height: 180,
      log: true,
      yAxisSize: 58,
      yFormat: (v) => (v >= 1000 ? `${+(v / 1000).toPrecision(3)} s` : v >= 1 ? `${+v.toPrecision(3)} ms` : `${+(v * 1000).toPrecision(3)} µs`),
    },
    2000,
  );
  sourceKeys.replaceChildren(
    ...chartSources.map((s, i) => h("span", { class: "key key-dot", style: `--key: ${PALETTE[i % PALETTE.length]}` }, s)),
  );
  // Replay what we already have into the new series layout.
  for (const e of events) pushEvent(e);
}

function pushEvent(e: CreationEvent): void {
  creationChart!.push(
    e.time_unix_ms / 1000,
    chartSources.map((s) => (s === e.source ? Math.max(e.duration_ms, 0.001) : null)),
  );
}

// ---- updates --------------------------------------------------------------
function updateCaches(caches: Cache[], now: number): void {
  const seen = new Set<string>();
  for (const c of caches) {
    seen.add(c.name);
    let card = cards.get(c.name);
    if (!card) {
      card = new CacheCard(c, api, () => void poll());
      cards.set(c.name, card);
    }
    card.update(c, now);
  }
  for (const [name, card] of cards) {
    if (!seen.has(name)) {
      card.destroy();
      cards.delete(name);
    }
  }
  // Keep the DOM in the API's order (by name).
  const ordered = caches.map((c) => cards.get(c.name)!.element);
  if (ordered.some((el, i) => cacheGrid.children[i] !== el)) cacheGrid.replaceChildren(...ordered);
  noCaches.hidden = caches.length > 0;
}

function updateEvents(fresh: CreationEvent[]): void {
  if (fresh.length === 0 && creationChart) return;
  const newSource = fresh.some((e) => !chartSources.includes(e.source));
  events.push(...fresh);
  if (events.length > 2000) events.splice(0, events.length - 2000);
  if (!creationChart || newSource) ensureCreationChart(fresh.map((e) => e.source));
  else for (const e of fresh) pushEvent(e);
  const recent = events.slice(-RECENT_ROWS).reverse();
  eventRows.replaceChildren(
    ...recent.map((e) =>
      h(
        "tr",
        { "data-seq": e.seq },
        h("td", { class: "mono" }, formatClock(e.time_unix_ms)),
        h("td", { class: "strong" }, e.name),
        h("td", {}, h("span", { class: `source source-${e.source}` }, e.source)),
        h("td", { class: "num mono" }, formatDuration(e.duration_ms)),
        h("td", { class: "detail", title: e.detail }, e.detail),
      ),
    ),
  );
  eventsEmpty.hidden = events.length > 0;
  creationFigure.hidden = events.length === 0;
}

function switchRow(s: Switch): HTMLElement {
  const box = h("input", { type: "checkbox", role: "switch", "data-testid": `switch-${s.name}` });
  box.checked = s.on;
  box.addEventListener("change", async () => {
    const wanted = box.checked;
    box.disabled = true;
    try {
      const updated = await api.setSwitch(s.name, wanted);
      box.checked = updated.on;
      toast(`${s.name} is ${updated.on ? "on" : "off"}`);
    } catch (e) {
      box.checked = !wanted;
      report(e, `Could not flip ${s.name}`);
    } finally {
      box.disabled = false;
    }
  });
  return h(
    "li",
    { class: "row", "data-switch": s.name },
    h(
      "div",
      { class: "row-text" },
      h("span", { class: "row-name" }, s.name, h("span", { class: "badge badge-soft", hidden: s.on === s.initial }, "changed")),
      h("span", { class: "row-desc" }, s.description),
    ),
    h("label", { class: "toggle" }, box, h("span", { class: "toggle-track" })),
  );
}

function updateSwitches(list: Switch[]): void {
  for (const s of list) {
    let row = switchList.querySelector<HTMLElement>(`[data-switch="${CSS.escape(s.name)}"]`);
    if (!row) {
      row = switchRow(s);
      switchList.append(row);
    }
    const box = row.querySelector("input")!;
    if (!box.disabled) box.checked = s.on;
    (row.querySelector(".badge") as HTMLElement).hidden = s.on === s.initial;
  }
  for (const row of [...switchList.children] as HTMLElement[]) {
    if (!list.some((s) => s.name === row.dataset.switch)) row.remove();
  }
  if (list.length === 0 && !switchList.querySelector(".empty")) {
    switchList.append(h("li", { class: "empty" }, "No switches registered."));
  } else if (list.length) {
    switchList.querySelector(".empty")?.remove();
  }
}

function settingEditor(s: Setting): { el: HTMLElement; read: () => Setting["value"]; set: (v: Setting["value"]) => void } {
  if (s.type === "bool") {
    const box = h("input", { type: "checkbox", role: "switch" });
    return {
      el: h("label", { class: "toggle" }, box, h("span", { class: "toggle-track" })),
      read: () => box.checked,
      set: (v) => (box.checked = Boolean(v)),
    };
  }
  if (s.type === "enum") {
    const select = h("select", { class: "input" }, ...(s.choices ?? []).map((c) => h("option", { value: c }, c)));
    return { el: select, read: () => select.value, set: (v) => (select.value = String(v)) };
  }
  const input = h("input", {
    class: "input",
    type: s.type === "int" ? "number" : "text",
    min: s.min,
    max: s.max,
    step: s.type === "int" ? 1 : undefined,
  });
  return {
    el: input,
    read: () => (s.type === "int" ? Number(input.value) : input.value),
    set: (v) => (input.value = String(v)),
  };
}

function settingRow(s: Setting): HTMLElement {
  const editor = settingEditor(s);
  editor.set(s.value);
  const range = s.type === "int" && (s.min !== undefined || s.max !== undefined) ? `${s.min ?? "…"} – ${s.max ?? "…"}` : "";
  const save = h("button", { class: "btn btn-primary btn-small", type: "submit", hidden: true }, "Save");
  const current = h("span", { class: "row-value", "data-field": "value" }, String(s.value));
  const form = h("form", { class: "setting-form" }, editor.el, save);
  const row = h(
    "li",
    { class: "row", "data-setting": s.name },
    h(
      "div",
      { class: "row-text" },
      h("span", { class: "row-name" }, s.name, current),
      h("span", { class: "row-desc" }, s.description, range && h("span", { class: "muted" }, ` (${range})`)),
    ),
    form,
  );
  const markDirty = () => {
    row.dataset.dirty = "1";
    save.hidden = false;
  };
  editor.el.addEventListener("input", markDirty);
  editor.el.addEventListener("change", () => {
    markDirty();
    if (s.type === "bool" || s.type === "enum") form.requestSubmit();
  });
  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    try {
      const updated = await api.setSetting(s.name, editor.read());
      delete row.dataset.dirty;
      save.hidden = true;
      editor.set(updated.value);
      setText(current, String(updated.value));
      toast(`${s.name} = ${updated.value}`);
    } catch (err) {
      report(err, `Could not set ${s.name}`);
    }
  });
  (row as HTMLElement & { setValue?: (v: Setting["value"]) => void }).setValue = (v) => {
    setText(current, String(v));
    if (row.dataset.dirty !== "1" && !row.contains(document.activeElement)) editor.set(v);
  };
  return row;
}

function updateSettings(list: Setting[]): void {
  for (const s of list) {
    let row = settingList.querySelector<HTMLElement>(`[data-setting="${CSS.escape(s.name)}"]`);
    if (!row) {
      row = settingRow(s);
      settingList.append(row);
    }
    (row as HTMLElement & { setValue?: (v: Setting["value"]) => void }).setValue?.(s.value);
  }
  for (const row of [...settingList.children] as HTMLElement[]) {
    if (row.dataset.setting && !list.some((s) => s.name === row.dataset.setting)) row.remove();
  }
  if (list.length === 0 && !settingList.querySelector(".empty")) {
    settingList.append(h("li", { class: "empty" }, "No settings registered."));
  } else if (list.length) {
    settingList.querySelector(".empty")?.remove();
  }
}

function updateTokenButton(): void {
  setText(tokenButton, api.hasToken ? "Forget token" : "Set token");
}
tokenButton.addEventListener("click", async () => {
  if (api.hasToken) {
    api.forgetToken();
    toast("Token forgotten for this tab");
  } else {
    const token = await promptToken("Changes need the admin token printed by primcached on start.");
    if (token) sessionStorage.setItem("primcache.token", token);
  }
  updateTokenButton();
});
window.addEventListener("storage", updateTokenButton);

function setStatus(kind: "live" | "paused" | "down", text: string): void {
  statusPill.className = `pill pill-${kind}`;
  setText(statusPill, text);
}

// ---- polling ----------------------------------------------------------------
async function poll(): Promise<void> {
  if (inFlight) return;
  inFlight = true;
  window.clearTimeout(timer);
  try {
    const [caches, switches, settings, fresh, health, metrics] = await Promise.all([
      api.caches(),
      api.switches(),
      api.settings(),
      api.events(eventsNext),
      fetch("/healthz", { cache: "no-store" }).then((r) => (r.ok ? r.json() : null)),
      // The graph executors' transforms (an optional panel: never fails the poll).
      fetch("/metrics", { cache: "no-store" })
        .then((r) => (r.ok ? r.text() : null))
        .catch(() => null),
    ]);
    const now = Date.now() / 1000;
    updateCaches(caches, now);
    updateSwitches(switches);
    updateSettings(settings);
    eventsNext = fresh.next;
    updateEvents(fresh.events);
    if (metrics !== null) graphPanel.update(metrics);
    if (health) setText(serverInfo, `v${health.version} · up ${uptime(health.uptime_seconds)}`);
    setStatus("live", `Live · ${formatClock(Date.now())}`);
  } catch (e) {
    setStatus("down", `Offline · retrying`);
    console.warn("poll failed", e);
  } finally {
    inFlight = false;
    updateTokenButton();
    schedule();
  }
}

function schedule(): void {
  window.clearTimeout(timer);
  if (document.visibilityState === "hidden") {
    setStatus("paused", "Paused (tab hidden)");
    return;
  }
  timer = window.setTimeout(() => void poll(), POLL_MS);
}

document.addEventListener("visibilitychange", () => {
  if (document.visibilityState === "hidden") {
    window.clearTimeout(timer);
    setStatus("paused", "Paused (tab hidden)");
  } else {
    void poll();
  }
});

function uptime(seconds: number): string {
  const s = Math.floor(seconds);
  if (s < 60) return `${s}s`;
  if (s < 3600) return `${Math.floor(s / 60)}m ${s % 60}s`;
  return `${Math.floor(s / 3600)}h ${Math.floor((s % 3600) / 60)}m`;
}

updateTokenButton();
ensureCreationChart([]);
void poll();
