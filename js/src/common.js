// The view shell shared by the run view and the chat widget: it keeps the view state in sync with
// the kernel (the `state` trait plus `patches` messages, docs/widget-protocol.md), redraws at most
// once per animation frame and only the blocks that changed, says hello until acknowledged, and
// turns button clicks into actions. What a block looks like lives in blocks.js; the patch logic
// in state.js; the chat's history (drawn in pages) in history.js; the chat's input box in chat.js.

import { awaitsUser, createBlockView } from "./blocks.js";
import { clockNow, formatCost, formatInt, h, setData, setText } from "./dom.js";
import { HistoryView, historyBlocks } from "./history.js";
import { placements, Store } from "./state.js";

/** How often `hello` is re-sent until the kernel acknowledges it (protocol: 500 ms). */
const HELLO_INTERVAL_MS = 500;
/** How long a clicked button stays disabled waiting for the kernel to react before it re-enables
 * (a lost message must not leave the user without a way to click again). */
const PENDING_TIMEOUT_MS = 5000;

const STATUS_TEXT = {
  idle: "",
  running: "Running…",
  completed: "Done",
  failed: "Failed",
  cancelled: "Stopped",
  exhausted: "Stopped: limit reached",
};

const nextFrame =
  typeof requestAnimationFrame === "function"
    ? (fn) => requestAnimationFrame(fn)
    : (fn) => setTimeout(fn, 16);
const cancelFrame = typeof cancelAnimationFrame === "function" ? cancelAnimationFrame : clearTimeout;

/** Streaming text alone is redrawn at most this often. A redraw costs the page a frame's style,
 * layout and paint however little changed (~3 ms without GPU compositing: bench/browser_frame.py),
 * and the kernel sends every ~50 ms: at 10 redraws a second the text still reads as live, for
 * half that cost. Anything else (a new block, a status, a button's answer) is drawn on
 * the next frame, with whatever text waited. */
export const STREAM_REDRAW_MS = 100;

/**
 * One rendered view of an ipyagent widget model.
 *
 * options.kind: "run" or "chat" (root class `ipyagent-run` / `ipyagent-chat`);
 * options.footerStop: show Stop in the footer (the chat puts it beside Send instead);
 * options.scroll: the block list scrolls and sticks to the bottom while content grows;
 * options.onRender(state, view): called after each redraw (the chat updates its input bar).
 */
export class AgentView {
  constructor(model, el, options) {
    this.model = model;
    this.options = { footerStop: true, scroll: false, ...options };
    this.views = new Map(); // block id -> { el, update, kind }
    this.dirty = new Set(); // block ids to redraw for local reasons (a click is pending)
    this.pendingActions = new Map(); // key -> { blockId, status, timer }
    this.frame = null; // the redraw requested: an animation frame's handle
    this.wait = null; // or a timer's, for streaming text that waits (STREAM_REDRAW_MS)
    this.drawnAt = -Infinity; // when the last redraw ran (clockNow)
    this.acked = false;

    // The scrolling list: the history the chat opened on (drawn in pages, history.js), then the
    // blocks of the view state, which patches keep current.
    this.historyMarker = h("div", {
      class: "ipyagent-history-more",
      hidden: true,
      text: "Loading earlier messages…",
    });
    this.historyEl = h("div", { class: "ipyagent-history" });
    this.liveEl = h("div", { class: "ipyagent-live" });
    this.blocksEl = h("div", { class: "ipyagent-blocks" }, this.historyMarker, this.historyEl, this.liveEl);
    this.emptyEl = h("div", { class: "ipyagent-empty" });
    this.footer = buildFooter(this);
    this.root = h(
      "div",
      { class: `ipyagent-root ipyagent-${this.options.kind}` },
      this.blocksEl,
      this.emptyEl,
      this.footer.el,
    );
    el.replaceChildren(this.root);

    this.store = new Store(model.get("state"));
    this.history = new HistoryView({
      scroller: this.blocksEl,
      container: this.historyEl,
      marker: this.historyMarker,
      render: (block) => this.renderFinished(block),
    });
    this.history.show(historyBlocks(model.get("history")));
    this.onHistory = () => {
      this.history.show(historyBlocks(model.get("history")));
      this.schedule();
    };
    model.on("change:history", this.onHistory);
    this.onState = () => {
      this.store.replace(model.get("state"));
      this.schedule();
    };
    this.onMessage = (msg) => this.receive(msg);
    model.on("change:state", this.onState);
    model.on("msg:custom", this.onMessage);
    this.startHello();
    this.flush(); // the first paint is synchronous: no flash of an empty view
  }

  /** Handle a custom message from the kernel. */
  receive(msg) {
    if (msg?.kind === "ack" && msg.of === "hello") {
      this.stopHello();
      this.acked = true;
      setData(this.root, "hello", "acked");
    } else if (this.store.applyMessage(msg)) {
      this.schedule();
    }
  }

  /** Send an action. With a `key`, its buttons stay disabled until the kernel changes the block
   * (or, for keys without a block, the run's status or the list of blocks) or the timeout passes. */
  act(message, key = null, blockId = null, buffers = undefined) {
    this.send(message, buffers);
    if (!key) return;
    this.clearPending(key);
    const timer = setTimeout(() => this.clearPending(key), PENDING_TIMEOUT_MS);
    const status = this.store.state.status;
    this.pendingActions.set(key, { blockId: blockId == null ? null : String(blockId), status, timer });
    this.markDirty(blockId);
  }

  pending(key) {
    return this.pendingActions.has(key);
  }

  clearPending(key) {
    const entry = this.pendingActions.get(key);
    if (!entry) return;
    clearTimeout(entry.timer);
    this.pendingActions.delete(key);
    this.markDirty(entry.blockId);
  }

  markDirty(blockId) {
    if (blockId != null) this.dirty.add(String(blockId));
    this.schedule();
  }

  send(message, buffers = undefined) {
    try {
      this.model.send(message, undefined, buffers);
    } catch (err) {
      // No live comm (a reloaded notebook without its kernel): the view still shows the state.
      console.debug("[ipyagent] could not send", message, err);
    }
  }

  startHello() {
    setData(this.root, "hello", "sent");
    this.send({ action: "hello" });
    this.helloTimer = setInterval(() => this.send({ action: "hello" }), HELLO_INTERVAL_MS);
  }

  stopHello() {
    clearInterval(this.helloTimer);
    this.helloTimer = null;
  }

  /** Redraw on the next animation frame; any number of patches before it cost one redraw. What
   * only grows streaming text waits until STREAM_REDRAW_MS after the last redraw. */
  schedule() {
    if (this.frame != null || this.destroyed) return;
    const early = this.drawnAt + STREAM_REDRAW_MS - clockNow();
    if (early > 0 && this.store.changes.onlyAppends === true && !this.dirty.size) {
      this.wait ??= setTimeout(() => {
        this.wait = null;
        this.schedule();
      }, early);
      return;
    }
    clearTimeout(this.wait);
    this.wait = null;
    this.frame = nextFrame(() => this.flush());
  }

  flush() {
    this.drawnAt = clockNow();
    try {
      const changes = this.store.takeChanges();
      const state = this.store.state;
      this.settlePending(changes, state);
      const stick = this.options.scroll && isNearBottom(this.blocksEl);
      if (changes.structure) this.reconcile(changes.blocks);
      for (const id of new Set([...changes.blocks, ...this.dirty])) {
        this.updateBlock(id, changes.appended.get(id));
        this.revealIfAwaited(id);
      }
      this.dirty.clear();
      this.renderRoot(state);
      this.footer.update(state);
      this.options.onRender?.(state, this);
      if (stick) this.blocksEl.scrollTop = this.blocksEl.scrollHeight;
    } finally {
      // Cleared last: the redraws requested while flushing are already part of this one.
      this.frame = null;
    }
  }

  /** The element of a history block, drawn once (history blocks never change). */
  renderFinished(block) {
    const view = createBlockView(block, this);
    try {
      view.update(block);
    } catch (err) {
      console.error("[ipyagent] could not render block", block, err);
    }
    return view.el;
  }

  /** Redraw a block; `appended` (field -> pieces) is what `append` patches added to it since its
   * last redraw, when that is all that changed in those fields. */
  updateBlock(id, appended) {
    const block = this.store.block(id);
    const view = this.views.get(id);
    if (!block || !view) return;
    try {
      view.update(block, appended);
    } catch (err) {
      // One malformed block must not stop the rest of the transcript from rendering.
      console.error("[ipyagent] could not render block", block, err);
    }
  }

  /** A sub-agent's prompt or question must be seen: open every delegate card around it, even
   * one the user folded. */
  revealIfAwaited(id) {
    let block = this.store.block(id);
    if (!awaitsUser(block)) return;
    const seen = new Set();
    while (block && block.parent != null && !seen.has(String(block.parent))) {
      seen.add(String(block.parent));
      this.views.get(String(block.parent))?.reveal?.();
      block = this.store.block(block.parent);
    }
  }

  /** The kernel reacted: buttons waiting on a block it changed, or on the run (its status, its
   * blocks), are live again. */
  settlePending(changes, state) {
    for (const [key, entry] of this.pendingActions) {
      const settled =
        entry.blockId == null
          ? state.status !== entry.status || changes.structure
          : changes.blocks.has(entry.blockId);
      if (settled) this.clearPending(key);
    }
  }

  /** Make the block elements match state.blocks: create, drop and reorder, reusing the rest. */
  reconcile(changedIds) {
    const blocks = this.store.state.blocks;
    const wanted = new Map(blocks.map((b) => [String(b.id), b]));
    for (const [id, view] of this.views) {
      if (wanted.get(id)?.kind !== view.kind) {
        view.el.remove();
        this.views.delete(id);
      }
    }
    // A sub-agent's blocks go inside their delegate card (its `children` element), in order.
    const last = new Map(); // container -> the element placed last in it
    for (const [block, parentId] of placements(blocks)) {
      const id = String(block.id);
      let view = this.views.get(id);
      if (!view) {
        view = createBlockView(block, this);
        view.kind = block.kind;
        this.views.set(id, view);
        changedIds.add(id);
      }
      const container = (parentId !== null && this.views.get(parentId)?.children) || this.liveEl;
      const prev = last.get(container);
      const expected = prev ? prev.nextSibling : container.firstChild;
      if (expected !== view.el) container.insertBefore(view.el, expected);
      last.set(container, view.el);
    }
  }

  renderRoot(state) {
    setData(this.root, "status", state.status);
    // What the caret of streaming text depends on (ipyagent.css): on the live list, so that a
    // status change restyles the live blocks, never the history above them.
    setData(this.liveEl, "run-status", state.status);
    setData(this.root, "live", state.live ? "true" : "false");
    setData(this.root, "seq", state.seq);
    const empty = state.blocks.length === 0 && this.history.length === 0;
    this.emptyEl.hidden = !empty;
    if (empty) setText(this.emptyEl, emptyText(this.options.kind, state.status));
  }

  destroy() {
    this.destroyed = true;
    if (this.frame != null) cancelFrame(this.frame);
    clearTimeout(this.wait);
    this.stopHello();
    this.history.stop();
    for (const { timer } of this.pendingActions.values()) clearTimeout(timer);
    this.model.off("change:state", this.onState);
    this.model.off("change:history", this.onHistory);
    this.model.off("msg:custom", this.onMessage);
  }
}

function emptyText(kind, status) {
  if (status === "running") return "Waiting for the model…";
  return kind === "chat" ? "Ask something below to start the conversation." : "";
}

function isNearBottom(el) {
  return el.scrollHeight - el.scrollTop - el.clientHeight < 48;
}

/** The footer: status, model, tokens, cost, context use; Stop while running; Retry when the run
 * ended on a retryable error. Built once; updates only toggle and retext. */
function buildFooter(view) {
  const status = h("span", { class: "ipyagent-status" });
  const model = h("span", { class: "ipyagent-model" });
  const usage = h("span", { class: "ipyagent-usage" });
  const stop = h("button", {
    class: "ipyagent-button ipyagent-stop",
    type: "button",
    hidden: true,
    data: { action: "stop" },
    text: "Stop",
    on: { click: () => view.act({ action: "stop" }, "stop") },
  });
  const retry = h("button", {
    class: "ipyagent-button",
    type: "button",
    hidden: true,
    data: { action: "retry" },
    text: "Retry",
    on: { click: () => view.act({ action: "retry" }, "retry") },
  });
  const el = h(
    "div",
    { class: "ipyagent-footer" },
    status,
    model,
    usage,
    h("span", { class: "ipyagent-spacer" }),
    retry,
    stop,
  );
  return {
    el,
    update(state) {
      setData(status, "status", state.status);
      setText(status, STATUS_TEXT[state.status] ?? state.status);
      setText(model, view.options.kind === "chat" ? "" : (state.model ?? ""));
      setText(usage, usageText(state.usage));
      const running = state.status === "running";
      stop.hidden = !(view.options.footerStop && running);
      stop.disabled = view.pending("stop");
      setText(stop, view.pending("stop") ? "Stopping…" : "Stop");
      // A failed %%agent cell is retried by running the cell again; only the chat offers Retry.
      retry.hidden = running || view.options.kind !== "chat" || !endsInRetryableError(state.blocks);
      retry.disabled = view.pending("retry");
      el.hidden = !(
        status.textContent ||
        model.textContent ||
        usage.textContent ||
        !stop.hidden ||
        !retry.hidden
      );
    },
  };
}

/** "1,200 in (9,000 cached) · 80 out · $0.0012 (cache saved $0.024) · ~1,280 / 32,768 tokens (4%)"
 * — the parts that are known. */
export function usageText(usage) {
  if (!usage || typeof usage !== "object") return "";
  const parts = [];
  if (Number.isFinite(usage.input) || Number.isFinite(usage.output)) {
    const cached = usage.cached > 0 ? ` (${formatInt(usage.cached)} cached)` : "";
    parts.push(`${formatInt(usage.input ?? 0)} in${cached} · ${formatInt(usage.output ?? 0)} out`);
  }
  if (Number.isFinite(usage.cost)) {
    const saved = usage.saved > 0 ? ` (cache saved ${formatCost(usage.saved)})` : "";
    parts.push(formatCost(usage.cost) + saved);
  }
  if (typeof usage.context === "string" && usage.context) parts.push(`context ${usage.context}`);
  if (typeof usage.budget === "string" && usage.budget) parts.push(`budget ${usage.budget}`);
  return parts.join(" · ");
}

/** Retry is offered only when the last thing shown (warnings aside) is a retryable error: an
 * old error earlier in a conversation is not what "run the last prompt again" would redo. */
export function endsInRetryableError(blocks) {
  for (let i = blocks.length - 1; i >= 0; i--) {
    const b = blocks[i];
    if (b.kind === "warning") continue;
    return b.kind === "error" && Boolean(b.retryable);
  }
  return false;
}
