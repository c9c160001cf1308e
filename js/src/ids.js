// Receipt ids and issued_at timestamps: each has exactly one accepted spelling, as in notary.core.ids.

const RECEIPT_ID_RE = /^tc_[A-Za-z0-9_-]{21}[AQgw]$/;
const ISSUED_AT_RE = /^([0-9]{4})-([0-9]{2})-([0-9]{2})T([0-9]{2}):([0-9]{2}):([0-9]{2})\.([0-9]{3})Z$/;

/** True only for `tc_` + 22 canonical base64url characters (16 bytes). */
export function isReceiptId(value) {
  return typeof value === "string" && RECEIPT_ID_RE.test(value);
}

function daysInMonth(year, month) {
  if (month === 2) return (year % 4 === 0 && year % 100 !== 0) || year % 400 === 0 ? 29 : 28;
  return [4, 6, 9, 11].includes(month) ? 30 : 31;
}

/** Whether `text` is the one accepted spelling of a real instant (no Date is built). */
export function isIssuedAt(text) {
  if (typeof text !== "string") return false;
  const m = ISSUED_AT_RE.exec(text);
  if (m === null) return false;
  const y = +m[1], mo = +m[2], d = +m[3];
  return y >= 1 && mo >= 1 && mo <= 12 && d >= 1 && d <= daysInMonth(y, mo) && +m[4] <= 23 && +m[5] <= 59 && +m[6] <= 59;
}

/** Why `text` is not an acceptable issued_at (for error messages). */
export function issuedAtProblem(text) {
  try {
    parseIssuedAt(text);
  } catch (e) {
    return e.message;
  }
  return "not a valid instant";
}

/**
 * Check the one accepted spelling of issued_at (RFC 3339 UTC, milliseconds, `Z`) and that it is
 * a real instant; returns the Date, throws Error with the reason otherwise.
 */
export function parseIssuedAt(text) {
  if (typeof text !== "string") throw new Error("issued_at must be a string");
  const m = ISSUED_AT_RE.exec(text);
  if (m === null) {
    throw new Error(`issued_at ${JSON.stringify(text)} is not RFC 3339 UTC with milliseconds (YYYY-MM-DDTHH:MM:SS.mmmZ)`);
  }
  const [y, mo, d, h, mi, s, ms] = m.slice(1).map(Number);
  const ok = y >= 1 && mo >= 1 && mo <= 12 && d >= 1 && d <= daysInMonth(y, mo) && h <= 23 &&
    mi <= 59 && s <= 59;
  if (!ok) throw new Error(`issued_at ${JSON.stringify(text)} is not a valid instant`);
  const date = new Date(0);
  date.setUTCFullYear(y, mo - 1, d);
  date.setUTCHours(h, mi, s, ms);
  return date;
}
