import assert from "node:assert/strict";
import { test } from "node:test";
import { applyEdit, outputsBefore } from "../src/edits.js";
import { arrayDoc, state } from "./fake_notebook.js";
import { RunLog, runOf, undoRunMessage, variablesMessage } from "../src/runs.js";


/** A run of four edits (insert, replace, move, delete), remembered as index.js does. */
function scriptedRun(doc, run = "r-1") {
  const log = new Map();
  const runs = new RunLog();
  const requests = [
    [{ op: "insert", after_id: "a", cell_type: "code", source: "new", cell_id: "n" }],
    [{ op: "replace", cell_id: "b", expect: "b0", source: "b1" }],
    [{ op: "move", cell_id: "c", after_id: null, expect: "c0" }],
    [{ op: "delete", cell_id: "d", expect: "d0" }],
  ];
  requests.forEach((ops, i) => {
    const provenance = { session: null, run, call: `call_${i}` };
    const entry = applyEdit(doc, { ops, provenance }, () => "x");
    log.set(`e${i}`, entry);
    runs.add(runOf(provenance), `e${i}`);
  });
  return { runs, lookup: (id) => log.get(id) };
}

const before = () => arrayDoc([["a", "a0"], ["b", "b0"], ["c", "c0"], ["d", "d0"]], { outputs: true });

test("undo of a run puts back sources, order and deleted cells with their outputs", () => {
  const doc = before();
  const { runs, lookup } = scriptedRun(doc);
  assert.deepEqual(state(doc), ["c:c0", "a:a0", "n:new", "b:b1"]);
  assert.equal(runs.latest(lookup), "r-1");
  const answer = runs.undo(doc, "r-1", lookup);
  assert.deepEqual(state(doc), ["a:a0", "b:b0", "c:c0", "d:d0"]);
  assert.deepEqual(doc.list[3].outputs, [{ text: "out d" }]);
  assert.deepEqual(answer.kept, []);
  assert.deepEqual(answer.undone.map((c) => c.cell_id).sort(), ["b", "c", "d", "n"]);
  assert.equal(runs.latest(lookup), null, "nothing is left to undo");
});

test("a cell the user changed since stays, the rest is undone, and the message says so", () => {
  const doc = before();
  const { runs, lookup } = scriptedRun(doc);
  doc.setSource(3, "b1 and mine");
  const answer = runs.undo(doc, "r-1", lookup);
  assert.deepEqual(state(doc), ["a:a0", "b:b1 and mine", "c:c0", "d:d0"]);
  assert.deepEqual(answer.kept, [{ cell_id: "b", index: 1, why: "it was changed since", source: "b1 and mine" }]);
  const text = undoRunMessage("r-1", answer);
  assert.equal(
    text,
    "ipyagent undid run r-1: put back 3 cells, 1 cell left as it is. Left as they are: cell 2 (it was changed since).",
  );
  const variables = { run: "r-1", restored: ["df", "x"], removed: ["y"], kept: [{ name: "z", why: "changed since the run" }], refused: "" };
  assert.equal(
    undoRunMessage("r-1", answer, variables),
    "ipyagent undid run r-1: put back 3 cells, 1 cell left as it is. Variables: put back df, x; removed y (the run " +
      "created them). Variables left as they are: z (changed since the run). Left as they are: cell 2 (it was changed since).",
  );
});

test("the variables' part says why the kernel put none back, and nothing for a run that changed none", () => {
  const none = { run: "r-1", restored: [], removed: [], kept: [], refused: "" };
  assert.equal(variablesMessage(none), "");
  assert.equal(variablesMessage(null), "");
  assert.equal(
    variablesMessage({ error: "the kernel's ipyagent is not connected to this page" }),
    "The kernel's variables were not put back: the kernel's ipyagent is not connected to this page.",
  );
  assert.equal(
    variablesMessage({ ...none, refused: "the agent's code is running now; undo the run when it has ended" }),
    "The kernel's variables were not put back: the agent's code is running now; undo the run when it has ended.",
  );
});

test("a run is a checkpoint: after a partial keep its undo puts back every cell, kept ones too", () => {
  const doc = before();
  const { runs, lookup } = scriptedRun(doc);
  runs.keep("r-1", ["n"]);
  assert.equal(runs.inReview("r-1", lookup), true, "the other cells are still to review");
  assert.equal(runs.pendingCells("r-1", lookup).length, 4, "the bar counts what Undo run puts back");
  const answer = runs.undo(doc, "r-1", lookup);
  assert.deepEqual(state(doc), ["a:a0", "b:b0", "c:c0", "d:d0"]);
  assert.deepEqual(answer.kept, []);
  assert.deepEqual(answer.undone.map((c) => c.cell_id).sort(), ["b", "c", "d", "n"]);
});

test("a kept cell the user changed afterwards is left as it is", () => {
  const doc = before();
  const { runs, lookup } = scriptedRun(doc);
  runs.keep("r-1", ["b"]);
  doc.setSource(3, "b1 and mine");
  const answer = runs.undo(doc, "r-1", lookup);
  assert.deepEqual(state(doc), ["a:a0", "b:b1 and mine", "c:c0", "d:d0"]);
  assert.deepEqual(answer.kept, [{ cell_id: "b", index: 1, why: "it was changed since", source: "b1 and mine" }]);
});

test("after keep all the run is reviewed (no bar) and can still be undone", () => {
  const doc = before();
  const { runs, lookup } = scriptedRun(doc);
  runs.keep("r-1", runs.pendingCells("r-1", lookup));
  assert.equal(runs.inReview("r-1", lookup), false);
  assert.deepEqual(runs.reviewed(lookup), []);
  assert.equal(runs.latest(lookup), "r-1", "%agent undo still finds it");
  const answer = runs.undo(doc, "r-1", lookup);
  assert.deepEqual(state(doc), ["a:a0", "b:b0", "c:c0", "d:d0"]);
  assert.equal(answer.undone.length, 4);
  assert.equal(runs.latest(lookup), null, "nothing is left to undo");
});

test("a run that only moved and deleted cells has its bar on the first cell it changed or left a gap after", () => {
  const doc = arrayDoc([["a", "a0"], ["b", "b0"], ["c", "c0"], ["d", "d0"]]);
  const log = new Map();
  const runs = new RunLog();
  const requests = [
    [{ op: "delete", cell_id: "c", expect: "c0" }],
    [{ op: "move", cell_id: "d", after_id: "a", expect: "d0" }],
  ];
  requests.forEach((ops, i) => {
    log.set(`e${i}`, applyEdit(doc, { ops, provenance: { run: "r-m" } }, () => "x"));
    runs.add("r-m", `e${i}`);
  });
  const lookup = (id) => log.get(id);
  assert.deepEqual(state(doc), ["a:a0", "d:d0", "b:b0"]);
  assert.deepEqual(runs.reviewed(lookup), ["r-m"], "nothing to review cell by cell, yet the run is");
  // The deleted cell came after b; d moved: d is the first of the two in the document.
  assert.equal(runs.anchor("r-m", lookup, doc.ids()), "d");
  assert.equal(runs.anchor("r-m", lookup, ["a", "b"]), "b", "d gone: at the deleted cell's neighbour");
  assert.equal(runs.anchor("r-m", lookup, ["a"]), null);

  const first = arrayDoc([["a", "a0"], ["b", "b0"]]);
  const only = new RunLog();
  const entry = applyEdit(first, { ops: [{ op: "delete", cell_id: "a", expect: "a0" }], provenance: { run: "r-d" } });
  only.add("r-d", "e");
  assert.equal(only.anchor("r-d", () => entry, first.ids()), "b", "the first cell deleted: on the new first cell");
});

test("the latest run with changes left is the one undone first; an unknown run is an error", () => {
  const doc = before();
  const { runs, lookup } = scriptedRun(doc);
  runs.add("r-2", "missing");
  assert.equal(runs.latest(lookup), "r-1", "a run whose edits are forgotten has nothing to undo");
  assert.throws(() => runs.undo(doc, "r-9", lookup), /knows no run "r-9"/);
  assert.equal(runOf({ run: "" }), null);
});

test("a cell already back (JupyterLab's own Undo) counts as put back, not as the user's change", () => {
  const doc = before();
  const { runs, lookup } = scriptedRun(doc);
  doc.setSource(3, "b0");
  const answer = runs.undo(doc, "r-1", lookup);
  assert.deepEqual(state(doc), ["a:a0", "b:b0", "c:c0", "d:d0"]);
  assert.deepEqual(answer.kept, []);
});

test("a cell the run ran gets back its outputs from before the run; a run that only ran cells shows no bar", () => {
  const doc = arrayDoc([["a", "n += 1"], ["b", "b0"]], { outputs: true });
  doc.list[0].execution_count = 1;
  const log = new Map();
  const runs = new RunLog();
  // What index.js keeps when the first cell_outputs notice of run r-x for cell a arrives.
  log.set("outputs:r-x:a", { answer: null, undo: [outputsBefore(doc.cellJSON(0))] });
  runs.add("r-x", "outputs:r-x:a");
  doc.setOutputs(0, [{ output_type: "stream", name: "stdout", text: "2\n" }], 2);
  const lookup = (id) => log.get(id);
  assert.equal(runs.inReview("r-x", lookup), false, "nothing to review: no bar");
  assert.equal(runs.latest(lookup), "r-x", "but %agent undo finds it");
  const answer = runs.undo(doc, "r-x", lookup);
  assert.deepEqual(answer.undone, [{ cell_id: "a", index: 0 }]);
  assert.deepEqual(doc.list[0].outputs, [{ text: "out a" }]);
  assert.equal(doc.list[0].execution_count, 1);
});

test("a cell the user changed after the run ran it keeps its outputs", () => {
  const doc = arrayDoc([["a", "n += 1"]], { outputs: true });
  const entry = { answer: null, undo: [outputsBefore(doc.cellJSON(0))] };
  const runs = new RunLog();
  runs.add("r-x", "e");
  doc.setOutputs(0, [{ output_type: "stream", name: "stdout", text: "2\n" }], 2);
  doc.setSource(0, "n += 2");
  const answer = runs.undo(doc, "r-x", () => entry);
  assert.deepEqual(answer.kept, [{ cell_id: "a", index: 0, why: "it was changed since", source: "n += 2" }]);
  assert.equal(doc.list[0].execution_count, 2);
});
