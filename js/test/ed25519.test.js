// Ed25519: one acceptance rule (libsodium's) whichever backend computes.
import { test } from "node:test";
import assert from "node:assert/strict";
import { ed25519 } from "@noble/curves/ed25519.js";
import { SMALL_ORDER_ENCODINGS, hasSmallOrder, isCanonicalPoint, passesStrictChecks } from "../src/ed25519.js";
import { ed25519Backend, setEd25519Backend, verifyEd25519 } from "../src/verify.js";
import { nodeEd25519 } from "../src/node/index.js";

const P = ed25519.Point;
const L = 2n ** 252n + 27742317777372353535851937790883648493n;
const le = (n) => Uint8Array.from({ length: 32 }, (_, i) => Number((n >> BigInt(8 * i)) & 0xffn));

test("the small-order blocklist is exactly the torsion points' encodings (canonical and not)", () => {
  // the eight points of order dividing 8, from the curve arithmetic
  const torsion = [];
  const seen = new Set();
  for (const enc of SMALL_ORDER_ENCODINGS) {
    const p = P.fromBytes(enc, true);
    assert.ok(p.isSmallOrder(), "every entry is a point of small order");
    for (let k = 0n; k < 8n; k++) {
      const q = k === 0n ? P.ZERO : p.multiplyUnsafe(k);
      const bytes = q.toBytes();
      bytes[31] &= 0x7f;
      const id = Buffer.from(bytes).toString("hex");
      if (!seen.has(id)) { seen.add(id); torsion.push(bytes); }
    }
  }
  assert.equal(torsion.length, 5, "five distinct y values (sign ignored) among the 8 torsion points");
  for (const t of torsion) assert.ok(hasSmallOrder(t));
  const canonical = SMALL_ORDER_ENCODINGS.filter(isCanonicalPoint);
  assert.equal(canonical.length, 5);
  // a random key is not blocked
  assert.ok(!hasSmallOrder(ed25519.getPublicKey(ed25519.utils.randomSecretKey())));
});

test("strict checks: S < L, canonical key, no small-order key or R", () => {
  const sk = ed25519.utils.randomSecretKey();
  const pk = ed25519.getPublicKey(sk);
  const sig = ed25519.sign(new Uint8Array([1]), sk);
  assert.ok(passesStrictChecks(pk, sig));
  const highS = Uint8Array.from(sig);
  highS.set(le((BigInt("0x" + Buffer.from(sig.subarray(32)).reverse().toString("hex")) + L)), 32);
  assert.ok(!passesStrictChecks(pk, highS), "S + L (a malleated signature) is refused");
  const smallR = Uint8Array.from(sig);
  smallR.set(SMALL_ORDER_ENCODINGS[1], 0);
  assert.ok(!passesStrictChecks(pk, smallR));
  for (const bad of SMALL_ORDER_ENCODINGS) assert.ok(!passesStrictChecks(bad, sig));
  assert.ok(!passesStrictChecks(pk.subarray(1), sig));
  assert.ok(!passesStrictChecks(pk, sig.subarray(1)));
});

test("WebCrypto, @noble/curves and Node's crypto give the same answers", async () => {
  const cases = [];
  for (let i = 0; i < 40; i++) {
    const sk = ed25519.utils.randomSecretKey();
    const pk = ed25519.getPublicKey(sk);
    const msg = new TextEncoder().encode(`message ${i}`);
    const sig = ed25519.sign(msg, sk);
    const variants = [[pk, msg, sig, true]];
    const flipped = Uint8Array.from(sig);
    flipped[i % 64] ^= 1 << (i % 8);
    variants.push([pk, msg, flipped, false], [pk, new TextEncoder().encode(`message ${i + 1}`), sig, false]);
    const s = BigInt("0x" + Buffer.from(sig.subarray(32)).reverse().toString("hex"));
    const malleated = Uint8Array.from(sig);
    malleated.set(le(s + L), 32);
    variants.push([pk, msg, malleated, false]);
    cases.push(...variants);
  }
  // a small-order key with an S = 0, R = identity "signature" that cofactored checks would accept
  cases.push([SMALL_ORDER_ENCODINGS[1], new Uint8Array([1]), new Uint8Array([...SMALL_ORDER_ENCODINGS[1], ...new Uint8Array(32)]), false]);
  try {
    for (const backend of ["webcrypto", "noble", nodeEd25519]) {
      setEd25519Backend(backend);
      assert.equal(await ed25519Backend(), backend.name ?? backend);
      for (const [pk, msg, sig, want] of cases) assert.equal(await verifyEd25519(pk, msg, sig), want, backend);
    }
    setEd25519Backend("auto");
    assert.equal(await ed25519Backend(), "webcrypto", "Node 20 has Ed25519 in WebCrypto");
    assert.throws(() => setEd25519Backend("openssl"), TypeError);
  } finally {
    setEd25519Backend("auto");
  }
});
