// Node-only helpers of mcp-notary: the state file store and the CLI.
export { DEFAULT_STATE_PATH, StateFileStore, expandUser } from "./state-file.js";
export { main } from "./cli.js";
