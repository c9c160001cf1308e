// A receipt's page: its fields, the trust in use, and the five levels checked in this browser.
// The record (for level 1) can be pasted or read from a file; it is hashed here, never sent.

import { decodeEntry, fromBase64, toHex } from "../../src/verify.js";
import { getJson } from "../api.js";
import { alert, fields, h, link, mono, utc } from "../dom.js";
import { servedKeys } from "../trust.js";
import { pending, renderReport, reveal, trustSummary, verifyHere } from "../verdict.js";

/** A textarea plus a file picker that fills it (read locally with FileReader, never uploaded). */
export function pasteOrFile(id, label, help, rows = 8) {
  const area = h("textarea", { id, name: id, rows, spellcheck: "false", autocomplete: "off", "aria-describedby": `${id}-help` });
  const file = h("input", { id: `${id}-file`, type: "file", accept: "application/json,.json,text/plain" });
  file.addEventListener("change", async () => {
    const f = file.files?.[0];
    if (f) area.value = await f.text();
  });
  return {
    area,
    element: h("div", { class: "field paste" },
      h("label", { for: id }, label), area,
      h("label", { for: `${id}-file`, class: "file-label" }, "…or read a file: "), file,
      h("p", { id: `${id}-help`, class: "hint" }, help)),
  };
}

/** Verify into `slot`; `show`: scroll the verdict into view (it was asked for by a button). */
async function runInto(slot, trustSlot, args, { show = false } = {}) {
  slot.replaceChildren(pending());
  try {
    const { report, trust } = await verifyHere(args);
    trustSlot.replaceChildren(await trustSummary(trust));
    slot.replaceChildren(renderReport(report));
  } catch (e) {
    slot.replaceChildren(alert(`Cannot verify: ${e.message}`));
  }
  if (show) reveal(slot);
}

/** The receipt section (also used by the entry page). */
export function receiptSection(receipt, { heading = "h1", activeOrigin = null } = {}) {
  const verdictSlot = h("div", { class: "verdict-slot" });
  const trustSlot = h("div", { class: "trust-slot" });
  const { area, element } = pasteOrFile("record-input", "Call record or saved tool call (for level 1)",
    "The record {tool, arguments, result, salt} or the saved call {tool, arguments, result}. It is hashed in this browser and never sent anywhere.");
  const form = h("form", { class: "record-form", "aria-labelledby": "record-h" },
    h("h3", { id: "record-h" }, "Check the record too"), element,
    h("button", { type: "submit" }, "Verify with this record"));
  form.addEventListener("submit", (e) => {
    e.preventDefault();
    runInto(verdictSlot, trustSlot, { receipt, input: area.value }, { show: true });
  });
  const sig = receipt.signature ?? {};
  const section = h("article", { class: "receipt" },
    h(heading, { tabindex: heading === "h1" ? "-1" : null }, "Tool call ", mono(receipt.tool), " on ", mono(receipt.server)),
    h("div", { class: "grid" },
      h("section", { class: "card", "aria-labelledby": "fields-h" },
        h("h2", { id: "fields-h" }, "Receipt"),
        fields([
          ["Receipt id", mono(receipt.id, { "data-testid": "receipt-id" })],
          ["Server", link(`/explorer/servers/${encodeURIComponent(receipt.server)}`, receipt.server)],
          ["Tool", receipt.tool],
          ["Issued at", `${utc(receipt.issued_at)} UTC (${receipt.issued_at})`],
          ["call_sha256", mono(receipt.call_sha256)],
          ["Log", h("span", {}, mono(receipt.ledger?.origin, { "data-testid": "receipt-log" }),
            receipt.ledger?.origin === activeOrigin ? null : h("span", { class: "source" }, " (a frozen log of this notary)"))],
          ["Entry", receipt.ledger?.origin === activeOrigin
            ? link(`/explorer/entries/${receipt.ledger?.index}`, `#${receipt.ledger?.index}`) : `#${receipt.ledger?.index}`],
          ["Signature", h("span", {}, `${sig.alg ?? "?"}, key `, mono(sig.kid ?? "none"))],
          ["Spec", receipt.spec],
          ["COSE receipt", h("a", {
            href: `/v1/tool-calls/${encodeURIComponent(receipt.id)}/receipt.cose`, download: `${receipt.id}.cose`,
            type: "application/scitt-receipt+cose", "data-testid": "cose-download",
          }, "Download (RFC 9942, for SCITT tools)")],
        ]),
        h("details", {}, h("summary", {}, "tlog-proof (inclusion proof and signed checkpoint)"), h("pre", { class: "note", tabindex: "0" }, receipt.proof ?? "none")),
        h("details", {}, h("summary", {}, "The receipt as JSON"), h("pre", { class: "note", tabindex: "0" }, JSON.stringify(receipt, null, 2)))),
      h("section", { class: "card", "aria-labelledby": "verify-h" },
        h("h2", { id: "verify-h" }, "Verified in this browser"),
        verdictSlot, trustSlot, form)));
  runInto(verdictSlot, trustSlot, { receipt });
  return section;
}

export async function receiptPage(main, { id, state }) {
  const [receipt, { ledger }] = await Promise.all([state?.receipt?.id === id && typeof state.receipt.proof === "string"
    ? state.receipt : getJson(`/v1/tool-calls/${encodeURIComponent(id)}`), servedKeys()]);
  main.append(receiptSection(receipt, { activeOrigin: ledger.origin }));
  return `Tool call ${receipt.tool} · ${receipt.id}`;
}

export async function entryPage(main, { index }) {
  if (!/^[0-9]{1,20}$/.test(index)) throw new Error(`${JSON.stringify(index)} is not an entry index`);
  const doc = await getJson(`/v1/ledger/entries/${index}`);
  const bytes = fromBase64(doc.entry, "entry");
  let entry = null;
  let problem = null;
  try {
    entry = decodeEntry(bytes);
  } catch (e) {
    problem = e.message;
  }
  main.append(
    h("h1", { tabindex: "-1" }, `Entry #${index}`),
    h("section", { class: "card", "aria-labelledby": "entry-h" },
      h("h2", { id: "entry-h" }, "The log entry"),
      h("p", { class: "hint" }, "What the log holds for this call: a commitment to it, never its arguments or result."),
      problem ? alert(`Not an rs-tool-call/1 entry: ${problem}`) : fields([
        ["Receipt id", link(`/explorer/tool-calls/${entry.id}`, entry.id, { class: "mono" })],
        ["Server", entry.server], ["Tool", entry.tool], ["call_sha256", mono(entry.call_sha256)], ["Issued at", entry.issued_at],
      ]),
      fields([["Leaf hash", mono(doc.leaf_hash)], ["Entry bytes (CBOR)", mono(toHex(bytes))], ["Tree size", String(doc.size)]])));
  if (entry !== null) {
    const receipt = await getJson(`/v1/tool-calls/${encodeURIComponent(entry.id)}`);
    main.append(receiptSection(receipt, { heading: "h2", activeOrigin: receipt.ledger?.origin }));
  }
  return `Entry #${index}`;
}
