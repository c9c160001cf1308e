// mcp-notary: verify notarized MCP tool calls (Node and browsers). This entry point imports
// nothing Node-only.
export * from "./verify.js";
