// The chat's history paging (js/src/history.js), without a browser: which blocks each page draws.

import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { HistoryPager, PAGE_BLOCKS, historyBlocks } from "../src/history.js";

/** A clock that advances `step` ms each time it is read. */
const ticking = (step) => {
  let t = 0;
  return () => {
    t += step;
    return t;
  };
};

describe("HistoryPager", () => {
  test("the first page is the latest blocks, in list order", () => {
    const pager = new HistoryPager(100, { pageBlocks: 10, clock: () => 0 });
    const made = pager.previous((i) => i);
    assert.deepEqual(made, [90, 91, 92, 93, 94, 95, 96, 97, 98, 99]);
    assert.equal(pager.start, 90);
    assert.equal(pager.drawn, 10);
  });

  test("each later page is the one just before, until the first block; then nothing", () => {
    const pager = new HistoryPager(25, { pageBlocks: 10, clock: () => 0 });
    const pages = [];
    while (!pager.done) pages.push(pager.previous((i) => i));
    assert.deepEqual(pages.map((p) => [p[0], p.at(-1)]), [
      [15, 24],
      [5, 14],
      [0, 4],
    ]);
    assert.deepEqual(pager.previous((i) => i), []);
    assert.deepEqual([...pages].reverse().flat(), [...Array(25).keys()], "every block drawn once");
  });

  test("a page stops when its time budget is spent, but always draws one block", () => {
    const slow = new HistoryPager(1000, { pageBlocks: 500, budgetMs: 20, clock: ticking(5) });
    // The clock is read once before the page and once after each block: 5 ms a block.
    assert.equal(slow.previous((i) => i).length, 4);
    const slower = new HistoryPager(1000, { budgetMs: 20, clock: ticking(100) });
    assert.deepEqual(slower.previous((i) => i), [999]);
  });

  test("the default page is bounded whatever the history's length", () => {
    const pager = new HistoryPager(10_000, { clock: () => 0 });
    let calls = 0;
    pager.previous(() => calls++);
    assert.equal(calls, PAGE_BLOCKS);
  });

  test("an empty history is done at once", () => {
    const pager = new HistoryPager(0);
    assert.ok(pager.done);
    assert.deepEqual(pager.previous(() => assert.fail("nothing to draw")), []);
  });
});

describe("historyBlocks", () => {
  test("keeps well-formed blocks, by reference, and ignores anything else", () => {
    const block = { id: "h0.0", kind: "user", text: "hi" };
    const blocks = historyBlocks([block, null, { kind: "text" }, { id: 3 }, "x"]);
    assert.deepEqual(blocks, [block]);
    assert.equal(blocks[0], block);
    assert.deepEqual(historyBlocks(undefined), []);
    assert.deepEqual(historyBlocks({ blocks: [] }), []);
  });
});
