// `mcp-notary verify`: the Python `notary verify` in Node, same inputs, flags and exit status:
// 0 every required level passed, 1 a level failed or a required level did not pass, 2 usage or
// input error. `--policy` is kept as another name of `--witness-policy`.

import { mkdirSync, readFileSync, renameSync, unlinkSync, writeFileSync } from "node:fs";
import { basename, dirname, join } from "node:path";
import { parseArgs } from "node:util";
import { JsonError, StateError, VerifierInputError } from "../errors.js";
import { parseJson } from "../json.js";
import { callFromDocument, callFromReceiptAndRecord, loadTrust, verifyCall } from "../verifier.js";
import { bundleText } from "../evidence.js";
import { readEvidence, writeAtomic } from "./evidence.js";
import { checkUrl, createFetcher } from "../fetcher.js";
import { DEFAULT_STATE_PATH, StateFileStore, expandUser } from "./state-file.js";
import { setEd25519Backend } from "../ed25519.js";
import { nodeEd25519 } from "./ed25519-node.js";

const USAGE = `usage: mcp-notary verify [CALL|DIR|BUNDLE] [--tool T] [--arguments FILE|JSON] [--receipt FILE] [--record FILE] [--cose FILE]
                         [--jwks FILE|URL] [--log-key VKEY|@FILE]... [--witness VKEY|@FILE]... [--quorum K]
                         [--witness-policy FILE] [--notary URL] [--state FILE | --no-state] [--offline]
                         [--log-url URL] [--timeout SECONDS] [--upgrade] [--save-receipt FILE]
                         [--export FILE] [--json]
       mcp-notary --version

Verify a notarized MCP tool call: the call record, the receipt signature, inclusion in the log,
witness cosignatures, and consistency with the checkpoints seen before.

inputs (one of):
  CALL                      saved tool call {"tool", "arguments", "result", "server"?}
  DIR | BUNDLE              every saved call of an evidence store (a directory of them, as a
                            verifying client keeps) or of its bundle (JSON Lines); --export
                            FILE writes the calls that verified as one bundle
  CALL --tool T [--arguments A]
                            bare CallToolResult (wire JSON with _meta), or a JSON-RPC response
  --receipt R --record C    receipt (with proof) and rs-tool-call/1 call record
  (CALL --receipt R: use R instead of, or for want of, the receipt embedded in _meta)
  --cose FILE               the call's RFC 9942 COSE receipt (receipt.cose): checked too, and
                            required to pass (the log's key signed a root the call's entry is in)

trust:
  --jwks FILE|URL           trusted receipt keys (a URL needs the network)
  --log-key VKEY|@FILE      trusted log verifier key <origin>+<id>+<key> (repeatable)
  --witness VKEY|@FILE      witness cosignature key (repeatable)
  --quorum K                witnesses that must have cosigned (default: all given witnesses)
  --witness-policy FILE     a C2SP tlog-policy file (log, witness, group and quorum lines)
                            instead of --witness/--quorum; its log keys are trusted too
                            (--policy FILE: the same)
  --notary URL              fetch the receipt keys and log keys (of every log it lists) from
                            this notary when --jwks or --log-key is not given (trusts that
                            notary for its own keys)

  --state FILE              checkpoints seen so far, per log (default ${DEFAULT_STATE_PATH})
  --no-state                neither read nor write a state file
  --offline                 never use the network; checks that need it are skipped
  --log-url URL             the log's base URL for level 5 (default: from the receipt)
  --timeout SECONDS         per HTTP request (default 10)
  --upgrade                 fetch the receipt's current proof from the notary first (into its
                            newest witnessed checkpoint: a receipt embedded at call time never
                            carries cosignatures) and verify with it
  --save-receipt FILE       write the receipt with the proof used (after --upgrade: the
                            witnessed one, verifiable offline with --witness later)
  --json                    print the report as JSON

levels: 1 record, 2 signature, 3 inclusion, 4 witnesses, 5 consistency.
exit status: 0 every required level passed (1-3 always; 4 with a quorum; 5 when a checkpoint
of the log was stored before and the check could be made), 1 a level failed or a required
level did not pass (a fork or rollback always fails), 2 usage or input error.`;

class UsageError extends Error {}

function readBytes(path, what) {
  try {
    return path === "-" ? readFileSync(0) : readFileSync(expandUser(path));
  } catch (e) {
    throw new VerifierInputError(`cannot read ${what} ${JSON.stringify(path)}: ${e.message}`);
  }
}

function readText(path, what) {
  const bytes = readBytes(path, what);
  try {
    return new TextDecoder("utf-8", { fatal: true, ignoreBOM: true }).decode(bytes);
  } catch (e) {
    throw new VerifierInputError(`cannot read ${what} ${JSON.stringify(path)}: ${e.message}`);
  }
}

/** JSON from a file path, "-" (stdin), or inline text starting with "{"; the bytes go to the
 * strict parser as they are (a BOM or invalid UTF-8 is refused there, as in Python). */
function readJson(value, what) {
  const text = value.trimStart().startsWith("{") ? value : readBytes(value, what);
  try {
    return parseJson(text);
  } catch (e) {
    if (e instanceof JsonError) throw new VerifierInputError(`cannot read ${what} ${JSON.stringify(value)}: ${e.message}`);
    throw e;
  }
}

// Around a key text only ASCII blanks are trimmed, as in Python (String.prototype.trim would also
// take a BOM and Unicode's spaces, which Python leaves for the key parser to refuse).
const trimBlanks = (text) => text.replace(/^[ \t\r\n]+|[ \t\r\n]+$/g, "");

function expandKeys(values) {
  const out = [];
  for (const value of values) {
    if (value.startsWith("@")) {
      const path = value.slice(1);
      const text = readText(path, "key file");
      if (text.startsWith("\ufeff")) throw new VerifierInputError(`the key file ${path} starts with a byte order mark (BOM); write it as UTF-8 without one`);
      for (const line of text.split(/\r\n|\r|\n/)) {
        const t = trimBlanks(line);
        if (t && !t.startsWith("#")) out.push(t);
      }
    } else out.push(trimBlanks(value));
  }
  return out;
}

function parse(argv) {
  let parsed;
  try {
    parsed = parseArgs({
      args: argv,
      allowPositionals: true,
      options: {
        tool: { type: "string" }, arguments: { type: "string" }, receipt: { type: "string" }, record: { type: "string" }, cose: { type: "string" },
        jwks: { type: "string" }, "log-key": { type: "string", multiple: true, default: [] },
        witness: { type: "string", multiple: true, default: [] }, quorum: { type: "string" },
        "witness-policy": { type: "string" }, policy: { type: "string" },
        upgrade: { type: "boolean", default: false }, "save-receipt": { type: "string" }, export: { type: "string" },
        notary: { type: "string" }, state: { type: "string" }, "no-state": { type: "boolean", default: false },
        offline: { type: "boolean", default: false }, "log-url": { type: "string" }, timeout: { type: "string", default: "10" },
        json: { type: "boolean", default: false }, help: { type: "boolean", short: "h", default: false },
      },
    });
  } catch (e) {
    throw new UsageError(e.message);
  }
  const { values, positionals } = parsed;
  if (values.help) return { help: true };
  if (positionals.length > 1) throw new UsageError(`unrecognized arguments: ${positionals.slice(1).join(" ")}`);
  if (values.state !== undefined && values["no-state"]) throw new UsageError("argument --no-state: not allowed with argument --state");
  if (values.policy !== undefined && values["witness-policy"] !== undefined) throw new UsageError("--policy is another name of --witness-policy: give one");
  values["witness-policy"] ??= values.policy;
  let quorum;
  if (values.quorum !== undefined) {
    if (!/^-?[0-9]+$/.test(values.quorum.trim())) throw new UsageError(`argument --quorum: invalid int value: '${values.quorum}'`);
    quorum = Number(values.quorum);
  }
  const timeout = Number(values.timeout);
  if (values.timeout.trim() === "" || Number.isNaN(timeout)) throw new UsageError(`argument --timeout: invalid float value: '${values.timeout}'`);
  return { ...values, call: positionals[0], quorum, timeout };
}

function checkNetworkArgs(args) {
  if (args.offline && args.notary) throw new VerifierInputError("--notary fetches keys, which --offline forbids; pass --jwks FILE and --log-key");
  if (args.offline && args.jwks && /^https?:\/\//.test(args.jwks)) throw new VerifierInputError("--jwks is a URL, which --offline forbids; pass a JWKS file");
  for (const url of [args.notary, args["log-url"]]) if (url !== undefined) checkUrl(url);
  if (!(args.timeout > 0 && args.timeout < Infinity)) throw new VerifierInputError("--timeout must be positive");
}

function loadCall(args) {
  const receipt = args.receipt ? readJson(args.receipt, "the receipt") : null;
  if (receipt !== null && (receipt === null || typeof receipt !== "object" || Array.isArray(receipt))) {
    throw new VerifierInputError("the receipt must be a JSON object");
  }
  if (args.call === undefined) {
    if (args.record === undefined || receipt === null) throw new VerifierInputError("give a tool call file, or --receipt FILE and --record FILE");
    if (args.tool !== undefined || args.arguments !== undefined) throw new VerifierInputError("--tool and --arguments go with a bare tool result");
    return callFromReceiptAndRecord(receipt, readJson(args.record, "the record"));
  }
  if (args.record !== undefined) throw new VerifierInputError("--record goes with --receipt, not with a tool call file");
  const args_ = args.arguments !== undefined ? readJson(args.arguments, "the arguments") : undefined;
  if (args_ !== undefined && (args_ === null || typeof args_ !== "object" || Array.isArray(args_))) throw new VerifierInputError("the arguments must be a JSON object");
  return callFromDocument(readJson(args.call, "the tool call"), { tool: args.tool, arguments: args_, receipt });
}

async function run(args) {
  const { trust, fetcher, store, call } = await setUp(args, () => loadCall(args));
  const cose = args.cose === undefined ? null : readBytes(args.cose, "the COSE receipt");
  return verifyCall(call, trust, { fetcher, store, logUrl: args["log-url"] ?? null, upgrade: args.upgrade, cose });
}

/**
 * The trust, fetcher and state store the flags ask for (one set for every call verified), and
 * `load()`'s call, loaded after the flags are checked and before any key is read, as in Python.
 */
async function setUp(args, load = () => null) {
  setEd25519Backend(nodeEd25519);
  checkNetworkArgs(args);
  if (!(args.jwks || args.notary)) throw new VerifierInputError("no receipt keys to trust: pass --jwks FILE|URL (or --notary URL)");
  if (!(args["log-key"].length || args.notary || args["witness-policy"])) throw new VerifierInputError("no log key to trust: pass --log-key VKEY (or --notary URL, or a --witness-policy with a log line)");
  if (args.offline && args.upgrade) throw new VerifierInputError("--upgrade fetches the receipt's proof, which --offline forbids");
  const call = load();
  const file = args["no-state"] ? null : new StateFileStore(args.state ?? DEFAULT_STATE_PATH);
  // Offline the state file is read (a stored checkpoint still catches a rollback), never written.
  const store = file !== null && args.offline ? { get: (key) => file.get(key), set() {} } : file;
  const fetcher = args.offline ? null : createFetcher({ timeoutMs: args.timeout * 1000 });
  let jwks = null;
  if (args.jwks) jwks = /^https?:\/\//.test(args.jwks) ? args.jwks : readJson(args.jwks.replace(/^@/, ""), "the JWKS file");
  const witnesses = expandKeys(args.witness);
  if (args.quorum && witnesses.length === 0) throw new VerifierInputError("--quorum needs witness keys (--witness)");
  if (args["witness-policy"] && (args.witness.length || args.quorum !== undefined)) {
    throw new VerifierInputError("--witness-policy replaces --witness and --quorum; give one or the other");
  }
  const policy = args["witness-policy"] ? readBytes(args["witness-policy"], "the witness policy") : null;
  const trust = await loadTrust({ jwks, logKeys: expandKeys(args["log-key"]), witnesses, quorum: args.quorum, policy, notary: args.notary ?? null }, { fetcher });
  return { trust, fetcher, store, call };
}

const SINGLE_CALL_FLAGS = ["tool", "arguments", "receipt", "record", "cose", "save-receipt"];

/**
 * `mcp-notary verify DIR|BUNDLE`: every saved call of an evidence store or bundle, as the Python
 * `notary verify` does (notary/cli/verify_evidence.py): a report per call behind `== SOURCE`, then
 * `N of M saved calls verified`; JSON {valid, calls: [{source, ...report}]}. An entry that
 * cannot be read fails alone. `--export FILE` writes the calls that verified as one bundle.
 */
async function runEvidence(args, entries, stdout) {
  for (const flag of SINGLE_CALL_FLAGS) {
    if (args[flag] !== undefined) throw new UsageError(`--${flag} goes with one saved call, not with an evidence store or bundle`);
  }
  if (entries.length === 0) throw new UsageError(`${args.call} holds no saved calls`);
  const { trust, fetcher, store } = await setUp(args);
  const results = [];
  for (const entry of entries) {
    if (entry.error !== undefined) {
      results.push([entry, entry.error]);
      continue;
    }
    try {
      const call = callFromDocument(entry.doc);
      results.push([entry, await verifyCall(call, trust, { fetcher, store, logUrl: args["log-url"] ?? null, upgrade: args.upgrade })]);
    } catch (e) {
      if (!(e instanceof VerifierInputError)) throw e;
      results.push([entry, e.message]);
    }
  }
  const good = results.filter(([, r]) => typeof r !== "string" && r.valid).map(([e]) => e);
  if (args.export !== undefined) {
    try {
      writeAtomic(expandUser(args.export), bundleText(good.map((e) => e.doc)));
    } catch (e) {
      throw new UsageError(`cannot write --export ${args.export}: ${e.message}`);
    }
  }
  if (args.json) {
    const calls = results.map(([e, r]) => ({ source: e.source, ...(typeof r === "string" ? { valid: false, error: r } : r.toJSON()) }));
    stdout.write(JSON.stringify({ valid: good.length === results.length, calls }, null, 2) + "\n");
  } else {
    for (const [e, r] of results) stdout.write(`== ${e.source}\n${typeof r === "string" ? `NOT VALID: ${r}` : r.render()}\n`);
    stdout.write(`${good.length} of ${results.length} saved calls verified\n`);
    if (args.export !== undefined) stdout.write(`${good.length} verified call(s) written to ${args.export}\n`);
  }
  return good.length === results.length ? 0 : 1;
}

/** `--save-receipt FILE`: the receipt with the proof used, written atomically (mode 0644: a
 * receipt is public, meant to be shared), its directory created if need be, as in Python. */
function saveReceipt(report, path) {
  const receipt = report.receiptWithProof();
  if (receipt === null) return;
  const target = expandUser(path);
  const tmp = join(dirname(target), `.${basename(target)}.${process.pid}.tmp`);
  try {
    mkdirSync(dirname(target), { recursive: true });
    writeFileSync(tmp, JSON.stringify(receipt, null, 2) + "\n", { mode: 0o644 });
    renameSync(tmp, target);
  } catch (e) {
    try { unlinkSync(tmp); } catch { /* never written */ }
    throw new UsageError(`cannot write --save-receipt ${path}: ${e.message}`);
  }
  report.notes.push(`receipt with the proof used saved to ${path}`);
}

/** The version of this package (package.json), for --version. */
export function packageVersion() {
  return JSON.parse(readFileSync(new URL("../../package.json", import.meta.url), "utf8")).version;
}

/** Run the CLI with `argv` (without node and the script); resolves to the exit status. */
export async function main(argv, { stdout = process.stdout, stderr = process.stderr } = {}) {
  const [command, ...rest] = argv;
  if (command === "--version") {
    stdout.write(`mcp-notary ${packageVersion()}\n`);
    return 0;
  }
  if (command === undefined || command === "-h" || command === "--help") {
    (command === undefined ? stderr : stdout).write(USAGE + "\n");
    return command === undefined ? 2 : 0;
  }
  if (command !== "verify") {
    stderr.write(`mcp-notary: error: unknown command ${JSON.stringify(command)} (the command is: verify)\n`);
    return 2;
  }
  let args;
  try {
    args = parse(rest);
  } catch (e) {
    stderr.write(`${USAGE.split("\n\n")[0]}\nmcp-notary verify: error: ${e.message}\n`);
    return 2;
  }
  if (args.help) {
    stdout.write(USAGE + "\n");
    return 0;
  }
  let report;
  try {
    if (args.call !== undefined && args.call !== "-" && !args.call.trimStart().startsWith("{")) {
      const entries = readEvidence(args.call);
      if (entries !== null) return await runEvidence(args, entries, stdout);
    }
    if (args.export !== undefined) throw new UsageError("--export goes with an evidence store or bundle");
    report = await run(args);
    if (args["save-receipt"] !== undefined) saveReceipt(report, args["save-receipt"]);
  } catch (e) {
    if (e instanceof VerifierInputError || e instanceof StateError || e instanceof UsageError) {
      stderr.write(`mcp-notary: error: ${e.message}\n`);
      return 2;
    }
    throw e;
  }
  stdout.write((args.json ? JSON.stringify(report.toJSON(), null, 2) : report.render()) + "\n");
  return report.exitCode;
}
