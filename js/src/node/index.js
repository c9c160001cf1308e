// Node-only helpers of mcp-notary: the state file store, Node's own Ed25519, and the CLI.
export { DEFAULT_STATE_PATH, StateFileStore, expandUser } from "./state-file.js";
export { nodeEd25519 } from "./ed25519-node.js";
export { main } from "./cli.js";
export { EvidenceStore, readEvidence } from "./evidence.js";
