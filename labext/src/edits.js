// The kernel's edits of the open document: `edit` and `undo_edit` (docs/live-notebook-protocol.md).
// Pure: it changes a document through a small adapter (`ids`, `source`, `setSource`, `cellJSON`,
// `insert`, `remove`, `move`, `getMeta`, `setMeta`, `setOutputs`), so node's tests drive it with
// an array and index.js with the notebook's shared model, inside one transaction.
//
// An edit is all or nothing: every op's guard (the source the agent expects, the neighbour a cell
// goes after) is checked on a simulation of the whole request before anything changes. Its undo
// is not: each inverse op is guarded by what the edit wrote, and a cell the user has changed since
// is left alone and reported, so undo never loses later work. The review on the changed cells
// (review.js) takes its diff, and which cells to show it on, from here too.

/** Edits (and undos) remembered for exactly-once answers and for undo. */
export const REMEMBERED = 200;

const CELL_TYPES = new Set(["code", "markdown", "raw"]);
const ID = /^[A-Za-z0-9_-]{1,64}$/;

function isText(value) {
  return typeof value === "string";
}

function isAnchor(value) {
  return value === null || isText(value);
}

/** The ops of a request, checked for shape: a malformed op is the kernel's bug, said at once. */
export function validateOps(ops) {
  if (!Array.isArray(ops) || ops.length === 0) throw new Error("an edit needs a non-empty list of ops");
  ops.forEach((op, i) => {
    const bad = (what) => {
      throw new Error(`op ${i} (${JSON.stringify(op && op.op)}): ${what}`);
    };
    if (!op || typeof op !== "object") bad("not an object");
    switch (op.op) {
      case "replace":
        if (!isText(op.cell_id) || !isText(op.expect) || !isText(op.source)) bad("needs cell_id, expect and source");
        break;
      case "insert":
        if (op.after_id !== undefined && !isAnchor(op.after_id)) bad("after_id must be a cell id or null");
        if (!CELL_TYPES.has(op.cell_type)) bad("cell_type must be code, markdown or raw");
        if (!isText(op.source)) bad("needs a source");
        if (op.cell_id !== undefined && !(isText(op.cell_id) && ID.test(op.cell_id))) bad("cell_id is not a valid id");
        break;
      case "delete":
        if (!isText(op.cell_id) || !isText(op.expect)) bad("needs cell_id and expect");
        break;
      case "move":
        if (!isText(op.cell_id) || !isText(op.expect) || !isAnchor(op.after_id)) {
          bad("needs cell_id, expect and after_id (a cell id or null)");
        }
        break;
      default:
        bad("unknown op");
    }
  });
}

/** Where the cell goes: after `afterId` (null: the top; undefined: the end). -1 when it is gone. */
function anchorIndex(ids, afterId) {
  if (afterId === undefined) return ids.length;
  if (afterId === null) return 0;
  const i = ids.indexOf(afterId);
  return i < 0 ? -1 : i + 1;
}

function gone(cellId) {
  return { cell_id: cellId, index: null, source: "gone" };
}

/**
 * The conflicts of `ops` with `doc` (none: the edit can be applied). Checked on a simulation of
 * the ids and sources, op after op, so an op may name a cell an earlier op inserted.
 */
export function findConflicts(doc, ops) {
  const ids = doc.ids();
  const where = new Map(ids.map((id, i) => [id, i]));
  // Sources as the ops leave them; the others are read from the document when a guard needs them.
  const sources = new Map();
  const source = (id) => (sources.has(id) ? sources.get(id) : doc.source(where.get(id)));
  const conflicts = [];
  let fresh = 0;
  for (const op of ops) {
    if (op.op === "insert") {
      const at = anchorIndex(ids, op.after_id);
      if (at < 0) {
        conflicts.push(gone(op.after_id));
        continue;
      }
      const id = op.cell_id && !ids.includes(op.cell_id) ? op.cell_id : `\0new-${fresh++}`;
      ids.splice(at, 0, id);
      sources.set(id, op.source);
      continue;
    }
    const i = ids.indexOf(op.cell_id);
    if (i < 0) {
      conflicts.push(gone(op.cell_id));
      continue;
    }
    const now = source(op.cell_id);
    if (now !== op.expect) {
      conflicts.push({ cell_id: op.cell_id, index: i, source: now });
      continue;
    }
    if (op.op === "replace") sources.set(op.cell_id, op.source);
    else if (op.op === "delete") ids.splice(i, 1);
    else {
      ids.splice(i, 1);
      const at = anchorIndex(ids, op.after_id);
      if (at < 0) {
        conflicts.push(gone(op.after_id));
        ids.splice(i, 0, op.cell_id);
        continue;
      }
      ids.splice(at, 0, op.cell_id);
    }
  }
  return conflicts;
}

function provenanceOf(value) {
  const p = value || {};
  return { session: p.session ?? null, run: p.run ?? null, call: p.call ?? null };
}

/**
 * Apply `ops` to `doc`, all or none. `newId()` names an inserted cell when the kernel suggests no
 * id, or one already taken. The result: `{answer, undo}`: the answer the kernel reads
 * (`{applied: true, cells}` or `{applied: false, conflicts}`) and, when applied, the inverse ops
 * that undo it (in the order to run them).
 */
export function applyEdit(doc, { ops, provenance }, newId) {
  validateOps(ops);
  const conflicts = findConflicts(doc, ops);
  if (conflicts.length > 0) return { answer: { applied: false, conflicts }, undo: null };
  const stamp = provenanceOf(provenance);
  const inverse = [];
  const touched = [];
  for (const op of ops) {
    const ids = doc.ids();
    switch (op.op) {
      case "replace": {
        const i = ids.indexOf(op.cell_id);
        const undo = { op: "replace", cell_id: op.cell_id, expect: op.source, source: op.expect, meta: doc.getMeta(i) };
        const old = doc.cellJSON(i);
        if (Array.isArray(old.outputs)) {
          // A checkpoint puts back what the cell showed too: it may run (Keep on a fix) before an undo.
          undo.outputs = old.outputs;
          undo.execution_count = old.execution_count ?? null;
        }
        inverse.push(undo);
        doc.setSource(i, op.source);
        doc.setMeta(i, stamp);
        touched.push(op.cell_id);
        break;
      }
      case "insert": {
        const at = anchorIndex(ids, op.after_id);
        const id = op.cell_id && !ids.includes(op.cell_id) ? op.cell_id : newId();
        const cell = { id, cell_type: op.cell_type, source: op.source, metadata: { ipyagent: stamp } };
        if (op.cell_type === "code") Object.assign(cell, { outputs: [], execution_count: null });
        const made = doc.insert(at, cell);
        inverse.push({ op: "delete", cell_id: made, expect: op.source });
        touched.push(made);
        break;
      }
      case "delete": {
        const i = ids.indexOf(op.cell_id);
        inverse.push({ op: "restore", cell: doc.cellJSON(i), after_id: i > 0 ? ids[i - 1] : null, index: i });
        doc.remove(i);
        touched.push(op.cell_id);
        break;
      }
      case "move": {
        const i = ids.indexOf(op.cell_id);
        const rest = ids.filter((id) => id !== op.cell_id);
        const to = anchorIndex(rest, op.after_id);
        inverse.push({ op: "move", cell_id: op.cell_id, expect: op.expect, after_id: i > 0 ? ids[i - 1] : null });
        if (to !== i) doc.move(i, to);
        touched.push(op.cell_id);
        break;
      }
    }
  }
  const after = doc.ids();
  const cells = touched.map((id) => ({ cell_id: id, index: after.includes(id) ? after.indexOf(id) : null }));
  return { answer: { applied: true, cells }, undo: inverse.reverse() };
}

/**
 * Undo an edit by its inverse ops, each guarded by what the edit wrote: a cell changed since, or
 * gone, is left alone and reported in `kept`; the others are `undone`.
 */
export function undoEdit(doc, inverse) {
  const undone = [];
  const kept = [];
  for (const op of inverse) {
    const ids = doc.ids();
    if (op.op === "restore") {
      if (ids.includes(op.cell.id)) {
        kept.push({ cell_id: op.cell.id, index: ids.indexOf(op.cell.id), why: "it is back already" });
        continue;
      }
      let at = anchorIndex(ids, op.after_id);
      if (at < 0) at = Math.min(op.index, ids.length);
      doc.insert(at, op.cell);
      undone.push({ cell_id: op.cell.id, index: at });
      continue;
    }
    const i = ids.indexOf(op.cell_id);
    if (i < 0) {
      kept.push({ cell_id: op.cell_id, index: null, why: "it is gone" });
      continue;
    }
    const now = doc.source(i);
    if (op.op === "replace" && now === op.source && now !== op.expect) {
      // Back already (JupyterLab's own Undo, or typed back): nothing to do, nothing of the user's lost.
      undone.push({ cell_id: op.cell_id, index: i });
      continue;
    }
    if (now !== op.expect) {
      kept.push({ cell_id: op.cell_id, index: i, why: "it was changed since", source: now });
      continue;
    }
    if (op.op === "replace") {
      doc.setSource(i, op.source);
      doc.setMeta(i, op.meta);
      if (op.outputs !== undefined) doc.setOutputs(i, op.outputs, op.execution_count);
      undone.push({ cell_id: op.cell_id, index: i });
    } else if (op.op === "delete") {
      doc.remove(i);
      undone.push({ cell_id: op.cell_id, index: null });
    } else if (op.op === "outputs") {
      // A cell the run ran (outputsBefore): what it showed before, if its source is as it ran.
      doc.setOutputs(i, op.outputs, op.execution_count);
      undone.push({ cell_id: op.cell_id, index: i });
    } else {
      const rest = ids.filter((id) => id !== op.cell_id);
      const to = anchorIndex(rest, op.after_id);
      if (to < 0) {
        kept.push({ cell_id: op.cell_id, index: i, why: "the cell it came after is gone" });
        continue;
      }
      if (to !== i) doc.move(i, to);
      undone.push({ cell_id: op.cell_id, index: to });
    }
  }
  return { undone, kept };
}

/**
 * The page's memory of edits: each `edit_id`'s first answer (a repeat of a request the kernel
 * timed out on gets it again instead of a second application) and its inverse ops (for undo).
 * Bounded: the oldest are forgotten first.
 */
export class EditLog {
  constructor(limit = REMEMBERED) {
    this.limit = limit;
    this.entries = new Map();
  }

  get(key) {
    return this.entries.get(key);
  }

  remember(key, entry) {
    this.entries.set(key, entry);
    while (this.entries.size > this.limit) this.entries.delete(this.entries.keys().next().value);
  }
}

/** Lines compared by the review's diff at most (a longer source is shown old and new, whole). */
export const DIFF_LINES = 400;

/**
 * The lines of `before` and `after`, each marked "same", "removed" or "added", in order: a longest
 * common subsequence of lines, as a reviewer reads a diff. `null` for `before`: all added.
 */
export function lineDiff(before, after) {
  const a = before === null ? [] : before.split("\n");
  const b = after.split("\n");
  if (a.length > DIFF_LINES || b.length > DIFF_LINES) {
    return [...a.map((text) => ({ kind: "removed", text })), ...b.map((text) => ({ kind: "added", text }))];
  }
  // common[i][j]: the longest common subsequence of a[i:] and b[j:].
  const common = Array.from({ length: a.length + 1 }, () => new Array(b.length + 1).fill(0));
  for (let i = a.length - 1; i >= 0; i--) {
    for (let j = b.length - 1; j >= 0; j--) {
      common[i][j] = a[i] === b[j] ? common[i + 1][j + 1] + 1 : Math.max(common[i + 1][j], common[i][j + 1]);
    }
  }
  const lines = [];
  let i = 0;
  let j = 0;
  while (i < a.length || j < b.length) {
    if (i < a.length && j < b.length && a[i] === b[j]) {
      lines.push({ kind: "same", text: a[i] });
      i++;
      j++;
    } else if (i < a.length && (j === b.length || common[i + 1][j] >= common[i][j + 1])) {
      lines.push({ kind: "removed", text: a[i++] });
    } else {
      lines.push({ kind: "added", text: b[j++] });
    }
  }
  return lines;
}

/**
 * What the review shows for an applied edit: one entry per replaced or inserted cell, with its
 * source before (null: inserted) and after. Deleted and moved cells have no cell to show it on.
 */
export function reviewsOf(ops, answer) {
  const reviews = [];
  ops.forEach((op, i) => {
    const cell = answer.cells[i];
    if (op.op === "replace") reviews.push({ cellId: cell.cell_id, before: op.expect, after: op.source });
    else if (op.op === "insert") reviews.push({ cellId: cell.cell_id, before: null, after: op.source });
  });
  return reviews;
}

/**
 * The inverse op that puts back what a code cell showed before a run ran it (`run_cell`): its
 * outputs and execution count, guarded by its source then (a cell the user changed since keeps
 * the outputs of what it holds). `cell` is the cell's nbformat JSON.
 */
export function outputsBefore(cell) {
  return {
    op: "outputs",
    cell_id: cell.id,
    expect: String(cell.source ?? ""),
    outputs: Array.isArray(cell.outputs) ? cell.outputs : [],
    execution_count: cell.execution_count ?? null,
  };
}

/** The inverse ops of one cell of an edit (a cell kept, another undone: only that one's). */
export function inverseFor(inverse, cellId) {
  return inverse.filter((op) => (op.op === "restore" ? op.cell.id : op.cell_id) === cellId);
}
