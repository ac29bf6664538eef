import assert from "node:assert/strict";
import { test } from "node:test";
import { documentSnapshot, trimOutput } from "../src/snapshot.js";

// Plain objects with the few properties of JupyterLab's models that the snapshot reads.
function codeCell(id, source, { count = null, outputs = [], state = "idle" } = {}) {
  return {
    id,
    type: "code",
    sharedModel: { getSource: () => source },
    executionCount: count,
    executionState: state,
    outputs: { toJSON: () => outputs },
  };
}

function markdownCell(id, source) {
  return { id, type: "markdown", sharedModel: { getSource: () => source } };
}

function panel(cells, { active, selected = [], dirty = false }) {
  const widgets = cells.map((model) => ({ model }));
  return {
    context: { path: "work/a.ipynb", model: { dirty, cells: { length: cells.length, get: (i) => cells[i] } } },
    content: {
      activeCell: widgets.find((w) => w.model.id === active) || null,
      widgets,
      isSelectedOrActive: (w) => w.model.id === active || selected.includes(w.model.id),
    },
  };
}

test("the snapshot is the open model: sources, counts, running state, active and selected cells", () => {
  const cells = [
    markdownCell("m1", "# Title"),
    codeCell("c1", "x = 1  # edited, not saved", { count: 3 }),
    codeCell("c2", "slow()", { state: "running" }),
  ];
  const snapshot = documentSnapshot(panel(cells, { active: "c2", selected: ["c1"], dirty: true }));
  assert.equal(snapshot.path, "work/a.ipynb");
  assert.equal(snapshot.dirty, true);
  assert.equal(snapshot.active_cell_id, "c2");
  assert.deepEqual(snapshot.selected_cell_ids, ["c1", "c2"]);
  assert.deepEqual(
    snapshot.cells.map((c) => [c.id, c.cell_type, c.source, c.execution_count, c.running]),
    [
      ["m1", "markdown", "# Title", null, false],
      ["c1", "code", "x = 1  # edited, not saved", 3, false],
      ["c2", "code", "slow()", null, true],
    ],
  );
});

test("outputs are trimmed: the tail of a stream and a traceback, the head of a result", () => {
  const stream = trimOutput({ output_type: "stream", name: "stdout", text: ["a".repeat(50), "END"] }, 10);
  assert.deepEqual(stream, { type: "stream", name: "stdout", text: "aaaaaaaEND", omitted: 43 });
  const result = trimOutput(
    { output_type: "execute_result", data: { "text/plain": "0123456789abc", "text/html": "<b>" } },
    10,
  );
  assert.deepEqual(result, {
    type: "result",
    text: "0123456789",
    omitted: 3,
    mime_types: ["text/html", "text/plain"],
  });
  const image = trimOutput({ output_type: "display_data", data: { "image/png": "iVBOR" } }, 10);
  assert.deepEqual(image, { type: "display", text: "", omitted: 0, mime_types: ["image/png"] });
  const error = trimOutput(
    { output_type: "error", ename: "ZeroDivisionError", evalue: "division by zero", traceback: ["frame 1", "\x1b[0;31mframe\x1b[0m 2"] },
    7,
  );
  assert.deepEqual(error, {
    type: "error",
    ename: "ZeroDivisionError",
    evalue: "division by zero",
    traceback: "frame 2",
    omitted: 8,
  });
});

test("a cell's outputs use the kernel's limit", () => {
  const cells = [codeCell("c1", "print('x' * 100)", { outputs: [{ output_type: "stream", name: "stdout", text: "x".repeat(100) }] })];
  const snapshot = documentSnapshot(panel(cells, { active: "c1" }), { maxChars: 5 });
  assert.deepEqual(snapshot.cells[0].outputs, [{ type: "stream", name: "stdout", text: "xxxxx", omitted: 95 }]);
});
