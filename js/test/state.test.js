// The patch-application and state logic of docs/widget-protocol.md, without a browser.

import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { Store, normalizeState, placements } from "../src/state.js";

const base = () => ({
  seq: 3,
  status: "running",
  model: "local/default",
  blocks: [
    { id: "u1", kind: "user", text: "hi" },
    { id: "t1", kind: "text", text: "Hel", streaming: true },
  ],
  usage: { input: 10, output: 2, cost: null, context: null },
  live: false,
});

const patches = (seq, ...ops) => ({ kind: "patches", seq, patches: ops });

describe("state", () => {
  test("normalizeState copies and fills defaults", () => {
    const raw = base();
    const state = normalizeState(raw);
    state.blocks[1].text += "lo";
    assert.equal(raw.blocks[1].text, "Hel", "the trait value is never mutated");
    assert.deepEqual(normalizeState(undefined), { seq: 0, status: "idle", blocks: [], usage: {} });
    assert.deepEqual(normalizeState({ blocks: [{ id: 1, kind: "text" }, null, { kind: "x" }] }).blocks, [
      { id: 1, kind: "text" },
    ]);
  });

  test("append grows a field; set replaces fields; seq advances", () => {
    const store = new Store(base());
    store.takeChanges();
    assert.ok(store.applyMessage(patches(4, { op: "append", id: "t1", field: "text", value: "lo" })));
    assert.ok(
      store.applyMessage(
        patches(
          5,
          { op: "append", id: "t1", field: "text", value: " world" },
          { op: "set", id: "t1", fields: { streaming: false } },
        ),
      ),
    );
    assert.equal(store.block("t1").text, "Hello world");
    assert.equal(store.block("t1").streaming, false);
    assert.equal(store.state.seq, 5);
    const changes = store.takeChanges();
    assert.deepEqual([...changes.blocks], ["t1"]);
    assert.equal(changes.structure, false);
    assert.equal(changes.top, false);
  });

  test("changes record what append patches added, until the field is set anew", () => {
    // The view passes these pieces on, so a long streamed text is never read whole per update.
    const store = new Store(base());
    store.takeChanges();
    store.applyMessage(
      patches(
        4,
        { op: "append", id: "t1", field: "text", value: "lo" },
        { op: "append", id: "t1", field: "text", value: " there" },
        { op: "set", id: "t1", fields: { streaming: false } },
      ),
    );
    assert.deepEqual(store.takeChanges().appended.get("t1").get("text"), ["lo", " there"]);
    store.applyMessage(
      patches(
        5,
        { op: "append", id: "t1", field: "text", value: "!" },
        { op: "set", id: "t1", fields: { text: "replaced" } },
        { op: "append", id: "u1", field: "text", value: "?" },
      ),
    );
    const changes = store.takeChanges();
    assert.equal(changes.appended.get("t1").get("text"), null);
    assert.deepEqual(changes.appended.get("u1").get("text"), ["?"]);
    store.applyMessage(
      patches(
        6,
        { op: "set", id: "t1", fields: { text: "again" } },
        { op: "append", id: "t1", field: "text", value: "!" },
      ),
    );
    assert.equal(store.block("t1").text, "again!");
    assert.equal(store.takeChanges().appended.get("t1").get("text"), null, "not an extension of the old");
  });

  test("changes say whether only appends changed anything (streaming text that may wait)", () => {
    const store = new Store(base());
    assert.equal(store.takeChanges().onlyAppends, false); // a new state: everything to draw
    assert.equal(store.takeChanges().onlyAppends, null); // nothing since
    store.applyMessage(patches(4, { op: "append", id: "t1", field: "text", value: "lo" }));
    store.applyMessage(patches(5, { op: "append", id: "t1", field: "text", value: "!" }));
    assert.equal(store.takeChanges().onlyAppends, true);
    for (const [seq, op] of [
      [6, { op: "set", id: "t1", fields: { streaming: false } }],
      [7, { op: "top", fields: { status: "completed" } }],
      [8, { op: "add", block: { id: "t2", kind: "text", text: "" } }],
      [9, { op: "remove", id: "t2" }],
    ]) {
      store.applyMessage(patches(seq, { op: "append", id: "t1", field: "text", value: "." }, op));
      assert.equal(store.takeChanges().onlyAppends, false, op.op);
    }
  });

  test("append to a missing field starts it from empty", () => {
    const store = new Store(base());
    store.applyMessage(
      patches(
        4,
        { op: "add", block: { id: "c1", kind: "tool", name: "run", status: "streaming" } },
        { op: "append", id: "c1", field: "args", value: '{"co' },
      ),
    );
    store.applyMessage(patches(5, { op: "append", id: "c1", field: "args", value: 'de": 1}' }));
    assert.equal(store.block("c1").args, '{"code": 1}');
  });

  test("old and repeated messages are ignored", () => {
    const store = new Store(base());
    assert.equal(
      store.applyMessage(patches(3, { op: "append", id: "t1", field: "text", value: "X" })),
      false,
    );
    assert.equal(
      store.applyMessage(patches(2, { op: "append", id: "t1", field: "text", value: "X" })),
      false,
    );
    assert.ok(store.applyMessage(patches(4, { op: "append", id: "t1", field: "text", value: "l" })));
    assert.equal(
      store.applyMessage(patches(4, { op: "append", id: "t1", field: "text", value: "l" })),
      false,
    );
    assert.equal(store.block("t1").text, "Hell");
    assert.equal(store.state.seq, 4);
  });

  test("a gap in seq is applied best-effort (the final state trait repairs the view)", () => {
    const store = new Store(base());
    assert.ok(store.applyMessage(patches(9, { op: "append", id: "t1", field: "text", value: "p" })));
    assert.equal(store.block("t1").text, "Help");
    assert.equal(store.state.seq, 9);
  });

  test("patches that carry their own seq are filtered one by one", () => {
    const store = new Store(base());
    store.applyMessage({
      kind: "patches",
      seq: 5,
      patches: [
        { seq: 3, op: "append", id: "t1", field: "text", value: "X" },
        { seq: 4, op: "append", id: "t1", field: "text", value: "l" },
        { seq: 5, op: "append", id: "t1", field: "text", value: "p" },
      ],
    });
    assert.equal(store.block("t1").text, "Hellp");
    assert.equal(store.state.seq, 5);
  });

  test("state replace: the trait wins, later patches apply on top, older ones are dropped", () => {
    const store = new Store(base());
    store.applyMessage(patches(4, { op: "append", id: "t1", field: "text", value: "l" }));
    const final = {
      ...base(),
      seq: 6,
      status: "completed",
      blocks: [{ id: "t1", kind: "text", text: "Hello!", streaming: false }],
    };
    store.replace(final);
    const changes = store.takeChanges();
    assert.equal(changes.structure, true);
    assert.equal(changes.top, true);
    assert.deepEqual([...changes.blocks], ["t1"]);
    assert.equal(store.block("u1"), undefined);
    assert.equal(
      store.applyMessage(patches(5, { op: "append", id: "t1", field: "text", value: "late" })),
      false,
    );
    assert.equal(
      store.applyMessage(patches(6, { op: "append", id: "t1", field: "text", value: "late" })),
      false,
    );
    assert.ok(store.applyMessage(patches(7, { op: "top", fields: { status: "running" } })));
    assert.equal(store.block("t1").text, "Hello!");
    assert.equal(store.state.status, "running");
  });

  test("add appends a block; re-adding an id replaces it in place", () => {
    const store = new Store(base());
    store.takeChanges();
    store.applyMessage(
      patches(4, { op: "add", block: { id: "k1", kind: "thinking", text: "", streaming: true } }),
    );
    let changes = store.takeChanges();
    assert.equal(changes.structure, true);
    assert.deepEqual(
      store.state.blocks.map((b) => b.id),
      ["u1", "t1", "k1"],
    );
    store.applyMessage(
      patches(5, { op: "add", block: { id: "t1", kind: "text", text: "again", streaming: false } }),
    );
    changes = store.takeChanges();
    assert.equal(changes.structure, false, "same kind, same place: no structural change");
    assert.deepEqual(
      store.state.blocks.map((b) => b.id),
      ["u1", "t1", "k1"],
    );
    assert.equal(store.block("t1").text, "again");
    assert.equal(store.state.blocks[1], store.block("t1"), "the index follows the replacement");
  });

  test("remove drops a block; patches to it afterwards are ignored", () => {
    const store = new Store(base());
    store.takeChanges();
    store.applyMessage(
      patches(4, { op: "remove", id: "t1" }, { op: "append", id: "t1", field: "text", value: "x" }),
    );
    const changes = store.takeChanges();
    assert.equal(changes.structure, true);
    assert.equal(changes.blocks.has("t1"), false);
    assert.deepEqual(
      store.state.blocks.map((b) => b.id),
      ["u1"],
    );
    assert.equal(store.block("t1"), undefined);
  });

  test("top replaces top-level fields but never seq or blocks", () => {
    const store = new Store(base());
    store.takeChanges();
    store.applyMessage(
      patches(4, {
        op: "top",
        fields: {
          status: "completed",
          usage: { input: 20, output: 9, cost: 0.01 },
          live: true,
          seq: 99,
          blocks: [],
        },
      }),
    );
    const { state } = store;
    assert.equal(state.status, "completed");
    assert.deepEqual(state.usage, { input: 20, output: 9, cost: 0.01 });
    assert.equal(state.live, true);
    assert.equal(state.seq, 4);
    assert.equal(state.blocks.length, 2);
    assert.equal(store.takeChanges().top, true);
  });

  test("set cannot rename a block; a kind change is structural", () => {
    const store = new Store(base());
    store.takeChanges();
    store.applyMessage(
      patches(4, { op: "set", id: "t1", fields: { id: "zz", kind: "warning", text: "careful" } }),
    );
    assert.equal(store.block("t1").kind, "warning");
    assert.equal(store.block("zz"), undefined);
    assert.equal(store.takeChanges().structure, true);
  });

  test("numeric ids work as well as string ids", () => {
    const store = new Store({ seq: 0, blocks: [{ id: 7, kind: "text", text: "a" }] });
    store.applyMessage(patches(1, { op: "append", id: 7, field: "text", value: "b" }));
    store.applyMessage(patches(2, { op: "append", id: "7", field: "text", value: "c" }));
    assert.equal(store.block(7).text, "abc");
  });

  test("unknown ops, unknown ids and other messages are ignored", () => {
    const store = new Store(base());
    assert.equal(store.applyMessage({ kind: "ack", of: "hello" }), false);
    assert.equal(store.applyMessage(null), false);
    store.applyMessage(
      patches(
        4,
        { op: "explode" },
        { op: "append", id: "nope", field: "text", value: "x" },
        { op: "set", id: "nope", fields: {} },
        null,
      ),
    );
    assert.equal(store.state.seq, 4);
    assert.deepEqual(normalizeState(store.state).blocks, base().blocks);
  });

  test("a 20,000-token stream folds in linear time", () => {
    const store = new Store({ seq: 0, blocks: [{ id: "t", kind: "text", text: "", streaming: true }] });
    const start = performance.now();
    for (let seq = 1; seq <= 20_000; seq++) {
      store.applyMessage(patches(seq, { op: "append", id: "t", field: "text", value: "tok " }));
    }
    assert.equal(store.block("t").text.length, 80_000);
    assert.ok(performance.now() - start < 2000);
  });
});

describe("placements", () => {
  test("a sub-agent's blocks go in their delegate card, in order; the rest at the top", () => {
    const blocks = [
      { id: "t0", kind: "text" },
      { id: "call_d", kind: "tool" },
      { id: "call_d/r1.1.0", kind: "text", parent: "call_d" },
      { id: "call_x", kind: "tool", parent: "call_d" },
      { id: "call_d2", kind: "tool", parent: "call_d" },
      { id: "call_y", kind: "tool", parent: "call_d2" },
      { id: "t1", kind: "text" },
    ];
    assert.deepEqual(
      placements(blocks).map(([b, parent]) => [b.id, parent]),
      [
        ["t0", null],
        ["call_d", null],
        ["call_d/r1.1.0", "call_d"],
        ["call_x", "call_d"],
        ["call_d2", "call_d"],
        ["call_y", "call_d2"],
        ["t1", null],
      ],
    );
  });

  test("a block whose card is missing, or comes later, is drawn at the top level", () => {
    const blocks = [
      { id: "a", kind: "text", parent: "gone" },
      { id: "b", kind: "text", parent: "c" },
      { id: "c", kind: "tool" },
      { id: 7, kind: "text", parent: "c" },
    ];
    assert.deepEqual(
      placements(blocks).map(([b, parent]) => [b.id, parent]),
      [
        ["a", null],
        ["b", null],
        ["c", null],
        [7, "c"],
      ],
    );
  });
});
