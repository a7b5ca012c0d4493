// The saved-transcript output (`<div class="nbagent-transcript">`, see nbagent/notebook/widget.py) is
// displayed right after the widget, for notebooks read without a kernel. JupyterLab and Notebook 7
// hide it with CSS (styles.css); other hosts (VS Code, Colab, a page of the standard HTML widget
// manager) have other output classes, so the live widget hides it itself: walking up from the
// widget's element a few levels, the first ancestor whose next element sibling holds a transcript
// and no chat widget; that sibling is the transcript's output.

const LEVELS = 5; // from the widget's element up to its output in the hosts' output lists
const TRANSCRIPT = ".nbagent-transcript";

/** The transcript output displayed next to the widget at `el`, or null.
 * @param {Element} el @returns {HTMLElement|null} */
export function transcriptBeside(el) {
  let node = el;
  for (let level = 0; level < LEVELS && node; level++) {
    const next = /** @type {HTMLElement|null} */ (node.nextElementSibling);
    if (next && (next.matches(TRANSCRIPT) || (next.querySelector(TRANSCRIPT) && !next.querySelector(".nba-chat")))) return next;
    node = /** @type {Element} */ (node.parentElement);
  }
  return null;
}

/** Hide the transcript output beside the live widget at `el`, now and when it arrives or is
 * re-displayed (it comes after the widget, and is replaced at each turn's end). Returns the stop.
 * @param {HTMLElement} el @returns {() => void} */
export function hideTranscriptBeside(el) {
  if (typeof MutationObserver === "undefined") return () => {};
  let queued = false;
  let stopped = false;
  const check = () => {
    queued = false;
    const out = transcriptBeside(el);
    if (out && out.style.display !== "none") { out.style.display = "none"; out.dataset.nbagentHidden = "live widget"; }
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
  return () => { stopped = true; watcher.disconnect(); };
}
