// `node test/support/build-fixture.mjs` compiles the TypeScript fixture server and prints its
// path (for tests/js/test_js_server.py).
import { fixtureServer } from "./build.js";

process.stdout.write((await fixtureServer()) + "\n");
