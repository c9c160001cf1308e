// The shipped .d.ts files describe the API as it is used (tsc --noEmit over test/types-usage.ts
// and the TypeScript fixture server).
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { fileURLToPath } from "node:url";

const root = fileURLToPath(new URL("..", import.meta.url));

test("tsc --noEmit accepts the types and their usage", () => {
  const r = spawnSync(process.execPath, ["node_modules/typescript/bin/tsc", "-p", "tsconfig.json"], { cwd: root, encoding: "utf8" });
  assert.equal(r.status, 0, r.stdout + r.stderr);
});
