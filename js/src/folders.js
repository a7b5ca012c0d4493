// The session browser and the class view, built on their own (static/folders.js) and handed over by
// the kernel in their widgets' `_ui` trait, so chat widgets never load them (see folder_ui.js).
export { browserWidget } from "./browser/index.js";
export { classWidget } from "./classview/index.js";
export { useTurnsRenderer } from "./browser/shared.js";
