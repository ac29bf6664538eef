// The live document as the kernel sees it: what `read_notebook` answers. Built from the open
// notebook's model (so unsaved edits are in it), never from the file. Pure: it reads the few
// model properties it needs, so node's tests can feed it plain objects.
//
// A read covers a range of cells (a 1000-cell notebook with outputs is about half a megabyte):
// `start`, at most `limit` cells, and no more than `page_chars` characters of sources and
// outputs (at least one cell). What the agent must know of the whole document comes with every
// read, whatever the range: the number of cells, the active, selected, running and last failed
// cells, and where each of those is (`index_of`).

/** Characters kept of one output's text when the kernel does not say. */
export const DEFAULT_MAX_OUTPUT_CHARS = 2000;

// Terminal colour codes: IPython colours its tracebacks.
const ANSI = /\x1b\[[0-9;]*[A-Za-z]/g;

function text(value) {
  return Array.isArray(value) ? value.join("") : typeof value === "string" ? value : "";
}

/** Keep `limit` characters: the head of a result, the tail of a stream (where the news is). */
function cut(value, limit, keep) {
  if (value.length <= limit) return { text: value, omitted: 0 };
  const omitted = value.length - limit;
  return { text: keep === "tail" ? value.slice(omitted) : value.slice(0, limit), omitted };
}

/** One nbformat output, trimmed to what the agent reads. */
export function trimOutput(output, maxChars) {
  switch (output.output_type) {
    case "stream": {
      const { text: kept, omitted } = cut(text(output.text), maxChars, "tail");
      return { type: "stream", name: output.name === "stderr" ? "stderr" : "stdout", text: kept, omitted };
    }
    case "execute_result":
    case "display_data": {
      const data = output.data || {};
      const mimeTypes = Object.keys(data).sort();
      const { text: kept, omitted } = cut(text(data["text/plain"]), maxChars, "head");
      return {
        type: output.output_type === "execute_result" ? "result" : "display",
        text: kept,
        omitted,
        mime_types: mimeTypes,
      };
    }
    case "error": {
      const traceback = Array.isArray(output.traceback) ? output.traceback.map((l) => String(l).replace(ANSI, "")) : [];
      // The last frames say where it failed: keep the tail of the traceback.
      const { text: kept, omitted } = cut(traceback.join("\n"), maxChars, "tail");
      return {
        type: "error",
        ename: String(output.ename ?? ""),
        evalue: String(output.evalue ?? ""),
        traceback: kept,
        omitted,
      };
    }
    default:
      return { type: "unknown", output_type: String(output.output_type) };
  }
}

/** `metadata.ipyagent` of a cell: {session, run, call}, or null. */
function provenanceOf(sharedModel) {
  const stamp = typeof sharedModel.getMetadata === "function" ? sharedModel.getMetadata("ipyagent") : undefined;
  return stamp && typeof stamp === "object" ? stamp : null;
}

/** One cell of the notebook model (a JupyterLab ICellModel). `running`: sent to the kernel and
 * not finished (JupyterLab marks every cell of a Run All at once, queued ones included). */
export function cellSnapshot(cell, maxChars) {
  const snapshot = {
    id: cell.id,
    cell_type: cell.type,
    source: cell.sharedModel.getSource(),
    execution_count: null,
    running: false,
    outputs: [],
    // Who changed the cell (the kernel's edits stamp it): later runs see it.
    provenance: provenanceOf(cell.sharedModel),
  };
  if (cell.type === "code") {
    snapshot.execution_count = cell.executionCount ?? null;
    snapshot.running = cell.executionState === "running";
    snapshot.outputs = (cell.outputs ? cell.outputs.toJSON() : []).map((o) => trimOutput(o, maxChars));
  }
  return snapshot;
}

/** Characters a cell costs in a read: its source and its trimmed outputs' texts. */
function cellChars(snapshot) {
  let chars = snapshot.source.length + 100;
  for (const o of snapshot.outputs) chars += (o.text || "").length + (o.traceback || "").length + (o.evalue || "").length;
  return chars;
}

/** Whether a cell's outputs hold an error, without serializing them (the whole document is looked at). */
function hasError(cell) {
  const outputs = cell.outputs;
  if (!outputs) return false;
  for (let i = 0; i < outputs.length; i++) if (outputs.get(i).type === "error") return true;
  return false;
}

/** A non-negative integer parameter, or `fallback`. */
function count(value, fallback) {
  return Number.isInteger(value) && value >= 0 ? value : fallback;
}

/**
 * The document of `view` (a NotebookPanel: `context` and `content`), as the user sees it now:
 * the cells from `start`, at most `limit` of them and `pageChars` characters (at least one cell;
 * no bounds: all of them). `maxChars` trims each output (the kernel asks for what fits its tool
 * results).
 */
export function documentSnapshot(
  view,
  { maxChars = DEFAULT_MAX_OUTPUT_CHARS, start = 0, limit = null, pageChars = null } = {},
) {
  const notebook = view.content;
  const model = view.context.model;
  const total = model.cells.length;
  const first = Math.min(count(start, 0), total);
  const end = Math.min(total, first + count(limit, total));
  const budget = count(pageChars, Infinity);
  const cells = [];
  let used = 0;
  for (let i = first; i < end; i++) {
    const snapshot = cellSnapshot(model.cells.get(i), maxChars);
    const chars = cellChars(snapshot);
    if (cells.length > 0 && used + chars > budget) break;
    cells.push(snapshot);
    used += chars;
  }
  const indexOf = {};
  const running = [];
  let failed = null;
  let failedCount = -1;
  for (let i = 0; i < total; i++) {
    const cell = model.cells.get(i);
    if (cell.type !== "code") continue;
    if (cell.executionState === "running") {
      running.push(cell.id);
      indexOf[cell.id] = i;
    }
    const executed = cell.executionCount ?? null;
    if (executed !== null && executed > failedCount && hasError(cell)) {
      failed = { id: cell.id, index: i };
      failedCount = executed;
    }
  }
  if (failed !== null) indexOf[failed.id] = failed.index;
  let active = null;
  const selected = [];
  notebook.widgets.forEach((widget, i) => {
    const id = widget.model.id;
    if (widget === notebook.activeCell) {
      active = id;
      indexOf[id] = i;
    }
    if (notebook.isSelectedOrActive(widget)) {
      selected.push(id);
      indexOf[id] = i;
    }
  });
  return {
    path: view.context.path,
    dirty: Boolean(model.dirty),
    start: first,
    total,
    cells,
    active_cell_id: active,
    selected_cell_ids: selected,
    running_cell_ids: running,
    last_failed_cell_id: failed && failed.id,
    index_of: indexOf,
  };
}
