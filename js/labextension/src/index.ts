// nbagent's front-end extension for JupyterLab 4 and Notebook 7 (prebuilt, shipped in the wheel):
// - a provenance badge on each cell whose metadata records agent actions, drawn as the notebook opens
//   (no kernel needed); it opens the list of actions;
// - "Ask nbagent" on error outputs (a button on the error, the cell context menu, the command palette and
//   a shortcut): sends "fix the error" with the cell attached to the notebook's chat, adding a chat cell
//   below the error when the notebook shows none.
import { JupyterFrontEnd, JupyterFrontEndPlugin } from '@jupyterlab/application';
import { ICommandPalette } from '@jupyterlab/apputils';
import { Cell, CodeCell } from '@jupyterlab/cells';
import { INotebookTracker, NotebookActions, NotebookPanel } from '@jupyterlab/notebook';

import { type CellAction, actionLine, codeHash, diffLabel, diffLines, lastHashed, recordedActions, summary } from './provenance';

const ASK = 'nbagent:ask-about-error';
const ASK_LABEL = 'Ask nbagent to fix this error';
const ASK_KEYS = ['Accel Shift Y']; // free in JupyterLab 4.6 and Notebook 7.6 (Accel Shift E opens the debugger)
/** The chat cell added below an error when the notebook shows no chat (the user's own agent is kept). */
const CHAT_CELL = [
  '# added by Ask nbagent: the chat below fixes the error above',
  'from nbagent import Agent',
  "nbagent_agent = globals().get('nbagent_agent')",
  'if not isinstance(nbagent_agent, Agent):',
  '    nbagent_agent = Agent(notebook=True)',
  'nbagent_agent.widget()'
].join('\n');
const CHAT_WAIT_MS = 120_000;

let uid = 0;

// --- provenance badges ------------------------------------------------------------------

async function drawBadge(cell: Cell): Promise<void> {
  const actions = recordedActions(cell.model.metadata);
  let box = cell.node.querySelector(':scope > .nba-prov') as HTMLElement | null;
  if (!actions.length) {
    box?.remove();
    return;
  }
  const source = cell.model.sharedModel.getSource();
  const hashed = lastHashed(actions);
  const current = hashed ? await codeHash(source) : null;
  if (cell.isDisposed) return;
  const changed = !!(hashed && current && current !== hashed.codeSha256);
  if (!box) {
    box = document.createElement('div');
    box.className = 'nba-prov';
    box.dataset.lmSuppressShortcuts = 'true'; // Enter / Space on the badge are the badge's, not the notebook's
    const button = document.createElement('button');
    button.type = 'button';
    button.className = 'nba-prov-badge';
    button.setAttribute('aria-expanded', 'false');
    const list = document.createElement('ul');
    list.className = 'nba-prov-actions';
    list.id = `nba-prov-${++uid}`;
    list.hidden = true;
    button.setAttribute('aria-controls', list.id);
    button.addEventListener('keydown', (e) => {
      if (e.key === 'Enter' || e.key === ' ') e.stopPropagation(); // the button's own click follows
    });
    button.addEventListener('click', (e) => {
      e.stopPropagation();
      list.hidden = !list.hidden;
      button.setAttribute('aria-expanded', String(!list.hidden));
    });
    box.append(button, list);
    cell.node.insertBefore(box, cell.node.firstChild);
  }
  const button = box.querySelector('.nba-prov-badge') as HTMLButtonElement;
  const list = box.querySelector('.nba-prov-actions') as HTMLUListElement;
  const line = summary(actions) + (changed ? ' · changed since' : '');
  box.classList.toggle('nba-prov-changed', changed);
  button.textContent = line;
  button.setAttribute('aria-label', `Cell provenance: ${line}. ${actions.length} recorded ` +
    `action${actions.length === 1 ? '' : 's'}; press to ${list.hidden ? 'show' : 'hide'} them`);
  list.replaceChildren(...actions.map((a) => {
    const item = document.createElement('li');
    item.textContent = actionLine(a);
    if (a.diff) item.append(diffBlock(a));
    return item;
  }));
}

/** An action's recorded diff as plain text (never HTML), its +/- lines marked by class. */
function diffBlock(a: CellAction): HTMLElement {
  const pre = document.createElement('pre');
  pre.className = 'nba-prov-diff';
  pre.setAttribute('role', 'group');
  pre.setAttribute('aria-label', diffLabel(a));
  pre.tabIndex = 0; // it may scroll: reachable by keyboard
  for (const [kind, line] of diffLines(a.diff)) {
    const span = document.createElement('span');
    if (kind) span.className = `nba-prov-${kind}`;
    span.textContent = line; // a block per line: its own line when read or copied
    pre.append(span);
  }
  return pre;
}

// --- Ask nbagent on error outputs -------------------------------------------------------

function hasError(cell: Cell): boolean {
  if (!(cell instanceof CodeCell)) return false;
  const outputs = cell.model.outputs;
  for (let i = 0; i < outputs.length; i++) if (outputs.get(i).type === 'error') return true;
  return false;
}

function drawErrorButtons(cell: Cell, app: JupyterFrontEnd, panel: NotebookPanel): void {
  if (!(cell instanceof CodeCell)) return;
  const area = cell.outputArea;
  const outputs = cell.model.outputs;
  area.widgets.forEach((child, i) => {
    const isError = i < outputs.length && outputs.get(i).type === 'error';
    const existing = child.node.querySelector(':scope > .nba-ask-row');
    if (!isError) {
      existing?.remove();
      return;
    }
    if (existing) return;
    const row = document.createElement('div'); // a line of its own under the error
    row.className = 'nba-ask-row';
    const button = document.createElement('button');
    button.type = 'button';
    button.className = 'nba-ask';
    button.textContent = 'Ask nbagent';
    button.title = `${ASK_LABEL} (${ASK_KEYS[0].replace('Accel', navigator.platform.startsWith('Mac') ? 'Cmd' : 'Ctrl')})`;
    button.setAttribute('aria-label', ASK_LABEL);
    button.addEventListener('click', (e) => {
      e.stopPropagation();
      void askAboutError(app, panel, cell);
    });
    row.appendChild(button);
    child.node.appendChild(row);
  });
}

/** The chat box of a chat widget shown in the panel (the one nearest below `cell`, else the first). */
function chatInput(panel: NotebookPanel, cell: Cell): HTMLTextAreaElement | null {
  const cells = panel.content.widgets;
  const from = cells.indexOf(cell);
  const order = [...cells.slice(from), ...cells.slice(0, from)];
  for (const c of order) {
    const input = c.node.querySelector('.nba-chat .nba-input') as HTMLTextAreaElement | null;
    if (input) return input;
  }
  return null;
}

function waitFor<T>(probe: () => T | null, ms: number): Promise<T | null> {
  return new Promise((resolve) => {
    const start = Date.now();
    const tick = () => {
      const found = probe();
      if (found || Date.now() - start > ms) resolve(found);
      else setTimeout(tick, 100);
    };
    tick();
  });
}

async function askAboutError(app: JupyterFrontEnd, panel: NotebookPanel, cell: Cell): Promise<void> {
  const notebook = panel.content;
  const number = notebook.widgets.indexOf(cell) + 1; // @cell:N counts cells from 1, as people do
  if (number < 1) return;
  const prompt = `fix the error in this cell @cell:${number}`;
  let input = chatInput(panel, cell);
  if (!input) {
    // no chat in this notebook: add a chat cell below the error and run it
    notebook.activeCellIndex = number - 1;
    NotebookActions.insertBelow(notebook);
    const added = notebook.activeCell;
    if (!added) return;
    added.model.sharedModel.setSource(CHAT_CELL);
    await NotebookActions.run(notebook, panel.sessionContext);
    input = await waitFor(() => added.node.querySelector('.nba-chat .nba-input') as HTMLTextAreaElement | null,
      CHAT_WAIT_MS);
    if (!input) return;
  }
  const draft = input.value; // what the user was typing there comes back once the prompt is sent
  input.value = prompt;
  input.dispatchEvent(new Event('input', { bubbles: true }));
  input.focus();
  input.dispatchEvent(new KeyboardEvent('keydown', { key: 'Enter', code: 'Enter', bubbles: true, cancelable: true }));
  if (!draft) return;
  const box = input;
  if (await waitFor(() => (box.value === '' ? box : null), CHAT_WAIT_MS)) {
    box.value = draft;
    box.dispatchEvent(new Event('input', { bubbles: true }));
  }
}

// --- wiring -----------------------------------------------------------------------------

function watchPanel(panel: NotebookPanel, app: JupyterFrontEnd): void {
  const seen = new WeakSet<Cell>();
  const due = new Set<Cell>(); // cells to draw again at the next frame (all of them: null)
  let all = false;
  let scheduled = false;
  const draw = (cell: Cell | null) => {
    if (panel.isDisposed) return;
    if (cell) due.add(cell);
    else all = true;
    if (scheduled) return;
    scheduled = true;
    requestAnimationFrame(() => {
      scheduled = false;
      const cells = all ? [...panel.content.widgets] : [...due];
      all = false;
      due.clear();
      if (panel.isDisposed) return;
      for (const c of cells) {
        if (c.isDisposed) continue;
        if (!seen.has(c)) { // a cell's own changes draw only that cell
          seen.add(c);
          const again = () => draw(c);
          c.model.metadataChanged.connect(again);
          c.model.contentChanged.connect(again);
          if (c instanceof CodeCell) c.outputArea.model.changed.connect(again);
        }
        void drawBadge(c);
        drawErrorButtons(c, app, panel);
      }
    });
  };
  void panel.context.ready.then(() => {
    panel.content.model?.cells.changed.connect(() => draw(null));
    draw(null);
  });
}

const plugin: JupyterFrontEndPlugin<void> = {
  id: 'jupyter-nbagent:plugin',
  description: "nbagent's provenance badges and Ask nbagent on error outputs",
  autoStart: true,
  requires: [INotebookTracker],
  optional: [ICommandPalette],
  activate: (app: JupyterFrontEnd, tracker: INotebookTracker, palette: ICommandPalette | null) => {
    tracker.widgetAdded.connect((_, panel) => watchPanel(panel, app));
    tracker.forEach((panel) => watchPanel(panel, app));
    app.commands.addCommand(ASK, {
      label: ASK_LABEL,
      caption: 'Send "fix the error in this cell" with the cell to the notebook\'s chat',
      isEnabled: () => !!tracker.activeCell && hasError(tracker.activeCell),
      execute: () => {
        const panel = tracker.currentWidget;
        const cell = tracker.activeCell;
        if (panel && cell && hasError(cell)) return askAboutError(app, panel, cell);
      }
    });
    app.commands.addKeyBinding({ command: ASK, keys: ASK_KEYS, selector: '.jp-Notebook' });
    app.contextMenu.addItem({ command: ASK, selector: '.jp-Notebook .jp-CodeCell', rank: 0 });
    palette?.addItem({ command: ASK, category: 'nbagent' });
  }
};

export default plugin;
