// The "Graph transforms" panel: what the graph executors of the process
// transformed (from → to kernel type, the plan's steps, executions, bytes),
// read from the primcache_graph_* series of GET /metrics (docs/metrics.md,
// docs/graph.md). Hidden while the process has no graph executor.
import { formatCount, formatQuantity, h, setText } from "./dom";

// One series of a Prometheus text exposition.
export interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

// Parses the sample lines of a text exposition (comments skipped); label
// values are unescaped (\\, \", \n).
export function parseExposition(text: string): Sample[] {
  const out: Sample[] = [];
  for (const raw of text.split("\n")) {
    const line = raw.trim();
    if (line === "" || line.startsWith("#")) continue;
    const brace = line.indexOf("{");
    const space = line.indexOf(" ");
    let name: string;
    const labels: Record<string, string> = {};
    let rest: string;
    if (brace >= 0 && (space < 0 || brace < space)) {
      name = line.slice(0, brace);
      let i = brace + 1;
      while (i < line.length && line[i] !== "}") {
        const eq = line.indexOf("=", i);
        if (eq < 0 || line[eq + 1] !== '"') return out; // malformed: stop here
        const key = line.slice(i, eq).trim();
        let value = "";
        let j = eq + 2;
        for (; j < line.length && line[j] !== '"'; j++) {
          if (line[j] === "\\" && j + 1 < line.length) {
            const c = line[++j];
            value += c === "n" ? "\n" : c;
          } else value += line[j];
        }
        labels[key] = value;
        i = j + 1;
        if (line[i] === ",") i++;
      }
      rest = line.slice(i + 1).trim();
    } else {
      name = line.slice(0, space);
      rest = line.slice(space + 1).trim();
    }
    const value = Number(rest.split(" ")[0]);
    if (name && !Number.isNaN(value)) out.push({ name, labels, value });
  }
  return out;
}

export interface TransformRow {
  graph: string;
  from: string;
  to: string;
  steps: string;
  executions: number;
  bytes: number;
}

export interface GraphSummary {
  graph: string;
  runs: number;
  constantTransforms: number;
  constantHits: number;
}

// The transforms and per-graph counters in a parsed exposition, ordered by
// graph, then by bytes (largest first).
export function graphTransforms(samples: Sample[]): { rows: TransformRow[]; graphs: GraphSummary[] } {
  const rows = new Map<string, TransformRow>();
  const graphs = new Map<string, GraphSummary>();
  const graphOf = (name: string): GraphSummary => {
    let g = graphs.get(name);
    if (!g) {
      g = { graph: name, runs: 0, constantTransforms: 0, constantHits: 0 };
      graphs.set(name, g);
    }
    return g;
  };
  for (const s of samples) {
    if (!s.name.startsWith("primcache_graph_")) continue;
    const graph = s.labels.graph ?? "";
    switch (s.name) {
      case "primcache_graph_runs_total":
        graphOf(graph).runs = s.value;
        break;
      case "primcache_graph_constant_transforms_total":
        graphOf(graph).constantTransforms = s.value;
        break;
      case "primcache_graph_constant_cache_hits_total":
        graphOf(graph).constantHits = s.value;
        break;
      case "primcache_graph_transform_executions_total":
      case "primcache_graph_transform_bytes_total": {
        const { from = "", to = "", steps = "" } = s.labels;
        const key = JSON.stringify([graph, from, to, steps]);
        let row = rows.get(key);
        if (!row) {
          row = { graph, from, to, steps, executions: 0, bytes: 0 };
          rows.set(key, row);
        }
        if (s.name.endsWith("executions_total")) row.executions = s.value;
        else row.bytes = s.value;
        graphOf(graph);
        break;
      }
    }
  }
  const sorted = [...rows.values()].sort((a, b) => a.graph.localeCompare(b.graph) || b.bytes - a.bytes);
  return { rows: sorted, graphs: [...graphs.values()].sort((a, b) => a.graph.localeCompare(b.graph)) };
}

export class GraphTransformsPanel {
  readonly element: HTMLElement;
  private readonly body = h("tbody", { "data-testid": "graph-transforms" });
  private readonly summary = h("span", { class: "muted", "data-testid": "graph-summary" });
  private readonly empty = h("p", { class: "empty" }, "No transform has run yet.");

  constructor() {
    this.element = h(
      "section",
      { class: "card wide", "data-panel": "graph-transforms", hidden: true },
      h("header", { class: "card-header" }, h("div", { class: "card-title" }, h("h3", {}, "Graph transforms")), this.summary),
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
              h("th", {}, "Graph"),
              h("th", {}, "From → to"),
              h("th", {}, "Steps"),
              h("th", { class: "num" }, "Executions"),
              h("th", { class: "num" }, "Bytes"),
            ),
          ),
          this.body,
        ),
        this.empty,
      ),
    );
  }

  // Shows what the exposition says; the panel stays hidden while no graph
  // executor registered its series.
  update(exposition: string): void {
    const { rows, graphs } = graphTransforms(parseExposition(exposition));
    this.element.hidden = graphs.length === 0;
    if (graphs.length === 0) return;
    setText(
      this.summary,
      graphs
        .map(
          (g) =>
            `${g.graph}: ${formatCount(g.runs)} ${g.runs === 1 ? "run" : "runs"}, ` +
            `constants transformed ${formatCount(g.constantTransforms)}, from cache ${formatCount(g.constantHits)}`,
        )
        .join(" · "),
    );
    this.body.replaceChildren(
      ...rows.map((r) =>
        h(
          "tr",
          { "data-transform": `${r.graph} ${r.from} ${r.to}` },
          h("td", { class: "strong", "data-field": "graph" }, r.graph),
          h("td", { class: "mono", "data-field": "from-to" }, `${r.from} → ${r.to}`),
          h("td", { class: "mono", "data-field": "steps" }, r.steps.split(",").join(" → ")),
          h("td", { class: "num mono", "data-field": "executions" }, formatCount(r.executions)),
          h("td", { class: "num mono", "data-field": "bytes", title: `${formatCount(r.bytes)} B` }, formatQuantity(r.bytes, "bytes")),
        ),
      ),
    );
    this.empty.hidden = rows.length > 0;
  }
}
