// The explorer chart's arithmetic (series and entries-per-minute buckets), without a browser.
import { test } from "node:test";
import assert from "node:assert/strict";
import { rates, series } from "../explorer/chart.js";
import { destination } from "../explorer/views/search.js";

test("series sorts the newest-first history and keeps one point per time", () => {
  const pts = series([{ size: 9, time: 300 }, { size: 5, time: 120 }, { size: 4, time: 120 }, { size: 0, time: 0 }]);
  assert.deepEqual(pts, [{ size: 0, time: 0 }, { size: 5, time: 120 }, { size: 9, time: 300 }]);
});

test("series reads the API's RFC 3339 times (GET /v1/ledger/checkpoints) as seconds", () => {
  const pts = series([{ size: 9, time: "1970-01-01T00:05:00.000Z" }, { size: 5, time: "1970-01-01T00:02:00.500Z" }, { size: 1, time: "not a time" }]);
  assert.deepEqual(pts, [{ size: 5, time: 120.5 }, { size: 9, time: 300 }]);
});

test("entries per minute: growth lands in the bucket of the later checkpoint", () => {
  const { bucket, bars } = rates([{ size: 0, time: 0 }, { size: 30, time: 30 }, { size: 90, time: 90 }, { size: 100, time: 170 }]);
  assert.equal(bucket, 60);
  assert.deepEqual(bars.map((b) => b.perMinute), [30, 60, 10]);
  assert.equal(bars.reduce((n, b) => n + b.perMinute * (bucket / 60), 0), 100, "every entry counted once");
});

test("a long history gets wider buckets, at most 48, rates still per minute", () => {
  const day = Array.from({ length: 1441 }, (_, i) => ({ size: i * 10, time: i * 60 }));
  const { bucket, bars } = rates(day);
  assert.ok(bars.length <= 48 && bucket % 60 === 0 && bucket > 60);
  assert.equal(bars.length, 48);
  for (const b of bars) assert.equal(b.perMinute, 10);
  assert.deepEqual(rates([{ size: 1, time: 5 }]).bars, []);
});

test("the find box sends each kind of value to its page", () => {
  assert.equal(destination(" tc_VE6mN3XYCRtQqDedonJK6Q "), "/explorer/tool-calls/tc_VE6mN3XYCRtQqDedonJK6Q");
  assert.equal(destination("AB".repeat(32)), `/explorer/search?call_sha256=${"ab".repeat(32)}`);
  assert.equal(destination("42"), "/explorer/entries/42");
  assert.equal(destination("my server/x"), "/explorer/servers/my%20server%2Fx");
});
