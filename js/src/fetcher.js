// The online checks' one need: GET a URL's bytes, with a timeout, a size cap, no redirects,
// http(s) only. Built on the platform's fetch (Node 20+, browsers); nothing else is used.

import { FetchError, VerifierInputError } from "./errors.js";
import { parseJson } from "./json.js";
import { fromUtf8 } from "./bytes.js";

export const MAX_RESPONSE_BYTES = 4 << 20;
/** Nesting bound of a JSON answer (receipts, proofs, keys are 2 to 4 levels): Python's
 * ledger.client.http MAX_JSON_DEPTH, so a hostile server's answer gets one verdict in both. */
export const MAX_ANSWER_DEPTH = 64;

/** Split an absolute URL as Python's urlsplit does: {scheme (lower case), netloc, path}, or null. */
export function splitUrl(url) {
  const m = /^([A-Za-z][A-Za-z0-9+.-]*):(?:\/\/([^/?#]*))?([^?#]*)/.exec(url);
  if (m === null) return null;
  return { scheme: m[1].toLowerCase(), netloc: m[2] ?? "", path: m[3] };
}

/** Throw VerifierInputError unless `url` is an http(s) URL with a host. */
export function checkUrl(url) {
  const parts = typeof url === "string" ? splitUrl(url) : null;
  if (parts === null || !["http", "https"].includes(parts.scheme) || !parts.netloc) {
    throw new VerifierInputError(`${JSON.stringify(url)} is not an http(s) URL`);
  }
}

function errorText(body) {
  try {
    const doc = JSON.parse(fromUtf8(body));
    if (typeof doc?.error?.message === "string") return doc.error.message;
  } catch {
    // not a JSON error body
  }
  return new TextDecoder().decode(body.subarray(0, 200)).trim();
}

async function readCapped(resp, url, cap) {
  if (!resp.body) return new Uint8Array(0);
  const reader = resp.body.getReader();
  const chunks = [];
  let total = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    total += value.length;
    if (total > cap) {
      reader.cancel().catch(() => {});
      throw new FetchError(url, "the answer is too large", { status: resp.status, malformed: true });
    }
    chunks.push(value);
  }
  const out = new Uint8Array(total);
  let off = 0;
  for (const c of chunks) { out.set(c, off); off += c.length; }
  return out;
}

/**
 * A fetcher `{getBytes(url)}` over `fetch` (default: the global one) with a per-request
 * timeout. Throws FetchError (with `status` and `refused`) for anything but a 200 answer.
 */
export function createFetcher({ fetch = globalThis.fetch, timeoutMs = 10000, maxBytes = MAX_RESPONSE_BYTES } = {}) {
  if (typeof fetch !== "function") throw new VerifierInputError("no fetch function: pass one to go online");
  return {
    async getBytes(url) {
      checkUrl(url);
      let resp;
      try {
        resp = await fetch(url, { redirect: "manual", signal: AbortSignal.timeout(timeoutMs), headers: { accept: "application/json, text/plain, */*" } });
      } catch (e) {
        throw new FetchError(url, `${e?.name ?? "Error"}: ${e?.cause?.message ?? e?.message ?? e}`);
      }
      let body;
      try {
        body = await readCapped(resp, url, maxBytes);
      } catch (e) {
        if (e instanceof FetchError) throw e;
        throw new FetchError(url, `${e?.name ?? "Error"}: ${e?.message ?? e}`);
      }
      if (resp.type === "opaqueredirect") throw new FetchError(url, "a redirect (not followed)", { status: 302 });
      if (resp.status !== 200) throw new FetchError(url, `HTTP ${resp.status}: ${errorText(body)}`, { status: resp.status });
      return body;
    },
  };
}

/** GET and parse JSON (bounded); a body that is not JSON is a malformed answer. */
export async function getJson(fetcher, url) {
  const data = await fetcher.getBytes(url);
  try {
    return parseJson(data, { maxDepth: MAX_ANSWER_DEPTH });
  } catch (e) {
    throw new FetchError(url, `the answer is not JSON: ${e.message}`, { malformed: true });
  }
}
