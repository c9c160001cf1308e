// The log's growth over its checkpoint history, drawn as SVG here (no chart library, nothing
// fetched): tree size over time above, entries per minute below.

import { h, s, utc } from "./dom.js";

const W = 720;
const PAD = { left: 64, right: 16, top: 14, bottom: 26 };
const TOP_H = 150;
const BAR_H = 110;
const GAP = 34;
const MAX_BARS = 48;

/** A checkpoint's time in UNIX seconds, from the API's RFC 3339 text (or a number of seconds). */
export function seconds(time) {
  if (typeof time === "number") return time;
  return typeof time === "string" && time !== "" ? Date.parse(time) / 1000 : NaN;
}

/** [{size, time}] oldest first (time in seconds), one point per distinct time, from the
 * history (any order). */
export function series(history) {
  const pts = history.map((c) => ({ size: Number(c.size), time: seconds(c.time) }))
    .filter((c) => Number.isFinite(c.size) && Number.isFinite(c.time))
    .sort((a, b) => a.time - b.time || a.size - b.size);
  return pts.filter((p, i) => i === pts.length - 1 || pts[i + 1].time !== p.time);
}

/** Entries per minute in equal buckets of whole minutes (at most MAX_BARS of them). */
export function rates(points) {
  if (points.length < 2) return { bucket: 60, bars: [] };
  const start = points[0].time;
  const span = Math.max(points.at(-1).time - start, 1);
  const bucket = Math.max(60, Math.ceil(span / MAX_BARS / 60) * 60);
  const count = Math.max(1, Math.ceil(span / bucket));
  const sums = new Array(count).fill(0);
  for (let i = 1; i < points.length; i++) {
    // (from, from + bucket]: a checkpoint at a bucket's end closes that bucket's growth
    const k = Math.min(count - 1, Math.max(0, Math.ceil((points[i].time - start) / bucket) - 1));
    sums[k] += points[i].size - points[i - 1].size;
  }
  return { bucket, bars: sums.map((n, k) => ({ from: start + k * bucket, perMinute: n / (bucket / 60) })) };
}

function niceMax(v) {
  if (v <= 0) return 1;
  const p = 10 ** Math.floor(Math.log10(v));
  for (const m of [1, 2, 2.5, 5, 10]) if (m * p >= v) return m * p;
  return 10 * p;
}

const fmt = (n) => (Number.isInteger(n) ? n.toLocaleString("en-US") : n.toFixed(n < 10 ? 1 : 0));

/** The chart element for a checkpoint history ({checkpoints: [{size, time}]}, newest first). */
export function growthChart(history) {
  const points = series(history);
  const id = "chart-title";
  if (points.length === 0) return h("p", { class: "empty" }, "No checkpoint history yet.");
  const { bucket, bars } = rates(points);
  const t0 = points[0].time;
  const t1 = Math.max(points.at(-1).time, t0 + 1);
  const x = (t) => PAD.left + ((t - t0) / (t1 - t0)) * (W - PAD.left - PAD.right);
  const maxSize = niceMax(points.at(-1).size);
  const y = (v) => PAD.top + TOP_H - (v / maxSize) * TOP_H;
  const barTop = PAD.top + TOP_H + GAP;
  const maxRate = niceMax(Math.max(0, ...bars.map((b) => b.perMinute)));
  const yr = (v) => barTop + BAR_H - (v / maxRate) * BAR_H;
  const height = barTop + BAR_H + PAD.bottom;

  const line = points.map((p, i) => `${i ? "L" : "M"}${x(p.time).toFixed(1)},${y(p.size).toFixed(1)}`).join(" ");
  const area = `${line} L${x(points.at(-1).time).toFixed(1)},${y(0)} L${x(t0).toFixed(1)},${y(0)} Z`;
  const barW = bars.length ? Math.max(1, (x(t0 + bucket) - x(t0)) - 2) : 0;
  const minutes = bucket / 60;
  const desc = `Tree size grew from ${fmt(points[0].size)} to ${fmt(points.at(-1).size)} between ${utc(t0)} and ${utc(points.at(-1).time)}` +
    (bars.length ? `; at most ${fmt(Math.max(...bars.map((b) => b.perMinute)))} entries per minute.` : ".");

  const svg = s("svg", { viewBox: `0 0 ${W} ${height}`, class: "chart", role: "img", "aria-labelledby": `${id} ${id}-desc`, preserveAspectRatio: "xMidYMid meet" },
    s("title", { id }, "Log growth and entries per minute"),
    s("desc", { id: `${id}-desc` }, desc),
    // size panel
    s("text", { x: PAD.left, y: PAD.top - 3, class: "chart-label" }, "tree size"),
    s("line", { x1: PAD.left, y1: y(0), x2: W - PAD.right, y2: y(0), class: "axis" }),
    s("line", { x1: PAD.left, y1: y(maxSize), x2: W - PAD.right, y2: y(maxSize), class: "gridline" }),
    s("line", { x1: PAD.left, y1: y(maxSize / 2), x2: W - PAD.right, y2: y(maxSize / 2), class: "gridline" }),
    s("text", { x: PAD.left - 6, y: y(maxSize) + 4, class: "tick", "text-anchor": "end" }, fmt(maxSize)),
    s("text", { x: PAD.left - 6, y: y(maxSize / 2) + 4, class: "tick", "text-anchor": "end" }, fmt(maxSize / 2)),
    s("text", { x: PAD.left - 6, y: y(0) + 4, class: "tick", "text-anchor": "end" }, "0"),
    s("path", { d: area, class: "area" }),
    s("path", { d: line, class: "line" }),
    points.length <= 60 ? points.map((p) => s("circle", { cx: x(p.time).toFixed(1), cy: y(p.size).toFixed(1), r: 2.5, class: "dot" },
      s("title", {}, `${utc(p.time)}: size ${fmt(p.size)}`))) : null,
    // rate panel
    s("text", { x: PAD.left, y: barTop - 3, class: "chart-label" }, `entries per minute${minutes > 1 ? ` (${minutes}-minute buckets)` : ""}`),
    s("line", { x1: PAD.left, y1: yr(0), x2: W - PAD.right, y2: yr(0), class: "axis" }),
    s("line", { x1: PAD.left, y1: yr(maxRate), x2: W - PAD.right, y2: yr(maxRate), class: "gridline" }),
    s("text", { x: PAD.left - 6, y: yr(maxRate) + 4, class: "tick", "text-anchor": "end" }, fmt(maxRate)),
    s("text", { x: PAD.left - 6, y: yr(0) + 4, class: "tick", "text-anchor": "end" }, "0"),
    bars.map((b) => s("rect", { x: (x(b.from) + 1).toFixed(1), y: yr(b.perMinute).toFixed(1), width: barW.toFixed(1), height: (yr(0) - yr(b.perMinute)).toFixed(1), class: "bar" },
      s("title", {}, `${utc(b.from)}: ${fmt(b.perMinute)} entries/min`))),
    // time axis
    s("text", { x: PAD.left, y: height - 6, class: "tick" }, utc(t0)),
    s("text", { x: W - PAD.right, y: height - 6, class: "tick", "text-anchor": "end" }, utc(points.at(-1).time)));
  return h("figure", { class: "chart-figure" }, svg,
    h("figcaption", {}, `${points.length} checkpoint${points.length === 1 ? "" : "s"} of history. `, desc));
}
