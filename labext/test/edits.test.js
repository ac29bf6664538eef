import assert from "node:assert/strict";
import { test } from "node:test";
import { arrayDoc, state } from "./fake_notebook.js";
import { EditLog, applyEdit, findConflicts, inverseFor, lineDiff, reviewsOf, undoEdit, validateOps } from "../src/edits.js";

const PROVENANCE = { session: "a.agent.jsonl", run: "r-1", call: "call_1" };
let counter = 0;
const newId = () => `new-${++counter}`;

test("an edit applies replace, insert, delete and move in order and stamps what it wrote", () => {
  const doc = arrayDoc([["a", "import x"], ["b", "total = 1 + 1"], ["c", "print(total)"], ["d", "x"]]);
  const ops = [
    { op: "replace", cell_id: "b", expect: "total = 1 + 1", source: "total = 2" },
    { op: "insert", after_id: "b", cell_type: "markdown", source: "## Total", cell_id: "m1" },
    { op: "delete", cell_id: "c", expect: "print(total)" },
    { op: "move", cell_id: "d", after_id: null, expect: "x" },
  ];
  const { answer, undo } = applyEdit(doc, { ops, provenance: PROVENANCE }, newId);
  assert.deepEqual(state(doc), ["d:x", "a:import x", "b:total = 2", "m1:## Total"]);
  assert.deepEqual(answer, {
    applied: true,
    cells: [
      { cell_id: "b", index: 2 },
      { cell_id: "m1", index: 3 },
      { cell_id: "c", index: null },
      { cell_id: "d", index: 0 },
    ],
  });
  assert.deepEqual(doc.list[2].metadata.ipyagent, PROVENANCE);
  assert.deepEqual(doc.list[3].metadata.ipyagent, PROVENANCE);
  assert.equal(doc.list[3].cell_type, "markdown");
  assert.equal(doc.list[0].metadata.ipyagent, undefined, "a moved cell is not stamped");

  const result = undoEdit(doc, undo);
  assert.deepEqual(state(doc), ["a:import x", "b:total = 1 + 1", "c:print(total)", "d:x"]);
  assert.deepEqual(result.kept, []);
  assert.equal(doc.list[1].metadata.ipyagent, undefined, "undo takes the stamp away");
});

test("one stale guard and nothing is applied; the conflicts say what is there now", () => {
  const doc = arrayDoc([["a", "one"], ["b", "two, typed by the user"]]);
  const before = state(doc);
  const ops = [
    { op: "replace", cell_id: "a", expect: "one", source: "1" },
    { op: "replace", cell_id: "b", expect: "two", source: "2" },
    { op: "delete", cell_id: "zz", expect: "" },
    { op: "insert", after_id: "gone-id", cell_type: "code", source: "" },
  ];
  const { answer, undo } = applyEdit(doc, { ops, provenance: PROVENANCE }, newId);
  assert.equal(undo, null);
  assert.deepEqual(answer, {
    applied: false,
    conflicts: [
      { cell_id: "b", index: 1, source: "two, typed by the user" },
      { cell_id: "zz", index: null, source: "gone" },
      { cell_id: "gone-id", index: null, source: "gone" },
    ],
  });
  assert.deepEqual(state(doc), before);
});

test("guards are checked against what earlier ops of the same request wrote", () => {
  const doc = arrayDoc([["a", "one"]]);
  const ops = [
    { op: "replace", cell_id: "a", expect: "one", source: "1" },
    { op: "replace", cell_id: "a", expect: "1", source: "uno" },
    { op: "insert", after_id: "a", cell_type: "code", source: "new", cell_id: "n" },
    { op: "move", cell_id: "n", after_id: null, expect: "new" },
  ];
  assert.deepEqual(findConflicts(doc, ops), []);
  applyEdit(doc, { ops, provenance: PROVENANCE }, newId);
  assert.deepEqual(state(doc), ["n:new", "a:uno"]);
});

test("an insert without a neighbour goes at the end; a taken id is replaced by a fresh one", () => {
  const doc = arrayDoc([["a", "1"], ["b", "2"]]);
  const ops = [{ op: "insert", cell_type: "code", source: "3", cell_id: "a" }];
  const { answer } = applyEdit(doc, { ops, provenance: PROVENANCE }, () => "fresh");
  assert.deepEqual(state(doc), ["a:1", "b:2", "fresh:3"]);
  assert.deepEqual(answer.cells, [{ cell_id: "fresh", index: 2 }]);
  assert.deepEqual(doc.list[2].outputs, []);
});

test("undo leaves alone a cell the user changed since, and undoes the rest", () => {
  const doc = arrayDoc([["a", "one"], ["b", "two"], ["c", "three"]]);
  const ops = [
    { op: "replace", cell_id: "a", expect: "one", source: "1" },
    { op: "replace", cell_id: "b", expect: "two", source: "2" },
    { op: "insert", after_id: "c", cell_type: "code", source: "4", cell_id: "d" },
  ];
  const { undo } = applyEdit(doc, { ops, provenance: PROVENANCE }, newId);
  doc.setSource(0, "1, then the user's change");
  const { undone, kept } = undoEdit(doc, undo);
  assert.deepEqual(state(doc), ["a:1, then the user's change", "b:two", "c:three"]);
  assert.deepEqual(kept, [{ cell_id: "a", index: 0, why: "it was changed since", source: "1, then the user's change" }]);
  assert.deepEqual(undone, [
    { cell_id: "d", index: null },
    { cell_id: "b", index: 1 },
  ]);
});

test("undoing a replace puts back the outputs and execution count the cell had before", () => {
  const doc = arrayDoc([["a", "print(totl)"]], { outputs: true });
  doc.list[0].execution_count = 2;
  const { undo } = applyEdit(doc, { ops: [{ op: "replace", cell_id: "a", expect: "print(totl)", source: "print(1)" }] }, newId);
  // The user keeps the fix and runs it: new outputs, a new count.
  doc.setOutputs(0, [{ output_type: "stream", name: "stdout", text: "1\n" }], 3);
  const { undone } = undoEdit(doc, undo);
  assert.deepEqual(undone, [{ cell_id: "a", index: 0 }]);
  assert.equal(doc.list[0].source, "print(totl)");
  assert.deepEqual(doc.list[0].outputs, [{ text: "out a" }]);
  assert.equal(doc.list[0].execution_count, 2);
});

test("undoing a delete puts the cell back after its neighbour, or where it was", () => {
  const doc = arrayDoc([["a", "1"], ["b", "2"], ["c", "3"]]);
  const { undo } = applyEdit(doc, { ops: [{ op: "delete", cell_id: "c", expect: "3" }] }, newId);
  doc.remove(1); // the user deletes b, the neighbour c was after
  undoEdit(doc, undo);
  assert.deepEqual(state(doc), ["a:1", "c:3"]);
  const again = undoEdit(doc, undo);
  assert.deepEqual(again.kept, [{ cell_id: "c", index: 1, why: "it is back already" }]);
});

test("malformed ops are refused with what is wrong", () => {
  assert.throws(() => validateOps([]), /non-empty/);
  assert.throws(() => validateOps([{ op: "replace", cell_id: "a", source: "x" }]), /op 0 \("replace"\)/);
  assert.throws(() => validateOps([{ op: "insert", cell_type: "python", source: "" }]), /cell_type/);
  assert.throws(() => validateOps([{ op: "move", cell_id: "a", expect: "" }]), /after_id/);
  assert.throws(() => validateOps([{ op: "explode" }]), /unknown op/);
});

test("the log keeps the latest edits and forgets the oldest", () => {
  const log = new EditLog(2);
  log.remember("e1", { answer: 1 });
  log.remember("e2", { answer: 2 });
  log.remember("e3", { answer: 3 });
  assert.equal(log.get("e1"), undefined);
  assert.deepEqual(log.get("e3"), { answer: 3 });
});

test("the review's diff marks removed and added lines around the common ones", () => {
  assert.deepEqual(lineDiff("a\nb\nc", "a\nB\nc\nd"), [
    { kind: "same", text: "a" },
    { kind: "removed", text: "b" },
    { kind: "added", text: "B" },
    { kind: "same", text: "c" },
    { kind: "added", text: "d" },
  ]);
  assert.deepEqual(lineDiff(null, "new"), [{ kind: "added", text: "new" }]);
});

test("reviews name the replaced and inserted cells; one cell's undo leaves the others", () => {
  const doc = arrayDoc([["a", "one"], ["b", "two"]]);
  const ops = [
    { op: "replace", cell_id: "a", expect: "one", source: "1" },
    { op: "replace", cell_id: "b", expect: "two", source: "2" },
    { op: "insert", after_id: "b", cell_type: "code", source: "3", cell_id: "c" },
  ];
  const { answer, undo } = applyEdit(doc, { ops, provenance: PROVENANCE }, newId);
  assert.deepEqual(reviewsOf(ops, answer), [
    { cellId: "a", before: "one", after: "1" },
    { cellId: "b", before: "two", after: "2" },
    { cellId: "c", before: null, after: "3" },
  ]);
  // The user keeps a and c, and undoes b.
  undoEdit(doc, inverseFor(undo, "b"));
  assert.deepEqual(state(doc), ["a:1", "b:two", "c:3"]);
});
