// Runs as checkpoints: the page groups the kernel's edits by the run that made them (the
// provenance's run id), and the cells it ran (a `cell_outputs` notice names its run), so that
// "Undo run" puts back everything a run did to the cells — sources, order, outputs, deleted cells
// with theirs, inserted cells removed — and "Keep all" accepts it.
// Pure (no JupyterLab import), tested by node; index.js holds one RunLog per document.
//
// Undo of a run is the undo of its edits, newest first, each guarded like undo_edit (edits.js): a
// cell the user changed since is left alone and reported, so it never loses later work. It is a
// checkpoint: the cells a run changed go back even when the user kept them (Keep, Keep all), for
// Keep only ends the review (the run's bar goes when nothing of it is left to review). The
// kernel puts back the variables the run's code changed when the page asks it (`undo_variables`,
// index.js); what the page tells the user adds its answer.

import { undoEdit } from "./edits.js";

/** The cell an inverse op puts back. */
export function cellOf(op) {
  return op.op === "restore" ? op.cell.id : op.cell_id;
}

/** The run of an edit's provenance, or null (an edit made outside a run). */
export function runOf(provenance) {
  return provenance && typeof provenance.run === "string" && provenance.run ? provenance.run : null;
}

/**
 * Undo a run: `entries` are its edits in the order applied (each `{undo}`: the inverse ops not
 * yet run). Each entry's ops are consumed. The answer, one row per cell with where it is now:
 * `{undone: [{cell_id, index}], kept: [{cell_id, index, why, source?}]}`; a cell several edits
 * touched is reported once, as kept if any of its undos left it alone (the earlier edits' ops on
 * it are not run then: they would expect a source the cell no longer has).
 */
export function undoRun(doc, entries) {
  const undone = new Map();
  const kept = new Map();
  for (const entry of [...entries].reverse()) {
    const ops = entry.undo.filter((op) => !kept.has(cellOf(op)));
    entry.undo = [];
    const result = undoEdit(doc, ops);
    for (const cell of result.kept) {
      undone.delete(cell.cell_id);
      kept.set(cell.cell_id, cell);
    }
    for (const cell of result.undone) if (!kept.has(cell.cell_id)) undone.set(cell.cell_id, cell);
  }
  const ids = doc.ids();
  const where = (id) => (ids.includes(id) ? ids.indexOf(id) : null);
  return {
    undone: [...undone.keys()].map((id) => ({ cell_id: id, index: where(id) })),
    kept: [...kept.values()].map((cell) => ({ ...cell, index: where(cell.cell_id) })),
  };
}

/**
 * What the user reads after an undo of a run: the counts first (a notification shows about 140
 * characters), then the variables (`variables`: the kernel's answer to `undo_variables`, or
 * `{error}` when it gave none), then each cell left alone and why.
 */
export function undoRunMessage(run, { undone, kept }, variables = null) {
  const n = (count) => `${count} cell${count === 1 ? "" : "s"}`;
  const left = kept.length > 0 ? `, ${n(kept.length)} left as ${kept.length === 1 ? "it is" : "they are"}` : "";
  const parts = [`ipyagent undid run ${run}: put back ${n(undone.length)}${left}.`];
  const said = variablesMessage(variables);
  if (said) parts.push(said);
  if (kept.length > 0) {
    const why = kept.map((cell) => `${cell.index === null ? cell.cell_id : `cell ${cell.index + 1}`} (${cell.why})`);
    parts.push(`Left as they are: ${why.join(", ")}.`);
  }
  return parts.join(" ");
}

/**
 * The kernel's answer to `undo_variables` in words: the names put back and removed, those left
 * as they are and why, or why none were; "" for a run that changed no variable.
 */
export function variablesMessage(variables) {
  if (!variables) return "";
  const reason = variables.error || variables.refused;
  if (reason) return `The kernel's variables were not put back: ${reason}.`;
  const list = (names) => (Array.isArray(names) ? names : []);
  const done = [];
  if (list(variables.restored).length > 0) done.push(`put back ${list(variables.restored).join(", ")}`);
  if (list(variables.removed).length > 0) done.push(`removed ${list(variables.removed).join(", ")} (the run created them)`);
  const parts = done.length > 0 ? [`Variables: ${done.join("; ")}.`] : [];
  const kept = list(variables.kept);
  if (kept.length > 0) parts.push(`Variables left as they are: ${kept.map((k) => `${k.name} (${k.why})`).join(", ")}.`);
  return parts.join(" ");
}

/** The runs that changed one document: run id -> its edits (in order) and the cells kept (reviewed). */
export class RunLog {
  constructor() {
    this.runs = new Map();
  }

  add(run, editId) {
    if (!run) return;
    const known = this.runs.get(run) || { editIds: [], kept: new Set() };
    known.editIds.push(editId);
    // The latest run is the last in the map.
    this.runs.delete(run);
    this.runs.set(run, known);
  }

  /** The run's edits still remembered (`lookup(editId)`, a bounded log, may have forgotten some). */
  entries(run, lookup) {
    const known = this.runs.get(run);
    return known ? known.editIds.map(lookup).filter(Boolean) : [];
  }

  /** The cells a run changed that an undo of it would put back (kept or not; not undone yet). */
  pendingCells(run, lookup) {
    const cells = new Set();
    for (const entry of this.entries(run, lookup)) for (const op of entry.undo) cells.add(cellOf(op));
    return [...cells];
  }

  /** Whether the run is still to review: one of the cells it changed (not only ran) is not kept.
   * Its bar shows then; after Keep on every cell (or Keep all) it goes, and the run stays
   * undoable. A run that only ran cells shows none: Undo run still puts back their outputs. */
  inReview(run, lookup) {
    const known = this.runs.get(run);
    if (!known) return false;
    return this.entries(run, lookup).some((entry) =>
      entry.undo.some((op) => op.op !== "outputs" && !known.kept.has(cellOf(op))),
    );
  }

  /** The runs still to review, oldest first. */
  reviewed(lookup) {
    return [...this.runs.keys()].filter((run) => this.inReview(run, lookup));
  }

  /**
   * Where a run's bar goes when none of its cells shows a review (a run that only moved or
   * deleted cells): the first cell, in the document's order (`ids`), among those it changed and
   * the neighbours its deleted cells had; null when none of them is in the document.
   */
  anchor(run, lookup, ids) {
    const near = new Set();
    for (const entry of this.entries(run, lookup)) {
      for (const op of entry.undo) {
        if (op.op !== "restore") near.add(op.cell_id);
        else near.add(op.after_id === null ? ids[0] : op.after_id);
      }
    }
    return ids.find((id) => near.has(id)) || null;
  }

  /** The latest run with something left to undo, or null. */
  latest(lookup) {
    const runs = [...this.runs.keys()].reverse();
    return runs.find((run) => this.pendingCells(run, lookup).length > 0) || null;
  }

  keep(run, cellIds) {
    const known = this.runs.get(run);
    if (known) for (const id of cellIds) known.kept.add(id);
  }

  undo(doc, run, lookup) {
    const known = this.runs.get(run);
    if (!known) throw new Error(`this page knows no run ${JSON.stringify(run)} (made before a reload, or in another page)`);
    return undoRun(doc, this.entries(run, lookup));
  }
}
