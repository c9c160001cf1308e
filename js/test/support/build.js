// Compile the TypeScript fixture server with esbuild (types are checked by tsc in types.test.js).
import { build } from "esbuild";
import { fileURLToPath } from "node:url";

export const FIXTURE_DIR = fileURLToPath(new URL("../fixtures/", import.meta.url));

let built = null;

/** Path of the compiled fixture server (test/fixtures/.build/server.mjs), built once per run. */
export function fixtureServer() {
  built ??= build({
    entryPoints: [FIXTURE_DIR + "server.ts"], outfile: FIXTURE_DIR + ".build/server.mjs",
    format: "esm", platform: "node", target: "node20", bundle: false, logLevel: "warning",
  }).then(() => FIXTURE_DIR + ".build/server.mjs");
  return built;
}
