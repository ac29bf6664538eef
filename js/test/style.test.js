// The stylesheet's selectors, checked for what they cost when the view changes an attribute.
//
// Chromium restyles, when an attribute changes, every element below it that a rule keyed on that
// attribute (in a compound left of the rule's last one) might now match; a rule whose last compound
// names no class, tag or attribute (say `... > :last-child::after`) makes that every element below.
// The root and the scrolling list carry the whole history, so the attributes the view changes on
// them during a run must start no such rule.

import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { describe, test } from "node:test";

const CSS = readFileSync(new URL("../src/ipyagent.css", import.meta.url), "utf8");
/** The data-* attributes AgentView.renderRoot (common.js) changes on the root as a run goes. */
const ROOT_ATTRIBUTES = ["data-status", "data-live", "data-seq", "data-hello"];

/** Every selector of the stylesheet (at-rule preludes and keyframe steps left out). */
function selectors(css) {
  const out = [];
  const text = css.replace(/\/\*[\s\S]*?\*\//g, "");
  const re = /([^{}]*)\{/g;
  let m;
  while ((m = re.exec(text))) {
    const prelude = m[1].trim();
    if (!prelude || prelude.startsWith("@") || /^(from|to|\d+%)/.test(prelude)) continue;
    out.push(...splitTopLevel(prelude, ",").map((s) => s.trim()));
  }
  return out;
}

/** The compounds of a selector, left to right (combinators dropped). */
function compounds(selector) {
  const parts = [];
  let depth = 0;
  let current = "";
  for (const ch of selector) {
    if (ch === "(") depth += 1;
    if (ch === ")") depth -= 1;
    if (depth === 0 && (/\s/.test(ch) || ch === ">" || ch === "+" || ch === "~")) {
      if (current) parts.push(current);
      current = "";
    } else {
      current += ch;
    }
  }
  if (current) parts.push(current);
  return parts;
}

function splitTopLevel(text, sep) {
  const out = [];
  let depth = 0;
  let current = "";
  for (const ch of text) {
    if (ch === "(") depth += 1;
    if (ch === ")") depth -= 1;
    if (depth === 0 && ch === sep) {
      out.push(current);
      current = "";
    } else current += ch;
  }
  out.push(current);
  return out;
}

/** The attribute names a selector tests in a compound before its last one. */
function ancestorAttributes(selector) {
  const names = new Set();
  for (const compound of compounds(selector).slice(0, -1)) {
    for (const [, name] of compound.matchAll(/\[\s*([\w-]+)/g)) names.add(name);
  }
  return names;
}

describe("stylesheet", () => {
  test("the helpers find the compounds and their attributes", () => {
    const s = '.a[data-x="1"] .b[data-y] > :is(ul, ol) > :last-child::after';
    assert.deepEqual(compounds(s), ['.a[data-x="1"]', ".b[data-y]", ":is(ul, ol)", ":last-child::after"]);
    assert.deepEqual([...ancestorAttributes(s)], ["data-x", "data-y"]);
    assert.deepEqual(selectors("/* c { */ .a, .b > p { x: 1 } @keyframes k { from { y: 0 } }"), [".a", ".b > p"]);
  });

  test("the stylesheet has the rules this checks", () => {
    const all = selectors(CSS);
    assert.ok(all.length > 100);
    assert.ok(all.some((s) => ancestorAttributes(s).has("data-run-status")), "the caret's rule is read");
  });

  test("no rule starts from an attribute the root changes during a run", () => {
    for (const selector of selectors(CSS)) {
      const keyed = ROOT_ATTRIBUTES.filter((name) => ancestorAttributes(selector).has(name));
      assert.deepEqual(keyed, [], `${selector}: a change of ${keyed} on the root restyles all of it`);
    }
  });
});
