// Consistency proofs read out of a log's tlog-tiles (C2SP tlog-tiles), for a log served without
// the notary's JSON API: a tlog-mirror's monitoring prefix (<mirror URL>/<origin hash>) or a
// static tile tree. The hashes a proof needs are read from the hash tiles of the newer tree and
// folded, as ledger.client.tiles does in Python; the caller still verifies the proof against
// both roots, so a lying server gets a failed check, never a false pass.
// Sizes and indexes are BigInt.

import { FetchError } from "./errors.js";
import { HASH_SIZE, nodeHash } from "./merkle.js";
import { toBase64 } from "./bytes.js";

const TILE_HEIGHT = 8n;
const TILE_WIDTH = 256n;

/** A tile index as tlog-tiles paths write it: 3-digit groups, all but the last with "x". */
export function encodeIndex(n) {
  const groups = [];
  do {
    groups.push(String(n % 1000n).padStart(3, "0"));
    n /= 1000n;
  } while (n > 0n);
  groups.reverse();
  return groups.map((g, i) => (i < groups.length - 1 ? "x" + g : g)).join("/");
}

/** The path of hash tile (level, index) as a tree of `size` publishes it (".p/W" if partial). */
export function tilePath(level, index, size) {
  const hashes = size >> (TILE_HEIGHT * level);
  const width = hashes - index * TILE_WIDTH;
  if (width <= 0n) throw new RangeError(`tile ${level}/${index} is not in a tree of size ${size}`);
  const tail = width >= TILE_WIDTH ? "" : `.p/${width}`;
  return `tile/${level}/${encodeIndex(index)}${tail}`;
}

function largestPow2Below(n) {
  let k = 1n;
  while (k << 1n < n) k <<= 1n;
  return k;
}

/** The leaf ranges whose roots form PROOF(old, D[0:new]) (RFC 9162 §2.1.4.1 SUBPROOF). */
export function consistencyPlan(oldSize, newSize) {
  if (!(0n < oldSize && oldSize <= newSize)) throw new RangeError(`no consistency proof from ${oldSize} to ${newSize}`);
  const out = [];
  let lo = 0n;
  let hi = newSize;
  let m = oldSize;
  let startKnown = true;
  for (;;) {
    const n = hi - lo;
    if (m === n) {
      if (!startKnown) out.push([lo, hi]);
      break;
    }
    const k = largestPow2Below(n);
    if (m <= k) {
      out.push([lo + k, hi]);
      hi = lo + k;
    } else {
      out.push([lo, lo + k]);
      lo += k;
      m -= k;
      startKnown = false;
    }
  }
  return out.reverse();
}

const bitLength = (x) => (x === 0n ? 0n : BigInt(x.toString(2).length));

/** Leaves [start, end) as maximal aligned perfect subtrees [level, index], left to right. */
function rangeCoords(start, end) {
  const out = [];
  while (start < end) {
    let level = start ? bitLength(start & -start) - 1n : bitLength(end - start) - 1n;
    while (start + (1n << level) > end) level -= 1n;
    out.push([level, start >> level]);
    start += 1n << level;
  }
  return out;
}

/** The stored hash `coord` = [level, index] of a tree of `size`, read out of its tiles. */
async function storedHash(coord, size, getTile) {
  const [level, index] = coord;
  const tl = level / TILE_HEIGHT;
  const sub = level - tl * TILE_HEIGHT;
  const first = index << sub;
  const tn = first >> TILE_HEIGHT;
  let row = await getTile(tl, tn);
  // Fold the tile's bottom row up `sub` heights, keeping only the node's own span.
  const pos = Number(first & 0xffn);
  const span = 1 << Number(sub);
  if ((pos + span) * HASH_SIZE > row.length) {
    throw new FetchError(getTile.url(tl, tn), "the tile is too short", { status: 200, malformed: true });
  }
  let nodes = [];
  for (let i = 0; i < span; i++) nodes.push(row.subarray((pos + i) * HASH_SIZE, (pos + i + 1) * HASH_SIZE));
  while (nodes.length > 1) {
    const next = [];
    for (let i = 0; i < nodes.length; i += 2) next.push(nodeHash(nodes[i], nodes[i + 1]));
    nodes = next;
  }
  row = null;
  return nodes[0];
}

function foldRight(hashes) {
  let acc = hashes[hashes.length - 1];
  for (let i = hashes.length - 2; i >= 0; i--) acc = nodeHash(hashes[i], acc);
  return acc;
}

/**
 * PROOF(oldSize, newSize) computed from the hash tiles the log at `base` serves for a tree of
 * `newSize` (fetched with `fetcher.getBytes`). Throws FetchError when a tile cannot be had or
 * is not a whole number of hashes.
 */
export async function consistencyFromTiles(fetcher, base, oldSize, newSize) {
  const tiles = new Map();
  const url = (tl, tn) => `${base}/${tilePath(tl, tn, newSize)}`;
  const getTile = async (tl, tn) => {
    const key = `${tl}/${tn}`;
    if (!tiles.has(key)) {
      const data = await fetcher.getBytes(url(tl, tn));
      if (data.length === 0 || data.length % HASH_SIZE) {
        throw new FetchError(url(tl, tn), "the tile is not a whole number of hashes", { status: 200, malformed: true });
      }
      tiles.set(key, data);
    }
    return tiles.get(key);
  };
  getTile.url = url;
  const proof = [];
  for (const [a, b] of consistencyPlan(oldSize, newSize)) {
    const parts = [];
    for (const coord of rangeCoords(a, b)) parts.push(await storedHash(coord, newSize, getTile));
    proof.push(foldRight(parts));
  }
  return proof;
}

/** The leaf ranges whose roots form PATH(index, D[0:size]), bottom-up (RFC 9162 §2.1.3.1). */
export function inclusionPlan(index, size) {
  if (!(0n <= index && index < size)) throw new RangeError(`index ${index} is not in a tree of size ${size}`);
  const out = [];
  for (let height = 0n; 1n << height < size; height++) {
    const start = ((index >> height) ^ 1n) << height;
    if (start < size) out.push([start, start + (1n << height) < size ? start + (1n << height) : size]);
  }
  return out;
}

/**
 * The tlog-proof text of entry `index` into the checkpoint the log at `base` serves (a
 * tlog-mirror's monitoring prefix, say), its path read out of that log's tiles: [text, note]
 * or [null, why there is none]. Nothing is trusted: the caller verifies the bundle.
 */
export async function proofFromTiles(fetcher, base, index) {
  base = base.replace(/\/+$/, "");
  let note;
  try {
    note = await fetcher.getBytes(`${base}/checkpoint`);
  } catch (e) {
    if (e instanceof FetchError) return [null, `none could be computed from ${base}: ${e.message}`];
    throw e;
  }
  const text = new TextDecoder("utf-8", { fatal: false }).decode(note);
  const sizeLine = text.split("\n")[1] ?? "";
  if (!/^(0|[1-9][0-9]{0,19})$/.test(sizeLine)) return [null, `none could be computed from ${base}: its checkpoint has no tree size`];
  const size = BigInt(sizeLine);
  const at = BigInt(index);
  if (at >= size) return [null, `the checkpoint at ${base} (size ${size}) does not cover index ${index} yet`];
  const tiles = new Map();
  const url = (tl, tn) => `${base}/${tilePath(tl, tn, size)}`;
  const getTile = async (tl, tn) => {
    const key = `${tl}/${tn}`;
    if (!tiles.has(key)) {
      const data = await fetcher.getBytes(url(tl, tn));
      if (data.length === 0 || data.length % HASH_SIZE) throw new FetchError(url(tl, tn), "the tile is not a whole number of hashes", { status: 200, malformed: true });
      tiles.set(key, data);
    }
    return tiles.get(key);
  };
  getTile.url = url;
  const lines = ["c2sp.org/tlog-proof@v1", `index ${index}`];
  try {
    for (const [a, b] of inclusionPlan(at, size)) {
      const parts = [];
      for (const coord of rangeCoords(a, b)) parts.push(await storedHash(coord, size, getTile));
      lines.push(toBase64(foldRight(parts)));
    }
  } catch (e) {
    if (e instanceof FetchError) return [null, `none could be computed from ${base}: ${e.message}`];
    throw e;
  }
  return [lines.join("\n") + "\n\n" + text, `inclusion proof computed from the tiles at ${base} (size ${size})`];
}
