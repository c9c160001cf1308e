// mcp-notary: verify notarized MCP tool calls (Node and browsers), and notarize the tool calls of
// TypeScript MCP servers. This entry point imports nothing Node-only.
export * from "./verify.js";
export { NotaryClient, NotaryHTTPError, NotaryResponseError, NotaryUnavailableError } from "./client.js";
export { NotarizationFailedError, Notarizer, notarizeServer, notarizationOf, receiptExtension, recordFor } from "./notarize.js";
export { isTraceparent, traceHeaders } from "./tracecontext.js";
export { ReceiptCheckError, VERIFICATION_META_KEY, verifyingClient } from "./verifying-client.js";
export { BUNDLE_FORMAT, bundleText, parseBundle } from "./evidence.js";
