// The notary's /v1/tool-calls URL paths in one place, as notary/core/paths.py is for Python: the
// client, the notarizer and the verifier build them from here, so they cannot drift apart.

export const TOOL_CALLS_PATH = "/v1/tool-calls";
export const VERIFY_PATH = `${TOOL_CALLS_PATH}/verify`;

// A receipt's path (GET: the receipt with a proof to the newest checkpoint), the id
// percent-encoded so that no id names another path.
export const receiptPath = (id) => `${TOOL_CALLS_PATH}/${encodeURIComponent(id)}`;
