// Modules the widget loads only when a page needs them (static/math.js: Temml; static/grammars.js:
// highlight.js grammars), sent by the kernel on request: the view sends {type: "asset", id, name} once per
// page, the kernel answers {type: "asset", id, name, code}, and the code is imported from a blob URL.
// Shared by every widget on the page (and every copy of this bundle) through one global.
// importCode loads the modules the kernel puts in a trait instead (session_bar.js, folders.js).
const G = /** @type {any} */ (globalThis);
const assets = G.__nbagentAssets || (G.__nbagentAssets = { mods: {}, asked: {}, listeners: {}, request: null });

/** How to ask the kernel for a module (set by a live widget). @param {(name: string) => boolean} fn */
export function setAssetRequester(fn) { assets.request = fn; }

/** Call `fn(module)` when the module `name` is loaded (also, later, for each copy of this bundle).
 * @param {string} name @param {(mod: any) => void} fn */
export function onAsset(name, fn) { (assets.listeners[name] ||= []).push(fn); }

/** The module `name` if loaded; otherwise ask the kernel for it (once per page) and return null.
 * @param {string} name */
export function asset(name) {
  if (assets.mods[name]) return assets.mods[name];
  if (!assets.asked[name] && assets.request) assets.asked[name] = assets.request(name);
  return null;
}

/** A module's code arrived from the kernel: import it, then tell the listeners.
 * @param {string} name @param {string} code */
export async function loadAsset(name, code) {
  if (assets.mods[name]) return;
  const url = URL.createObjectURL(new Blob([code], { type: "text/javascript" }));
  try { assets.mods[name] = await import(/* webpackIgnore: true */ url); } finally { URL.revokeObjectURL(url); }
  for (const fn of assets.listeners[name] || []) fn(assets.mods[name]);
}

/** @type {Map<string, Promise<any>>} */
const imported = new Map(); // code -> its module, once per page (per copy of this bundle)

/** Import a module from its code (sent by the kernel in a trait), once per page. @param {string} code */
export function importCode(code) {
  let mod = imported.get(code);
  if (!mod) {
    const url = URL.createObjectURL(new Blob([code], { type: "text/javascript" }));
    mod = import(/* webpackIgnore: true */ url).finally(() => URL.revokeObjectURL(url));
    imported.set(code, mod);
  }
  return mod;
}
