// The chat's history (the `history` trait, docs/widget-protocol.md): the finished blocks of the
// conversation the chat opened on. Drawing thousands of them at once is one long freeze, so they
// are drawn in pages from the end: the latest at once, older ones when the user scrolls near the
// top (an IntersectionObserver on a marker above them) and a few pages ahead while the page is
// idle. Each page is one short task; the scroll position is kept as pages go in above it.
// History blocks never change: the kernel replaces the whole trait (a new conversation empties it).

import { clockNow } from "./dom.js";

/** The most blocks one page draws. */
export const PAGE_BLOCKS = 40;
/** A page stops early once it has taken this long (it always draws at least one block). */
export const PAGE_BUDGET_MS = 16;
/** Blocks drawn ahead while the page is idle; the rest wait for the user to scroll up. */
export const IDLE_BLOCKS = 200;
/** Start loading the previous page this far before the user reaches the top. */
const LOAD_MARGIN_PX = 800;

/** The well-formed blocks of a `history` trait value (no copy: history blocks are never mutated). */
export function historyBlocks(raw) {
  if (!Array.isArray(raw)) return [];
  return raw.filter((b) => b && typeof b === "object" && b.id != null && typeof b.kind === "string");
}

/**
 * Which history blocks are drawn: always the last ones, `[start, total)`. No DOM.
 * `previous(make)` draws the page before `start` (calling `make(index)` from the newest to the
 * oldest, until PAGE_BLOCKS were made or PAGE_BUDGET_MS passed) and returns what `make` gave, in
 * list order.
 */
export class HistoryPager {
  constructor(total, { pageBlocks = PAGE_BLOCKS, budgetMs = PAGE_BUDGET_MS, clock = clockNow } = {}) {
    this.total = total;
    this.start = total;
    this.pageBlocks = pageBlocks;
    this.budgetMs = budgetMs;
    this.clock = clock;
  }

  get done() {
    return this.start <= 0;
  }

  get drawn() {
    return this.total - this.start;
  }

  previous(make) {
    const made = [];
    const began = this.clock();
    while (this.start > 0 && made.length < this.pageBlocks) {
      this.start -= 1;
      made.push(make(this.start));
      if (this.clock() - began >= this.budgetMs) break;
    }
    return made.reverse();
  }
}

const idle =
  typeof requestIdleCallback === "function"
    ? (fn) => requestIdleCallback(fn, { timeout: 1000 })
    : (fn) => setTimeout(fn, 50);
const cancelIdle = typeof cancelIdleCallback === "function" ? cancelIdleCallback : clearTimeout;

/**
 * Draws a history into `container` (a child of the scrolling `scroller`), page by page.
 * `render(block)` returns the element of one block. `marker` sits just above the container.
 */
export class HistoryView {
  constructor({ scroller, container, marker, render }) {
    this.scroller = scroller;
    this.container = container;
    this.marker = marker;
    this.render = render;
    this.blocks = [];
    this.pager = new HistoryPager(0);
    this.observer = null;
    this.idleHandle = null;
  }

  get length() {
    return this.blocks.length;
  }

  /** Show `blocks` (replacing any history shown): the latest page now, the rest later. */
  show(blocks) {
    this.stop();
    this.blocks = blocks;
    this.pager = new HistoryPager(blocks.length);
    this.container.replaceChildren();
    if (blocks.length) this.loadPage();
    this.marker.hidden = this.pager.done;
    if (this.pager.done) return;
    if (typeof IntersectionObserver === "function") {
      this.observer = new IntersectionObserver((entries) => this.onMarker(entries), {
        root: this.scroller,
        rootMargin: `${LOAD_MARGIN_PX}px 0px 0px 0px`,
      });
      this.observer.observe(this.marker);
    }
    this.scheduleIdle();
  }

  /** Draw the previous page above what is shown, keeping the view where the user left it. */
  loadPage() {
    if (this.pager.done) return;
    // A page is one element of its own: putting it in lays out that page, not every block
    // already shown (they would all be items of one flex list otherwise).
    const page = this.container.ownerDocument.createElement("div");
    page.className = "ipyagent-history-page";
    page.append(...this.pager.previous((i) => this.render(this.blocks[i])));
    const fromBottom = this.scroller.scrollHeight - this.scroller.scrollTop;
    this.container.prepend(page);
    this.scroller.scrollTop = this.scroller.scrollHeight - fromBottom;
    if (this.pager.done) this.stop();
  }

  onMarker(entries) {
    if (!entries.some((e) => e.isIntersecting) || this.pager.done) return;
    this.loadPage();
    if (this.observer) {
      // Observing again reports the marker's position afresh: still near the top (a short page)
      // loads the next page, in a task of its own.
      this.observer.unobserve(this.marker);
      this.observer.observe(this.marker);
    }
  }

  scheduleIdle() {
    // Without an observer (an old browser), idle time draws everything, a page per task.
    const limit = this.observer ? IDLE_BLOCKS : Infinity;
    if (this.idleHandle != null || this.pager.done || this.pager.drawn >= limit) return;
    this.idleHandle = idle(() => {
      this.idleHandle = null;
      this.loadPage();
      this.scheduleIdle();
    });
  }

  stop() {
    this.observer?.disconnect();
    this.observer = null;
    if (this.idleHandle != null) cancelIdle(this.idleHandle);
    this.idleHandle = null;
    this.marker.hidden = true;
  }
}
