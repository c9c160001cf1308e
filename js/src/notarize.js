// Notarize the final tool results of a TypeScript MCP server (@modelcontextprotocol/sdk 1.x,
// @modelcontextprotocol/server 2.x): the same rs-tool-call/1 record, the same
// _meta["com.rightshold/tool-call"] block and the same unreachable-notary policies as the
// Python SDK (notary.sdk.mcp).
//
// notarizeServer(server, notarizer) wraps the server's stored `tools/call` handler, the
// outermost one (after the SDK validated and shaped the result), and keeps wrapping whatever
// handler is registered later, so tools may be added before or after the call. The result is
// taken in its wire form (a JSON round trip: what the client will parse), `isError` is made
// explicit (a client's parsed result cannot tell absent from false), hashed with a fresh salt,
// notarized, and returned with the block in _meta, every other _meta key kept.
//
// A client without an API key is refused when the Notarizer is built, so a misconfigured server
// fails at start-up, not on its first call.
//
// When notarization fails (notary unreachable, key refused or revoked, quota spent, any other 4xx
// or 5xx, a record that cannot be hashed faithfully, even a bug in the notarizer) the tool has
// already run. onUnreachable "fail" (default) withholds the result and answers with a JSON-RPC
// error (-32603) whose data carries
// {spec, notarized: false, reason, tool_executed: true}; "mark" returns the result with
// _meta block {spec, notarized: false, reason}. Never silently.

import { CanonicalizationError, NotaryClientError, RecordError } from "./errors.js";
import { MISSING_API_KEY } from "./client.js";
import { VERIFY_PATH, receiptPath } from "./paths.js";
import { SPEC, hashedResult, isFinal, makeRecord, newSalt, recordBytes } from "./records.js";
import { toHex } from "./bytes.js";
import { sha256 } from "@noble/hashes/sha2.js";
import { META_KEY } from "./verifier.js";

export const INTERNAL_ERROR = -32603;
const INSTALLED = Symbol.for("mcp-notary.notarizer");

/** A final result could not be notarized under onUnreachable "fail": a JSON-RPC error. */
export class NotarizationFailedError extends Error {
  constructor(tool, reason) {
    super(`tool ${JSON.stringify(tool)} ran but its result could not be notarized (${reason}); the result is withheld. Its side effects, if any, have happened: do not blindly retry a non-idempotent call.`);
    this.name = "NotarizationFailedError";
    this.code = INTERNAL_ERROR;
    this.data = { [META_KEY]: { spec: SPEC, notarized: false, reason, tool_executed: true } };
    this.tool = tool;
    this.reason = reason;
  }
}

const expected = (e) => e instanceof NotaryClientError || e instanceof RecordError || e instanceof CanonicalizationError;

/** The reason a client is told; an unexpected error is named, its text kept in the log. */
function describe(e) {
  if (e instanceof NotaryClientError) return e.message;
  if (e instanceof RecordError || e instanceof CanonicalizationError) return `the call record cannot be hashed: ${e.message}`;
  return `unexpected ${e?.name ?? "error"} in the notarizer (see the server log)`;
}

function wireForm(result) {
  try {
    const text = JSON.stringify(result);
    if (text === undefined) throw new TypeError("the result is not JSON");
    return JSON.parse(text);
  } catch (e) {
    throw new RecordError("$.result", `cannot be serialized as JSON: ${e.message}`);
  }
}

/**
 * Notarizes the final tool results of one MCP server through one notary.
 * Options: `onUnreachable` ("fail" | "mark"), `embedReceipt` (true: the receipt and its proof
 * ride in _meta so the result verifies offline), `publicUrl` (the notary's address as verifiers
 * see it, default the client's), `logger` (warnings; default console).
 */
export class Notarizer {
  constructor(client, serverName, { onUnreachable = "fail", embedReceipt = true, publicUrl = null, logger = console } = {}) {
    if (onUnreachable !== "fail" && onUnreachable !== "mark") throw new TypeError(`onUnreachable must be 'fail' or 'mark', not ${JSON.stringify(onUnreachable)}`);
    if (typeof serverName !== "string" || !serverName) throw new TypeError("serverName must be a non-empty string");
    if (!client || typeof client.notarize !== "function") throw new TypeError("client must be a NotaryClient");
    if (client.hasApiKey === false) throw new TypeError(MISSING_API_KEY);
    this.client = client;
    this.serverName = serverName;
    this.onUnreachable = onUnreachable;
    this.embedReceipt = embedReceipt;
    this.publicUrl = (publicUrl ?? client.baseUrl).replace(/\/+$/, "");
    this.logger = logger;
  }

  /**
   * Notarize a result (any JSON-able CallToolResult); a new object, the input untouched.
   * Non-final results (resultType other than "complete") come back unchanged. `args` are the
   * call's arguments exactly as received (undefined/null: none, recorded as {}). Throws
   * NotarizationFailedError under "fail".
   */
  async notarizeResult(tool, args, result, { traceContext = null } = {}) {
    if (result === null || typeof result !== "object" || !isFinal(result)) return result;
    let wire;
    let record;
    let receipt;
    try {
      wire = wireForm(result);
      if (wire.isError === undefined || wire.isError === null) wire.isError = false;
      record = makeRecord({ server: this.serverName, tool, arguments: args === undefined || args === null ? {} : args, result: wire, salt: newSalt() });
      const digest = toHex(sha256(recordBytes(record)));
      receipt = await this.client.notarize(this.serverName, tool, digest, { traceContext });
    } catch (e) {
      // Whatever went wrong, the tool has run: the client is told so in the documented shape,
      // never with a bare -32603; only an error nobody expected puts its stack in the log.
      return this.#failed(tool, wire ?? {}, describe(e), expected(e) ? null : e);
    }
    const block = {
      spec: SPEC, id: receipt.id, call_sha256: receipt.call_sha256, salt: record.salt,
      receipt_url: this.publicUrl + receiptPath(receipt.id), verify_url: this.publicUrl + VERIFY_PATH,
    };
    if (this.embedReceipt) block.receipt = receipt;
    return this.#withBlock(tool, wire, block);
  }

  #withBlock(tool, wire, block) {
    const existing = wire._meta;
    const isObj = existing !== null && typeof existing === "object" && !Array.isArray(existing);
    if (existing !== undefined && !isObj) this.logger?.warn?.(`[mcp-notary] tool ${JSON.stringify(tool)} returned a non-object _meta; it is replaced`);
    const meta = isObj ? { ...existing } : {};
    if (Object.prototype.hasOwnProperty.call(meta, META_KEY)) {
      this.logger?.warn?.(`[mcp-notary] tool ${JSON.stringify(tool)} result already had ${META_KEY} in _meta; it is replaced`);
    }
    meta[META_KEY] = block;
    return { ...wire, _meta: meta };
  }

  #failed(tool, wire, reason, unexpected = null) {
    const line = `[mcp-notary] could not notarize a result of tool ${JSON.stringify(tool)} (${reason}); policy ${JSON.stringify(this.onUnreachable)}`;
    this.logger?.warn?.(unexpected === null ? line : `${line}\n${unexpected?.stack ?? unexpected}`);
    if (this.onUnreachable === "fail") throw new NotarizationFailedError(tool, reason);
    return this.#withBlock(tool, wire, { spec: SPEC, notarized: false, reason });
  }

  /** A `tools/call` handler wrapper: (request, extra) => notarized result. */
  wrapHandler(handler) {
    const notarizer = this;
    const wrapped = async function notarizedToolsCall(request, extra) {
      const params = request?.params;
      if (params === null || typeof params !== "object" || params.task !== undefined) return handler(request, extra);
      const tool = params.name;
      let args = params.arguments;
      try {
        args = args === undefined ? undefined : structuredClone(args);
      } catch {
        args = JSON.parse(JSON.stringify(args));
      }
      const result = await handler(request, extra);
      if (typeof tool !== "string" || result === null || result === undefined) return result;
      // The caller's trace context rides in _meta (MCP 2026-07-28): the notary request carries it.
      return notarizer.notarizeResult(tool, args, result, { traceContext: params._meta });
    };
    wrapped[INSTALLED] = true;
    return wrapped;
  }
}

function protocolOf(server) {
  for (const candidate of [server, server?.server]) {
    if (candidate && candidate._requestHandlers instanceof Map) return candidate;
  }
  throw new TypeError("notarizeServer needs an McpServer or Server of @modelcontextprotocol/sdk 1.x or @modelcontextprotocol/server 2.x (no request handler table found)");
}

/**
 * The settings of the receipt extension `com.rightshold/tool-call` that a notarized server
 * declares: results carry rs-tool-call/1 receipts, and where to check them. Discovery, not
 * trust: verifiers never take keys from it unless their user says so.
 */
export function receiptExtension(notaryUrl, logKeys = []) {
  const base = String(notaryUrl).replace(/\/+$/, "");
  return { spec: SPEC, metaKey: META_KEY, notary: base, jwks: `${base}/.well-known/jwks.json`, logKeys: [...logKeys] };
}

/**
 * Notarize every final `tools/call` result of `server` (an McpServer or a low-level Server, SDK
 * 1.x or 2.x), whether its tools are registered before or after this call; returns `server`.
 * Installing a second notarizer is refused: a result carries one notarization block.
 * Before the server connects, it also declares the receipt extension (`receiptExtension`, with
 * `logKeys` when given) under `capabilities.extensions` (2026-07-28) and
 * `capabilities.experimental` (2025-era clients).
 */
export function notarizeServer(server, notarizer, { logKeys = [] } = {}) {
  if (!(notarizer instanceof Notarizer)) throw new TypeError("notarizeServer needs a Notarizer");
  const protocol = protocolOf(server);
  const handlers = protocol._requestHandlers;
  if (handlers[INSTALLED]) throw new Error("this server already has a Notarizer installed");
  const set = handlers.set.bind(handlers);
  const wrapIfCall = (method, fn) => (method === "tools/call" && typeof fn === "function" && !fn[INSTALLED] ? notarizer.wrapHandler(fn) : fn);
  Object.defineProperty(handlers, "set", { value: (method, fn) => set(method, wrapIfCall(method, fn)), configurable: true, writable: true });
  Object.defineProperty(handlers, INSTALLED, { value: notarizer });
  if (handlers.has("tools/call")) set("tools/call", wrapIfCall("tools/call", handlers.get("tools/call")));
  if (typeof protocol.registerCapabilities === "function" && !protocol.transport) {
    const settings = receiptExtension(notarizer.publicUrl, logKeys);
    protocol.registerCapabilities({ experimental: { [META_KEY]: settings }, extensions: { [META_KEY]: settings } });
  }
  return server;
}

/** The _meta["com.rightshold/tool-call"] block of a received result, or null. */
export function notarizationOf(result) {
  const meta = result?._meta;
  if (meta === null || typeof meta !== "object") return null;
  const block = meta[META_KEY];
  return block !== null && typeof block === "object" && !Array.isArray(block) ? block : null;
}

/**
 * Rebuild the call record from what a client sent and received: {tool, arguments, result, salt,
 * server?} for verifyReceipt. Throws TypeError when the result carries no usable block.
 */
export function recordFor(tool, args, result, { server = null } = {}) {
  const block = notarizationOf(result);
  if (block === null) throw new TypeError(`the result has no ${META_KEY} block in _meta`);
  if (block.notarized === false) throw new TypeError(`the result was not notarized: ${block.reason}`);
  if (typeof block.salt !== "string") throw new TypeError(`the ${META_KEY} block has no salt`);
  const record = { tool, arguments: args ?? {}, result: hashedResult(result), salt: block.salt };
  if (server !== null) record.server = server;
  return record;
}
