// The explorer's test stack on 127.0.0.1: a real `notary serve` with one real witness
// (`ledger witness serve`), an API key, and headless Chromium (Debian's, via playwright-core).
import { spawn, spawnSync } from "node:child_process";
import { closeSync, existsSync, mkdtempSync, openSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { REPO, freePort, notaryCli, notaryCommand } from "./notary.js";

export const CHROMIUM = process.env.CHROMIUM_PATH || "/usr/bin/chromium";
const LEDGER = join(REPO, ".venv/bin/ledger");

function cleanEnv() {
  const env = {};
  for (const [k, v] of Object.entries(process.env)) if (!k.startsWith("NOTARY_")) env[k] = v;
  return env;
}

function run(cmd, args) {
  const r = spawnSync(cmd, args, { encoding: "utf8", env: cleanEnv(), timeout: 60000 });
  if (r.error || r.status !== 0) throw new Error(`${cmd} ${args.join(" ")} failed: ${r.error?.message ?? r.stderr}`);
  return r.stdout;
}

/** Spawn a daemon logging to `logPath`; resolves once `ready()` is true (bounded wait). */
async function daemon(cmd, args, logPath, ready) {
  const log = openSync(logPath, "a");
  const proc = spawn(cmd, args, { stdio: ["ignore", log, log], env: cleanEnv() });
  closeSync(log);
  const exited = new Promise((resolve) => proc.once("exit", resolve));
  const deadline = Date.now() + 30000;
  for (;;) {
    if (proc.exitCode !== null) throw new Error(`${cmd} exited with ${proc.exitCode}:\n${readFileSync(logPath, "utf8").slice(-3000)}`);
    if (await ready().catch(() => false)) break;
    if (Date.now() > deadline) {
      proc.kill("SIGKILL");
      throw new Error(`${cmd} was not ready in time:\n${readFileSync(logPath, "utf8").slice(-3000)}`);
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  return {
    proc,
    async stop() {
      if (proc.exitCode !== null) return;
      proc.kill("SIGTERM");
      const timer = setTimeout(() => proc.kill("SIGKILL"), 10000);
      await exited;
      clearTimeout(timer);
    },
  };
}

const answers = (url) => async () => (await fetch(url)).status === 200;
const listening = (port) => async () => {
  const r = await fetch(`http://127.0.0.1:${port}/add-checkpoint`, { method: "GET" });
  return r.status > 0;
};

/**
 * A notary witnessed by one witness (quorum 1). The notary starts once alone to create its log
 * key (the witness must know it), then again with the witness configured.
 */
export async function startStack({ origin = "explorer.test/log" } = {}) {
  if (!existsSync(CHROMIUM)) throw new Error(`no Chromium at ${CHROMIUM}: apt-get install -y chromium (or set CHROMIUM_PATH)`);
  const dir = mkdtempSync(join(tmpdir(), "mcp-notary-explorer-"));
  const data = join(dir, "data");
  const port = await freePort();
  const url = `http://127.0.0.1:${port}`;
  const [cmd, ...pre] = notaryCommand();
  const serve = (extra) => daemon(cmd, [...pre, "serve", "--data", data, "--listen", `127.0.0.1:${port}`, "--origin", origin, "--log-format", "json", ...extra],
    join(dir, "serve.log"), answers(url + "/healthz"));
  let notary = await serve([]);
  const ledger = await (await fetch(url + "/v1/ledger")).json();
  await notary.stop();

  const witnessKey = join(dir, "witness.key");
  const witnessVkey = run(LEDGER, ["witness", "keygen", "--name", "witness.test/w1", "--out", witnessKey]).trim().split("\n").at(-1).trim();
  const wport = await freePort();
  const witness = await daemon(LEDGER, ["witness", "serve", "--key", witnessKey, "--log", ledger.vkey, "--listen", `127.0.0.1:${wport}`,
    "--data", join(dir, "witness-data"), "--log-format", "json"], join(dir, "witness.log"), listening(wport));
  notary = await serve(["--witness", `http://127.0.0.1:${wport}=${witnessVkey}`, "--witness-quorum", "1", "--witness-interval", "0.2"]);
  const key = notaryCli("apikey", "create", "--data", data, "--account", "explorer-tests");
  if (key.status !== 0) throw new Error(`notary apikey create failed: ${key.stderr}`);
  return {
    url, data, dir, origin: ledger.origin, vkey: ledger.vkey, witnessVkey,
    apiKey: key.stdout.trim().split("\n").at(-1).trim(),
    async cleanup() {
      await notary.stop();
      await witness.stop();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** Wait until /checkpoint is witnessed and covers `size` entries (bounded). */
export async function witnessed(url, size) {
  const deadline = Date.now() + 30000;
  for (;;) {
    const r = await fetch(url + "/checkpoint");
    const text = await r.text();
    if (r.headers.get("Notary-Witnessed") === "true" && Number(text.split("\n")[1]) >= size) return text;
    if (Date.now() > deadline) throw new Error(`no witnessed checkpoint of size ${size}: ${text}`);
    await new Promise((res) => setTimeout(res, 100));
  }
}
