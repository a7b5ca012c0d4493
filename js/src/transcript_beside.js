// The saved-transcript outputs (`<div class="nbagent-transcript">`, see
// nbagent/notebook/transcript_output.py) follow the widget in its cell, for notebooks read without a
// kernel: one with the turns so far, then one more per finished turn. JupyterLab and Notebook 7
// hide them with CSS (styles.css); other hosts (VS Code, Colab, a page of the standard HTML widget
// manager) have other output classes, so the live widget hides them itself: walking up from the
// widget's element a few levels, the first ancestor whose next element sibling holds a transcript
// and no chat widget; that sibling and the later ones holding a transcript (up to another chat
// widget's output) are the transcript's outputs. A turn asked from another cell has its output
// there, marked with the widget's key: a chat showing its turns hides those too.

const LEVELS = 5; // from the widget's element up to its output in the hosts' output lists
const TRANSCRIPT = ".nbagent-transcript";

/** @param {Element} node */
const holdsTranscript = (node) => node.matches(TRANSCRIPT) || (!!node.querySelector(TRANSCRIPT) && !node.querySelector(".nba-chat"));

/** The transcript outputs displayed after the widget at `el` (none: an empty list).
 * @param {Element} el @returns {HTMLElement[]} */
export function transcriptsBeside(el) {
  let node = el;
  for (let level = 0; level < LEVELS && node; level++) {
    let next = /** @type {HTMLElement|null} */ (node.nextElementSibling);
    if (next && holdsTranscript(next)) {
      const found = [];
      for (; next && !(next.matches(".nba-chat") || next.querySelector(".nba-chat")); next = /** @type {HTMLElement|null} */ (next.nextElementSibling)) {
        if (holdsTranscript(next)) found.push(next);
      }
      return found;
    }
    node = /** @type {Element} */ (node.parentElement);
  }
  return [];
}

/** Whether the chat at `el` stepped aside for the transcript (rendered without a kernel and
 * without its turns: a headless run's saved widget state). @param {Element} el */
const asideAt = (el) => !!el.querySelector(".nba-chat.nba-aside");

/** Hide the transcript outputs beside the live widget at `el`, now and as they arrive (they come
 * after the widget, one more at each turn's end); a chat that stepped aside shows them again.
 * Returns the stop and a re-check (the chat stepped aside or back).
 * @param {HTMLElement} el @returns {{stop: () => void, check: () => void}} */
export function hideTranscriptBeside(el) {
  if (typeof MutationObserver === "undefined") return { stop: () => {}, check: () => {} };
  let queued = false;
  let stopped = false;
  const check = () => {
    queued = false;
    const aside = asideAt(el);
    for (const out of transcriptsBeside(el)) {
      if (aside) {
        if (out.dataset.nbagentHidden) { out.style.display = ""; delete out.dataset.nbagentHidden; }
      } else if (out.style.display !== "none") { out.style.display = "none"; out.dataset.nbagentHidden = "live widget"; }
    }
  };
  const watcher = new MutationObserver((records) => {
    if (queued || records.every((r) => el.contains(r.target))) return; // the chat's own streaming
    queued = true;
    queueMicrotask(check);
  });
  // the host puts the widget's element in the page after render: watch from the top once it is there
  let tries = 0;
  const start = () => {
    if (stopped) return;
    if (!el.isConnected) { if (++tries < 50) setTimeout(start, 200); return; }
    let top = /** @type {Element} */ (el);
    for (let i = 0; i <= LEVELS && top.parentElement; i++) top = top.parentElement;
    watcher.observe(top, { childList: true, subtree: true });
    check();
  };
  start();
  return { stop: () => { stopped = true; watcher.disconnect(); }, check: () => { if (el.isConnected) check(); } };
}

/** Hide, anywhere in the page, the transcript outputs of this widget's turns asked from other
 * cells (class `nbagent-of-<key>`, transcript_output.py): the chat shows those turns. Returns the
 * undo. @param {string} key the widget's `_key` @returns {() => void} */
export function hideAskedElsewhere(key) {
  if (!/^[0-9a-f]+$/.test(key) || typeof document === "undefined" || !document.head) return () => {};
  const cls = `nbagent-of-${key}`;
  const style = document.createElement("style");
  style.dataset.nbagent = cls;
  style.textContent = `.jp-OutputArea-child:has(.${cls}), .${cls} { display: none; }`;
  document.head.append(style);
  return () => style.remove();
}
