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
    outputs: { toJSON: () => outputs, length: outputs.length, get: (i) => ({ type: outputs[i].output_type }) },
  };
}

function markdownCell(id, source, stamp) {
  return { id, type: "markdown", sharedModel: { getSource: () => source, getMetadata: (key) => key === "ipyagent" ? stamp : undefined } };
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

function numbered(count, extra = {}) {
  return Array.from({ length: count }, (_, i) => codeCell(`c${i}`, `x = ${i}`, { count: i + 1, ...(extra[i] || {}) }));
}

const error = { output_type: "error", ename: "ValueError", evalue: "bad", traceback: ["tb"] };

test("a read covers a range of cells and says where the notable ones are, inside it or not", () => {
  const cells = numbered(10, { 2: { outputs: [error], count: 5 }, 7: { outputs: [error], count: 3 }, 9: { state: "running" } });
  cells[9].executionCount = null;
  const snapshot = documentSnapshot(panel(cells, { active: "c8", selected: ["c6", "c7"] }), { start: 4, limit: 3 });
  assert.equal(snapshot.start, 4);
  assert.equal(snapshot.total, 10);
  assert.deepEqual(
    snapshot.cells.map((c) => c.id),
    ["c4", "c5", "c6"],
  );
  assert.equal(snapshot.active_cell_id, "c8");
  assert.deepEqual(snapshot.selected_cell_ids, ["c6", "c7", "c8"]);
  assert.deepEqual(snapshot.running_cell_ids, ["c9"]);
  // The failed cell that ran last (In [5]), not the one further down (In [3]).
  assert.equal(snapshot.last_failed_cell_id, "c2");
  assert.deepEqual(snapshot.index_of, { c2: 2, c6: 6, c7: 7, c8: 8, c9: 9 });
});

test("a read stops at its character budget, but always gives one cell", () => {
  const cells = numbered(50);
  const big = [codeCell("huge", "y".repeat(5000)), ...cells];
  const first = documentSnapshot(panel(big, { active: "c0" }), { pageChars: 1000 });
  assert.deepEqual(first.cells.map((c) => c.id), ["huge"]);
  const next = documentSnapshot(panel(big, { active: "c0" }), { start: 1, pageChars: 1000 });
  assert.ok(next.cells.length > 1 && next.cells.length < 50, `${next.cells.length} cells`);
  assert.deepEqual(next.cells[0].id, "c0");
  const rest = documentSnapshot(panel(big, { active: "c0" }), { start: 40 });
  assert.deepEqual(rest.cells.map((c) => c.id), ["c39", "c40", "c41", "c42", "c43", "c44", "c45", "c46", "c47", "c48", "c49"]);
});

test("a start past the end reads no cells and still counts them", () => {
  const snapshot = documentSnapshot(panel(numbered(3), { active: "c0" }), { start: 7 });
  assert.equal(snapshot.start, 3);
  assert.equal(snapshot.total, 3);
  assert.deepEqual(snapshot.cells, []);
});

test("a cell the kernel's edits stamped says who changed it", () => {
  const stamp = { session: "a.agent.jsonl", run: "r-1", call: "call_2" };
  const snapshot = documentSnapshot(panel([markdownCell("m", "# Hi", stamp), markdownCell("n", "x")], {}));
  assert.deepEqual(
    snapshot.cells.map((c) => c.provenance),
    [stamp, null],
  );
});
