// The evidence bundle (browser-safe): the saved calls a verifying client kept, in one JSON Lines
// file, as the Python notary.verifier.evidence writes and reads it: a header line
// {"format": "mcp-notary-evidence/1", "calls": N}, then one saved call {tool, arguments, result,
// server?} per line. The header tells a bundle from a saved-call file; its count makes a
// truncated bundle an error rather than a shorter history.

import { JsonError, VerifierInputError } from "./errors.js";
import { parseJson } from "./json.js";

export const BUNDLE_FORMAT = "mcp-notary-evidence/1";

/** Saved calls as a bundle (the header line, then one call per line). */
export function bundleText(calls) {
  const lines = calls.map((c) => JSON.stringify(c));
  return [JSON.stringify({ format: BUNDLE_FORMAT, calls: lines.length }), ...lines].map((l) => `${l}\n`).join("");
}

const NEWLINE = 0x0a;

function lines(bytes) {
  const out = [];
  let start = 0;
  for (let i = 0; i <= bytes.length; i++) {
    if (i === bytes.length || bytes[i] === NEWLINE) {
      out.push(bytes.subarray(start, i));
      start = i + 1;
    }
  }
  return out;
}

const isBlank = (line) => line.every((b) => b === 0x20 || b === 0x09 || b === 0x0d);

/**
 * The saved calls of a bundle as entries {source, doc} (or {source, error} for a line that is not
 * JSON), or null when `bytes` is not a bundle. `name` names the entries (`name:line`).
 */
export function parseBundle(bytes, name) {
  if (typeof bytes === "string") bytes = new TextEncoder().encode(bytes);
  const [first, ...rest] = lines(bytes);
  const head = new TextDecoder().decode(first);
  if (!head.startsWith("{") || !head.includes('"format"')) return null;
  let header;
  try {
    header = parseJson(first);
  } catch (e) {
    if (e instanceof JsonError) return null;
    throw e;
  }
  if (header === null || typeof header !== "object" || header.format !== BUNDLE_FORMAT) return null;
  const count = header.calls;
  if (!Number.isInteger(count) || count < 0) throw new VerifierInputError("the evidence bundle's header has no valid 'calls' count");
  const body = rest.map((line, i) => [line, i + 2]).filter(([line]) => !isBlank(line));
  if (body.length !== count) {
    throw new VerifierInputError(`the evidence bundle ${name} announces ${count} call(s) but holds ${body.length}: it is truncated or was edited`);
  }
  return body.map(([line, n]) => {
    try {
      return { source: `${name}:${n}`, doc: parseJson(line) };
    } catch (e) {
      if (e instanceof JsonError) return { source: `${name}:${n}`, error: `not a saved call: ${e.message}` };
      throw e;
    }
  });
}
