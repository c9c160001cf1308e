#!/usr/bin/env node
import { main } from "../src/node/cli.js";

main(process.argv.slice(2)).then(
  (code) => { process.exitCode = code; },
  (e) => {
    process.stderr.write(`mcp-notary: internal error: ${e?.stack ?? e}\n`);
    process.exitCode = 2;
  },
);
