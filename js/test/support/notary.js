// A real `notary serve` on 127.0.0.1 for the integration tests, started as an operator would.
// NOTARY_CMD overrides the command (default: the repository's .venv/bin/notary).
import { spawn, spawnSync } from "node:child_process";
import { mkdtempSync, rmSync, openSync, closeSync, readFileSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";

export const REPO = fileURLToPath(new URL("../../../", import.meta.url));

export function notaryCommand() {
  if (process.env.NOTARY_CMD) return process.env.NOTARY_CMD.split(" ").filter(Boolean);
  return [join(REPO, ".venv/bin/notary")];
}

export function freePort() {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.once("error", reject);
    srv.listen(0, "127.0.0.1", () => {
      const { port } = srv.address();
      srv.close(() => resolve(port));
    });
  });
}

function cleanEnv() {
  const env = {};
  for (const [k, v] of Object.entries(process.env)) if (!k.startsWith("NOTARY_")) env[k] = v;
  return env;
}

/** Run `notary ARGV` to completion: {status, stdout, stderr}. */
export function notaryCli(...argv) {
  const [cmd, ...pre] = notaryCommand();
  const r = spawnSync(cmd, [...pre, ...argv], { encoding: "utf8", env: cleanEnv(), timeout: 60000 });
  if (r.error) throw new Error(`cannot run ${cmd}: ${r.error.message}`);
  return { status: r.status, stdout: r.stdout, stderr: r.stderr };
}

/**
 * Start a fresh notary; resolves to {url, data, apiKey, jwks, vkey, stop()}. `args` are extra
 * `notary serve` flags.
 */
export async function startNotary({ origin = "js-test.example/log", args = [] } = {}) {
  const dir = mkdtempSync(join(tmpdir(), "mcp-notary-js-"));
  const data = join(dir, "data");
  const port = await freePort();
  const url = `http://127.0.0.1:${port}`;
  const [cmd, ...pre] = notaryCommand();
  const logPath = join(dir, "serve.log");
  const log = openSync(logPath, "a");
  const proc = spawn(cmd, [...pre, "serve", "--data", data, "--listen", `127.0.0.1:${port}`, "--origin", origin, "--log-format", "json", ...args], {
    stdio: ["ignore", log, log], env: cleanEnv(), detached: false,
  });
  closeSync(log);
  const exited = new Promise((resolve) => proc.once("exit", resolve));
  const deadline = Date.now() + 30000;
  for (;;) {
    if (proc.exitCode !== null) throw new Error(`notary serve exited with ${proc.exitCode}:\n${readFileSync(logPath, "utf8").slice(-3000)}`);
    try {
      const r = await fetch(url + "/healthz");
      if (r.status === 200) break;
    } catch {
      // not listening yet
    }
    if (Date.now() > deadline) {
      proc.kill("SIGKILL");
      throw new Error(`notary serve did not answer /healthz in time:\n${readFileSync(logPath, "utf8").slice(-3000)}`);
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  const key = notaryCli("apikey", "create", "--data", data, "--account", "js-tests");
  if (key.status !== 0) throw new Error(`notary apikey create failed: ${key.stderr}`);
  const apiKey = key.stdout.trim().split("\n").at(-1).trim();
  const jwks = await (await fetch(url + "/.well-known/jwks.json")).json();
  const ledger = await (await fetch(url + "/v1/ledger")).json();
  return {
    url, data, dir, apiKey, jwks, vkey: ledger.vkey, origin: ledger.origin, logPath, proc,
    async stop() {
      if (proc.exitCode === null) {
        proc.kill("SIGTERM");
        const timer = setTimeout(() => proc.kill("SIGKILL"), 10000);
        await exited;
        clearTimeout(timer);
      }
    },
    async cleanup() {
      await this.stop();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
