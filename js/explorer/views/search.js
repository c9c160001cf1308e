// Find: one box that recognises a receipt id, a call_sha256, an entry index or a server name,
// and the search page (server, tool, time range; newest first; cursor pagination).

import { getJson, query } from "../api.js";
import { alert, h, link, mono, shortHex, utc } from "../dom.js";
import { navigate } from "../router.js";
import { servedKeys } from "../trust.js";

const ID = /^tc_[A-Za-z0-9_-]{22}$/;
const DIGEST = /^[0-9a-fA-F]{64}$/;
const INDEX = /^[0-9]{1,20}$/;

/** Where a search box value leads. */
export function destination(value) {
  const v = value.trim();
  if (ID.test(v)) return `/explorer/tool-calls/${v}`;
  if (DIGEST.test(v)) return `/explorer/search${query({ call_sha256: v.toLowerCase() })}`;
  if (INDEX.test(v)) return `/explorer/entries/${v}`;
  return `/explorer/servers/${encodeURIComponent(v)}`;
}

export function findForm() {
  const input = h("input", { id: "find-q", name: "q", type: "search", required: true, autocomplete: "off", spellcheck: "false",
    placeholder: "tc_…, call_sha256, entry index or server name", "aria-describedby": "find-help" });
  const form = h("form", { class: "find", role: "search", action: "/explorer/search", method: "get" },
    h("label", { for: "find-q" }, "Find a tool call"),
    h("div", { class: "row" }, input, h("button", { type: "submit" }, "Find")),
    h("p", { id: "find-help", class: "hint" }, "A receipt id (tc_…), a call_sha256 (64 hex digits), an entry index, or a server name."));
  form.addEventListener("submit", (e) => {
    e.preventDefault();
    if (input.value.trim()) navigate(destination(input.value));
  });
  return form;
}

/** A receipt's entry: a link to its entry page when it is in the active log (the entry pages
 * read the active log), else its index. */
export function entryCell(receipt, activeOrigin) {
  const index = String(receipt.ledger?.index);
  return receipt.ledger?.origin === activeOrigin ? link(`/explorer/entries/${index}`, index) : index;
}

/** Search results; `activeOrigin`: the active log's origin (each row says which log). */
export function resultsTable(receipts, activeOrigin) {
  if (receipts.length === 0) return h("p", { class: "empty" }, "No tool calls found.");
  return h("div", { class: "table-wrap", tabindex: "0", role: "region", "aria-label": "tool calls" },
    h("table", { class: "results" },
      h("thead", {}, h("tr", {}, ["Issued (UTC)", "Server", "Tool", "Entry", "Receipt", "call_sha256", "Log"].map((t) => h("th", { scope: "col" }, t)))),
      h("tbody", {}, receipts.map((r) => h("tr", {},
        h("td", {}, utc(r.issued_at)),
        h("td", {}, link(`/explorer/servers/${encodeURIComponent(r.server)}`, r.server)),
        h("td", {}, r.tool),
        h("td", {}, entryCell(r, activeOrigin)),
        h("td", {}, link(`/explorer/tool-calls/${r.id}`, r.id, { class: "mono" })),
        h("td", {}, mono(shortHex(r.call_sha256))),
        h("td", { "data-log": r.ledger?.origin }, mono(r.ledger?.origin), r.ledger?.origin === activeOrigin ? null : h("span", { class: "source" }, " (frozen)")))))));
}

/** datetime-local value (the browser's local time) ⇄ RFC 3339 UTC for the API. */
function toApiTime(local) {
  if (!local) return "";
  const d = new Date(local);
  return Number.isNaN(d.getTime()) ? "" : d.toISOString();
}
function toLocalInput(iso) {
  if (!iso) return "";
  const d = new Date(iso);
  if (Number.isNaN(d.getTime())) return "";
  const off = new Date(d.getTime() - d.getTimezoneOffset() * 60000);
  return off.toISOString().slice(0, 19);
}

function searchForm(params, fixedServer) {
  const input = (name, label, attrs = {}) => {
    const el = h("input", { id: `s-${name}`, name, ...attrs });
    return [h("label", { for: `s-${name}` }, label), el];
  };
  const [serverLabel, server] = input("server", "Server", { value: fixedServer ?? params.get("server") ?? "", autocomplete: "off" });
  const [toolLabel, tool] = input("tool", "Tool", { value: params.get("tool") ?? "", autocomplete: "off" });
  const [sinceLabel, since] = input("since", "Since (your local time)", { type: "datetime-local", step: "1", value: toLocalInput(params.get("since")) });
  const [untilLabel, until] = input("until", "Until (your local time)", { type: "datetime-local", step: "1", value: toLocalInput(params.get("until")) });
  const form = h("form", { class: "search-form", action: "/explorer/search", method: "get" },
    h("div", { class: "field" }, serverLabel, server), h("div", { class: "field" }, toolLabel, tool),
    h("div", { class: "field" }, sinceLabel, since), h("div", { class: "field" }, untilLabel, until),
    h("div", { class: "field actions" }, h("button", { type: "submit" }, "Search")));
  form.addEventListener("submit", (e) => {
    e.preventDefault();
    const q = { tool: tool.value.trim(), since: toApiTime(since.value), until: toApiTime(until.value) };
    const name = server.value.trim();
    // A receipt id in the Server box is a receipt sought, as in the find box (a server name of
    // that very shape stays reachable at its /explorer/servers/ link).
    if (ID.test(name)) navigate(destination(name));
    else navigate(name ? `/explorer/servers/${encodeURIComponent(name)}${query(q)}` : `/explorer/search${query(q)}`);
  });
  return form;
}

/** /explorer/search and /explorer/servers/<name>: one page of results, newest first. */
export async function searchPage(main, { server = null, params }) {
  // ?q= is what the find box submits without this script's handler (a browser's site search).
  const q = server === null ? params.get("q")?.trim() : null;
  if (q) {
    navigate(destination(q), { replace: true });
    return null;
  }
  const digest = params.get("call_sha256");
  if (digest !== null) {
    const receipt = await getJson(`/v1/tool-calls${query({ call_sha256: digest })}`);
    navigate(`/explorer/tool-calls/${receipt.id}`, { replace: true, state: { receipt } });
    return null;
  }
  const api = { server: server ?? params.get("server"), tool: params.get("tool"), since: params.get("since"), until: params.get("until"), cursor: params.get("cursor") };
  const title = server ? `Server ${server}` : "Search tool calls";
  main.append(h("h1", { tabindex: "-1" }, server ? ["Tool calls of ", mono(server)] : title), findForm(),
    h("h2", { class: "sub" }, "Filter"), searchForm(params, server));
  const [page, { ledger }] = await Promise.all([getJson(`/v1/tool-calls${query(api)}`), servedKeys()]);
  const here = server ? `/explorer/servers/${encodeURIComponent(server)}` : "/explorer/search";
  const keep = { tool: api.tool, since: api.since, until: api.until, ...(server ? {} : { server: api.server }) };
  const described = [api.tool && `tool ${api.tool}`, api.since && `since ${utc(api.since)}`, api.until && `until ${utc(api.until)}`].filter(Boolean).join(", ");
  main.append(
    h("p", { class: "hint", role: "status" }, `${page.tool_calls.length} tool call${page.tool_calls.length === 1 ? "" : "s"}${api.cursor ? " (an older page)" : ""}, newest first${described ? `; ${described}` : ""}.`),
    resultsTable(page.tool_calls, ledger.origin),
    h("nav", { class: "pager", "aria-label": "pages" },
      api.cursor ? link(`${here}${query(keep)}`, "← Newest") : null,
      page.next_cursor ? link(`${here}${query({ ...keep, cursor: page.next_cursor })}`, "Older →", { rel: "next" }) : null));
  return title;
}

export function searchError(main, e) {
  main.append(alert(e.message));
}
