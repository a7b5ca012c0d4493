// Bundles src/ into ../nbagent/notebook/static/ (widget.js, math.js, widget.css), deterministically:
// pinned esbuild, no timestamps, no absolute paths, no source maps.
import * as esbuild from "esbuild";
import { fileURLToPath } from "node:url";
import path from "node:path";

const here = path.dirname(fileURLToPath(import.meta.url));
const outdir = process.argv[2] ? path.resolve(process.argv[2]) : path.join(here, "..", "nbagent", "notebook", "static");
const common = { bundle: true, minify: true, legalComments: "eof", logLevel: "warning", absWorkingDir: here, charset: "utf8" };

await esbuild.build({ ...common, entryPoints: ["src/index.js"], outfile: path.join(outdir, "widget.js"),
  format: "esm", target: "es2020", platform: "browser" });
// Temml (TeX -> MathML), loaded by the widget only when a page shows math (see src/mathtext.js)
await esbuild.build({ ...common, entryPoints: ["src/math.js"], outfile: path.join(outdir, "math.js"),
  format: "esm", target: "es2020", platform: "browser" });
await esbuild.build({ ...common, entryPoints: ["src/styles.css"], outfile: path.join(outdir, "widget.css") });
console.log(`built ${path.relative(process.cwd(), outdir) || "."}/widget.js, math.js and widget.css`);
