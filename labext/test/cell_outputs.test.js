import assert from "node:assert/strict";
import { test } from "node:test";

import { applyCellOutputs, findCell } from "../src/cell_outputs.js";

/** A code cell's model as the notices use it; `add` merges consecutive streams as Lab's does. */
function fakeCell(id) {
  const list = [{ output_type: "stream", name: "stdout", text: "old run\n" }];
  return {
    id,
    type: "code",
    executionCount: 7,
    executionState: "idle",
    list,
    outputs: {
      clear: () => void list.splice(0),
      add: (o) => {
        const last = list[list.length - 1];
        if (last && last.output_type === "stream" && o.output_type === "stream" && last.name === o.name) {
          last.text += o.text;
        } else list.push(structuredClone(o));
      },
    },
  };
}

const stream = (text) => ({ output_type: "stream", name: "stdout", text });

test("a run clears the old outputs, shows [*], streams, then its count", () => {
  const cell = fakeCell("c1");
  applyCellOutputs(cell, { cell_id: "c1", reset: true, outputs: [], running: true, execution_count: null });
  assert.deepEqual(cell.list, []);
  assert.equal(cell.executionCount, null);
  assert.equal(cell.executionState, "running");
  applyCellOutputs(cell, { cell_id: "c1", reset: false, outputs: [stream("a\n")], running: true });
  applyCellOutputs(cell, { cell_id: "c1", reset: false, outputs: [stream("b\n")], running: true });
  const result = { output_type: "execute_result", data: { "text/plain": "3" }, metadata: {}, execution_count: 8 };
  applyCellOutputs(cell, { cell_id: "c1", reset: false, outputs: [result], running: false, execution_count: 8 });
  assert.deepEqual(cell.list, [stream("a\nb\n"), result]);
  assert.equal(cell.executionState, "idle");
  assert.equal(cell.executionCount, 8);
});

test("a notice for a cell that is gone or not code, or with a foreign output, changes nothing", () => {
  const cells = [fakeCell("c1"), { id: "m1", type: "markdown" }];
  assert.equal(findCell(cells, "c2"), null);
  assert.throws(() => applyCellOutputs(findCell(cells, "c2"), { cell_id: "c2" }), /no code cell "c2"/);
  assert.throws(() => applyCellOutputs(findCell(cells, "m1"), { cell_id: "m1" }), /no code cell/);
  const cell = findCell(cells, "c1");
  assert.throws(
    () => applyCellOutputs(cell, { cell_id: "c1", reset: true, outputs: [{ output_type: "script" }] }),
    /unknown type "script"/,
  );
  assert.deepEqual(cell.list, [stream("old run\n")]);
  assert.equal(cell.executionCount, 7);
});
