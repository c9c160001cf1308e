// The notary's HTTP API, from the page's own origin only (the CSP allows nothing else).

export class ApiError extends Error {
  constructor(status, code, message) {
    super(message);
    this.name = "ApiError";
    this.status = status;
    this.code = code;
  }
}

async function request(path) {
  let resp;
  try {
    resp = await fetch(path, { headers: { accept: "application/json, text/plain" }, credentials: "same-origin" });
  } catch (e) {
    throw new ApiError(0, "network", `the notary did not answer (${e.message})`);
  }
  const text = await resp.text();
  if (!resp.ok) {
    let code = `http_${resp.status}`;
    let message = text.slice(0, 300) || resp.statusText;
    try {
      const doc = JSON.parse(text);
      if (typeof doc?.error?.code === "string") code = doc.error.code;
      if (typeof doc?.error?.message === "string") message = doc.error.message;
    } catch {
      // not a JSON error body
    }
    throw new ApiError(resp.status, code, message);
  }
  return { text, headers: resp.headers };
}

export async function getJson(path) {
  const { text } = await request(path);
  try {
    return JSON.parse(text);
  } catch {
    throw new ApiError(200, "malformed", `${path} did not answer with JSON`);
  }
}

export async function getText(path) {
  return request(path);
}

/** Query string from an object, leaving out empty values. */
export function query(params) {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) if (v !== undefined && v !== null && v !== "") q.set(k, String(v));
  const text = q.toString();
  return text ? `?${text}` : "";
}
