// Marks on an answer's claims (src/claims.js): each claim found at the occurrence the kernel
// named, in the rendered text, with a title that says where it came from. The DOM half is
// exercised in the browser (tests/browser/test_claims_in_view.py).

import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { claimTitle, locateClaims } from "../src/claims.js";

const traced = (text, nth = 0) => ({
  text,
  nth,
  kind: "number",
  source: { call: "c1", tool: "run_python", line: `median ${text}` },
});
const untraced = (text, nth = 0) => ({ text, nth, kind: "number", source: null });

describe("claim marks", () => {
  test("the title names the tool call and its output line, or says nothing was found", () => {
    assert.equal(claimTitle(traced("12.5")), "✓ From run_python (c1): median 12.5");
    assert.equal(claimTitle(untraced("40%")), "Not found in any tool output");
  });

  test("each claim is found at the occurrence the kernel counted", () => {
    // "5" occurs first inside "1.5": the claim is its second occurrence.
    const found = locateClaims(["Of 1.5 and ", "5", " rows"], [traced("1.5"), untraced("5", 1)]);
    assert.deepEqual(
      found.map(({ claim, node, start, end }) => [claim.text, node, start, end]),
      [
        ["1.5", 0, 3, 6],
        ["5", 1, 0, 1],
      ],
    );
    assert.equal(found[1].claim.source, null);
  });

  test("a claim split across elements, absent, or inside another is not marked", () => {
    assert.deepEqual(locateClaims(["about 12", ".5 units"], [traced("12.5")]), []);
    assert.deepEqual(locateClaims(["nothing here"], [traced("7")]), []);
    const nested = locateClaims(["The median is 12.5"], [untraced("median is 12.5"), traced("12.5")]);
    assert.deepEqual(
      nested.map((p) => p.claim.text),
      ["median is 12.5"],
    );
  });

  test("claims come back in text order whatever order they were given in", () => {
    const found = locateClaims(["a 1 b 2 c 3"], [traced("3"), traced("1"), untraced("2")]);
    assert.deepEqual(
      found.map((p) => p.claim.text),
      ["1", "2", "3"],
    );
  });
});
