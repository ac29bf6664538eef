import assert from "node:assert/strict";
import { test } from "node:test";
import { FixOutput, fixRequest, hasError, offersFix } from "../src/fix.js";

test("a cell shows the Fix button when one of its outputs is an error", () => {
  assert.equal(hasError([{ output_type: "stream", name: "stdout", text: "1" }]), false);
  assert.equal(hasError([{ output_type: "stream" }, { output_type: "error", ename: "NameError" }]), true);
  assert.equal(hasError([]), false);
  assert.equal(hasError(undefined), false);
});

test("an agent's failed cell does not offer Fix: there is no code of the user's to fix", () => {
  const error = [{ output_type: "error", ename: "AgentRunFailed" }];
  assert.equal(offersFix("print(totl)", error), true);
  assert.equal(offersFix("%%agent -m m\nTidy up.", error), false);
  assert.equal(offersFix("x = 1\n%agent fix", error), false);
  assert.equal(offersFix("agent = 1\nprint(agnt)", error), true);
  assert.equal(offersFix("print(1)", []), false);
});

test("the button's request runs %agent fix for the cell, out of the notebook's history", () => {
  assert.deepEqual(fixRequest("c-total_2"), {
    code: "%agent fix c-total_2 --quiet",
    silent: false,
    store_history: false,
    allow_stdin: false,
    stop_on_error: false,
  });
  // Only an id reaches the kernel's command line: nothing else can be smuggled into it.
  assert.throws(() => fixRequest("c1 --yes\nimport os"), /not a cell id/);
  assert.throws(() => fixRequest(""), /not a cell id/);
});

const stream = (text, name = "stdout") => ({ header: { msg_type: "stream" }, content: { name, text } });

test("what the run printed is what the user reads; an error says why the fix failed", () => {
  const output = new FixOutput();
  output.onMessage(stream("ipyagent: using openai/gpt-4.1 (change with %agent model ID)\n"));
  output.onMessage(stream("The name is misspelt.\n"));
  output.onMessage(stream("warning\n", "stderr"));
  output.onMessage(stream("The fix is shown on cell [1] c1 as a diff.\n"));
  output.onMessage({ header: { msg_type: "status" }, content: { execution_state: "idle" } });
  assert.deepEqual(output.outcome({ content: { status: "ok" } }), {
    ok: true,
    text: "The name is misspelt.\nThe fix is shown on cell [1] c1 as a diff.",
  });

  const failed = new FixOutput();
  failed.onMessage({ header: { msg_type: "error" }, content: { ename: "UserError", evalue: "Nothing to fix" } });
  assert.deepEqual(failed.outcome({ content: { status: "error", ename: "UserError", evalue: "Nothing to fix" } }), {
    ok: false,
    text: "UserError: Nothing to fix",
  });
  assert.deepEqual(new FixOutput().outcome({ content: { status: "error" } }), {
    ok: false,
    text: "the kernel gave no reason",
  });
});
