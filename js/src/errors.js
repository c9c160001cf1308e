// Error types. Every error this package throws on purpose is one of these, each a subclass of
// NotaryError, so a caller can tell "the input is bad" from a bug.

/** Base class of every error this package throws on purpose. */
export class NotaryError extends Error {
  constructor(message, options) {
    super(message, options);
    this.name = new.target.name;
  }
}

/** Unusable inputs or trust material: a usage error (CLI exit 2), not a verdict. */
export class VerifierInputError extends NotaryError {}

/** A JSON text is malformed or exceeds the size or depth bounds. */
export class JsonError extends NotaryError {}

/** A value cannot be canonicalized faithfully; `path` names it (`$.a.items[3].n`). */
export class CanonicalizationError extends NotaryError {
  constructor(path, problem) {
    super(`${path}: ${problem}`);
    this.path = path;
    this.problem = problem;
  }
}

/** A call record is malformed; `path` names the offending member. */
export class RecordError extends NotaryError {
  constructor(path, problem) {
    super(`${path}: ${problem}`);
    this.path = path;
    this.problem = problem;
  }
}

/** A receipt does not have the rs-tool-call/1 shape. */
export class ReceiptFormatError extends NotaryError {}

/**
 * A receipt signature does not verify; `reason` is a stable code: `missing`, `malformed`,
 * `bad_alg`, `unknown_kid`, `bad_signature`.
 */
export class ReceiptSignatureError extends NotaryError {
  constructor(reason, message) {
    super(`${reason}: ${message}`);
    this.reason = reason;
  }
}

/** A JWKS, or an Ed25519 key in it, is malformed. */
export class JwksError extends NotaryError {}

/** Bytes or values that are not a valid rs-tool-call/1 log entry. */
export class EntryError extends NotaryError {}

/** A signed note, key or signature is malformed or does not verify. */
export class NoteError extends NotaryError {}

/** A checkpoint text is malformed, or its signatures do not satisfy the caller's policy. */
export class CheckpointError extends NoteError {}

/** A tlog-proof text is malformed. */
export class ProofBundleError extends NotaryError {}

/** A Merkle proof does not verify, or asks for something that cannot exist. */
export class ProofError extends NotaryError {}

/** An RFC 9942 COSE receipt is malformed, or does not verify (src/cose.js). */
export class CoseReceiptError extends NotaryError {}

/** A tlog-policy text is malformed. */
export class PolicyError extends NotaryError {}

/** A checkpoint is not signed by a policy log or not cosigned by the policy's quorum. */
export class PolicyNotMet extends NoteError {}

/** A stored checkpoint (the verifier's memory) cannot be read or written. */
export class StateError extends NotaryError {}

/**
 * A GET failed. `status` is the HTTP status when the server answered at all. `refused` tells a
 * log that answered but would not (4xx) or answered garbage (evidence against it) from one that
 * could not be asked (network, 5xx: no evidence either way).
 */
export class FetchError extends NotaryError {
  constructor(url, message, { status = null, malformed = false } = {}) {
    super(`GET ${url}: ${message}`);
    this.url = url;
    this.status = status;
    this.malformed = malformed;
  }

  get refused() {
    return this.malformed || (this.status !== null && this.status >= 400 && this.status < 500);
  }
}

/** Base class of the errors the notary client raises. */
export class NotaryClientError extends NotaryError {}

/**
 * The notary answered with a 4xx: a refusal that retrying would not change. `code` is the
 * stable code of its JSON error body (`unauthorized`, `quota_exceeded`, ...).
 */
export class NotaryHTTPError extends NotaryClientError {
  constructor(status, code, message, { retryAfter = null } = {}) {
    super(`notary answered ${status} ${code}: ${message}`);
    this.status = status;
    this.code = code;
    this.detail = message;
    this.retryAfter = retryAfter;
  }
}

/** The notary could not be reached, timed out or kept failing with 5xx after all retries. */
export class NotaryUnavailableError extends NotaryClientError {
  constructor(message, { attempts, status = null, cause } = {}) {
    super(message, cause === undefined ? undefined : { cause });
    this.attempts = attempts;
    this.status = status;
  }
}

/** The notary answered 2xx with something that is not the documented reply (not retried). */
export class NotaryResponseError extends NotaryClientError {}
