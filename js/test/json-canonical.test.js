// The bounded JSON parser (Python's value model), JCS canonicalization and call records.
import { test } from "node:test";
import assert from "node:assert/strict";
import {
  CanonicalizationError, JsonError, RecordError, UnsafeInteger, callSha256, canonicalText, hashedResult, isFloatLiteral,
  parseJson, recordFromJson, validateReceiptShape, ReceiptFormatError, fromBase64, fromBase64Url, toBase64, toBase64Url, NoteError,
} from "../src/verify.js";

test("parseJson reads what Python's parse_json reads, strictly and bounded", () => {
  assert.deepEqual(parseJson('{"a":[1,2.5,"x",true,false,null],"b":{}}'), { a: [1, 2.5, "x", true, false, null], b: {} });
  for (const bad of ["NaN", "-Infinity", "Infinity", "[1,NaN]", '{"a":Infinity}']) {
    assert.throws(() => parseJson(bad), /is not a JSON value/, bad);
  }
  assert.equal(parseJson("1e400"), Infinity, "as Python's float('1e400'); refused when hashed");
  assert.equal(Object.is(parseJson("-0"), 0), true, "the integer -0 is 0");
  assert.equal(Object.is(parseJson("-0.0"), -0), true, "the float -0.0 stays -0.0");
  assert.ok(parseJson("9007199254740993") instanceof UnsafeInteger);
  assert.equal(parseJson("9007199254740993").literal, "9007199254740993");
  assert.equal(parseJson("9007199254740992"), 2 ** 53);
  assert.equal(parseJson("35818508739113130"), 35818508739113130);
  assert.equal(parseJson("1" + "0".repeat(21)), 1e21);
  assert.throws(() => parseJson("1" + "0".repeat(4300)), /4301 digits/);
  const proto = parseJson('{"__proto__":{"polluted":1}}');
  assert.equal(Object.getPrototypeOf(proto), Object.prototype);
  assert.deepEqual(Object.keys(proto), ["__proto__"]);
  assert.equal({}.polluted, undefined);
  for (const dup of ['{"a":1,"a":2}', '{"a":1,"\\u0061":2}', '{"__proto__":1,"__proto__":2}', '{"x":{"constructor":1,"constructor":1}}']) {
    assert.throws(() => parseJson(dup), /duplicate member name/, dup);
  }
  assert.deepEqual(parseJson('{"constructor":1,"toString":2}'), { constructor: 1, toString: 2 });
  assert.throws(() => parseJson(new Uint8Array([0xef, 0xbb, 0xbf, 0x7b, 0x7d])), /byte order mark/);
  assert.equal(parseJson('"\\ud800"'), "\ud800", "a lone surrogate escape is read (and refused when hashed)");
  const floats = parseJson('{"i":1,"f":1.0,"e":1e2,"l":[3,4.0]}');
  assert.deepEqual([isFloatLiteral(floats, "i"), isFloatLiteral(floats, "f"), isFloatLiteral(floats, "e"), isFloatLiteral(floats.l, 0), isFloatLiteral(floats.l, 1)], [false, true, true, false, true]);
  for (const bad of ["", " ", "{", "[1,]", "[1 2]", '{"a" 1}', '{a:1}', "01", "1.", ".5", "+1", '"\t"', '"\\x"', '"\\u12"', "\ufeff{}", "nul", "[]x", "'a'", "[-]"]) {
    assert.throws(() => parseJson(bad), JsonError, JSON.stringify(bad));
  }
  assert.throws(() => parseJson("[".repeat(265) + "]".repeat(265)), /deeper than 264/);
  assert.ok(Array.isArray(parseJson("[".repeat(264) + "]".repeat(264))));
  assert.throws(() => parseJson("[1]", { maxBytes: 2 }), /larger than 2 bytes/);
  assert.throws(() => parseJson(new Uint8Array([0x22, 0xff, 0x22])), /not valid UTF-8/);
  assert.equal(parseJson(new TextEncoder().encode('"é"')), "é");
  // nothing hostile throws anything but JsonError
  for (let i = 0; i < 3000; i++) {
    const s = Array.from({ length: 1 + (i % 17) }, () => '{}[],:"\\0123456789.eE+-tfnaulrsINy \u00e9\ud800'[Math.floor(Math.random() * 39)]).join("");
    try {
      parseJson(s);
    } catch (e) {
      assert.ok(e instanceof JsonError, `${JSON.stringify(s)}: ${e}`);
    }
  }
});

test("JCS: sorted by UTF-16 code units, ECMAScript numbers, raw UTF-8 strings", () => {
  assert.equal(canonicalText({ "\uffff": 1, "\u{1F600}": 2, a: 3, 10: 4, 9: 5 }), '{"10":4,"9":5,"a":3,"😀":2,"￿":1}');
  assert.equal(canonicalText([1e21, 1e-7, 0.1, -0, 5e-324, 100, 1.5e300]), "[1e+21,1e-7,0.1,0,5e-324,100,1.5e+300]");
  assert.equal(canonicalText("a\u2028b\u0001\"\\"), '"a\u2028b\\u0001\\"\\\\"');
  for (const [value, path] of [[{ a: [1, NaN] }, "$.a[1]"], [{ b: Infinity }, "$.b"], [{ "\ud800": 1 }, '$["\\ud800"]'], [{ c: "x\udc00" }, "$.c"],
    [{ d: undefined }, "$.d"], [{ e: 1n }, "$.e"], [{ f: new Date(0) }, "$.f"], [{ g: () => 1 }, "$.g"], [{ h: new Uint8Array(1) }, "$.h"],
    [parseJson('{"i":[9007199254740993]}'), "$.i[0]"], [{ "a b": [null, [2, [Symbol("s")]]] }, '$["a b"][1][1][0]']]) {
    assert.throws(() => canonicalText(value), (e) => e instanceof CanonicalizationError && e.path === path, `${path}`);
  }
  let deep = 1;
  for (let i = 0; i < 256; i++) deep = [deep];
  canonicalText(deep); // 256 nested arrays: the limit
  assert.throws(() => canonicalText([deep]), /deeper than 256/);
  assert.equal(canonicalText({ x: Object.assign(Object.create(null), { b: 1, a: 2 }) }), '{"x":{"a":2,"b":1}}');
});

test("records: hashed members, names, salts, and the server from the receipt", () => {
  const rec = { tool: "t", arguments: {}, result: { content: [], structuredContent: null, isError: null, resultType: "complete", _meta: { x: 1 } }, salt: "ab".repeat(16) };
  assert.deepEqual(hashedResult(rec.result), { content: [], structuredContent: null });
  assert.match(callSha256(rec, { server: "srv" }), /^[0-9a-f]{64}$/);
  assert.notEqual(callSha256(rec, { server: "srv" }), callSha256({ ...rec, result: { content: [] } }, { server: "srv" }), "null structuredContent is hashed");
  assert.equal(callSha256({ ...rec, server: "srv" }), callSha256(rec, { server: "srv" }));
  assert.equal(recordFromJson({ ...rec, server: "inner" }, { server: "srv" }).server, "inner");
  const refused = [
    [{ ...rec }, undefined, "$.server"], [{ ...rec, argument: {} }, "s", "$.argument"], [{ ...rec, salt: "AB".repeat(16) }, "s", "$.salt"],
    [{ ...rec, tool: "x".repeat(257) }, "s", "$.tool"], [{ ...rec, result: { content: {} } }, "s", "$.result.content"],
    [{ ...rec, result: { content: [], isError: 1 } }, "s", "$.result.isError"], [{ ...rec, result: { content: [], resultType: "input_required" } }, "s", "$.result.resultType"],
    [{ ...rec, arguments: [] }, "s", "$.arguments"], [{ ...rec, spec: "x" }, "s", "$.spec"],
  ];
  for (const [r, server, path] of refused) {
    assert.throws(() => recordFromJson(r, { server }), (e) => e instanceof RecordError && e.path === path, path);
  }
  assert.equal(recordFromJson({ ...rec, tool: "😀".repeat(256) }, { server: "s" }).tool.length, 512, "names count code points");
});

test("receipt shape: exact members and types", () => {
  const receipt = {
    spec: "rs-tool-call/1", id: "tc_AAAAAAAAAAAAAAAAAAAAAA", server: "s", tool: "t", call_sha256: "ab".repeat(32),
    issued_at: "2024-02-29T23:59:59.999Z", ledger: { origin: "o", index: 0, entry_url: "https://n.example/v1/ledger/entries/0" },
  };
  validateReceiptShape(receipt);
  validateReceiptShape({ ...receipt, signature: { alg: "EdDSA", kid: "k", sig: "s" }, proof: "p" });
  const bad = [{ ...receipt, extra: 1 }, { ...receipt, id: "tc_AAAAAAAAAAAAAAAAAAAAAB" }, { ...receipt, issued_at: "2023-02-29T00:00:00.000Z" },
    { ...receipt, issued_at: "2024-01-01T00:00:00Z" }, { ...receipt, ledger: { ...receipt.ledger, index: 2 ** 53 } }, { ...receipt, ledger: { ...receipt.ledger, index: 1.5 } },
    parseJson(JSON.stringify(receipt).replace('"index":0', '"index":0.0')), { ...receipt, signature: { alg: "EdDSA", kid: "k" } }, { ...receipt, proof: null }];
  for (const r of bad) assert.throws(() => validateReceiptShape(r), ReceiptFormatError);
});

test("base64 and base64url accept only the canonical spelling", () => {
  for (let n = 0; n < 40; n++) {
    const bytes = Uint8Array.from({ length: n }, (_, i) => (i * 37 + n) & 0xff);
    assert.deepEqual(fromBase64(toBase64(bytes)), bytes);
    assert.deepEqual(fromBase64Url(toBase64Url(bytes)), bytes);
    assert.equal(toBase64(bytes), btoa(String.fromCharCode(...bytes)));
  }
  for (const bad of ["A", "AB", "AB=", "AB==A", "AB=A", "AQ=", "AR==", "A===", "ab c", "AAA*"]) assert.throws(() => fromBase64(bad), NoteError, bad);
  for (const bad of ["A", "AR", "AB==", "a+b", "AAA/"]) assert.throws(() => fromBase64Url(bad), Error, bad);
});

test("the receipt signing bytes' direct path equals the general JCS path", async () => {
  const { signedBytes, signedBytesGeneral } = await import("../src/receipt.js");
  const base = {
    spec: "rs-tool-call/1", id: "tc_AAAAAAAAAAAAAAAAAAAAAA", server: "s", tool: "t", call_sha256: "ab".repeat(32),
    issued_at: "2024-02-29T23:59:59.999Z", ledger: { origin: "o", index: 0, entry_url: "https://n.example/v1/ledger/entries/0" },
    signature: { alg: "EdDSA", kid: "k", sig: "s" }, proof: "p",
  };
  const strings = ["", "a\"b\\c", "\u2028\u2029", "\u0001\u001f\u007f", "é😀\uffff", "</script>", "x".repeat(300), "\ud800", "a\tb\nc"];
  let n = 0;
  for (const s of strings) {
    for (const field of ["server", "tool", "id", "call_sha256", "issued_at", "spec", "origin", "entry_url"]) {
      const r = structuredClone(base);
      if (field === "origin" || field === "entry_url") r.ledger[field] = s;
      else r[field] = s;
      for (const index of [0, 1, 2 ** 53 - 1, -0, 7]) {
        r.ledger.index = index;
        let general;
        try {
          general = signedBytesGeneral(r);
        } catch {
          assert.throws(() => signedBytes(r), CanonicalizationError);
          continue;
        }
        assert.deepEqual(signedBytes(r), general, JSON.stringify([field, s, index]));
        n++;
      }
    }
  }
  assert.ok(n > 300);
  const extra = { ...structuredClone(base), extra: { z: 1, a: [1.5] } };
  assert.deepEqual(signedBytes(extra), signedBytesGeneral(extra), "another shape takes the general path");
});

test("a JSON answer from the network nests at most Python's answer bound (64), else it is malformed", async () => {
  const { FetchError } = await import("../src/errors.js");
  const { MAX_ANSWER_DEPTH, getJson } = await import("../src/fetcher.js");
  const answer = (depth) => ({ getBytes: async () => new TextEncoder().encode("[".repeat(depth) + "]".repeat(depth)) });
  assert.ok(Array.isArray(await getJson(answer(MAX_ANSWER_DEPTH), "http://127.0.0.1/x")));
  await assert.rejects(getJson(answer(MAX_ANSWER_DEPTH + 1), "http://127.0.0.1/x"), (e) => e instanceof FetchError && e.refused === true);
  await assert.rejects(getJson({ getBytes: async () => new TextEncoder().encode('{"a":1,"a":2}') }, "http://127.0.0.1/x"), FetchError);
});
