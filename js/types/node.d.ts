// Types of `mcp-notary/node`: Node-only helpers (the state file store, the CLI).
import type { CheckpointStore, SavedToolCall, StoredCheckpoint } from "./verify.js";
import type { EvidenceEntry, EvidenceSink } from "./index.js";

export const DEFAULT_STATE_PATH: string;
export function expandUser(path: string): string;

/** The verifier's memory in a JSON file shared with the Python `notary verify` (version 1). */
export class StateFileStore implements CheckpointStore {
  constructor(path?: string);
  readonly path: string;
  load(): Record<string, StoredCheckpoint>;
  get(key: string): StoredCheckpoint | undefined;
  set(key: string, entry: StoredCheckpoint): void;
}

/** Ed25519 through Node's own crypto, synchronously: `setEd25519Backend(nodeEd25519)`. */
export const nodeEd25519: { readonly name: "node"; verify(publicKey: Uint8Array, message: Uint8Array, signature: Uint8Array): boolean };

/** `mcp-notary ARGV...`; resolves to the exit status (0 valid, 1 not valid, 2 usage/input error). */
export function main(argv: string[], io?: { stdout?: { write(s: string): unknown }; stderr?: { write(s: string): unknown } }): Promise<number>;

/** A directory of saved calls, `<receipt id>.json` each, written atomically, never overwritten. */
export class EvidenceStore implements EvidenceSink {
  constructor(directory: string);
  readonly directory: string;
  pathFor(receiptId: string): string;
  has(receiptId: string): boolean;
  save(receiptId: string, call: SavedToolCall): string;
  files(): string[];
  entries(): EvidenceEntry[];
  /** Write every kept call to one bundle file; how many it holds. */
  exportBundle(out: string): number;
}

/** The saved calls of an evidence store (a directory) or bundle; null when `path` is neither. */
export function readEvidence(path: string): EvidenceEntry[] | null;
