// What the page trusts, and where each key came from. Receipt keys (JWKS) and witness keys come
// from the notary serving the page; the log key too, unless the user pinned one in this browser,
// in which case the pinned key is used whatever the server says (and a difference is shown).
// The newest checkpoint seen per log is remembered in localStorage for level 5.

import { WebStorageStore, makeTrust, parseLogKey, toHex } from "../src/verify.js";
import { getJson } from "./api.js";

export const PINS_KEY = "mcp-notary.explorer.pins.v1";
export const STATE_KEY = "mcp-notary.explorer.checkpoints.v1";

function storage() {
  try {
    return globalThis.localStorage ?? null;
  } catch {
    return null; // storage disabled: nothing can be pinned or remembered
  }
}

/** The pin of log `origin`, or null: own members only, so an origin named `constructor`,
 * `__proto__` or `toString` is a name like any other, not a property of every object. */
export function pinFor(origin) {
  const doc = pins();
  return Object.hasOwn(doc, origin) ? doc[origin] : null;
}

/** {origin: {vkey, pinned_at}} */
export function pins() {
  const st = storage();
  if (st === null) return {};
  try {
    const doc = JSON.parse(st.getItem(PINS_KEY) ?? "{}");
    return doc !== null && typeof doc === "object" && !Array.isArray(doc) ? doc : {};
  } catch {
    return {};
  }
}

function savePins(doc) {
  const st = storage();
  if (st === null) throw new Error("this browser keeps no local storage here, so nothing can be pinned");
  st.setItem(PINS_KEY, JSON.stringify(doc));
}

/** Pin a log verifier key (`<origin>+<key id>+<key>`) for the origin its name gives. */
export function pinLogKey(vkey) {
  const key = parseLogKey(vkey.trim()); // Ed25519 or ML-DSA-44; NoteError for a malformed key
  const doc = pins();
  Object.defineProperty(doc, key.name, {
    value: { vkey: key.vkey, pinned_at: new Date().toISOString().replace(/\.\d{3}Z$/, "Z") },
    enumerable: true, writable: true, configurable: true,
  });
  savePins(doc);
  return key;
}

export function unpin(origin) {
  const doc = pins();
  delete doc[origin];
  savePins(doc);
}

export function checkpointStore() {
  const st = storage();
  return st === null ? null : new WebStorageStore(st, STATE_KEY);
}

export function forgetCheckpoints() {
  storage()?.removeItem(STATE_KEY);
}

/** Name, key ID and a SHA-256 fingerprint of the public key, for people comparing keys by eye. */
export async function fingerprint(vkey) {
  const key = parseLogKey(vkey);
  const digest = new Uint8Array(await crypto.subtle.digest("SHA-256", key.publicKey));
  return { name: key.name, keyId: key.keyId.toString(16).padStart(8, "0"), sha256: toHex(digest).match(/.{4}/g).join(" ") };
}

let served = null;

/** Every key of the served log: Ed25519 first, then ML-DSA-44 when it dual-signs (vkeys). */
export function servedLogKeys(ledger) {
  return Array.isArray(ledger.vkeys) && ledger.vkeys.length ? ledger.vkeys : [ledger.vkey];
}

/** What this notary publishes: its log (origin, vkey), JWKS, witnesses and quorum. Cached. */
export function servedKeys() {
  served ??= Promise.all([getJson("/v1/ledger"), getJson("/.well-known/jwks.json"), getJson("/v1/witnesses")])
    .then(([ledger, jwks, witnesses]) => ({ ledger, jwks, witnesses }))
    .catch((e) => {
      served = null;
      throw e;
    });
  return served;
}

/** This notary's logs as /v1/ledger lists them (docs/lifecycle.md): well-formed entries only. */
export function listedLogs(ledger) {
  const logs = Array.isArray(ledger.logs) ? ledger.logs : [];
  return logs.filter((l) => l !== null && typeof l === "object" && typeof l.origin === "string"
    && Array.isArray(l.vkeys) && l.vkeys.length > 0 && l.vkeys.every((k) => typeof k === "string"));
}

/** Where this page fetches log `entry`'s checkpoint and proofs: its url's path, on this origin
 * (the page fetches from its own origin only; the notary's public URL may be another name). */
function logPath(entry) {
  try {
    return location.origin + new URL(entry.url).pathname.replace(/\/+$/, "");
  } catch {
    return null;
  }
}

/**
 * The trust for receipts of log `origin` (default: this notary's active log): the verifier's
 * Trust plus a description of each anchor's source, for the page to show. A log this notary
 * lists in /v1/ledger's `logs` (a frozen one) is its own too, under the key listed for it.
 */
export async function trustFor(origin = null) {
  const { ledger, jwks, witnesses } = await servedKeys();
  const logOrigin = origin ?? ledger.origin;
  const pinned = pinFor(logOrigin);
  const own = logOrigin === ledger.origin;
  const listed = own ? null : listedLogs(ledger).find((l) => l.origin === logOrigin) ?? null;
  const servedVkeys = own ? servedLogKeys(ledger) : listed?.vkeys ?? [];
  let logKey = null;
  if (pinned !== null) logKey = { vkey: pinned.vkey, source: "pinned", detail: `pinned in this browser on ${pinned.pinned_at}` };
  else if (own) logKey = { vkey: ledger.vkey, source: "server", detail: "served by this notary at /v1/ledger, not pinned: you are trusting the server that serves this page" };
  else if (listed !== null) {
    logKey = { vkey: listed.vkeys[0], source: "server", detail: `served by this notary in /v1/ledger's log list (a ${listed.state} log), not pinned: you are trusting the server that serves this page` };
  }
  const mismatch = pinned !== null && servedVkeys.length > 0 && !servedVkeys.includes(pinned.vkey);
  const witnessKeys = own ? witnesses.witnesses.map((w) => w.vkey) : [];
  const trust = makeTrust({
    jwks,
    logKeys: logKey === null ? [] : [logKey.vkey],
    witnesses: witnessKeys,
    quorum: own ? witnesses.quorum : 0,
  });
  return {
    trust,
    origin: logOrigin,
    own,
    logKey,
    servedVkey: own ? ledger.vkey : listed?.vkeys[0] ?? null,
    mismatch,
    // Level 5 from this origin: the active log at the usual paths, a listed log under its url.
    logUrl: own ? location.origin : listed === null ? null : logPath(listed),
    jwks: { kids: (jwks.keys ?? []).map((k) => k.kid), detail: "served by this notary at /.well-known/jwks.json" },
    witnesses: {
      list: own ? witnesses.witnesses : [],
      quorum: own ? witnesses.quorum : 0,
      detail: own ? "served by this notary at /v1/witnesses"
        : listed !== null ? "not required: the witnesses at /v1/witnesses cosign the active log" : "none known for a log this notary does not run",
    },
  };
}

/**
 * fetch for the verifier: this origin only. Anything else is refused here, before the browser
 * would block it under the CSP, so the verifier reports it (level 5 skipped) without noise.
 */
export function sameOriginFetch(url, init) {
  const target = new URL(url, location.href);
  if (target.origin !== location.origin) return Promise.reject(new TypeError(`the explorer fetches from its own origin only, not ${target.origin}`));
  return fetch(target.href, init);
}
