// The review of the kernel's edits, on the cells they changed: the diff of the cell's source
// before and after the edit, and Keep / Undo. Keep takes the review away and leaves the cell;
// Undo puts back that cell (index.js runs the edit's inverse ops for it, guarded: a cell the user
// changed since is left alone, and the review says so). Styled with JupyterLab's theme variables,
// so it follows the light and dark themes. The diff itself is edits.js's (pure, tested by node).

import { lineDiff } from "./edits.js";

export const REVIEW_CLASS = "jp-ipyagent-review";
/** The bar of a run's changes, on the first cell that shows one of them. */
export const RUN_BAR_CLASS = "jp-ipyagent-run";
/** The Fix button, below a failed cell's outputs. */
export const FIX_CLASS = "jp-ipyagent-fix";

const CSS = `
.${REVIEW_CLASS} {
  margin: 2px 0 6px var(--jp-cell-prompt-width, 64px);
  border-left: 3px solid var(--jp-brand-color1);
  background: var(--jp-layout-color1);
  color: var(--jp-ui-font-color1);
  font-size: var(--jp-ui-font-size1);
}
.${REVIEW_CLASS}-head { display: flex; align-items: center; gap: 6px; padding: 3px 6px; }
.${REVIEW_CLASS}-head .${REVIEW_CLASS}-title { flex: 1; color: var(--jp-ui-font-color2); }
.${REVIEW_CLASS}-diff {
  margin: 0; padding: 2px 6px; overflow-x: auto; white-space: pre;
  font-family: var(--jp-code-font-family); font-size: var(--jp-code-font-size);
}
.${REVIEW_CLASS}-removed { background: var(--jp-error-color3); color: var(--jp-content-font-color1); }
.${REVIEW_CLASS}-added { background: var(--jp-success-color3); color: var(--jp-content-font-color1); }
.${REVIEW_CLASS}-note { padding: 3px 6px; color: var(--jp-warn-color0); }
.${RUN_BAR_CLASS} {
  display: flex; align-items: center; gap: 6px; padding: 3px 6px;
  margin: 2px 0 0 var(--jp-cell-prompt-width, 64px);
  border-left: 3px solid var(--jp-brand-color1);
  background: var(--jp-layout-color2);
  color: var(--jp-ui-font-color1);
  font-size: var(--jp-ui-font-size1);
}
.${REVIEW_CLASS}-why { padding: 3px 6px; white-space: pre-wrap; color: var(--jp-ui-font-color1); }
.${FIX_CLASS} {
  display: flex; align-items: center; gap: 6px; padding: 2px 6px;
  margin: 0 0 4px var(--jp-cell-prompt-width, 64px);
  color: var(--jp-ui-font-color2);
  font-size: var(--jp-ui-font-size1);
}
.${RUN_BAR_CLASS} .${RUN_BAR_CLASS}-title { flex: 1; }
.${RUN_BAR_CLASS} .${RUN_BAR_CLASS}-hint { color: var(--jp-ui-font-color2); }
`;

/** Add the review's style to the page once. */
export function ensureStyle(doc = document) {
  if (doc.getElementById(`${REVIEW_CLASS}-style`)) return;
  const style = doc.createElement("style");
  style.id = `${REVIEW_CLASS}-style`;
  style.textContent = CSS;
  doc.head.appendChild(style);
}

function button(doc, label, kind, onClick) {
  const el = doc.createElement("button");
  el.className = `jp-Button jp-mod-styled ${kind}`;
  el.textContent = label;
  el.addEventListener("click", (event) => {
    event.stopPropagation();
    onClick();
  });
  return el;
}

/**
 * The review of one cell: `before` (null: the edit inserted the cell) and `after` its source;
 * `note`, when set, says why an Undo left the cell alone (then only Keep is offered). A `fix`
 * (`%agent fix`'s edit) is kept with "Keep and run", and shows the agent's `explanation`.
 */
export function reviewElement({ before, after, note, fix, explanation, onKeep, onUndo }, doc = document) {
  const root = doc.createElement("div");
  root.className = REVIEW_CLASS;
  const head = doc.createElement("div");
  head.className = `${REVIEW_CLASS}-head`;
  const title = doc.createElement("span");
  title.className = `${REVIEW_CLASS}-title`;
  title.textContent = fix
    ? "ipyagent proposes this fix"
    : before === null
      ? "ipyagent inserted this cell"
      : "ipyagent changed this cell";
  head.appendChild(title);
  head.appendChild(button(doc, fix && !note ? "Keep and run" : "Keep", "jp-mod-accept", onKeep));
  if (!note) head.appendChild(button(doc, "Undo", "jp-mod-warn", onUndo));
  root.appendChild(head);
  if (note) {
    const why = doc.createElement("div");
    why.className = `${REVIEW_CLASS}-note`;
    why.textContent = note;
    root.appendChild(why);
  }
  if (explanation) {
    const why = doc.createElement("div");
    why.className = `${REVIEW_CLASS}-why`;
    why.textContent = explanation;
    root.appendChild(why);
  }
  const diff = doc.createElement("pre");
  diff.className = `${REVIEW_CLASS}-diff`;
  for (const line of lineDiff(before, after)) {
    const row = doc.createElement("div");
    const mark = line.kind === "removed" ? "-" : line.kind === "added" ? "+" : " ";
    if (line.kind !== "same") row.className = `${REVIEW_CLASS}-${line.kind}`;
    row.textContent = `${mark} ${line.text}`;
    diff.appendChild(row);
  }
  root.appendChild(diff);
  return root;
}

/**
 * The bar of a run: how many cells it changed that are still to review, "Keep all" and "Undo run",
 * and the warning that an undo puts back cells only, not the kernel's variables.
 */
export function runBarElement({ run, count, onKeepAll, onUndoRun }, doc = document) {
  const root = doc.createElement("div");
  root.className = RUN_BAR_CLASS;
  const title = doc.createElement("span");
  title.className = `${RUN_BAR_CLASS}-title`;
  title.textContent = `ipyagent run ${run} changed ${count} cell${count === 1 ? "" : "s"}. `;
  const hint = doc.createElement("span");
  hint.className = `${RUN_BAR_CLASS}-hint`;
  hint.textContent = "Undo run puts the cells back (sources, order, outputs) and the variables the run's code changed.";
  title.appendChild(hint);
  root.appendChild(title);
  root.appendChild(button(doc, "Keep all", "jp-mod-accept", onKeepAll));
  root.appendChild(button(doc, "Undo run", "jp-mod-warn", onUndoRun));
  return root;
}

/** The Fix button below a failed cell's outputs; `busy` while the agent works on it. */
export function fixElement({ busy, onFix }, doc = document) {
  const root = doc.createElement("div");
  root.className = FIX_CLASS;
  const fix = button(doc, busy ? "Fixing…" : "Fix", "jp-mod-accept", onFix);
  fix.title = "ipyagent explains this error and proposes a fix of the cell, as a diff to keep or undo";
  fix.disabled = Boolean(busy);
  root.appendChild(fix);
  const hint = doc.createElement("span");
  hint.textContent = busy ? "ipyagent is looking at the error…" : "ipyagent: explain this error and propose a fix";
  root.appendChild(hint);
  return root;
}
