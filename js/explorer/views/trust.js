// Trust: which log key receipts are checked against, pinned here or served by the notary.

import { alert, fields, h, mono } from "../dom.js";
import { fingerprint, forgetCheckpoints, listedLogs, pinLogKey, pins, servedKeys, servedLogKeys, unpin } from "../trust.js";
import { keySummary } from "../keyview.js";
import { navigate } from "../router.js";

export async function trustPage(main) {
  const { ledger, jwks, witnesses } = await servedKeys();
  const all = pins();
  const mine = all[ledger.origin];
  const fp = await fingerprint(ledger.vkey);
  const status = h("div", { role: "status", class: "status-slot" }, history.state?.message ? alert(history.state.message, "info") : null);
  const reload = (message) => navigate("/explorer/trust", { replace: true, state: { message } });

  const pinServed = h("button", { type: "button" }, "Pin the key this notary serves");
  pinServed.addEventListener("click", () => { pinLogKey(ledger.vkey); reload("Pinned the served log key."); });
  const pqKey = servedLogKeys(ledger).find((k) => k !== ledger.vkey);
  const pinPq = pqKey === undefined ? null : h("button", { type: "button", class: "secondary" }, "Pin its post-quantum (ML-DSA-44) key instead");
  pinPq?.addEventListener("click", () => { pinLogKey(pqKey); reload("Pinned the served ML-DSA-44 log key: receipts are checked against the dual-signed checkpoints."); });
  const matches = mine !== undefined && servedLogKeys(ledger).includes(mine.vkey);
  const vkeyInput = h("input", { id: "pin-vkey", name: "vkey", autocomplete: "off", spellcheck: "false", required: true,
    placeholder: "origin+keyid+base64key", "aria-describedby": "pin-help" });
  const pinForm = h("form", { class: "pin-form" },
    h("label", { for: "pin-vkey" }, "Pin a log key you got elsewhere"),
    h("div", { class: "row" }, vkeyInput, h("button", { type: "submit" }, "Pin")),
    h("p", { id: "pin-help", class: "hint" }, "A signed-note verifier key <origin>+<key id>+<key>, e.g. from the operator's documentation. It is pinned for the origin its name gives."));
  pinForm.addEventListener("submit", (e) => {
    e.preventDefault();
    try {
      const key = pinLogKey(vkeyInput.value);
      reload(`Pinned a log key for ${key.name}.`);
    } catch (err) {
      status.replaceChildren(alert(`Not a log verifier key: ${err.message}`));
    }
  });
  const forget = h("button", { type: "button", class: "secondary" }, "Forget the checkpoints this browser remembered");
  forget.addEventListener("click", () => { forgetCheckpoints(); status.replaceChildren(alert("Forgotten: level 5 starts over from the next receipt.", "info")); });

  // The notary's other logs (frozen since a roll): each has its own origin and key, pinned apart.
  const others = listedLogs(ledger).filter((l) => l.origin !== ledger.origin);
  const otherRows = await Promise.all(others.map(async (l) => {
    const pinnedKey = Object.hasOwn(all, l.origin) ? all[l.origin] : undefined;
    const b = h("button", { type: "button", class: "secondary", "data-pin": l.origin }, "Pin its key");
    b.addEventListener("click", () => { pinLogKey(l.vkeys[0]); reload(`Pinned the served key of ${l.origin}.`); });
    const state = pinnedKey === undefined ? b
      : l.vkeys.includes(pinnedKey.vkey) ? `pinned on ${pinnedKey.pinned_at} (matches)` : alert(`pinned on ${pinnedKey.pinned_at}, and DIFFERENT from the served key`);
    return h("tr", {}, h("td", {}, mono(l.origin)), h("td", {}, l.state), h("td", {}, await keySummary(l.vkeys[0])), h("td", {}, state));
  }));

  const pinRows = await Promise.all(Object.entries(all).map(async ([origin, p]) => {
    const b = h("button", { type: "button", class: "secondary", "data-unpin": origin }, "Unpin");
    b.addEventListener("click", () => { unpin(origin); reload(`Unpinned the key for ${origin}.`); });
    return h("tr", {}, h("td", {}, mono(origin)), h("td", {}, await keySummary(String(p.vkey))), h("td", {}, p.pinned_at), h("td", {}, b));
  }));

  main.append(
    h("h1", { tabindex: "-1" }, "Trust"), status,
    h("section", { class: "card" },
      h("h2", {}, "How this page decides what to trust"),
      h("ul", {},
        h("li", {}, h("strong", {}, "Log key"), " (level 3): the key you pin here, kept in this browser's local storage. Without a pin, the key this notary serves at /v1/ledger — then you trust the server that serves this page."),
        h("li", {}, h("strong", {}, "Receipt keys"), " (level 2): this notary's JWKS at /.well-known/jwks.json."),
        h("li", {}, h("strong", {}, "Witness keys"), " (level 4): the witnesses this notary lists at /v1/witnesses, with its quorum."),
        h("li", {}, h("strong", {}, "Newest checkpoint"), " (level 5): remembered per log in this browser; every new one must be consistent with it."))),
    h("section", { class: "card" },
      h("h2", {}, "This notary's log"),
      fields([
        ["Origin", mono(ledger.origin)], ["Served log key", mono(ledger.vkey)], ["Key ID", mono(fp.keyId)], ["Fingerprint", mono(fp.sha256)],
        ...(pqKey === undefined ? [] : [["Post-quantum log key (ML-DSA-44)", await keySummary(pqKey)]]),
        ["Status", mine === undefined ? "not pinned" : matches ? `pinned on ${mine.pinned_at} (matches)` : alert(`pinned on ${mine.pinned_at}, and DIFFERENT from the served key`)],
        ["Receipt keys", (jwks.keys ?? []).map((k) => [mono(k.kid), " "])],
        ["Witnesses", witnesses.witnesses.length ? witnesses.witnesses.map((w) => [mono(w.vkey), h("br")]) : "none"],
      ]),
      mine?.vkey === ledger.vkey ? null : pinServed, mine?.vkey === pqKey ? null : pinPq),
    ...(otherRows.length === 0 ? [] : [h("section", { class: "card" }, h("h2", {}, "This notary's earlier logs"),
      h("p", {}, "Receipts of a frozen log are checked against that log's key: pin each log's key to stop trusting the server for it."),
      h("div", { class: "table-wrap", tabindex: "0", role: "region", "aria-label": "earlier logs" },
        h("table", {}, h("thead", {}, h("tr", {}, ["Origin", "State", "Log key", ""].map((t) => h("th", { scope: "col" }, t)))), h("tbody", {}, otherRows))))]),
    h("section", { class: "card" }, h("h2", {}, "Pinned log keys"),
      pinRows.length ? h("div", { class: "table-wrap", tabindex: "0", role: "region", "aria-label": "pinned keys" },
        h("table", {}, h("thead", {}, h("tr", {}, ["Origin", "Key", "Pinned", ""].map((t) => h("th", { scope: "col" }, t)))), h("tbody", {}, pinRows)))
        : h("p", { class: "empty" }, "No key pinned in this browser."),
      pinForm, h("p", {}, forget)));
  return "Trust";
}
