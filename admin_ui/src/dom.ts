// A tiny element builder: h("div", {class: "card"}, child, "text").
type Attrs = Record<string, string | number | boolean | EventListener | undefined>;
type Child = Node | string | null | undefined | false;

export function h<K extends keyof HTMLElementTagNameMap>(
  tag: K,
  attrs: Attrs = {},
  ...children: Child[]
): HTMLElementTagNameMap[K] {
  const el = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (value === undefined || value === false) continue;
    if (key === "style") {
      // Through the CSSOM: the admin server's Content-Security-Policy allows
      // no inline style attributes from markup.
      el.style.cssText = String(value);
    } else if (key.startsWith("on") && typeof value === "function") {
      el.addEventListener(key.slice(2), value as EventListener);
    } else if (value === true) {
      el.setAttribute(key, "");
    } else {
      el.setAttribute(key, String(value));
    }
  }
  for (const child of children) {
    if (child === null || child === undefined || child === false) continue;
    el.append(child);
  }
  return el;
}

export function setText(el: Element, text: string): void {
  if (el.textContent !== text) el.textContent = text;
}

const integer = new Intl.NumberFormat("en-US", { maximumFractionDigits: 0 });

export function formatCount(n: number): string {
  return integer.format(n);
}

// A quantity in the cache's unit: entries as plain integers, bytes in IEC units.
export function formatQuantity(n: number, unit: string): string {
  if (unit !== "bytes") return integer.format(n);
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let v = n;
  let i = 0;
  while (Math.abs(v) >= 1024 && i < units.length - 1) {
    v /= 1024;
    i++;
  }
  return i === 0 ? `${integer.format(v)} B` : `${v.toFixed(v < 10 ? 2 : 1)} ${units[i]}`;
}

export function formatPercent(ratio: number | null): string {
  if (ratio === null || !Number.isFinite(ratio)) return "–";
  return `${(ratio * 100).toFixed(1)}%`;
}

export function formatDuration(ms: number): string {
  if (ms >= 1000) return `${(ms / 1000).toFixed(2)} s`;
  if (ms >= 1) return `${ms.toFixed(ms >= 100 ? 0 : 2)} ms`;
  return `${(ms * 1000).toFixed(0)} µs`;
}

export function formatClock(unixMs: number): string {
  return new Date(unixMs).toLocaleTimeString("en-GB", { hour12: false });
}
