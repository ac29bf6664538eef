// The live document as the kernel sees it: what `read_notebook` answers. Built from the open
// notebook's model (so unsaved edits are in it), never from the file. Pure: it reads the few
// model properties it needs, so node's tests can feed it plain objects.

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

/** One cell of the notebook model (a JupyterLab ICellModel). */
export function cellSnapshot(cell, maxChars) {
  const snapshot = {
    id: cell.id,
    cell_type: cell.type,
    source: cell.sharedModel.getSource(),
    execution_count: null,
    running: false,
    outputs: [],
  };
  if (cell.type === "code") {
    snapshot.execution_count = cell.executionCount ?? null;
    snapshot.running = cell.executionState === "running";
    snapshot.outputs = (cell.outputs ? cell.outputs.toJSON() : []).map((o) => trimOutput(o, maxChars));
  }
  return snapshot;
}

/**
 * The document of `view` (a NotebookPanel: `context` and `content`), as the user sees it now.
 * `maxChars` trims each output (the kernel asks for what fits its tool results).
 */
export function documentSnapshot(view, { maxChars = DEFAULT_MAX_OUTPUT_CHARS } = {}) {
  const notebook = view.content;
  const model = view.context.model;
  const cells = [];
  for (let i = 0; i < model.cells.length; i++) cells.push(cellSnapshot(model.cells.get(i), maxChars));
  const active = notebook.activeCell ? notebook.activeCell.model.id : null;
  const selected = notebook.widgets.filter((w) => notebook.isSelectedOrActive(w)).map((w) => w.model.id);
  return {
    path: view.context.path,
    dirty: Boolean(model.dirty),
    cells,
    active_cell_id: active,
    selected_cell_ids: selected,
  };
}
