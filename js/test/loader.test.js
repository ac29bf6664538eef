// Loading the runtime once per page (js/src/loader.js) and keeping a model's state on the page
// (StateKeeper in js/src/runtime.js), without a browser: stand-in models record what they send, a
// stand-in import turns the kernel's answer into a module, timers run by hand.

import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { FALLBACK_AFTER_MS, RETRY_MS, runtimeLoader, widget } from "../src/loader.js";
import { StateKeeper, SYNC_RETRY_MS } from "../src/runtime.js";

class Model {
  constructor(values = {}, { dead = false } = {}) {
    this.values = { state: { seq: 0, status: "running", blocks: [] }, ...values };
    this.handlers = new Map();
    this.sent = [];
    this.sets = [];
    this.dead = dead;
  }
  get(key) {
    return this.values[key];
  }
  set(key, value, options) {
    this.values[key] = value;
    this.sets.push({ key, options });
  }
  on(event, fn) {
    this.handlers.set(event, [...(this.handlers.get(event) || []), fn]);
  }
  off(event, fn) {
    this.handlers.set(event, (this.handlers.get(event) || []).filter((f) => f !== fn));
  }
  send(msg) {
    if (this.dead) throw new Error("no comm");
    this.sent.push(msg);
  }
  emit(event, ...args) {
    for (const fn of this.handlers.get(event) || []) fn(...args);
  }
  /** The kernel's answer to a runtime request, on this model's comm. */
  answer(hash, code = "runtime") {
    this.emit("msg:custom", { kind: "runtime", hash }, [new TextEncoder().encode(code)]);
  }
}

class Timers {
  constructor() {
    this.now = 0;
    this.pending = new Map();
    this.next = 1;
  }
  setTimeout = (fn, ms) => {
    const id = this.next++;
    this.pending.set(id, { at: this.now + ms, fn });
    return id;
  };
  clearTimeout = (id) => {
    this.pending.delete(id);
  };
  /** Run every timer due within `ms`, in time order, including those set meanwhile. */
  advance(ms) {
    const end = this.now + ms;
    for (;;) {
      const due = [...this.pending].filter(([, t]) => t.at <= end).sort((x, y) => x[1].at - y[1].at)[0];
      if (!due) break;
      const [id, { at, fn }] = due;
      this.pending.delete(id);
      this.now = at;
      fn();
    }
    this.now = end;
  }
}

/** A tiny DOM: enough for the saved-text fallback. */
class Element {
  constructor(tag) {
    this.tagName = tag;
    this.children = [];
    this.style = {};
    this.textContent = "";
  }
  append(...nodes) {
    this.children.push(...nodes);
  }
  replaceChildren(...nodes) {
    this.children = nodes;
  }
  get text() {
    return [this.textContent, ...this.children.map((c) => c.text)].filter(Boolean).join("\n");
  }
}
const documentStub = { createElement: (tag) => new Element(tag) };

/** A page: its own registry, timers, and a runtime module that records what it rendered. */
function page() {
  const timers = new Timers();
  const rendered = [];
  const attached = [];
  const imported = [];
  const env = {
    scope: {},
    setTimeout: timers.setTimeout,
    clearTimeout: timers.clearTimeout,
    document: documentStub,
    importCode: async (code) => {
      imported.push(code);
      const view = (kind) => ({
        render({ model, el }) {
          el.replaceChildren(Object.assign(new Element("div"), { textContent: `live ${kind}` }));
          rendered.push({ kind, model });
          return () => rendered.push({ kind, model, destroyed: true });
        },
      });
      return { views: { run: view("run"), chat: view("chat") }, attach: (m) => attached.push(m) };
    },
  };
  return { env, timers, rendered, attached, imported };
}

const settle = () => new Promise((resolve) => setTimeout(resolve, 0));
const asks = (model) => model.sent.filter((m) => m.action === "runtime");
const hellos = (model) => model.sent.filter((m) => m.action === "hello");
/** How long a page asks before it waits for another view. */
const ASK_TIMEOUT_MS = RETRY_MS.reduce((a, b) => a + b, 0);

describe("the runtime loads once per page", () => {
  test("many views: one request, one load, every view rendered", async () => {
    const p = page();
    const run = widget("run", "h1", p.env);
    const chat = widget("chat", "h1", p.env); // another view module on the same page
    const [a, b, c] = [new Model(), new Model(), new Model()];
    run.initialize({ model: a });
    run.initialize({ model: b });
    chat.initialize({ model: c });
    const pageId = runtimeLoader("h1", p.env).page;
    assert.deepEqual(asks(a), [{ action: "runtime", hash: "h1", page: pageId, round: 1 }]);
    assert.deepEqual([asks(b).length, asks(c).length], [0, 0], "the others wait for that answer");
    const els = [new Element("div"), new Element("div"), new Element("div")];
    // Rendered in any order, before the runtime is here.
    chat.render({ model: c, el: els[2] });
    run.render({ model: b, el: els[1] });
    run.render({ model: a, el: els[0] });
    assert.equal(p.rendered.length, 0);
    a.answer("h1");
    await settle();
    assert.deepEqual(
      p.rendered.map((r) => r.kind),
      ["chat", "run", "run"],
    );
    assert.deepEqual(p.attached, [a, b, c], "each model's state is kept from then on");
    assert.deepEqual(p.imported, ["runtime"]);
    const stats = runtimeLoader("h1", p.env).stats;
    assert.deepEqual([stats.requests, stats.loads], [1, 1]);
    assert.deepEqual([hellos(a).length, hellos(b).length, hellos(c).length], [1, 1, 1]);
    p.timers.advance(ASK_TIMEOUT_MS * 2);
    assert.equal(asks(a).length, 1, "answered: not asked again");
    assert.equal(hellos(a).length, 1, "rendered: the view says hello itself from now on");

    // A view that comes later renders at once and never asks.
    const d = new Model();
    run.initialize({ model: d });
    const cleanup = run.render({ model: d, el: new Element("div") });
    assert.equal(p.rendered.at(-1).model, d);
    assert.deepEqual(d.sent, []);
    assert.equal(p.attached.at(-1), d);
    cleanup();
    assert.equal(p.rendered.at(-1).destroyed, true);
  });

  test("a second answer (another page asked too) is not loaded again", async () => {
    const p = page();
    const run = widget("run", "h1", p.env);
    const [a, b] = [new Model(), new Model()];
    run.initialize({ model: a });
    run.initialize({ model: b });
    a.answer("h1");
    b.answer("h1");
    await settle();
    a.answer("h1");
    await settle();
    assert.equal(p.imported.length, 1);
    assert.equal(runtimeLoader("h1", p.env).stats.answers, 3);
  });

  test("a reloaded page starts empty and asks again", async () => {
    const first = page();
    const a = new Model();
    widget("run", "h1", first.env).initialize({ model: a });
    a.answer("h1");
    await settle();
    const second = page(); // a new page: a new global scope
    const b = new Model();
    widget("run", "h1", second.env).initialize({ model: b });
    assert.equal(asks(b).length, 1);
    assert.notEqual(asks(b)[0].page, runtimeLoader("h1", first.env).page, "the kernel sees a new page");
  });

  test("no answer yet: the same comm asks again, sooner first (its first messages may wait behind a busy cell)", async () => {
    const p = page();
    const run = widget("run", "h1", p.env);
    const a = new Model();
    run.initialize({ model: a });
    run.render({ model: a, el: new Element("div") });
    const counts = [[asks(a).length, hellos(a).length]];
    for (const wait of RETRY_MS.slice(0, 2)) {
      p.timers.advance(wait);
      counts.push([asks(a).length, hellos(a).length]);
    }
    assert.deepEqual(counts, [
      [1, 1],
      [2, 2],
      [3, 3],
    ]);
    assert.equal(new Set(asks(a).map((m) => m.page)).size, 1, "one page id: the kernel answers once");
    a.answer("h1");
    await settle();
    p.timers.advance(ASK_TIMEOUT_MS);
    assert.deepEqual([asks(a).length, hellos(a).length], [3, 3]);
  });

  test("another runtime (another version of ipyagent on the page) is loaded apart", () => {
    const p = page();
    const [a, b] = [new Model(), new Model()];
    widget("run", "h1", p.env).initialize({ model: a });
    widget("run", "h2", p.env).initialize({ model: b });
    assert.deepEqual([asks(a)[0].hash, asks(b)[0].hash], ["h1", "h2"]);
  });

  test("a model without a comm is passed over; later views ask through the newest comm", async () => {
    const p = page();
    const run = widget("run", "h1", p.env);
    const dead = new Model({}, { dead: true }); // restored from a saved notebook: no comm
    const silent = new Model(); // its messages reach no kernel that answers
    run.initialize({ model: silent });
    run.initialize({ model: dead });
    assert.deepEqual([asks(silent).length, asks(dead).length], [1, 0]);
    p.timers.advance(RETRY_MS[0]);
    assert.equal(asks(silent).length, 2, "the dead one could not send: the one before it asked");
    const live = new Model(); // a view made since, by a live kernel
    run.initialize({ model: live });
    assert.equal(asks(live).length, 0, "the round goes on: no extra request for each new view");
    p.timers.advance(RETRY_MS[1]);
    assert.equal(asks(live).length, 1, "the next request goes through the newest view");
    live.answer("h1");
    await settle();
    assert.equal(p.imported.length, 1);
  });

  test("nobody answers: the page stops asking until another view comes", () => {
    const p = page();
    const run = widget("run", "h1", p.env);
    const a = new Model();
    run.initialize({ model: a });
    p.timers.advance(ASK_TIMEOUT_MS * 3);
    assert.equal(asks(a).length, RETRY_MS.length + 1);
    assert.equal(p.timers.pending.size, 0);
    const b = new Model();
    run.initialize({ model: b });
    assert.equal(asks(b).length, 1, "a new view asks at once");
    assert.deepEqual([asks(a)[0].round, asks(a).at(-1).round, asks(b)[0].round], [1, 1, 2], "in a new round");
  });

  test("the view that was asking goes away: the next request goes through another", () => {
    const p = page();
    const run = widget("run", "h1", p.env);
    const [a, b] = [new Model(), new Model()];
    run.initialize({ model: a });
    const cleanup = run.initialize({ model: b });
    cleanup();
    p.timers.advance(RETRY_MS[0]);
    assert.deepEqual([asks(a).length, asks(b).length], [2, 0]);
    assert.deepEqual(b.handlers.get("msg:custom"), []);
  });

  test("no runtime in time: the saved text shows, then the live view replaces it", async () => {
    const p = page();
    const run = widget("run", "h1", p.env);
    const state = {
      seq: 4,
      status: "completed",
      blocks: [
        { id: "u0", kind: "user", text: "Hi?" },
        { id: "b1", kind: "thinking", text: "hidden" },
        { id: "b2", kind: "text", text: "Hello <b>there</b>" },
        { id: "c1", kind: "tool", name: "run_python", status: "done" },
      ],
    };
    const model = new Model({ state });
    const el = new Element("div");
    run.initialize({ model });
    run.render({ model, el });
    p.timers.advance(FALLBACK_AFTER_MS - 1);
    assert.equal(el.children.length, 0, "no flash of saved text while the runtime is on its way");
    p.timers.advance(1);
    const shown = el.text;
    assert.match(shown, /> Hi\?\nHello <b>there<\/b>\n→ run_python \(done\)/);
    assert.doesNotMatch(shown, /hidden/);
    model.answer("h1");
    await settle();
    assert.equal(el.text, "live run");
  });

  test("the saved text sums a sub-agent up under its delegate card", () => {
    const p = page();
    const run = widget("run", "h1", p.env);
    const state = {
      seq: 9,
      status: "completed",
      blocks: [
        { id: "d1", kind: "tool", name: "delegate", status: "done" },
        { id: "d1/r1.1.0", kind: "text", text: "child thinking aloud", parent: "d1" },
        { id: "c2", kind: "tool", name: "lookup", status: "done", parent: "d1" },
        { id: "t9", kind: "text", text: "Parent's answer." },
      ],
    };
    const model = new Model({ state });
    const el = new Element("div");
    run.initialize({ model });
    run.render({ model, el });
    p.timers.advance(FALLBACK_AFTER_MS);
    assert.match(el.text, /→ delegate \(done\)\n {2}→ lookup \(done\)\nParent's answer\./);
    assert.doesNotMatch(el.text, /child thinking aloud/);
  });
});

describe("StateKeeper", () => {
  const patches = (seq, value) => ({
    kind: "patches",
    seq,
    patches: [{ op: "append", id: "t", field: "text", value }],
  });
  const start = (state) => {
    const timers = new Timers();
    const model = new Model({ state });
    const keeper = new StateKeeper(model, timers);
    keeper.start();
    return { model, timers, keeper };
  };
  const syncs = (model) => model.sent.filter((m) => m.action === "sync");
  const text = (model) => model.get("state").blocks[0].text;
  const base = () => ({ seq: 2, status: "running", blocks: [{ id: "t", kind: "text", text: "a" }] });

  test("the model's state follows the patches, on the page only", () => {
    const raw = base();
    const { model } = start(raw);
    assert.deepEqual(syncs(model), [{ action: "sync", seq: 2 }], "says how far it got, once");
    model.emit("msg:custom", patches(3, "b"));
    model.emit("msg:custom", patches(4, "c"));
    model.emit("msg:custom", patches(4, "c")); // repeated: ignored
    assert.equal(text(model), "abc");
    assert.equal(model.get("state").seq, 4);
    assert.equal(raw.blocks[0].text, "a", "the value the kernel sent is not changed");
    assert.ok(model.sets.every((s) => s.key === "state" && s.options.silent === true));
    assert.equal(syncs(model).length, 1);
  });

  test("a gap asks for the whole state once, and the whole state repairs it", () => {
    const { model, timers } = start(base());
    model.emit("msg:custom", patches(4, "X")); // 3 went missing
    model.emit("msg:custom", patches(5, "Y"));
    assert.equal(text(model), "a", "nothing built on the hole");
    assert.equal(syncs(model).length, 1, "the first question is still open");
    timers.advance(SYNC_RETRY_MS);
    model.emit("msg:custom", patches(6, "Z"));
    assert.deepEqual(syncs(model).at(-1), { action: "sync", seq: 2 });
    // The kernel sends the whole state: it replaces the page's copy; the next patch applies.
    model.values.state = { seq: 6, status: "running", blocks: [{ id: "t", kind: "text", text: "abcXYZ" }] };
    model.emit("change:state");
    model.emit("msg:custom", patches(7, "!"));
    assert.equal(text(model), "abcXYZ!");
  });

  test("a model without a kernel keeps its saved state and asks nothing", () => {
    const timers = new Timers();
    const model = new Model({ state: base() }, { dead: true });
    new StateKeeper(model, timers).start();
    assert.equal(text(model), "a");
    assert.equal(timers.pending.size, 0);
  });
});
