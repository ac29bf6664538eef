import assert from "node:assert/strict";
import { test } from "node:test";
import { EditLog, applyEdit } from "../src/edits.js";
import { arrayDoc, state } from "./fake_notebook.js";
import { STORE_VERSION, restore, snapshotText, storageKey } from "../src/persist.js";
import { RunLog, runOf } from "../src/runs.js";

/** A page's logs after runs of the agent, as index.js keeps them. */
function page(doc, runIds) {
  const logs = { edits: new EditLog(), runs: new RunLog(), reviews: new Map() };
  runIds.forEach((run, i) => {
    const ops = [{ op: "replace", cell_id: "a", expect: doc.source(0), source: `a${i + 1}` }];
    const provenance = { session: null, run, call: "call_1" };
    const entry = applyEdit(doc, { ops, provenance }, () => "x");
    logs.edits.remember(`e${i}`, entry);
    logs.runs.add(runOf(provenance), `e${i}`);
    logs.reviews.set("a", { editId: `e${i}`, run, before: ops[0].expect, after: ops[0].source, note: "", fix: false, explanation: "" });
  });
  return logs;
}

const fresh = () => ({ edits: new EditLog(), runs: new RunLog(), reviews: new Map() });

test("a reloaded page finds the runs it can undo, their kept cells and open reviews", () => {
  const doc = arrayDoc([["a", "a0"], ["b", "b0"]], { outputs: true });
  const before = page(doc, ["r-1", "r-2"]);
  before.runs.keep("r-2", ["a"]);
  const text = snapshotText(before);
  assert.equal(JSON.parse(text).version, STORE_VERSION);
  const after = fresh();
  assert.equal(restore(text, after), true);
  const lookup = (id) => after.edits.get(id);
  assert.equal(after.runs.latest(lookup), "r-2");
  assert.equal(after.runs.inReview("r-2", lookup), false, "kept before the reload, kept after");
  assert.deepEqual(after.reviews.get("a").run, "r-2");
  after.runs.undo(doc, "r-2", lookup);
  after.runs.undo(doc, "r-1", lookup);
  assert.deepEqual(state(doc), ["a:a0", "b:b0"], "both runs undone from the stored records");
  assert.deepEqual(doc.list[0].outputs, [{ text: "out a" }]);
});

test("nothing left to undo keeps nothing; the oldest runs go first when it does not fit", () => {
  const doc = arrayDoc([["a", "a0"]]);
  const logs = page(doc, ["r-1", "r-2", "r-3"]);
  const whole = snapshotText(logs);
  const limited = snapshotText(logs, whole.length - 1);
  assert.deepEqual(JSON.parse(limited).runs.map((r) => r.run), ["r-2", "r-3"]);
  for (const run of ["r-3", "r-2", "r-1"]) logs.runs.undo(doc, run, (id) => logs.edits.get(id));
  assert.equal(snapshotText(logs), null);
  assert.equal(storageKey("work/a.ipynb"), "ipyagent:checkpoints:work/a.ipynb");
});

test("a record of another shape is ignored, not misread", () => {
  const logs = fresh();
  assert.equal(restore("{not json", logs), false);
  assert.equal(restore(JSON.stringify({ version: STORE_VERSION + 1, runs: [] }), logs), false);
  assert.equal(logs.runs.runs.size, 0);
});
