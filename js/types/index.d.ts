// Types of `mcp-notary`: the verifier (see verify.d.ts) plus notarization for MCP servers.
export * from "./verify.js";
import type { CallRecordJson, CheckpointStore, JsonObject, LevelName, NotarizationBlock, Receipt, Report, SavedToolCall, Trust } from "./verify.js";

export interface NotaryClientOptions {
  /** Per attempt (default 5000). */
  timeoutMs?: number;
  /** Additional attempts after the first on connection errors, timeouts and 5xx (default 3). */
  retries?: number;
  /** First back-off, doubled per retry, with jitter, capped at 2 s (default 50). */
  backoffMs?: number;
  fetch?: typeof globalThis.fetch;
}

/** A client for one notary's HTTP API. The API key is never printed. */
export class NotaryClient {
  constructor(baseUrl: string, apiKey?: string | null, options?: NotaryClientOptions);
  readonly baseUrl: string;
  /** Whether this client can notarize (a Notarizer refuses a client without a key). */
  readonly hasApiKey: boolean;
  readonly timeoutMs: number;
  readonly retries: number;
  readonly backoffMs: number;
  readonly verifyUrl: string;
  receiptUrl(id: string): string;
  /** POST /v1/tool-calls: the receipt (with its proof) for this digest. */
  notarize(server: string, tool: string, callSha256: string, options?: TraceOptions): Promise<Receipt & { proof: string }>;
  getReceipt(id: string): Promise<Receipt>;
  lookup(callSha256: string): Promise<Receipt>;
  verify(id: string, record: CallRecordJson | JsonObject): Promise<JsonObject>;
  jwks(): Promise<JsonObject>;
  ledger(): Promise<JsonObject & { origin: string; vkey: string; size: number }>;
  request(method: string, path: string, options?: { body?: unknown; auth?: boolean; headers?: Record<string, string> }): Promise<JsonObject>;
}

/** W3C trace context headers, e.g. taken from an MCP request's `_meta`. */
export interface TraceHeaders {
  traceparent: string;
  tracestate?: string;
  baggage?: string;
}

export interface TraceOptions {
  /** The caller's W3C trace context (an MCP `_meta`, or headers): sent to the notary, whose spans join that trace. */
  traceContext?: { traceparent?: unknown; tracestate?: unknown; baggage?: unknown } | null;
}

/** Whether `value` is a W3C traceparent that can be continued. */
export function isTraceparent(value: unknown): value is string;
/** The valid trace context headers in `carrier` (e.g. `_meta`), or null without a valid traceparent. */
export function traceHeaders(carrier: unknown): TraceHeaders | null;

export interface NotarizerOptions {
  /** "fail" (default): withhold the result with a JSON-RPC error; "mark": return it marked. */
  onUnreachable?: "fail" | "mark";
  /** Put the full receipt and its proof in _meta (default true). */
  embedReceipt?: boolean;
  /** The notary's URL as verifiers see it in receipt_url/verify_url (default the client's). */
  publicUrl?: string | null;
  /** Where warnings go (default console; null: nowhere). */
  logger?: { warn(message: string): void } | null;
}

/** Notarizes the final tool results of one MCP server through one notary. */
export class Notarizer {
  /** Throws a TypeError naming `apiKey` when `client` has no API key. */
  constructor(client: NotaryClient, serverName: string, options?: NotarizerOptions);
  readonly client: NotaryClient;
  readonly serverName: string;
  readonly onUnreachable: "fail" | "mark";
  readonly embedReceipt: boolean;
  readonly publicUrl: string;
  /** A copy of `result` with the notarization block in _meta (non-final results unchanged). */
  notarizeResult<T extends object>(tool: string, args: JsonObject | undefined | null, result: T, options?: TraceOptions): Promise<T & { _meta: Record<string, unknown> }>;
  wrapHandler<H extends (request: any, extra: any) => unknown>(handler: H): H;
}

/** The JSON-RPC error (code -32603) a tool call answers with when onUnreachable is "fail". */
export class NotarizationFailedError extends Error {
  readonly code: -32603;
  readonly data: { "com.rightshold/tool-call": { spec: "rs-tool-call/1"; notarized: false; reason: string; tool_executed: true } };
  readonly tool: string;
  readonly reason: string;
}

/**
 * Notarize every final tools/call result of an McpServer or low-level Server of
 * @modelcontextprotocol/sdk 1.x or @modelcontextprotocol/server 2.x; returns the server.
 */
export function notarizeServer<S extends object>(server: S, notarizer: Notarizer, options?: { logKeys?: string[] }): S;
/** The settings of the receipt extension `com.rightshold/tool-call` (discovery, not trust). */
export function receiptExtension(notaryUrl: string, logKeys?: string[]): { spec: string; metaKey: string; notary: string; jwks: string; logKeys: string[] };

/** The notarization block of a received result, or null. */
export function notarizationOf(result: unknown): NotarizationBlock | { spec: string; notarized: false; reason: string } | null;

/** The call record a client rebuilds from what it sent and received (for verifyReceipt). */
export function recordFor(tool: string, args: JsonObject | undefined | null, result: JsonObject | object, options?: { server?: string | null }): CallRecordJson;

/** The _meta key of a verifying client's finding on a result (client side only). */
export const VERIFICATION_META_KEY: "com.rightshold/verification";

/** What a verifying client found for one result: in _meta[VERIFICATION_META_KEY]. */
export interface VerificationFinding {
  status: "verified" | "missing" | "invalid";
  reason: string;
  /** The receipt id, when a receipt was checked. */
  id?: string;
  levels?: Partial<Record<LevelName, "passed" | "failed" | "skipped">>;
}

/** Where a verifying client keeps verified calls (mcp-notary/node's EvidenceStore is one). */
export interface EvidenceSink {
  has(receiptId: string): boolean | Promise<boolean>;
  save(receiptId: string, call: SavedToolCall): unknown;
}

export interface VerifyingClientOptions {
  /** The keys to verify under (makeTrust or loadTrust): pin them. */
  trust: Trust;
  /** A result without a receipt: "raise" (default, ReceiptCheckError), "mark" or "log". */
  onMissing?: "raise" | "mark" | "log";
  /** A receipt that does not verify (or a replayed one): "raise" (default), "mark" or "log". */
  onInvalid?: "raise" | "mark" | "log";
  evidence?: EvidenceSink | null;
  /** The server name the receipts must carry (default: the receipt's). */
  server?: string | null;
  /** A checkpoint store, read (never written) for level 5. */
  state?: CheckpointStore | null;
  logger?: { warn(message: string): void } | null;
}

/** A result whose receipt is missing or does not verify, under "raise" (the result is withheld). */
export class ReceiptCheckError extends Error {
  readonly tool: string;
  readonly status: "missing" | "invalid";
  readonly reason: string;
  readonly report: Report | null;
  readonly result: unknown;
}

/**
 * `client` (an @modelcontextprotocol/sdk 1.x or @modelcontextprotocol/client 2.x Client) with
 * every callTool result verified offline before it is returned, its finding in
 * _meta["com.rightshold/verification"].
 */
export function verifyingClient<C extends { callTool(params: { name: string; arguments?: Record<string, unknown> }, ...rest: any[]): Promise<unknown> }>(client: C, options: VerifyingClientOptions): C;

export const BUNDLE_FORMAT: "mcp-notary-evidence/1";
/** Saved calls as an evidence bundle (JSON Lines behind a header line). */
export function bundleText(calls: SavedToolCall[]): string;
/** The entries of a bundle, or null when the bytes are not one. */
export function parseBundle(bytes: string | Uint8Array, name: string): EvidenceEntry[] | null;
export interface EvidenceEntry {
  source: string;
  doc?: unknown;
  error?: string;
}
