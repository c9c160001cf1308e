// Compile the TypeScript fixtures with esbuild (types are checked by tsc in types.test.js): the
// server, and the tracing set-up an application loads with `node --import` (instrumentation).
import { build } from "esbuild";
import { fileURLToPath } from "node:url";

export const FIXTURE_DIR = fileURLToPath(new URL("../fixtures/", import.meta.url));

let built = null;

/** Path of the compiled fixture server (test/fixtures/.build/server.mjs), built once per run. */
export function fixtureServer() {
  built ??= build({
    entryPoints: ["server.ts", "instrumentation.ts"].map((name) => FIXTURE_DIR + name), outdir: FIXTURE_DIR + ".build",
    outExtension: { ".js": ".mjs" }, format: "esm", platform: "node", target: "node20", bundle: false, logLevel: "warning",
  }).then(() => FIXTURE_DIR + ".build/server.mjs");
  return built;
}
