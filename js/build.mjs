// Bundle the anywidget front end into the Python package (ipyagent/widgets/static):
//
//   runtime.js     the views' code, with marked, DOMPurify, highlight.js and the stylesheet inlined
//                  (no CDN: users are often offline); a page loads it once (js/src/loader.js)
//   run_view.js    the small module each view gets as its `_esm`: it loads the runtime, asking
//   chat.js        the kernel for it (by its hash, baked in here) when the page has none yet
//   ipyagent.css   the stylesheet alone, for pages that load runtime.js themselves (tests, benches)
//
//   node build.mjs                 write into ../ipyagent/widgets/static
//   node build.mjs --outdir DIR    write elsewhere (scripts/check-js.sh compares a fresh build)
//
// The output depends only on the sources and the locked dependency versions: no timestamps,
// no absolute paths, no source maps, files and inputs in a fixed order.

import { createHash } from "node:crypto";
import { mkdir, readdir, readFile, writeFile } from "node:fs/promises";
import path from "node:path";
import { fileURLToPath } from "node:url";
import * as esbuild from "esbuild";

const here = path.dirname(fileURLToPath(import.meta.url));
const LOADERS = ["run_view", "chat"];
const BANNER = "/* ipyagent widget bundle: built from js/src by js/build.mjs. Do not edit. */";

/** The runtime's name for loaders and the kernel: the start of the sha256 of its bytes
 * (ipyagent/widgets/runtime.py computes the same). */
function runtimeHash(text) {
  return createHash("sha256").update(text, "utf8").digest("hex").slice(0, 16);
}

function parseArgs(argv) {
  const i = argv.indexOf("--outdir");
  if (i !== -1 && !argv[i + 1]) throw new Error("--outdir needs a directory");
  return {
    outdir: path.resolve(i === -1 ? path.join(here, "..", "ipyagent", "widgets", "static") : argv[i + 1]),
  };
}

async function bundleScripts(entries, define) {
  const result = await esbuild.build({
    absWorkingDir: here,
    entryPoints: Object.fromEntries(entries.map((name) => [name, `src/${name}.js`])),
    define,
    outdir: "out", // nothing is written (write: false); names only
    write: false,
    bundle: true,
    format: "esm",
    platform: "browser",
    target: "es2020",
    minify: true,
    legalComments: "eof", // keep the libraries' licence notices
    charset: "ascii",
    sourcemap: false,
    banner: { js: BANNER },
    logLevel: "warning",
  });
  return result.outputFiles.map((f) => ({ name: path.basename(f.path), text: f.text }));
}

async function bundleStyles() {
  const dir = path.join(here, "src");
  const names = (await readdir(dir)).filter((n) => n.endsWith(".css")).sort();
  const sources = await Promise.all(names.map((n) => readFile(path.join(dir, n), "utf8")));
  const { code } = await esbuild.transform(sources.join("\n"), {
    loader: "css",
    minify: true,
    charset: "ascii",
    banner: BANNER,
    logLevel: "warning",
  });
  return { name: "ipyagent.css", text: code };
}

async function main() {
  const { outdir } = parseArgs(process.argv.slice(2));
  const css = await bundleStyles();
  const [runtime] = await bundleScripts(["runtime"], { __IPYAGENT_CSS__: JSON.stringify(css.text) });
  const loaders = await bundleScripts(LOADERS, {
    __IPYAGENT_RUNTIME__: JSON.stringify(runtimeHash(runtime.text)),
  });
  const files = [runtime, ...loaders, css];
  await mkdir(outdir, { recursive: true });
  for (const { name, text } of files) {
    await writeFile(path.join(outdir, name), text);
    const kb = (Buffer.byteLength(text) / 1024).toFixed(1);
    console.log(`${path.relative(process.cwd(), path.join(outdir, name)) || name}  ${kb} KiB`);
  }
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
