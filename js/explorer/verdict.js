// Running the JS verifier in the page and showing its five verdicts, with the stable hooks tests
// and tools rely on: [data-level][data-verdict] per level, [data-testid=verdict][data-valid].

import { LEVELS, parseJson, verifyReceipt, verifyToolCall } from "../src/verify.js";
import { h, link, mono } from "./dom.js";
import { keySummary } from "./keyview.js";
import { checkpointStore, sameOriginFetch, trustFor } from "./trust.js";

export const LEVEL_TITLES = {
  record: "Record: the call record hashes to the receipt's call_sha256",
  signature: "Signature: the receipt is signed by a trusted receipt key",
  inclusion: "Inclusion: the entry is in a checkpoint signed by the trusted log key",
  witnesses: "Witnesses: that checkpoint carries the required cosignatures",
  consistency: "Consistency: it is consistent with the newest checkpoint seen",
};

/** The trust box: which keys are used, and where each came from. */
export async function trustSummary(t) {
  const log = t.logKey === null
    ? h("dd", {}, h("strong", {}, "none"), ` — no log key is known for ${JSON.stringify(t.origin)}; `, link("/explorer/trust", "pin one"))
    : h("dd", {}, await keySummary(t.logKey.vkey), h("br"), h("span", { class: t.logKey.source === "pinned" ? "source pinned" : "source" }, t.logKey.detail));
  return h("section", { class: "trust", "aria-labelledby": "trust-h" },
    h("h3", { id: "trust-h" }, "Trusted keys"),
    t.mismatch ? h("p", { class: "alert alert-error", role: "alert" }, "The log key you pinned differs from the one this notary serves: receipts are checked against your pinned key.") : null,
    h("dl", { class: "fields" },
      h("dt", {}, `Log key (${t.origin})`), log,
      h("dt", {}, "Receipt keys"), h("dd", {}, t.jwks.kids.length ? t.jwks.kids.map((k) => [mono(k), " "]) : "none", h("br"), h("span", { class: "source" }, t.jwks.detail)),
      h("dt", {}, "Witnesses"), h("dd", {},
        t.witnesses.list.length ? `${t.witnesses.quorum} of ${t.witnesses.list.length} must cosign: ` : "none configured",
        t.witnesses.list.map((w) => [mono(w.name), " "]), h("br"), h("span", { class: "source" }, t.witnesses.detail))),
    h("p", { class: "hint" }, link("/explorer/trust", "Pin or change the log key"), " (kept in this browser only)."));
}

/** A placeholder while the verifier runs (no data-testid: tests wait for the real one). */
export function pending(text = "Verifying in this browser…") {
  return h("section", { class: "verdict running", "aria-busy": "true" }, h("p", { class: "overall" }, text));
}

/**
 * Bring a verdict asked for by a button into view: the button may sit below a long record, with
 * the verdict scrolled out of sight above it. Only the top of a verdict taller than the window.
 */
export function reveal(el) {
  const r = el.getBoundingClientRect();
  if (r.top < 0 || r.bottom > innerHeight) el.scrollIntoView({ block: r.height > innerHeight ? "start" : "nearest" });
}

/** The report as the page shows it, with the stable data-* hooks. */
export function renderReport(report) {
  const levels = report.levels;
  const failed = LEVELS.some((n) => levels[n].status === "failed");
  const onlyRecordMissing = !report.valid && !failed && levels.record.status === "skipped" && LEVELS.every((n) => n === "record" || !levels[n].required || levels[n].status === "passed");
  const overall = report.valid ? "✔ Valid: every required level passed, checked by this browser."
    : onlyRecordMissing ? "◐ The receipt checks out (signature, inclusion and what follows), but the call itself is not proven until its record is checked: give it below."
      : "✘ Not valid: a required level did not pass.";
  return h("section", { class: `verdict ${report.valid ? "valid" : onlyRecordMissing ? "partial" : "invalid"}`, "data-testid": "verdict", "data-valid": String(report.valid), "aria-live": "polite" },
    h("p", { class: "overall" }, overall),
    h("ol", { class: "levels" }, LEVELS.map((name) => {
      const r = levels[name];
      return h("li", { "data-level": name, "data-verdict": r.status, class: `level ${r.status}` },
        h("span", { class: "badge" }, r.status),
        h("span", { class: "level-body" },
          h("strong", {}, LEVEL_TITLES[name]), r.required ? null : h("span", { class: "optional" }, " (optional)"),
          r.reason ? h("span", { class: "reason" }, r.reason) : null));
    })),
    report.notes.length ? h("ul", { class: "notes" }, report.notes.map((n) => h("li", {}, n))) : null);
}

function isRecord(doc) {
  return doc !== null && typeof doc === "object" && !Array.isArray(doc) && typeof doc.salt === "string" && "result" in doc && !("content" in doc);
}

/**
 * Verify in this browser. `receipt`: a receipt object (or null); `input`: text of a call
 * record, a saved tool call, or nothing. Only the log's checkpoints and proofs are fetched,
 * from this origin; the input is parsed and hashed here and never sent.
 */
export async function verifyHere({ receipt = null, input = null }) {
  let doc = null;
  if (input !== null && input.trim() !== "") doc = parseJson(input);
  const origin = receipt?.ledger?.origin ?? doc?.result?._meta?.["com.rightshold/tool-call"]?.receipt?.ledger?.origin ?? null;
  const t = await trustFor(typeof origin === "string" ? origin : null);
  const options = { trust: t.trust, fetch: sameOriginFetch, store: checkpointStore(), logUrl: t.logUrl };
  let report;
  if (doc === null) report = await verifyReceipt(receipt, null, options);
  else if (isRecord(doc)) {
    if (receipt === null) throw new Error("a call record needs its receipt: paste the receipt too, or a saved tool call (it carries one)");
    report = await verifyReceipt(receipt, doc, options);
  } else report = await verifyToolCall(doc, { ...options, receipt: receipt ?? undefined });
  return { report, trust: t };
}
