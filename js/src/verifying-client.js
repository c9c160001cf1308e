// A client that verifies for you (browser-safe): wrap a client of the official TypeScript MCP
// SDKs (@modelcontextprotocol/sdk 1.x Client, @modelcontextprotocol/client 2.x Client, or
// anything with their callTool(params, ...)) so that every tool result is verified offline
// before the application sees it, as the Python notary.verifier.mcp_client.VerifyingClient does.
//
// Neither SDK has a hook around callTool for clients, so this is a wrapper: a Proxy that forwards
// everything to the client and replaces callTool. For each result it rebuilds the rs-tool-call/1
// record from the call made (params.name and a copy of params.arguments, taken before sending)
// and the result received (its wire JSON), verifies it with verifyCall (the verifier of
// `mcp-notary verify`) under the caller's trust, and keeps a verified call in the evidence store.
//
// onMissing (no notarization block, the server could not notarize, no embedded receipt) and
// onInvalid (a level failed, a malformed block, a receipt already kept for an earlier call) are
// each "raise" (ReceiptCheckError; the result is withheld), "mark" (returned with the finding)
// or "log" (the same, plus a warning naming the tool, receipt id and reason, never arguments or
// results). Every returned result carries _meta["com.rightshold/verification"] =
// {status: "verified"|"missing"|"invalid", reason, id?, levels?}: the client's own finding, not
// part of what was notarized.

import { LEVELS } from "./levels.js";
import { META_KEY, callFromToolResult, verifyCall } from "./verifier.js";
import { VerifierInputError } from "./errors.js";

/** The _meta key of the verifying client's finding on a result (client side only). */
export const VERIFICATION_META_KEY = "com.rightshold/verification";

const ACTIONS = ["raise", "mark", "log"];
const isObject = (v) => v !== null && typeof v === "object" && !Array.isArray(v);

/** A result whose receipt is missing or does not verify, under "raise". */
export class ReceiptCheckError extends Error {
  constructor(tool, status, reason, report, result) {
    super(`the result of tool ${JSON.stringify(tool)} is ${status === "missing" ? "not notarized" : "not valid"}: ${reason}`);
    this.name = "ReceiptCheckError";
    this.tool = tool;
    this.status = status;
    this.reason = reason;
    this.report = report;
    this.result = result;
  }
}

function wire(value) {
  const text = JSON.stringify(value);
  return text === undefined ? value : JSON.parse(text);
}

async function check(options, tool, args, received) {
  const metaAll = received?._meta;
  const block = isObject(metaAll) ? metaAll[META_KEY] : undefined;
  if (!isObject(block)) return ["missing", `the result has no _meta['${META_KEY}'] block`, null];
  if (block.notarized === false) return ["missing", `the server could not notarize it: ${block.reason}`, null];
  if (block.receipt === undefined || block.receipt === null) {
    return ["missing", "the result carries no embedded receipt (the server was told not to embed it), so it cannot be verified offline", null];
  }
  let report;
  try {
    const call = callFromToolResult(received, { tool, arguments: args, server: options.server });
    report = await verifyCall(call, options.trust, { store: options.state });
  } catch (e) {
    if (e instanceof VerifierInputError) return ["invalid", e.message, null];
    throw e;
  }
  const levels = report.verdict.levels;
  if (!report.valid) {
    const level = LEVELS.find((n) => levels[n]?.status === "failed") ?? report.verdict.required.find((n) => levels[n]?.status !== "passed");
    return ["invalid", `${level}: ${levels[level]?.reason ?? "not checked"}`, report];
  }
  const id = report.receipt.id;
  if (options.evidence) {
    if (await options.evidence.has(id)) return ["invalid", `receipt ${id} was already received for an earlier call: the server replayed an old result`, report];
    const saved = { tool, arguments: args ?? {}, result: received };
    if (options.server !== undefined && options.server !== null) saved.server = options.server;
    await options.evidence.save(id, saved);
  }
  return ["verified", `receipt ${id} verified`, report];
}

/**
 * `client` with every callTool result verified. Options: `trust` (makeTrust/loadTrust: pin the
 * keys), `onMissing` and `onInvalid` ("raise" default, "mark", "log"), `evidence` (an
 * EvidenceStore of mcp-notary/node, or any {has(id), save(id, call)}; null keeps nothing),
 * `server` (the server name receipts must carry), `state` (a checkpoint store, read only),
 * `logger` (warnings of "log"; default console).
 */
export function verifyingClient(client, { trust, onMissing = "raise", onInvalid = "raise", evidence = null, server = null, state = null, logger = console } = {}) {
  if (!client || typeof client.callTool !== "function") throw new TypeError("client must be an MCP client (with callTool)");
  if (!trust) throw new TypeError("trust is required (makeTrust or loadTrust)");
  for (const [name, value] of [["onMissing", onMissing], ["onInvalid", onInvalid]]) {
    if (!ACTIONS.includes(value)) throw new TypeError(`${name} must be one of ${ACTIONS.join(", ")}, not ${JSON.stringify(value)}`);
  }
  const readOnly = state === null ? null : { get: (key) => state.get(key), set() {} };
  const options = { trust, evidence, server, state: readOnly };
  async function callTool(params, ...rest) {
    const tool = params?.name;
    const args = params?.arguments === undefined ? undefined : structuredClone(params.arguments);
    const result = await client.callTool(params, ...rest);
    const [status, reason, report] = await check(options, tool, args, wire(result));
    const finding = { status, reason };
    if (report !== null) {
      if (isObject(report.receipt) && typeof report.receipt.id === "string") finding.id = report.receipt.id;
      finding.levels = Object.fromEntries(LEVELS.filter((n) => n in report.verdict.levels).map((n) => [n, report.verdict.levels[n].status]));
    }
    if (status !== "verified") {
      const action = status === "missing" ? onMissing : onInvalid;
      if (action === "raise") throw new ReceiptCheckError(tool, status, reason, report, result);
      if (action === "log") logger?.warn(`tool result ${JSON.stringify(tool)}: ${status} (receipt ${finding.id ?? "none"}): ${reason}`);
    }
    return { ...result, _meta: { ...(isObject(result?._meta) ? result._meta : {}), [VERIFICATION_META_KEY]: finding } };
  }
  return new Proxy(client, {
    get(target, prop, receiver) {
      if (prop === "callTool") return callTool;
      const value = Reflect.get(target, prop, target);
      return typeof value === "function" ? value.bind(target) : value;
    },
  });
}
