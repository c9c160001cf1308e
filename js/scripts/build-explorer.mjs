#!/usr/bin/env node
// Build the explorer (js/explorer, bundling the verifier from js/src) into the Python package:
// notary/http/explorer/index.html and assets/<name>.<content hash>.<ext>. The output depends on
// the sources and the esbuild version (pinned by package-lock.json) only: no timestamps, no
// absolute paths, so a fresh build equals the committed one byte for byte, which a test checks.
//
//   node scripts/build-explorer.mjs [--out DIR]     (default: ../notary/http/explorer)

import { build } from "esbuild";
import { createHash } from "node:crypto";
import { mkdirSync, readFileSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";

const JS_DIR = fileURLToPath(new URL("../", import.meta.url));
const SRC = join(JS_DIR, "explorer");
export const DEFAULT_OUT = fileURLToPath(new URL("../../notary/http/explorer/", import.meta.url));
const HASHED = /^[a-z]+\.[0-9a-f]{16}\.(js|css|svg)$/;

const hashed = (stem, ext, bytes) => `${stem}.${createHash("sha256").update(bytes).digest("hex").slice(0, 16)}.${ext}`;

async function bundle(entry, loader) {
  const result = await build({
    entryPoints: [join(SRC, entry)], bundle: true, write: false, minify: true, format: "esm", platform: "browser",
    target: ["es2022", "chrome111", "firefox115", "safari16"], legalComments: "none", charset: "utf8", sourcemap: false,
    loader, logLevel: "warning", absWorkingDir: JS_DIR,
  });
  if (result.outputFiles.length !== 1) throw new Error(`${entry}: expected one output file`);
  return Buffer.from(result.outputFiles[0].contents);
}

/** The built files, {relative path: Buffer}, without writing anything. */
export async function buildExplorer() {
  const js = await bundle("main.js");
  const css = await bundle("style.css", { ".css": "css" });
  const icon = readFileSync(join(SRC, "icon.svg"));
  const names = { js: hashed("app", "js", js), css: hashed("app", "css", css), icon: hashed("icon", "svg", icon) };
  let html = readFileSync(join(SRC, "index.html"), "utf8");
  for (const [key, name] of Object.entries(names)) html = html.replaceAll(`{{${key}}}`, name);
  if (/\{\{\w+\}\}/.test(html)) throw new Error("index.html has an unknown placeholder");
  return {
    "index.html": Buffer.from(html, "utf8"),
    [`assets/${names.js}`]: js,
    [`assets/${names.css}`]: css,
    [`assets/${names.icon}`]: icon,
  };
}

/** Write the build to `out`, removing hashed assets of earlier builds. */
export async function writeExplorer(out = DEFAULT_OUT) {
  const files = await buildExplorer();
  mkdirSync(join(out, "assets"), { recursive: true });
  for (const name of readdirSync(join(out, "assets"))) {
    if (HASHED.test(name) && !(`assets/${name}` in files)) rmSync(join(out, "assets", name));
  }
  for (const [rel, bytes] of Object.entries(files)) writeFileSync(join(out, rel), bytes);
  return files;
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  const i = process.argv.indexOf("--out");
  const out = i > 0 ? process.argv[i + 1] : DEFAULT_OUT;
  const files = await writeExplorer(out);
  for (const [rel, bytes] of Object.entries(files)) console.log(`${join(out, rel)}  ${bytes.length} bytes`);
}
