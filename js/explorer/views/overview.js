// The log at a glance: origin, key, size, the newest checkpoint and its signatures (each checked
// here), the witnesses and their latest cosignatures, the growth chart and recent tool calls.

import {
  CosignatureVerifier, SubtreeCosignatureVerifier, algorithmOf, parseCheckpointText, parseLogKey, parseNote, parseVerifierKey,
} from "../../src/verify.js";
import { getJson, getText } from "../api.js";
import { growthChart } from "../chart.js";
import { alert, fields, h, link, mono, utc } from "../dom.js";
import { keySummary } from "../keyview.js";
import { fingerprint, listedLogs, pinFor, pinLogKey, servedKeys, servedLogKeys } from "../trust.js";
import { findForm, resultsTable } from "./search.js";

const enc = new TextEncoder();
const hex8 = (n) => n.toString(16).padStart(8, "0");

/** A signature field's timestamp when its key type has one (0 for a subtree/v1 without one). */
function timestampOf(v, signature) {
  if (v instanceof CosignatureVerifier && signature.length === 72) return Number(CosignatureVerifier.timestamp(signature));
  if (v instanceof SubtreeCosignatureVerifier && signature.length === 2428) return Number(SubtreeCosignatureVerifier.timestamp(signature)) || null;
  return null;
}

/**
 * Each signature line of a note: who made it, with which algorithm, whether it verifies here,
 * its time. `logVkeys` are every key of the log (Ed25519 and ML-DSA-44).
 */
export async function checkSignatures(noteText, logVkeys, witnesses) {
  const note = parseNote(noteText);
  const verifiers = [];
  for (const vkey of logVkeys) verifiers.push({ role: "log", v: parseLogKey(vkey) });
  for (const w of witnesses) verifiers.push({ role: "witness", v: parseVerifierKey(w.vkey) });
  const message = enc.encode(note.text);
  return Promise.all(note.signatures.map(async (sig) => {
    const match = verifiers.find(({ v }) => v.name === sig.name && v.keyId === sig.keyId);
    const out = { name: sig.name, keyId: hex8(sig.keyId), role: match?.role ?? "unknown", algorithm: match ? algorithmOf(match.v) : "unknown", ok: null, time: null };
    if (match) {
      out.ok = await match.v.verify(message, sig.signature);
      out.time = timestampOf(match.v, sig.signature);
    }
    return out;
  }));
}

function signatureRow(sig) {
  const status = sig.ok === null ? "not checked (unknown key)" : sig.ok ? "✔ verified here" : "✘ does not verify";
  return [sig.role === "log" ? "log" : sig.role === "witness" ? "witness" : "unknown", mono(sig.name), mono(sig.keyId), sig.algorithm,
    sig.time === null ? "—" : utc(sig.time), h("span", { class: sig.ok ? "ok" : sig.ok === false ? "bad" : "" }, status)];
}

/**
 * The notary's logs (/v1/ledger's `logs`, docs/lifecycle.md): one active, the others frozen, each
 * with its keys (name, key ID, fingerprint) and the time it took entries. Null for a notary
 * that lists none (one log, as before rolling existed).
 */
async function logsCard(ledger) {
  const logs = listedLogs(ledger);
  if (logs.length === 0) return null;
  const rows = await Promise.all(logs.map(async (l) => {
    const keys = await Promise.all(l.vkeys.map(async (k) => {
      const fp = await fingerprint(k).catch(() => null);
      return h("div", {}, fp === null ? mono(k) : [mono(`${fp.name}+${fp.keyId}`), " ", h("span", { class: "source" }, `SHA-256 ${fp.sha256.split(" ").slice(0, 4).join(" ")}…`)]);
    }));
    const span = [l.started ? utc(l.started) : "?", " – ", l.frozen_at ? utc(l.frozen_at) : "now"];
    const pruned = Number(l.min_index) > 0 ? h("span", { class: "source" }, ` (entries below ${l.min_index} pruned)`) : null;
    return h("tr", { "data-origin": l.origin, "data-state": l.state },
      h("td", {}, mono(l.origin)), h("td", {}, l.state), h("td", {}, Number(l.size).toLocaleString("en-US"), pruned), h("td", {}, keys), h("td", {}, span));
  }));
  return h("section", { class: "card", "aria-labelledby": "logs-h", "data-testid": "logs" },
    h("h2", { id: "logs-h" }, "Logs of this notary"),
    h("p", {}, "The notary rolls to a new log under new keys from time to time; a frozen log never changes again, and its receipts keep verifying under its own key."),
    h("div", { class: "table-wrap", tabindex: "0", role: "region", "aria-label": "logs" },
      h("table", {}, h("thead", {}, h("tr", {}, ["Origin", "State", "Entries", "Log keys", "Time window (UTC)"].map((t) => h("th", { scope: "col" }, t)))),
        h("tbody", {}, rows))));
}

export async function overview(main) {
  const [{ ledger, witnesses }, cp, history, recent] = await Promise.all([
    servedKeys(), getText("/checkpoint"), getJson("/v1/ledger/checkpoints?limit=1000"), getJson("/v1/tool-calls?limit=10"),
  ]);
  const checkpoint = parseCheckpointText(parseNote(cp.text).text);
  const logVkeys = servedLogKeys(ledger);
  const sigs = await checkSignatures(cp.text, logVkeys, witnesses.witnesses);
  const fp = await fingerprint(ledger.vkey);
  const pqKeys = logVkeys.filter((k) => k !== ledger.vkey);
  const pqSummaries = await Promise.all(pqKeys.map(keySummary));
  const pinned = pinFor(ledger.origin);
  const witnessed = cp.headers.get("Notary-Witnessed");
  const logs = await logsCard(ledger);

  const pinButton = h("button", { type: "button", class: "secondary" }, "Pin this log key in this browser");
  pinButton.addEventListener("click", () => {
    pinLogKey(ledger.vkey);
    pinButton.replaceWith(h("span", { class: "source pinned", role: "status" }, "Pinned. Receipts are now checked against this key, whatever the server says later."));
  });
  const pinState = pinned === null
    ? [h("span", { class: "source" }, "Not pinned: the page trusts the key this server sends. "), pinButton]
    : logVkeys.includes(pinned.vkey)
      ? h("span", { class: "source pinned" }, `Pinned in this browser on ${pinned.pinned_at}.`)
      : alert("This server's log key differs from the one you pinned: its receipts fail level 3 here. See Trust.");

  const latestBy = new Map(sigs.filter((x) => x.role === "witness").map((x) => [`${x.name}\n${x.keyId}`, x]));
  const witnessRows = witnesses.witnesses.map((w) => {
    const key = parseVerifierKey(w.vkey);
    const sig = latestBy.get(`${key.name}\n${hex8(key.keyId)}`);
    return [mono(w.name), mono(hex8(key.keyId)), sig ? `${utc(sig.time)} (size ${checkpoint.size})` : "none on the published checkpoint",
      sig ? h("span", { class: sig.ok ? "ok" : "bad" }, sig.ok ? "✔ verified here" : "✘ does not verify") : "—"];
  });

  main.append(
    h("h1", { tabindex: "-1" }, "Transparency log"),
    h("p", { class: "lead" }, "Every notarized MCP tool call is an entry of this append-only Merkle tree log. Find a call below and this page verifies it itself, with keys you can pin."),
    findForm(),
    h("div", { class: "grid" },
      h("section", { class: "card", "aria-labelledby": "log-h" },
        h("h2", { id: "log-h" }, "The log"),
        fields([
          ["Origin", mono(ledger.origin)],
          ["Size", h("span", { class: "big", "data-testid": "log-size" }, Number(ledger.size).toLocaleString("en-US"), " entries")],
          ["Root hash", mono(ledger.root)],
          ["Log key", mono(ledger.vkey)],
          ["Key ID", mono(fp.keyId)],
          ["Fingerprint", h("span", {}, mono(fp.sha256), h("br"), h("span", { class: "source" }, "SHA-256 of the Ed25519 public key"))],
          ...pqKeys.map((k, i) => ["Post-quantum log key (ML-DSA-44)", pqSummaries[i]]),
          ["Trust", pinState],
        ])),
      h("section", { class: "card", "aria-labelledby": "cp-h" },
        h("h2", { id: "cp-h" }, "Newest checkpoint"),
        h("p", {}, `Size ${checkpoint.size}, as served at `, link("/checkpoint", "/checkpoint", { "data-external": "" }),
          witnessed === null ? "." : witnessed === "true" ? ": witnessed (meets the witness quorum)." : ": not yet witnessed."),
        h("pre", { class: "note", "data-testid": "checkpoint-text", tabindex: "0" }, cp.text))),
    logs,
    // Full width: six columns do not fit the half-width checkpoint card on a laptop screen.
    h("section", { class: "card", "aria-labelledby": "sig-h" },
      h("h2", { id: "sig-h" }, "Signatures of the newest checkpoint"),
      h("div", { class: "table-wrap", tabindex: "0", role: "region", "aria-label": "checkpoint signatures" },
        h("table", {}, h("thead", {}, h("tr", {}, ["Role", "Key name", "Key ID", "Algorithm", "Signed at", "Check"].map((t) => h("th", { scope: "col" }, t)))),
          h("tbody", {}, sigs.map((x) => h("tr", {}, signatureRow(x).map((c) => h("td", {}, c)))))))),
    h("section", { class: "card", "aria-labelledby": "w-h" },
      h("h2", { id: "w-h" }, "Witnesses"),
      witnesses.witnesses.length
        ? [h("p", {}, `A published checkpoint needs ${witnesses.quorum} of ${witnesses.witnesses.length} witness cosignatures.`),
          h("div", { class: "table-wrap", tabindex: "0", role: "region", "aria-label": "witnesses" },
            h("table", {}, h("thead", {}, h("tr", {}, ["Witness", "Key ID", "Latest cosignature", "Check"].map((t) => h("th", { scope: "col" }, t)))),
              h("tbody", {}, witnessRows.map((r) => h("tr", {}, r.map((c) => h("td", {}, c)))))))]
        : h("p", { class: "empty" }, "This notary has no witnesses configured: its checkpoints carry the log's signature only.")),
    h("section", { class: "card", "aria-labelledby": "g-h" },
      h("h2", { id: "g-h" }, "Growth"),
      growthChart(history.checkpoints)),
    h("section", { class: "card", "aria-labelledby": "r-h" },
      h("h2", { id: "r-h" }, "Recent tool calls"),
      resultsTable(recent.tool_calls, ledger.origin),
      recent.next_cursor ? h("p", {}, link(`/explorer/search?cursor=${encodeURIComponent(recent.next_cursor)}`, "Older tool calls →")) : null,
      h("p", {}, link("/explorer/search", "Search by server, tool and time")))
  );
  return "Overview";
}
