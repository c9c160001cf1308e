// A long log key (an ML-DSA-44 verifier key is about 1,800 characters) shown the way people
// compare keys: its name and key ID, the start of its SHA-256 fingerprint, a button that copies
// the whole key, and the key itself folded away, so it no longer fills a column.

import { h, mono } from "./dom.js";
import { fingerprint } from "./trust.js";

/** Copy `text`; where the page may not write the clipboard (plain HTTP off loopback), select `node`. */
function copyButton(text, node, folded) {
  const said = h("span", { class: "source", role: "status" });
  const button = h("button", { type: "button", class: "secondary small" }, "Copy the full key");
  button.addEventListener("click", async () => {
    try {
      await navigator.clipboard.writeText(text);
      said.textContent = " Copied.";
    } catch {
      folded.open = true;
      getSelection()?.selectAllChildren(node);
      said.textContent = " This page may not use the clipboard here: the key is selected below, copy it with Ctrl+C (⌘C).";
    }
  });
  return [button, said];
}

/**
 * A long key summarised. One short enough to read (an Ed25519 key: about 80 characters) or that
 * the page cannot parse is shown whole, as it was given.
 */
export async function keySummary(vkey) {
  let fp = null;
  if (vkey.length > 200) fp = await fingerprint(vkey).catch(() => null);
  if (fp === null) return mono(vkey);
  const whole = mono(vkey);
  const folded = h("details", { class: "key-full" },
    h("summary", {}, `Show the full key (${vkey.length.toLocaleString("en-US")} characters)`), whole);
  return h("span", {},
    mono(`${fp.name}+${fp.keyId}`), h("br"), h("span", { class: "source" }, `SHA-256 ${fp.sha256.split(" ").slice(0, 4).join(" ")}…`),
    h("br"), copyButton(vkey, whole, folded), folded);
}
