// A client for the notary's HTTP API (POST /v1/tool-calls and the read endpoints), on fetch.
//
// Retries are safe: issuing a receipt is keyed by call_sha256, so sending a digest again after a
// lost answer returns the receipt that exists (and is not counted twice). Connection errors,
// timeouts and 5xx answers are retried with exponential back-off and jitter; a 4xx never is,
// being the notary's considered answer.

import { NotaryHTTPError, NotaryResponseError, NotaryUnavailableError, ReceiptFormatError } from "./errors.js";
import { validateReceiptShape } from "./receipt.js";
import { TOOL_CALLS_PATH, VERIFY_PATH, receiptPath } from "./paths.js";
import { clientSpan } from "#tracing";

export { NotaryHTTPError, NotaryResponseError, NotaryUnavailableError };

/** Longest single wait between two attempts, in milliseconds (also caps Retry-After). */
export const MAX_BACKOFF_MS = 2000;
/** Largest answer read from the notary; receipts with their proofs are a few kilobytes. */
export const MAX_ANSWER_BYTES = 4 << 20;
const HEX64 = /^[0-9a-f]{64}$/;
// Whitespace and control characters can never be part of a key (a trailing newline read from a
// file is the usual culprit) and must never reach a header.
const NOT_IN_A_KEY = /[\x00-\x20\x7f-\x9f\s]/;

/** Why a NotaryClient without a key cannot notarize (the Python SDK says the same). */
export const MISSING_API_KEY = "the notary client has no API key, so no tool result could be notarized: pass apiKey to NotaryClient (a server usually reads it from the NOTARY_API_KEY environment variable; create one with `notary apikey create`)";

class Retryable extends Error {
  constructor(description, { status = null, retryAfter = null, cause } = {}) {
    super(description, cause === undefined ? undefined : { cause });
    this.status = status;
    this.retryAfter = retryAfter;
  }
}

function retryAfterMs(headers) {
  const value = headers.get("retry-after");
  if (value === null) return null;
  const seconds = Number(value);
  return Number.isFinite(seconds) && seconds >= 0 ? seconds * 1000 : null;
}

/**
 * A failed exchange in the words the Python client uses: "connection failed (ECONNREFUSED)" when
 * the system error is known (what an operator looks up), else the error as fetch names it.
 */
function connectionFailure(e) {
  const code = e?.cause?.code ?? e?.code;
  if (typeof code === "string" && /^E[A-Z0-9]+$/.test(code)) return `connection failed (${code})`;
  return `${e?.name ?? "Error"}: ${e?.cause?.code ?? e?.cause?.message ?? e?.message ?? e}`;
}

function errorBody(status, statusText, text) {
  try {
    const err = JSON.parse(text).error;
    if (typeof err.code === "string" && typeof err.message === "string") return [err.code, err.message];
  } catch {
    // not the notary's JSON error shape
  }
  return [`http_${status}`, text.slice(0, 200).trim() || statusText || "no message"];
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

class TooLarge extends Error {}

async function readText(resp) {
  const length = Number(resp.headers.get("content-length"));
  if (length > MAX_ANSWER_BYTES) throw new TooLarge();
  if (!resp.body) return "";
  const reader = resp.body.getReader();
  const decoder = new TextDecoder();
  let total = 0;
  let text = "";
  for (;;) {
    const { done, value } = await reader.read();
    if (done) return text + decoder.decode();
    total += value.length;
    if (total > MAX_ANSWER_BYTES) {
      reader.cancel().catch(() => {});
      throw new TooLarge();
    }
    text += decoder.decode(value, { stream: true });
  }
}

/**
 * `new NotaryClient(url, apiKey, {timeoutMs, retries, backoffMs, fetch})`. `apiKey` is needed
 * only by notarize(); a Notarizer refuses a client without one when it is built, so a server
 * missing its key fails at start-up rather than on its first call. At most `retries + 1`
 * requests are made per call; the wait before retry n is backoffMs·2^n with equal jitter, capped
 * at MAX_BACKOFF_MS, never shorter than a 5xx's Retry-After (capped too). The API key is never part of any message or printed form.
 */
export class NotaryClient {
  #apiKey;
  #fetch;

  constructor(baseUrl, apiKey = null, { timeoutMs = 5000, retries = 3, backoffMs = 50, fetch = globalThis.fetch } = {}) {
    if (typeof baseUrl !== "string" || !/^https?:\/\//.test(baseUrl)) throw new TypeError(`baseUrl must be an http(s) URL, got ${JSON.stringify(baseUrl)}`);
    if (!(timeoutMs > 0)) throw new RangeError("timeoutMs must be positive");
    if (!Number.isInteger(retries) || retries < 0) throw new RangeError("retries must be an integer >= 0");
    if (!(backoffMs >= 0)) throw new RangeError("backoffMs must be >= 0");
    if (typeof fetch !== "function") throw new TypeError("no fetch function available; pass one in the options");
    if (apiKey !== null && apiKey !== undefined && (typeof apiKey !== "string" || NOT_IN_A_KEY.test(apiKey))) {
      throw new TypeError("apiKey must be a string without whitespace or control characters (the key is not shown)");
    }
    this.baseUrl = baseUrl.replace(/\/+$/, "");
    this.#apiKey = apiKey;
    this.#fetch = fetch;
    this.timeoutMs = timeoutMs;
    this.retries = retries;
    this.backoffMs = backoffMs;
  }

  /** Whether this client can notarize (an empty key counts as none). */
  get hasApiKey() {
    return Boolean(this.#apiKey);
  }

  toString() {
    return `NotaryClient(${this.baseUrl}, retries=${this.retries}, timeoutMs=${this.timeoutMs})`;
  }

  [Symbol.for("nodejs.util.inspect.custom")]() {
    return this.toString();
  }

  toJSON() {
    return { baseUrl: this.baseUrl, retries: this.retries, timeoutMs: this.timeoutMs };
  }

  /** Where anyone can fetch this receipt with a proof to the latest checkpoint. */
  receiptUrl(id) {
    return this.baseUrl + receiptPath(id);
  }

  /** The online verification endpoint (POST {id, record}, no auth). */
  get verifyUrl() {
    return this.baseUrl + VERIFY_PATH;
  }

  /**
   * Notarize one call digest: the receipt with its top-level `proof`, checked to be for this
   * call (same server, tool and digest) before it is returned.
   */
  async notarize(server, tool, callSha256, { traceContext = null } = {}) {
    if (!this.#apiKey) throw new TypeError(MISSING_API_KEY);
    if (typeof callSha256 !== "string" || !HEX64.test(callSha256)) throw new TypeError("callSha256 must be 64 lower-case hex characters");
    const body = { server, tool, call_sha256: callSha256 };
    // The caller's W3C trace context (e.g. from the MCP request's _meta): the notary continues
    // it, under our client span when the application traces (tracing.js).
    const attributes = { "http.request.method": "POST", "url.full": this.baseUrl + TOOL_CALLS_PATH, "gen_ai.tool.name": tool };
    return clientSpan(`POST ${TOOL_CALLS_PATH}`, attributes, traceContext, async (headers, span) => {
      const receipt = this.#checkedReceipt(body, await this.request("POST", TOOL_CALLS_PATH, { body, auth: true, headers }));
      span?.setAttributes({ "notary.receipt.id": receipt.id, "notary.log.origin": receipt.ledger.origin, "notary.log.index": receipt.ledger.index });
      return receipt;
    });
  }

  #checkedReceipt(body, receipt) {
    for (const key of ["server", "tool", "call_sha256"]) {
      if (receipt[key] !== body[key]) {
        throw new NotaryResponseError(`the notary returned a receipt whose ${key} is ${JSON.stringify(receipt[key])}, not ${JSON.stringify(body[key])}`);
      }
    }
    if (typeof receipt.id !== "string" || typeof receipt.proof !== "string") throw new NotaryResponseError("the notary's receipt lacks its id or its proof");
    try {
      validateReceiptShape(receipt);
    } catch (e) {
      if (e instanceof ReceiptFormatError) throw new NotaryResponseError(`the notary's receipt is malformed: ${e.message}`);
      throw e;
    }
    return receipt;
  }

  /** The receipt `id` with a proof to the notary's latest checkpoint. */
  getReceipt(id) {
    return this.request("GET", receiptPath(id));
  }

  /** The receipt issued for a digest (NotaryHTTPError 404 when none). */
  lookup(callSha256) {
    return this.request("GET", `${TOOL_CALLS_PATH}?call_sha256=${encodeURIComponent(callSha256)}`);
  }

  /** Online verification by the notary (sends the record to it: prefer offline verification). */
  verify(id, record) {
    return this.request("POST", VERIFY_PATH, { body: { id, record } });
  }

  /** The receipt keys (/.well-known/jwks.json). */
  jwks() {
    return this.request("GET", "/.well-known/jwks.json");
  }

  /** The log's description: {origin, vkey, size, ...}. */
  ledger() {
    return this.request("GET", "/v1/ledger");
  }

  /** One API request with the retry policy; resolves to the JSON object answered. */
  async request(method, path, { body = undefined, auth = false, headers: extra = {} } = {}) {
    const url = this.baseUrl + path;
    const headers = { ...extra, accept: "application/json" };
    if (auth && this.#apiKey) headers.authorization = `Bearer ${this.#apiKey}`;
    let data;
    if (body !== undefined) {
      data = JSON.stringify(body);
      headers["content-type"] = "application/json";
    }
    for (let attempt = 1; ; attempt++) {
      try {
        return await this.#attempt(method, url, headers, data);
      } catch (e) {
        if (!(e instanceof Retryable)) throw e;
        if (attempt > this.retries) {
          throw new NotaryUnavailableError(`notary at ${this.baseUrl} unavailable after ${attempt} attempt(s): ${e.message}`, { attempts: attempt, status: e.status, cause: e.cause });
        }
        await sleep(this.#delay(attempt - 1, e.retryAfter));
      }
    }
  }

  #delay(retry, retryAfter) {
    const base = Math.min(this.backoffMs * 2 ** retry, MAX_BACKOFF_MS);
    let delay = base / 2 + Math.random() * (base / 2);
    if (retryAfter !== null) delay = Math.max(delay, Math.min(retryAfter, MAX_BACKOFF_MS));
    return delay;
  }

  async #attempt(method, url, headers, data) {
    let resp;
    let text;
    try {
      resp = await this.#fetch(url, { method, headers, body: data, redirect: "manual", signal: AbortSignal.timeout(this.timeoutMs) });
      text = await readText(resp);
    } catch (e) {
      if (e instanceof TooLarge) throw new NotaryResponseError(`the notary's answer from ${url} is larger than ${MAX_ANSWER_BYTES} bytes`);
      if (e?.name === "TimeoutError" || e?.name === "AbortError") throw new Retryable(`timed out after ${this.timeoutMs / 1000} s`, { cause: e });
      throw new Retryable(connectionFailure(e), { cause: e });
    }
    const status = resp.status;
    if (status >= 500) {
      const [code, message] = errorBody(status, resp.statusText, text);
      throw new Retryable(`HTTP ${status} ${code}: ${message}`, { status, retryAfter: retryAfterMs(resp.headers) });
    }
    if (status >= 400) {
      const [code, message] = errorBody(status, resp.statusText, text);
      throw new NotaryHTTPError(status, code, message, { retryAfter: retryAfterMs(resp.headers) });
    }
    if (status < 200 || status >= 300) throw new NotaryResponseError(`unexpected HTTP ${status} from ${url}`);
    let doc;
    try {
      doc = JSON.parse(text);
    } catch (e) {
      throw new NotaryResponseError(`the notary's answer from ${url} is not JSON: ${e.message}`);
    }
    if (doc === null || typeof doc !== "object" || Array.isArray(doc)) throw new NotaryResponseError(`the notary's answer from ${url} is not a JSON object`);
    return doc;
  }
}
