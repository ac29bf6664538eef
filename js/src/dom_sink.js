// Streaming markdown on the page: applies what a MarkdownStream (stream.js) hands out to an
// element. Finished HTML goes in place, sanitized, once. An open paragraph or quote of ordinary
// size lives in a tail element that goes when the text is complete; an open code block, table,
// list or long paragraph is built where it will stay (moving it at the end would lay it all out
// again), through the writers of parts.js, which split a big block into parts exactly as they
// split the same block rendered at once (a paragraph or a table is joined again when complete):
// streamed or not, the element ends up the same. A quote's or a list item's content streams into
// its element through a DomSink of its own (stream_nested.js).

import { sanitizedFragment } from "./markdown.js";
import { Parts, TableParts, splitBlocks } from "./parts.js";
import { MarkdownStream } from "./stream.js";

const OPEN_CLASS = "ipyagent-md-open";

class DomSink {
  /** `nested`: `el` is a quote or a list item, whose blocks are never put in parts (each big
   * one is split on its own); `lead`: the text marked puts before its content. */
  constructor(el, { nested = false, lead = "" } = {}) {
    this.el = el;
    this.nested = nested;
    this.lead = lead;
  }

  reset() {
    this.el.replaceChildren(...(this.lead ? [this.lead] : []));
    // The top-level blocks, in parts past a size.
    this.top = new Parts(this.el, this.nested ? "nested" : "blocks");
    this.tail = null;
    this.#clearOpen();
  }

  #clearOpen() {
    this.parts = null; // the writer of the open block
    this.nodes = null; // the open block's top-level nodes (to drop or replace it)
    this.liveNode = null;
  }

  #tail() {
    if (!this.tail) {
      this.tail = this.el.ownerDocument.createElement("div");
      this.tail.className = "ipyagent-md-tail";
      this.top.setLive(this.tail);
    }
    return this.tail;
  }

  /** Put `frag` before the tail (the text region it replaces goes). */
  #settle(frag) {
    const nodes = Array.from(frag.childNodes);
    this.top.append(nodes);
    this.tail?.replaceChildren();
    return nodes;
  }

  /** Open a block from its shell HTML; `make(el)` gives the writer that fills its element. */
  #open(html, make) {
    const frag = sanitizedFragment(html);
    const el = frag.firstElementChild;
    const replaced = this.nodes;
    if (replaced) {
      this.nodes = Array.from(frag.childNodes);
      replaced[0].before(frag);
      for (const n of replaced) n.remove();
    } else {
      this.nodes = this.#settle(frag);
    }
    this.parts = make(el);
    this.liveNode = null;
  }

  freeze(html) {
    this.#settle(splitBlocks(sanitizedFragment(html)));
  }

  /** The open region's rendering so far: a list's open item, a paragraph's text after its last
   * piece, or (in the tail) a whole region. */
  live(html) {
    if (!this.parts || this.parts instanceof TableParts) {
      this.#tail().replaceChildren(sanitizedFragment(html));
      return;
    }
    if (this.parts.kind === "list") {
      const item = html ? sanitizedFragment(`<ul>${html}</ul>`).firstElementChild.firstElementChild : null;
      item?.classList.add(OPEN_CLASS);
      this.liveNode = item;
      this.parts.setLive(item);
      return;
    }
    this.#liveSpan().replaceChildren(sanitizedFragment(html));
  }

  #liveSpan() {
    if (!this.liveNode) {
      this.liveNode = this.el.ownerDocument.createElement("span");
      this.liveNode.className = OPEN_CLASS;
      this.parts.setLive(this.liveNode);
    }
    return this.liveNode;
  }

  liveText(text) {
    let at = this.parts ? this.liveNode : this.#tail();
    if (!at) return;
    while (at.lastElementChild && /^(P|LI|UL|OL|BLOCKQUOTE)$/.test(at.lastElementChild.tagName)) {
      at = at.lastElementChild;
    }
    at.append(text);
  }

  /** The open block is not what it was taken for: it goes (its text is rendered again). */
  drop() {
    for (const n of this.nodes ?? []) n.remove();
    this.#clearOpen();
  }

  // -- code ---------------------------------------------------------------------------------------

  codeOpen(shellHtml) {
    this.#open(shellHtml, (pre) => new Parts(pre.firstElementChild, "code"));
    const doc = this.el.ownerDocument;
    this.pending = doc.createElement("span"); // complete lines not highlighted yet, then the partial
    this.partial = doc.createTextNode("");
    this.pending.append(this.partial);
    this.parts.setLive(this.pending);
  }

  codePending(text) {
    this.partial.before(text);
  }

  codeHtml(html, rest) {
    this.parts.append(sanitizedFragment(html).childNodes);
    this.pending.replaceChildren(rest, this.partial);
  }

  codePartial(text) {
    if (this.partial.data !== text) this.partial.data = text;
  }

  codeClose(html) {
    this.parts.setLive(null);
    this.parts.append(sanitizedFragment(html).childNodes);
    this.pending = this.partial = null;
    this.#clearOpen();
  }

  // -- tables -------------------------------------------------------------------------------------

  tableOpen(html) {
    this.#open(html, (table) => new TableParts(table));
  }

  tableRow(html) {
    const rows = sanitizedFragment(`<table><tbody>${html}</tbody></table>`).querySelector("tbody");
    this.parts.append(rows.childNodes);
  }

  tableClose() {
    this.parts.unsplit();
    this.#clearOpen();
  }

  // -- quotes and list items: a sink of their own --------------------------------------------------

  quoteOpen(shellHtml) {
    let inner = null;
    this.#open(shellHtml, (quote) => {
      inner = new DomSink(quote, { nested: true, lead: "\n" });
      return null;
    });
    return inner;
  }

  quoteClose() {
    this.#clearOpen();
  }

  /** The open list item, empty, its content to stream in through the sink returned. */
  itemOpen() {
    const li = this.el.ownerDocument.createElement("li");
    li.className = OPEN_CLASS;
    this.liveNode = li;
    this.parts.setLive(li);
    return new DomSink(li, { nested: true });
  }

  /** The open item (itemOpen) is finished as it is. */
  itemKeep() {
    this.liveNode.removeAttribute("class");
    this.liveNode = null;
    this.parts.keepLive();
    this.parts.append([this.el.ownerDocument.createTextNode("\n")]); // as marked ends an item
  }

  // -- lists and long paragraphs ------------------------------------------------------------------

  /** Open a list (or, while one is open, replace it: a list that turned loose starts over). */
  listOpen(shellHtml) {
    this.#open(shellHtml, (list) => {
      const parts = new Parts(list, "list");
      const shell = Array.from(list.childNodes);
      list.replaceChildren();
      parts.append(shell); // the shell's text counts as a list rendered at once would count it
      return parts;
    });
    this.#dropTail();
  }

  listItems(html) {
    this.parts.append(sanitizedFragment(`<ul>${html}</ul>`).firstElementChild.childNodes);
  }

  listClose() {
    this.parts.setLive(null);
    this.#clearOpen();
  }

  paraOpen() {
    this.#open("<p></p>\n", (p) => new Parts(p, "p"));
    this.#dropTail();
  }

  paraHtml(html) {
    this.parts.append(sanitizedFragment(html).childNodes);
  }

  paraClose() {
    this.parts.setLive(null);
    this.parts.unsplit();
    this.#clearOpen();
  }

  /** The open block shows its own caret now: no empty tail after it. */
  #dropTail() {
    this.top.setLive(null);
    this.tail = null;
  }

  done() {
    this.#dropTail();
    this.#clearOpen();
  }
}

/**
 * Renders a growing markdown text into `el`, in time proportional to what arrives (stream.js);
 * when streaming ends the element holds exactly what rendering the whole text at once gives.
 */
export class StreamingMarkdown {
  constructor(el) {
    this.stream = new MarkdownStream(new DomSink(el));
  }

  /** `appended`: the pieces appended to `text` since the last update, if that is all that changed. */
  update(text, streaming, appended) {
    this.stream.update(text, streaming, appended);
  }
}
