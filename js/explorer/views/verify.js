// The verify panel: a saved tool call, or a receipt plus its record, pasted or read from a file,
// verified here. Nothing typed or read into this panel is ever sent: only the log's public
// checkpoints and proofs are fetched.

import { parseJson } from "../../src/verify.js";
import { alert, h } from "../dom.js";
import { pending, renderReport, reveal, trustSummary, verifyHere } from "../verdict.js";
import { pasteOrFile } from "./receipt.js";

export async function verifyPage(main) {
  const call = pasteOrFile("call-input", "Saved tool call, or call record",
    "A saved call {tool, arguments, result (with its _meta)}, or a call record {tool, arguments, result, salt} with the receipt below.", 12);
  const rec = pasteOrFile("receipt-input", "Receipt (only with a bare call record)",
    "The receipt JSON with its proof. A saved tool call carries its own receipt in _meta.", 6);
  const slot = h("div", { class: "verdict-slot" }, h("p", { class: "empty" },
    "Nothing verified yet. The five levels (record, signature, inclusion, witnesses, consistency) show here, each checked by this browser."));
  const trustSlot = h("div", { class: "trust-slot" });
  const form = h("form", { class: "verify-form" }, call.element, rec.element, h("button", { type: "submit" }, "Verify in this browser"));
  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    slot.replaceChildren(pending());
    try {
      const receipt = rec.area.value.trim() ? parseJson(rec.area.value) : null;
      const { report, trust } = await verifyHere({ receipt, input: call.area.value });
      trustSlot.replaceChildren(await trustSummary(trust));
      slot.replaceChildren(renderReport(report));
    } catch (err) {
      slot.replaceChildren(alert(`Cannot verify: ${err.message}`));
    }
    reveal(slot);
  });
  main.append(
    h("h1", { tabindex: "-1" }, "Verify a tool call"),
    h("p", { class: "lead" }, "Paste what your MCP client received, or pick the file. The record is hashed by this page, in your browser: it is never uploaded, and no request carries it."),
    h("div", { class: "grid" }, h("section", { class: "card" }, form), h("section", { class: "card", "aria-label": "result" }, slot, trustSlot)));
  return "Verify";
}
