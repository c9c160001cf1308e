// Building the page without innerHTML: every value from the network or the user becomes a text
// node, never markup, so a hostile server name or record cannot inject anything.

const SVG_NS = "http://www.w3.org/2000/svg";

function fill(el, attrs, children) {
  for (const [key, value] of Object.entries(attrs ?? {})) {
    if (value === undefined || value === null || value === false) continue;
    if (key.startsWith("on") && typeof value === "function") el.addEventListener(key.slice(2), value);
    else el.setAttribute(key, value === true ? "" : String(value));
  }
  for (const child of children.flat(Infinity)) {
    if (child === undefined || child === null || child === false) continue;
    el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return el;
}

/** An HTML element: h("a", {href: "/explorer/"}, "Overview"). */
export function h(tag, attrs, ...children) {
  return fill(document.createElement(tag), attrs, children);
}

/** An SVG element (presentation attributes only: the CSP forbids inline style). */
export function s(tag, attrs, ...children) {
  return fill(document.createElementNS(SVG_NS, tag), attrs, children);
}

/** A definition list from [term, value] pairs (values may be nodes). */
export function fields(pairs, attrs = {}) {
  return h("dl", { class: "fields", ...attrs }, pairs.filter(Boolean).map(([term, value]) => [h("dt", {}, term), h("dd", {}, value)]));
}

/** Monospace text that may break anywhere (hashes, keys). */
export function mono(text, attrs = {}) {
  return h("code", { class: "mono", ...attrs }, text);
}

/** A table that scrolls sideways on a narrow screen instead of overflowing the page. */
export function table(headers, rows, { caption, empty = "Nothing here yet." } = {}) {
  if (rows.length === 0) return h("p", { class: "empty" }, empty);
  return h("div", { class: "table-wrap", tabindex: "0", role: "region", "aria-label": caption ?? headers.join(", ") },
    h("table", {}, caption ? h("caption", {}, caption) : null,
      h("thead", {}, h("tr", {}, headers.map((t) => h("th", { scope: "col" }, t)))),
      h("tbody", {}, rows.map((cells) => h("tr", {}, cells.map((c) => h("td", {}, c)))))));
}

/** An internal link, handled by the router without a page load. */
export function link(href, text, attrs = {}) {
  return h("a", { href, ...attrs }, text);
}

export function alert(message, kind = "error") {
  return h("p", { class: `alert alert-${kind}`, role: kind === "error" ? "alert" : "status" }, message);
}

export function shortHex(hex, n = 12) {
  return hex.length > n + 1 ? `${hex.slice(0, n)}…` : hex;
}

/** UNIX seconds or an RFC 3339 string, shown in UTC to the second: the log's own clock. */
export function utc(value) {
  const d = typeof value === "number" ? new Date(value * 1000) : new Date(value);
  if (Number.isNaN(d.getTime())) return String(value);
  return d.toISOString().replace(/\.\d{3}Z$/, "Z").replace("T", " ");
}
