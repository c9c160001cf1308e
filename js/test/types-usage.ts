// Compiled by `tsc --noEmit` in the tests: the shipped types describe the API as it is used.
import { verifyToolCall, verifyReceipt, makeTrust, MemoryStore, callSha256, parseReceipt, openCheckpoint,
  decodeProofBundle, verifyInclusion, verifyConsistency, Ed25519Verifier, parsePolicy, type Report, type LevelName } from "mcp-notary";
import { verifyToolCall as verifyOnly } from "mcp-notary/verify";
import { EvidenceStore, StateFileStore, main, readEvidence } from "mcp-notary/node";
import { ReceiptCheckError, VERIFICATION_META_KEY, verifyingClient, type VerificationFinding } from "mcp-notary";
import { Client as ClientV1 } from "@modelcontextprotocol/sdk/client/index.js";
import { Client as ClientV2 } from "@modelcontextprotocol/client";
import { NotaryClient, Notarizer, notarizeServer, recordFor } from "mcp-notary";
import { COSE_RECEIPT_MEDIA_TYPE, CoseReceiptError, parseCoseReceipt, verifyCoseReceipt } from "mcp-notary/verify";

function receipt0(): ReturnType<typeof parseReceipt> {
  return parseReceipt("{}");
}

async function usage(): Promise<number> {
  const trust = makeTrust({ jwks: { keys: [] }, logKeys: ["log+00000000+AQ=="], witnesses: [], quorum: 0 });
  const report: Report = await verifyToolCall({ tool: "t", arguments: {}, result: { content: [] } }, { trust, store: new MemoryStore() });
  const level: LevelName = "consistency";
  const status: "passed" | "failed" | "skipped" = report.levels[level].status;
  const r2 = await verifyReceipt("{}", null, { trust: { jwks: "{}", logKeys: "x" }, online: true, store: new StateFileStore("/tmp/x") });
  const r3 = await verifyOnly("{}", { tool: "t" });
  const withCose = await verifyToolCall("{}", { trust, cose: new Uint8Array(1) });
  const coseStatus: "passed" | "failed" | "skipped" | undefined = withCose.cose?.status;
  const cose = await verifyCoseReceipt(receipt0(), new Uint8Array(1), trust);
  const coseSize: bigint = cose.treeSize + parseCoseReceipt(new Uint8Array(1)).leafIndex;
  const media: string = COSE_RECEIPT_MEDIA_TYPE;
  new CoseReceiptError("x") satisfies Error;
  const digest: string = callSha256({ tool: "t", arguments: {}, result: { content: [] }, salt: "00" }, { server: "s" });
  const receipt = parseReceipt("{}");
  const index: number = receipt.ledger.index;
  const bundle = decodeProofBundle(receipt.proof ?? "");
  const { checkpoint } = await openCheckpoint(bundle.checkpoint, Ed25519Verifier.fromVkey("x"));
  verifyInclusion(bundle.index, checkpoint.size, new Uint8Array(32), bundle.proof, checkpoint.rootHash);
  verifyConsistency(1n, 2n, new Uint8Array(32), new Uint8Array(32), []);
  parsePolicy("quorum none\n").quorum satisfies string;
  const client = new NotaryClient("http://127.0.0.1:1", "key", { timeoutMs: 1000, retries: 2 });
  const notarizer = new Notarizer(client, "srv", { onUnreachable: "mark", embedReceipt: false });
  const server = notarizeServer({ server: {} }, notarizer);
  const notarized = await notarizer.notarizeResult("t", { a: 1 }, { content: [] });
  const rec = recordFor("t", { a: 1 }, notarized);
  const v1 = verifyingClient(new ClientV1({ name: "c", version: "1" }), { trust, onMissing: "mark", evidence: new EvidenceStore("/tmp/e") });
  const v2 = verifyingClient(new ClientV2({ name: "c", version: "1" }), { trust, onInvalid: "log", server: "srv" });
  const res = await v2.callTool({ name: "t", arguments: { a: 1 } });
  const finding = res._meta?.[VERIFICATION_META_KEY] as VerificationFinding | undefined;
  const bad = new Error() instanceof ReceiptCheckError;
  void [status, r2.valid, r3.exitCode, digest, index, server, rec.salt, v1, finding?.status, bad, readEvidence("/tmp/e")?.length];
  return main(["verify", "--help"]);
}
void usage;
