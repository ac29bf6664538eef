// The DOM-free rendering decisions: tool labels, footer text, highlighting.

import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { awaitsUser, subagentSummary, summarizeArgs } from "../src/blocks.js";
import { endsInRetryableError, usageText } from "../src/common.js";
import { formatCost, formatDuration, formatInt } from "../src/dom.js";
import { highlightHtml } from "../src/markdown.js";

describe("labels and footer", () => {
  test("summarizeArgs: complete JSON becomes key=value", () => {
    assert.equal(summarizeArgs('{"path": "a.txt", "n": 3}', false), 'path="a.txt", n=3');
  });

  test("summarizeArgs: partial JSON shows the raw prefix with an ellipsis", () => {
    assert.equal(summarizeArgs('{"code": "print(1', true), '{"code": "print(1…');
    assert.equal(summarizeArgs("", true), "");
  });

  test("summarizeArgs truncates long values", () => {
    const label = summarizeArgs(JSON.stringify({ code: "x".repeat(500) }), false);
    assert.ok(label.length <= 80);
    assert.ok(label.endsWith("…"));
  });

  test("usageText shows what is known", () => {
    assert.equal(
      usageText({ input: 1200, output: 80, cost: null, context: "~1,280 / 32,768 tokens (4%)" }),
      "1,200 in · 80 out · context ~1,280 / 32,768 tokens (4%)",
    );
    assert.equal(usageText({ input: 5, output: 1, cost: 0.0123 }), "5 in · 1 out · $0.012");
    assert.equal(
      usageText({ input: 5, output: 1, cost: 0.21, budget: "$0.21 / $0.50" }),
      "5 in · 1 out · $0.21 · budget $0.21 / $0.50",
    );
    assert.equal(usageText({}), "");
    assert.equal(usageText(null), "");
  });

  test("usageText shows cached tokens and what caching saved", () => {
    assert.equal(
      usageText({ input: 1000, output: 10, cost: 0.0059, cached: 9000, saved: 0.0243 }),
      "1,000 in (9,000 cached) · 10 out · $0.0059 (cache saved $0.024)",
    );
    // A saving not (yet) positive is not shown; nothing cached, nothing said.
    assert.equal(usageText({ input: 5, output: 1, cost: 0.5, cached: 0, saved: -0.1 }), "5 in · 1 out · $0.50");
  });

  test("Retry only when the transcript ends in a retryable error", () => {
    const err = (retryable) => ({ id: "e", kind: "error", retryable });
    assert.equal(endsInRetryableError([err(true)]), true);
    assert.equal(endsInRetryableError([err(true), { id: "w", kind: "warning" }]), true);
    assert.equal(endsInRetryableError([err(false)]), false);
    assert.equal(
      endsInRetryableError([err(true), { id: "u", kind: "user" }, { id: "t", kind: "text" }]),
      false,
    );
    assert.equal(endsInRetryableError([]), false);
  });

  test("subagentSummary: status, model and usage, as far as known", () => {
    assert.equal(
      subagentSummary({ status: "completed", model: "openai/gpt-4.1", usage: { input: 1200, output: 80 } }),
      "Sub-agent · done · openai/gpt-4.1 · 1,200 in · 80 out",
    );
    assert.equal(subagentSummary({ status: "running", model: "", usage: null }), "Sub-agent · working…");
    assert.equal(subagentSummary({ status: "exhausted" }), "Sub-agent · stopped: limit reached");
    assert.equal(subagentSummary(null), "");
  });

  test("awaitsUser: a permission prompt or an unanswered question", () => {
    assert.equal(awaitsUser({ kind: "tool", permission: true }), true);
    assert.equal(awaitsUser({ kind: "tool", permission: false }), false);
    assert.equal(awaitsUser({ kind: "question", answer: null }), true);
    assert.equal(awaitsUser({ kind: "question", answer: "blue" }), false);
    assert.equal(awaitsUser({ kind: "text" }), false);
    assert.equal(awaitsUser(undefined), false);
  });

  test("formatting", () => {
    assert.equal(formatDuration(0.42), "0.4 s");
    assert.equal(formatDuration(12.4), "12 s");
    assert.equal(formatDuration(125), "2 min 5 s");
    assert.equal(formatDuration(undefined), "");
    assert.equal(formatInt(1234567), "1,234,567");
    assert.equal(formatCost(1.5), "$1.50");
    assert.equal(formatCost(0.00001), "<$0.0001");
  });
});

describe("highlighting", () => {
  test("known languages are highlighted, unknown ones escaped", () => {
    assert.match(highlightHtml("def f(): pass", "python"), /hljs-keyword/);
    assert.match(highlightHtml("SELECT 1", "sql"), /hljs-keyword/);
    assert.match(highlightHtml("ls -la", "sh"), /ls/);
    assert.equal(highlightHtml("<b>&</b>", "cobol"), "&#60;b&#62;&#38;&#60;/b&#62;");
  });
});
