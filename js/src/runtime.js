// The runtime: everything the views need (the run view, the chat, marked, DOMPurify, highlight.js
// and the stylesheet), loaded once per page by loader.js — never sent with each view.
//
// Besides the views it keeps each model's `state` current on the page (StateKeeper): the kernel
// sends a run's text once, as patches, and does not send the whole state again when a run ends
// (docs/widget-protocol.md). So the model's `state` here follows the patches — what a saved
// notebook's widget state and a view rendered later start from — and a gap in the patches (a view
// that loaded while the kernel was already streaming, a reconnect) asks the kernel for the whole
// state once.

import { AgentView } from "./common.js";
import chatView from "./chat_view.js";
import { Store } from "./state.js";

/** The stylesheet (js/src/*.css), put in by js/build.mjs. */
const CSS = typeof __IPYAGENT_CSS__ === "string" ? __IPYAGENT_CSS__ : "";
const STYLE_ID = "ipyagent-style";
/** After asking for the whole state, how long before a gap may ask again. */
export const SYNC_RETRY_MS = 2000;

const runView = {
  render({ model, el }) {
    const view = new AgentView(model, el, { kind: "run" });
    return () => view.destroy();
  },
};

/** The anywidget view objects, by kind; each puts the stylesheet where it renders first. */
export const views = {
  run: withStyle(runView),
  chat: withStyle(chatView),
};

function withStyle(view) {
  return {
    render(props) {
      setup(styleRoot(props.el));
      return view.render(props);
    },
  };
}

/** Where a view's styles go: its shadow root if it has one, else the page. */
function styleRoot(el) {
  const root = el?.getRootNode?.();
  if (root && typeof ShadowRoot === "function" && root instanceof ShadowRoot) return root;
  return el?.ownerDocument ?? globalThis.document;
}

/** Put the stylesheet into `root` (a document or a shadow root), once. */
export function setup(root) {
  if (!root || !CSS) return;
  const doc = root.ownerDocument ?? root;
  let style = root.getElementById?.(STYLE_ID) ?? null;
  if (!style) {
    style = doc.createElement("style");
    style.id = STYLE_ID;
    (root.head ?? root).append(style);
  }
  if (style.textContent !== CSS) style.textContent = CSS;
}

/** Keep `model`'s state current on this page (called once per model by the loader). */
export function attach(model, timers) {
  return new StateKeeper(model, timers).start();
}

/**
 * Folds a model's patches into its `state` attribute, on the page only (the kernel holds the
 * same state already), and asks the kernel for the whole state when patches went missing.
 */
export class StateKeeper {
  constructor(model, timers = globalThis) {
    this.model = model;
    this.timers = timers;
    this.timer = null;
    this.store = null;
  }

  start() {
    this.store = new Store(this.model.get("state"));
    this.store.takeChanges();
    this.expose();
    this.onState = () => this.replace();
    this.onMessage = (msg) => this.receive(msg);
    this.model.on("change:state", this.onState);
    this.model.on("msg:custom", this.onMessage);
    this.sync(); // patches sent before this page loaded the runtime went by unseen
    return () => this.stop();
  }

  stop() {
    this.model.off("change:state", this.onState);
    this.model.off("msg:custom", this.onMessage);
    if (this.timer != null) this.timers.clearTimeout(this.timer);
  }

  /** The kernel wrote the whole state: start from it. */
  replace() {
    const raw = this.model.get("state");
    if (raw === this.store.state) return;
    this.store.replace(raw);
    this.store.takeChanges();
    this.expose();
  }

  receive(msg) {
    if (!msg || msg.kind !== "patches") return;
    const seq = Number(msg.seq);
    if (!Number.isFinite(seq) || seq <= this.store.state.seq) return;
    if (seq !== this.store.state.seq + 1) {
      this.sync(); // a batch went missing: applying this one would build on a hole
      return;
    }
    this.store.applyMessage(msg);
    this.store.takeChanges();
    this.expose();
  }

  /** Tell the kernel how far this page got; if that is behind, it sends the whole state. One
   * question at a time: the answer to one repairs every gap seen until it comes. */
  sync() {
    if (this.timer != null) return;
    try {
      this.model.send({ action: "sync", seq: this.store.state.seq });
    } catch (err) {
      return; // no kernel behind this model (a saved notebook): its state is all there is
    }
    this.timer = this.timers.setTimeout(() => {
      this.timer = null;
    }, SYNC_RETRY_MS);
  }

  /** The model's `state` is this page's copy, kept current in place: what a view rendered later
   * starts from and what a saved notebook stores. Set silently: the views follow the patches
   * themselves, and nothing is sent to the kernel. */
  expose() {
    this.model.set("state", this.store.state, { silent: true });
  }
}
