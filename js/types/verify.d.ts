// Types of the verifier entry point, `mcp-notary/verify` (also re-exported by `mcp-notary`).

export type JsonValue = null | boolean | number | string | JsonValue[] | { [key: string]: JsonValue };
export type JsonObject = { [key: string]: JsonValue };

export type LevelName = "record" | "signature" | "inclusion" | "witnesses" | "consistency";
export type Status = "passed" | "failed" | "skipped";

export interface LevelResult {
  status: Status;
  reason: string;
}

export interface ReportLevel extends LevelResult {
  /** Whether this level must pass for the report to be valid. */
  required: boolean;
}

/** The receipt an rs-tool-call/1 notary issues. */
export interface Receipt {
  spec: "rs-tool-call/1";
  id: string;
  server: string;
  tool: string;
  call_sha256: string;
  issued_at: string;
  ledger: { origin: string; index: number; entry_url: string };
  signature?: { alg: "EdDSA"; kid: string; sig: string };
  /** The tlog-proof text: inclusion proof and the signed checkpoint (not signed itself). */
  proof?: string;
}

/** A call record as `notary hash` takes it; `server` may be omitted (the receipt names it). */
export interface CallRecordJson {
  spec?: "rs-tool-call/1";
  server?: string;
  tool: string;
  arguments: JsonObject;
  result: JsonObject;
  salt: string;
}

/** A validated record, ready to hash: {spec, server, tool, arguments, result (reduced), salt}. */
export interface CallRecord {
  spec: "rs-tool-call/1";
  server: string;
  tool: string;
  arguments: JsonObject;
  result: { content: JsonValue[]; structuredContent?: JsonValue; isError?: boolean };
  salt: string;
}

/** A saved tool call: what a client received, for `notary verify CALL`. */
export interface SavedToolCall {
  tool: string;
  arguments?: JsonObject;
  result: JsonObject;
  server?: string;
}

/** The `_meta["com.rightshold/tool-call"]` block of a notarized result. */
export interface NotarizationBlock {
  spec: "rs-tool-call/1";
  id: string;
  call_sha256: string;
  salt: string;
  receipt_url: string;
  verify_url: string;
  receipt?: Receipt;
}

export interface Checkpoint {
  origin: string;
  size: bigint;
  rootHash: Uint8Array;
  extensions: readonly string[];
}

export interface NoteSignature {
  name: string;
  keyId: number;
  signature: Uint8Array;
}

export interface Note {
  text: string;
  signatures: NoteSignature[];
}

export interface ProofBundle {
  index: bigint;
  proof: readonly Uint8Array[];
  /** The signed checkpoint note, verbatim. */
  checkpoint: Uint8Array;
  extra: Uint8Array | null;
}

/** A verifier of one signed-note key (log key, witness key). */
export interface NoteVerifier {
  readonly name: string;
  readonly keyId: number;
  verify(message: Uint8Array, signature: Uint8Array): Promise<boolean>;
}

declare class Ed25519Key implements NoteVerifier {
  readonly name: string;
  readonly keyId: number;
  readonly keyType: number;
  readonly publicKey: Uint8Array;
  /** `<name>+<hex key ID>+<base64(type ‖ key)>` */
  readonly vkey: string;
  equals(other: unknown): boolean;
  verify(message: Uint8Array, signature: Uint8Array): Promise<boolean>;
}

/** A plain Ed25519 note key (type 0x01): log keys. */
export class Ed25519Verifier extends Ed25519Key {
  constructor(name: string, publicKey: Uint8Array);
  static fromVkey(text: string): Ed25519Verifier;
}

/** A witness cosignature/v1 key (type 0x04). */
export class CosignatureVerifier extends Ed25519Key {
  constructor(name: string, publicKey: Uint8Array);
  static fromVkey(text: string): CosignatureVerifier;
  static timestamp(signature: Uint8Array): bigint;
}

export class Jwks {
  constructor(doc: JsonObject | string | Uint8Array);
  readonly kids: string[];
  readonly size: number;
  has(kid: string): boolean;
  toJSON(): { keys: JsonObject[] };
  /** Throws ReceiptSignatureError when the signature does not verify. */
  verify(receipt: JsonObject | Receipt): Promise<void>;
}

export class Policy {
  readonly quorum: string;
  readonly logVerifiers: Ed25519Verifier[];
  readonly witnessVerifiers: NoteVerifier[];
  satisfied(cosigned: Set<string>): boolean;
  verify(note: Uint8Array | string, logVerifiers?: NoteVerifier[]): Promise<{ checkpoint: Checkpoint; cosigned: Set<string> }>;
}

/** Trust anchors as the caller holds them. */
export interface TrustSpec {
  /** Receipt keys: a JWKS document, its JSON text, a Jwks (loadTrust: also an http(s) URL). */
  jwks?: JsonObject | string | Jwks | null;
  /** Log verifier keys `<origin>+<hex id>+<base64 key>`. */
  logKeys?: Array<string | Ed25519Verifier> | string;
  /** Witness verifier keys (cosignature/v1 or plain Ed25519). */
  witnesses?: Array<string | NoteVerifier> | string;
  /** Distinct witnesses that must have cosigned; default all given witnesses. */
  quorum?: number;
  /** A C2SP tlog-policy text (its logs join logKeys; its quorum sets level 4). */
  policy?: string | Uint8Array | Policy | null;
  /** loadTrust only: a notary whose own keys fill in what is missing (trust on first use; its log keys only when neither logKeys nor the policy's log lines pin any). */
  notary?: string | null;
  /** Logs whose keys a compromised roll retired, by origin (loadTrust reads them from the notary's list). */
  retired?: Readonly<Record<string, Retirement>>;
}

/** A log whose keys a compromised roll retired: its receipts need level 5 consistent with its final checkpoint. */
export interface Retirement {
  readonly finalSize: number;
  readonly at: string;
  /** The origin of the log that roll froze. */
  readonly by: string;
}

/** Trust anchors, checked: what makeTrust and loadTrust return. */
export interface Trust {
  readonly jwks: Jwks | null;
  readonly logKeys: readonly Ed25519Verifier[];
  readonly witnesses: readonly NoteVerifier[];
  readonly quorum: number;
  readonly policy: Policy | null;
  readonly retired: Readonly<Record<string, Retirement>>;
}

/** The entry a store keeps per log origin (the Python state file's format). */
export interface StoredCheckpoint {
  size: number;
  root: string;
  checkpoint: string;
  vkey?: string;
  updated?: string;
}

/** Where the verifier remembers the newest checkpoint per log; methods may be async. */
export interface CheckpointStore {
  get(key: string): StoredCheckpoint | undefined | null | Promise<StoredCheckpoint | undefined | null>;
  set(key: string, entry: StoredCheckpoint): void | Promise<void>;
}

export interface Fetcher {
  getBytes(url: string): Promise<Uint8Array>;
}

export interface VerifyOptions {
  trust?: TrustSpec | Trust;
  /** Fetch the log's newest checkpoint and consistency proofs (default false: offline). */
  online?: boolean;
  /** The fetch function to go online with (default globalThis.fetch); implies online. */
  fetch?: typeof globalThis.fetch;
  /** A ready fetcher; implies online. */
  fetcher?: Fetcher;
  /** The newest checkpoint per log, read and updated (default: none). */
  store?: CheckpointStore | null;
  /** The log's base URL (default: from the receipt's ledger.entry_url). */
  logUrl?: string | null;
  timeoutMs?: number;
  /** The call's RFC 9942 COSE receipt (receipt.cose): checked too (Report.cose), must pass. */
  cose?: Uint8Array | null;
}

export interface ToolCallOptions extends VerifyOptions {
  /** For a bare CallToolResult: the tool name and the arguments of the call. */
  tool?: string;
  arguments?: JsonObject | string;
  /** A receipt to use instead of (or for want of) the one embedded in _meta. */
  receipt?: Receipt | JsonObject | string;
}

export class Conflict {
  readonly kind: "fork" | "rollback";
  readonly message: string;
  toJSON(): JsonObject;
}

export class Report {
  /** Every required level passed and none failed. */
  readonly valid: boolean;
  /** 0 valid, 1 not valid (the CLI's exit status). */
  readonly exitCode: 0 | 1;
  readonly levels: Record<LevelName, ReportLevel>;
  readonly required: LevelName[];
  readonly receipt: Receipt | JsonObject | null;
  readonly checkpoint: Checkpoint | null;
  /** Fork or rollback evidence of level 5 (both signed checkpoints). */
  readonly conflicts: Conflict[];
  readonly notes: string[];
  /** The proof verified with (after an upgrade: the one fetched), or null. */
  readonly proof: string | null;
  /** The COSE receipt's check when one was given (required to pass), else null. */
  readonly cose: CoseCheck | null;
  /** The receipt carrying the proof used (`--save-receipt`), or null without a receipt. */
  receiptWithProof(): JsonObject | null;
  /** The JSON report of `notary verify --json`. */
  toJSON(): JsonObject;
  /** The human-readable report. */
  render(): string;
}

export class Verdict {
  levels: Partial<Record<LevelName, LevelResult>>;
  required: LevelName[];
  checkpoint: Checkpoint | null;
  readonly valid: boolean;
}

export const META_KEY: "com.rightshold/tool-call";
export const SPEC: "rs-tool-call/1";
export const LEVELS: readonly LevelName[];
export const MAX_DEPTH: number;

/** Verify a saved tool call, a bare CallToolResult (with `tool`), or a JSON-RPC response. */
export function verifyToolCall(input: SavedToolCall | JsonObject | string | Uint8Array, options?: ToolCallOptions): Promise<Report>;
/** Verify a receipt (with its proof) against its call record (null: level 1 skipped). */
export function verifyReceipt(receipt: Receipt | JsonObject | string, record: CallRecordJson | JsonObject | string | null, options?: VerifyOptions): Promise<Report>;
export function makeTrust(spec?: TrustSpec): Trust;
export function loadTrust(spec?: TrustSpec, options?: { fetcher?: Fetcher | null }): Promise<Trust>;
export function logBaseUrl(receipt: JsonObject | Receipt): string | null;

export interface ToolCallInput {
  receipt: JsonObject | null;
  record: JsonObject | null;
  meta: JsonObject | null;
  source: string;
}
export function callFromDocument(doc: JsonObject | string | Uint8Array, options?: { tool?: string; arguments?: JsonObject; receipt?: JsonObject }): ToolCallInput;
export function callFromSavedCall(doc: JsonObject, options?: { receipt?: JsonObject }): ToolCallInput;
export function callFromToolResult(result: JsonObject, options: { tool: string; arguments?: JsonObject; server?: string; receipt?: JsonObject }): ToolCallInput;
export function callFromReceiptAndRecord(receipt: JsonObject, record: JsonObject): ToolCallInput;
export function verifyCall(call: ToolCallInput, trust: Trust, options?: { fetcher?: Fetcher | null; store?: CheckpointStore | null; logUrl?: string | null; upgrade?: boolean; cose?: Uint8Array | null }): Promise<Report>;

/** Levels 1-4 of one receipt, pure (the Python verify_receipt). */
export function verifyLevels(receipt: JsonObject | Receipt, options?: {
  record?: JsonObject | null; jwks?: Jwks | null; logVerifier?: NoteVerifier | null; proof?: string | Uint8Array | null;
  witnesses?: NoteVerifier[]; quorum?: number; policy?: Policy | null;
}): Promise<Verdict>;
export function checkRecord(receipt: JsonObject | Receipt, record: JsonObject | null): LevelResult;
export function checkSignature(receipt: JsonObject | Receipt, jwks: Jwks | null): Promise<LevelResult>;
export function checkInclusion(receipt: JsonObject | Receipt, proof: string | Uint8Array | null, logVerifier: NoteVerifier | null): Promise<{ level: LevelResult; bundle: ProofBundle | null; checkpoint: Checkpoint | null }>;

export class MemoryStore implements CheckpointStore {
  constructor(entries?: Record<string, StoredCheckpoint>);
  get(key: string): StoredCheckpoint | undefined;
  set(key: string, entry: StoredCheckpoint): void;
  toJSON(): { version: 1; logs: Record<string, StoredCheckpoint> };
}
/** A store in localStorage/sessionStorage, in the state file's JSON format. */
export class WebStorageStore implements CheckpointStore {
  constructor(storage: { getItem(key: string): string | null; setItem(key: string, value: string): void }, key?: string);
  get(key: string): StoredCheckpoint | undefined;
  set(key: string, entry: StoredCheckpoint): void;
}
export class Seen {
  readonly label: "stored" | "receipt" | "latest";
  readonly checkpoint: Checkpoint;
  readonly note: Uint8Array;
  readonly size: bigint;
  describe(): string;
}
export class Reconciler {
  constructor(stored: Seen | null, receipt: Seen, latest: Seen | null);
  proofsNeeded(): Array<[bigint, bigint]>;
  finish(proofs?: Map<string, { proof?: Uint8Array[]; problem?: string; refused?: boolean }>): {
    conflicts: Conflict[]; newest: Seen | null; connected(a: Seen, b: Seen): boolean;
  };
}
export function checkStoredEntry(origin: string, entry: unknown): StoredCheckpoint;
export function createFetcher(options?: { fetch?: typeof globalThis.fetch; timeoutMs?: number; maxBytes?: number }): Fetcher;
export function getJson(fetcher: Fetcher, url: string): Promise<unknown>;

// Building blocks: canonical JSON and records
export function canonicalJson(value: unknown): Uint8Array;
export function canonicalText(value: unknown): string;
export function canonicalSha256(value: unknown): string;
export function checkJsSafe(value: unknown, path?: string): void;
/** call_sha256 of a call record (JSON form; pass `server` when the record omits it). */
export function callSha256(record: CallRecordJson | JsonObject, options?: { server?: string }): string;
export function recordFromJson(record: CallRecordJson | JsonObject, options?: { server?: string }): CallRecord;
export function makeRecord(fields: { server: string; tool: string; arguments: JsonObject; result: JsonObject; salt: string }): CallRecord;
export function recordBytes(record: CallRecord): Uint8Array;
export function hashedResult(result: JsonObject): CallRecord["result"];
export function isFinal(result: JsonObject): boolean;
export function nameProblem(value: unknown): string | null;
export function newSalt(): string;

// Receipts, entries
export function parseReceipt(input: string | Uint8Array | JsonObject): Receipt;
export function validateReceiptShape(receipt: unknown): void;
export function signedBytes(receipt: JsonObject | Receipt): Uint8Array;
export function jwkThumbprint(x: string): string;
export interface EntryFields { id: string; server: string; tool: string; callSha256: Uint8Array; issuedAt: string }
export function entryFromReceipt(receipt: JsonObject | Receipt): EntryFields;
export function encodeEntry(fields: EntryFields): Uint8Array;
export function decodeEntry(data: Uint8Array): { spec: "rs-tool-call/1"; id: string; server: string; tool: string; call_sha256: string; issued_at: string };

// Signed notes, checkpoints, cosignatures, tlog-proof, tlog-policy
export function parseNote(data: Uint8Array | string): Note;
export function openNote(data: Uint8Array | string, verifiers: NoteVerifier[]): Promise<{ note: Note; verified: NoteSignature[] }>;
export function parseVkeyText(text: string): { name: string; keyId: number; keyType: number; material: Uint8Array };
/** An ML-DSA-44 subtree/v1 verifier key (type 0x06): a log's post-quantum checkpoint key, or a witness's. */
export class SubtreeCosignatureVerifier {
  constructor(name: string, publicKey: Uint8Array);
  static fromVkey(text: string): SubtreeCosignatureVerifier;
  static timestamp(signature: Uint8Array): bigint;
  readonly name: string;
  readonly publicKey: Uint8Array;
  readonly keyType: number;
  readonly keyId: number;
  readonly vkey: string;
  /** Whether `signature` (timestamp ‖ ML-DSA-44 signature) signs the subtree [start, end). */
  verifySubtree(origin: string, start: bigint | number, end: bigint | number, hash: Uint8Array, signature: Uint8Array): Promise<boolean>;
  /** Whether `signature` signs the checkpoint whose note text is `message`. */
  verify(message: Uint8Array, signature: Uint8Array): Promise<boolean>;
  equals(other: unknown): boolean;
}
/** The cosigned_message bytes an ML-DSA-44 subtree/v1 signature covers. */
export function subtreeMessage(cosignerName: string, timestamp: bigint | number, origin: string, start: bigint | number, end: bigint | number, hash: Uint8Array): Uint8Array;
export function isValidSubtree(start: bigint | number, end: bigint | number): boolean;
export function parseVerifierKey(text: string): Ed25519Verifier | CosignatureVerifier | SubtreeCosignatureVerifier;
/** A log key: Ed25519 (0x01) or ML-DSA-44 (0x06). */
export function parseLogKey(text: string): Ed25519Verifier | SubtreeCosignatureVerifier;
/** A witness (or mirror) key: cosignature/v1 (0x04) or ML-DSA-44 (0x06). */
export function parseWitnessKey(text: string): CosignatureVerifier | SubtreeCosignatureVerifier;
/** "Ed25519", "Ed25519 (cosignature/v1)" or "ML-DSA-44". */
export function algorithmOf(verifier: Ed25519Verifier | CosignatureVerifier | SubtreeCosignatureVerifier): string;
export function keyId(name: string, keyType: number, publicKey: Uint8Array): number;
export function isValidKeyName(name: string): boolean;
export function cosignedMessage(checkpointText: string | Uint8Array, timestamp: bigint | number): Uint8Array;
export function signatureLine(sig: NoteSignature): string;
export function parseCheckpointText(text: string): Checkpoint;
export function checkpointText(cp: Checkpoint): string;
export function openCheckpoint(data: Uint8Array | string, logVerifier: NoteVerifier, witnesses?: NoteVerifier[], quorum?: number): Promise<{ checkpoint: Checkpoint; note: Note }>;
export function clearCheckpointCache(): void;
export function sameTreeHead(a: Checkpoint, b: Checkpoint): boolean;
export function decodeProofBundle(data: Uint8Array | string): ProofBundle;
export function encodeProofBundle(bundle: { index: bigint | number; proof: readonly Uint8Array[]; checkpoint: Uint8Array; extra?: Uint8Array | null }): Uint8Array;
export function parsePolicy(text: string | Uint8Array): Policy;

// RFC 9162
export function leafHash(entry: Uint8Array): Uint8Array;
export function nodeHash(left: Uint8Array, right: Uint8Array): Uint8Array;
export function rootFromInclusionProof(index: bigint | number, size: bigint | number, leafHash: Uint8Array, proof: readonly Uint8Array[]): Uint8Array;
export function verifyInclusion(index: bigint | number, size: bigint | number, leafHash: Uint8Array, proof: readonly Uint8Array[], root: Uint8Array): void;
export function verifyConsistency(oldSize: bigint | number, newSize: bigint | number, oldRoot: Uint8Array, newRoot: Uint8Array, proof: readonly Uint8Array[]): void;

// RFC 9942 COSE receipts (docs/scitt.md)
export const COSE_RECEIPT_MEDIA_TYPE: "application/scitt-receipt+cose";
export const ALG_EDDSA: -8;
export const ALG_ML_DSA_44: -48;
export const MAX_COSE_RECEIPT_BYTES: number;
export const MAX_CBOR_DEPTH: number;
/** A report's `cose`: the check of a COSE receipt; alg, tree_size, leaf_index, root once passed. */
export interface CoseCheck extends LevelResult {
  alg?: "EdDSA" | "ML-DSA-44";
  /** A number, or a decimal string beyond 2^53. */
  tree_size?: number | string;
  leaf_index?: number | string;
  /** base64 */
  root?: string;
}
export interface CoseKey {
  readonly alg: -8 | -48;
  readonly algName: "EdDSA" | "ML-DSA-44";
  readonly publicKey: Uint8Array;
  /** RFC 9679 COSE Key Thumbprint (SHA-256). */
  readonly kid: Uint8Array;
}
export interface CoseReceipt {
  readonly protected: Uint8Array;
  readonly alg: -8 | -48;
  readonly algName: "EdDSA" | "ML-DSA-44";
  readonly kid: Uint8Array | null;
  readonly issuer: string | null;
  readonly iat: number | bigint | null;
  readonly treeSize: bigint;
  readonly leafIndex: bigint;
  readonly path: readonly Uint8Array[];
  readonly signature: Uint8Array;
}
export interface CoseVerified {
  readonly alg: "EdDSA" | "ML-DSA-44";
  readonly kid: Uint8Array | null;
  readonly issuer: string;
  readonly iat: number | bigint | null;
  readonly treeSize: bigint;
  readonly leafIndex: bigint;
  readonly root: Uint8Array;
}
/** A COSE receipt's fields, parsed strictly, not verified; throws CoseReceiptError. */
export function parseCoseReceipt(data: Uint8Array): CoseReceipt;
/** The COSE receipt of the call whose JSON receipt is `receipt`, under trusted log keys;
 * rejects with CoseReceiptError. */
export function verifyCoseReceipt(receipt: Receipt | JsonObject, data: Uint8Array, trust: Trust | readonly NoteVerifier[]): Promise<CoseVerified>;
/** The COSE receipt against a leaf and COSE keys (no JSON receipt). */
export function verifyCoseInclusion(data: Uint8Array, entry: Uint8Array, keys: readonly CoseKey[]): Promise<{ receipt: CoseReceipt; root: Uint8Array }>;
export function coseKey(alg: -8 | -48, publicKey: Uint8Array): CoseKey;
export function coseKeysOf(logKeys: readonly NoteVerifier[]): CoseKey[];
export function coseSigStructure(protectedHeader: Uint8Array, payload: Uint8Array): Uint8Array;
export function inclusionPathLength(index: bigint | number, size: bigint | number): number;

// Ed25519, JSON, bytes
export interface Ed25519Backend {
  readonly name: string;
  verify(publicKey: Uint8Array, message: Uint8Array, signature: Uint8Array): boolean | Promise<boolean>;
}
/** How Ed25519 is computed; the acceptance rule (libsodium's) is the same for every backend. */
export function setEd25519Backend(backend: "auto" | "webcrypto" | "noble" | Ed25519Backend): void;
export function ed25519Backend(): Promise<string>;
export function verifyEd25519(publicKey: Uint8Array, message: Uint8Array, signature: Uint8Array): Promise<boolean>;
/** An integer literal no JavaScript number holds faithfully (2^53+1): refused when hashed. */
export class UnsafeInteger {
  readonly literal: string;
  readonly rounded: number;
}
/**
 * Parse untrusted JSON strictly, as the Python verifier does: duplicate member names, NaN and
 * Infinity, a byte order mark and invalid UTF-8 are refused (JsonError); at most 64 MiB and 264
 * levels deep by default. Numbers keep Python's value model (exact integers, float literals).
 */
export function parseJson(input: string | Uint8Array, options?: { maxBytes?: number; maxDepth?: number }): unknown;
export function isFloatLiteral(container: object, key: string | number): boolean;
export function toHex(bytes: Uint8Array): string;
export function fromHex(text: string): Uint8Array;
export function toBase64(bytes: Uint8Array): string;
export function fromBase64(text: string, what?: string): Uint8Array;
export function toBase64Url(bytes: Uint8Array): string;
export function fromBase64Url(text: string): Uint8Array;

// Errors
export class NotaryError extends Error {}
export class VerifierInputError extends NotaryError {}
export class JsonError extends NotaryError {}
export class CanonicalizationError extends NotaryError { readonly path: string; readonly problem: string }
export class RecordError extends NotaryError { readonly path: string; readonly problem: string }
export class ReceiptFormatError extends NotaryError {}
export class ReceiptSignatureError extends NotaryError { readonly reason: "missing" | "malformed" | "bad_alg" | "unknown_kid" | "bad_signature" }
export class JwksError extends NotaryError {}
export class EntryError extends NotaryError {}
export class NoteError extends NotaryError {}
export class CheckpointError extends NoteError {}
export class InvalidSignatureError extends NoteError { readonly keyName: string; readonly keyId: number }
export class UnverifiedNoteError extends NoteError { readonly note: Note }
export class ProofBundleError extends NotaryError {}
export class ProofError extends NotaryError {}
export class CoseReceiptError extends NotaryError {}
export class PolicyError extends NotaryError {}
export class PolicyNotMet extends NoteError {}
export class StateError extends NotaryError {}
export class FetchError extends NotaryError { readonly url: string; readonly status: number | null; readonly refused: boolean }
export class NotaryClientError extends NotaryError {}
export class NotaryHTTPError extends NotaryClientError { readonly status: number; readonly code: string; readonly detail: string; readonly retryAfter: number | null }
export class NotaryUnavailableError extends NotaryClientError { readonly attempts: number; readonly status: number | null }
export class NotaryResponseError extends NotaryClientError {}
