// A live uPlot chart that fills its container's width and keeps the last
// `window` points. The number of points is mirrored in the container's
// data-points attribute, so tests (and curious operators) can read it.
import uPlot from "uplot";
import "uplot/dist/uPlot.min.css";

export interface SeriesSpec {
  label: string;
  color: string;
  fill?: string;
  dash?: number[];
  points?: boolean; // points only (a scatter), no line
}

export interface ChartSpec {
  series: SeriesSpec[];
  height?: number;
  yRange?: (min: number, max: number) => [number, number];
  yFormat?: (v: number) => string;
  yAxisSize?: number;
  log?: boolean; // a base-10 log y scale (values must be > 0)
}

const axisFont = '11px system-ui, -apple-system, "Segoe UI", Roboto, sans-serif';
const axisStroke = "#4b5563";
const gridStroke = "#e5e7eb";

export class LiveChart {
  private readonly plot: uPlot;
  private readonly data: (number | null)[][];
  private readonly observer: ResizeObserver;

  constructor(
    private readonly host: HTMLElement,
    spec: ChartSpec,
    private readonly window = 300,
  ) {
    this.data = [[], ...spec.series.map(() => [])];
    const height = spec.height ?? 150;
    const yFormat = spec.yFormat ?? ((v: number) => compact(v));
    const options: uPlot.Options = {
      width: Math.max(host.clientWidth, 200),
      height,
      legend: { show: false },
      cursor: { drag: { x: false, y: false }, points: { size: 6 } },
      padding: [8, 22, 0, 0],
      scales: {
        x: { time: true },
        y: spec.log
          ? { distr: 3, log: 10, range: (_u, min, max) => uPlot.rangeLog(min || 0.01, max || 1, 10, true) }
          : spec.yRange
            ? { range: (_u, min, max) => spec.yRange!(min, max) }
            : {},
      },
      axes: [
        {
          stroke: axisStroke,
          font: axisFont,
          space: 70,
          // Whole seconds at least: sub-second ticks would repeat labels.
          incrs: [1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 21600, 43200, 86400],
          grid: { stroke: gridStroke, width: 1 },
          ticks: { stroke: gridStroke, width: 1 },
          values: (_u, splits) => splits.map(clock),
        },
        {
          stroke: axisStroke,
          font: axisFont,
          size: spec.yAxisSize ?? 52,
          grid: { stroke: gridStroke, width: 1 },
          ticks: { stroke: gridStroke, width: 1 },
          values: (_u, splits) => splits.map((v) => (v === null ? "" : yFormat(v))),
          // On a log scale, a line and a label at each power of ten only.
          splits: spec.log ? (_u, _axis, min, max) => powersOfTen(min, max) : undefined,
        },
      ],
      series: [
        {},
        ...spec.series.map(
          (s): uPlot.Series => ({
            label: s.label,
            stroke: s.color,
            fill: s.fill,
            width: 2,
            dash: s.dash,
            spanGaps: false,
            paths: s.points ? () => null : undefined,
            points: s.points
              ? { show: true, size: 6, stroke: s.color, fill: s.color, width: 1 }
              : { show: false },
          }),
        ),
      ],
    };
    this.plot = new uPlot(options, this.data as uPlot.AlignedData, host);
    this.observer = new ResizeObserver(() => {
      const width = Math.max(host.clientWidth, 200);
      if (width !== this.plot.width) this.plot.setSize({ width, height });
    });
    this.observer.observe(host);
    this.host.dataset.points = "0";
  }

  // Appends one x (unix seconds) with one value per series.
  push(x: number, values: (number | null)[]): void {
    this.data[0].push(x);
    values.forEach((v, i) => this.data[i + 1].push(v));
    const excess = this.data[0].length - this.window;
    if (excess > 0) for (const column of this.data) column.splice(0, excess);
    this.redraw();
  }

  get points(): number {
    return this.data[0].length;
  }

  destroy(): void {
    this.observer.disconnect();
    this.plot.destroy();
  }

  private redraw(): void {
    this.plot.setData(this.data as uPlot.AlignedData);
    this.host.dataset.points = String(this.data[0].length);
  }
}

export function compact(v: number): string {
  const a = Math.abs(v);
  if (a >= 1e9) return `${+(v / 1e9).toFixed(1)}G`;
  if (a >= 1e6) return `${+(v / 1e6).toFixed(1)}M`;
  if (a >= 1e4) return `${+(v / 1e3).toFixed(0)}k`;
  if (a >= 1e3) return `${+(v / 1e3).toFixed(1)}k`;
  if (a === 0 || a >= 1) return `${+v.toFixed(1)}`;
  return `${+v.toPrecision(2)}`;
}

function clock(unixSeconds: number): string {
  const d = new Date(unixSeconds * 1000);
  const two = (n: number) => String(n).padStart(2, "0");
  return `${two(d.getHours())}:${two(d.getMinutes())}:${two(d.getSeconds())}`;
}

function powersOfTen(min: number, max: number): number[] {
  const out: number[] = [];
  for (let e = Math.floor(Math.log10(min)); e <= Math.ceil(Math.log10(max)); e++) {
    const v = 10 ** e;
    if (v >= min * 0.999 && v <= max * 1.001) out.push(v);
  }
  return out;
}
