// TeX -> MathML with Temml: a module of its own (static/math.js), fetched from the kernel the first
// time a page shows math, so widgets without math never load it. MathML needs no fonts and no
// fetches; the caller sanitises what this returns. TeX that does not parse throws (the caller then
// shows the TeX as written, not Temml's error text inside the answer).
import temml from "temml";

/** @param {string} tex @param {boolean} display @returns {string} MathML */
export function tex(tex, display) {
  return temml.renderToString(tex, { displayMode: display, throwOnError: true, trust: false, annotate: true, xml: false });
}
