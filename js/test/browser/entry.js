// The browser bundle of the tests: the verifier (through the package's browser entry point) and
// the corpus runner, exposed as globalThis.notaryTest.
import * as notary from "../../src/index.js";
import { runCase } from "../../src/corpus.js";

globalThis.notaryTest = {
  notary,
  async runAll(texts, backend) {
    notary.setEd25519Backend(backend);
    const used = await notary.ed25519Backend();
    const out = [];
    for (const [name, text] of texts) {
      try {
        const { ok, expected, got } = await runCase(notary.parseJson(text));
        out.push({ name, ok, expected: ok ? null : expected, got: ok ? null : got });
      } catch (e) {
        out.push({ name, ok: false, got: `threw ${e?.name}: ${e?.message}` });
      }
    }
    return { used, results: out };
  },
};
