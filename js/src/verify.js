// The verifier alone (browser-safe): `import { verifyToolCall } from "mcp-notary/verify"`.
export {
  META_KEY, Report, callFromDocument, callFromReceiptAndRecord, callFromSavedCall, callFromToolResult,
  loadTrust, logBaseUrl, makeTrust, verifyCall, verifyReceipt, verifyToolCall,
} from "./verifier.js";
export { LEVELS, Verdict, checkInclusion, checkRecord, checkSignature, verifyLevels } from "./levels.js";
export { Conflict, MemoryStore, Reconciler, Seen, WebStorageStore, checkStoredEntry } from "./state.js";
export { createFetcher, getJson } from "./fetcher.js";
export { canonicalJson, canonicalSha256, canonicalText, checkJsSafe, MAX_DEPTH } from "./canonical.js";
export { SPEC, callSha256, hashedResult, isFinal, makeRecord, nameProblem, newSalt, recordBytes, recordFromJson } from "./records.js";
export { Jwks, jwkThumbprint, parseReceipt, signedBytes, validateReceiptShape } from "./receipt.js";
export { decodeEntry, encodeEntry, entryFromReceipt } from "./entry.js";
export {
  CosignatureVerifier, Ed25519Verifier, InvalidSignatureError, UnverifiedNoteError, cosignedMessage, isValidKeyName,
  keyId, openNote, parseNote, parseVkeyText, signatureLine,
} from "./note.js";
export { SubtreeCosignatureVerifier, isValidSubtree, subtreeMessage } from "./mldsa.js";
export { algorithmOf, parseLogKey, parseVerifierKey, parseWitnessKey } from "./keys.js";
export { checkpointText, clearCheckpointCache, openCheckpoint, parseCheckpointText, sameTreeHead } from "./checkpoint.js";
export { decodeProofBundle, encodeProofBundle } from "./proofbundle.js";
export {
  ALG_EDDSA, ALG_ML_DSA_44, COSE_RECEIPT_MEDIA_TYPE, MAX_CBOR_DEPTH, MAX_COSE_RECEIPT_BYTES, coseKey, coseKeysOf, coseSigStructure,
  inclusionPathLength, parseCoseReceipt, verifyCoseInclusion, verifyCoseReceipt,
} from "./cose.js";
export { leafHash, nodeHash, rootFromInclusionProof, verifyConsistency, verifyInclusion } from "./merkle.js";
export { Policy, parsePolicy } from "./policy.js";
export { ed25519Backend, setEd25519Backend, verifyEd25519 } from "./ed25519.js";
export { UnsafeInteger, isFloatLiteral, parseJson } from "./json.js";
export { fromBase64, fromBase64Url, fromHex, toBase64, toBase64Url, toHex } from "./bytes.js";
export * from "./errors.js";
