// Big blocks in parts that lay out on their own. A browser lays out one paragraph, one code block,
// one list or one table as a whole: appending to a 1 MB one costs it hundreds of milliseconds,
// every time. So a block past a size is split into parts (display: block, content-visibility:
// auto in ipyagent.css): appending touches the last part only, and parts off screen are not laid
// out or painted at all.
//
// Parts of code blocks, lists and the top-level blocks look exactly like the block unsplit, so
// they stay. Where such a part ends depends on the content only, never on how it arrived: a block
// streamed piece by piece and the same block rendered at once end up split the same way
// (dom_sink.js runs both through `Parts`), so the page is the same either way.
//
//   blocks the rendered markdown itself: parts end before a paragraph, list, code block, quote or
//          table that follows another of those (their margins are alike: the gap between the
//          parts is the gap between the blocks), once they hold BLOCK_PART characters;
//   code   <pre><code>: parts end after a line, once they hold CODE_PART characters;
//   list   <ul>/<ol>: parts end before an item, once they hold LIST_PART characters.
// The blocks nested in a quote or a list item are split by the same rules, each on its own: those
// that stream (stream_nested.js) as they arrive, the others once the item or quote is finished.
//
// A paragraph or a table cannot be split without showing it: a part of a paragraph starts a new
// line, and tables in parts cannot size their columns by all their rows. So these are split while
// they stream, and joined again (`unsplit`) when they are complete, once, if the browser can lay
// the whole out in one task of under 50 ms (up to PARA_JOIN characters, TABLE_JOIN rows: measured
// by bench/browser_join.py, see docs/widget-protocol.md):
//   p      past PARA_WHOLE characters, parts end after a sentence (". ", "! ", "? "), once they
//          hold PARA_PART characters;
//   table  a table goes on in another table past TABLE_ROWS rows, with column widths that the
//          first rows suggest.
// Rendered at once, a paragraph or table is split only past those sizes, so the page ends up the
// same either way. Past them (a paragraph of 32 KB, a table of 100 rows) the parts show: a line
// break every PARA_PART characters, column widths from the first rows.
//
// Small blocks stay exactly as marked renders them. Only top-level text is ever cut, so a
// highlighted string or an emphasis is never split. Parts go in shelves of SHELF parts (each a
// part too): the browser checks every such part on every frame (is it on screen yet?), and a
// shelf off screen spares it the check of its parts.

export const BLOCK_PART = 4096;
export const CODE_PART = 2048;
export const PARA_PART = 4096;
/** A streaming paragraph is laid out whole (its text appended in place) up to this size: each
 * append lays it all out again (~5 ms at 16 KB in Chromium, 18 at 64 KB: bench/browser_frame.py). */
export const PARA_WHOLE = 16384;
export const LIST_PART = 4096;
export const TABLE_ROWS = 50;
/** The largest paragraph and table joined again when complete (see above). */
export const PARA_JOIN = 32768;
export const TABLE_JOIN = 100;
export const SHELF = 32;

// "nested": the blocks of a quote or a list item, never cut (the big ones are split on their own).
const LIMIT = { blocks: BLOCK_PART, code: CODE_PART, p: PARA_PART, list: LIST_PART, nested: Infinity };
const PART_TAG = { blocks: "div", list: "div", code: "span", p: "span", table: "div" };
/** Top-level blocks with margins of 0.5em (ipyagent.css): a part may end between two of them. */
const EVEN = /^(P|UL|OL|PRE|BLOCKQUOTE|TABLE)$/;
/** Characters of the widest column a big table sizes for (longer cells wrap). */
const MAX_COLUMN = 40;

/** The kind of parts a finished element's children go into, or null for elements never split. */
function partsKind(el) {
  if (el.nodeName === "P") return "p";
  if (el.nodeName === "UL" || el.nodeName === "OL") return "list";
  if (el.nodeName === "TABLE") return "table";
  if (el.nodeName === "PRE" && el.firstElementChild?.nodeName === "CODE") return "code";
  return null;
}

/** A writer of the children of `el`: the rendered markdown's element ("blocks"), a <code>, <p>,
 * <ul> or <ol>. */
export class Parts {
  constructor(el, kind) {
    this.el = el;
    this.kind = kind;
    this.limit = kind === "p" ? PARA_WHOLE : LIMIT[kind]; // the first part holds what came before
    this.part = null; // the part being filled; null while the element is not split
    this.shelves = null;
    this.size = 0; // characters in the part being filled (counted only as far as `limit`)
    this.prev = ""; // the top-level text just before, for a cut that spans two text nodes
    this.cutNext = false; // a part ended exactly at the end of what was appended last
    this.items = 0; // list items appended
    this.live = null;
  }

  /** The node showing the block's unfinished end, kept after everything appended. */
  setLive(node) {
    if (node === this.live) return;
    this.live?.remove();
    this.live = node;
    if (node) (this.part ?? this.el).append(node);
  }

  /** The node showing the block's unfinished end is finished as it is: it stays where it is (a
   * list item streamed in, which moving would lay out again), or goes into the next part if one
   * begins before it, as if appended now. */
  keepLive() {
    const node = this.live;
    this.live = null;
    if (!node) return;
    if (this.#cutBefore(node)) {
      node.remove();
      this.#node(node);
      return;
    }
    // (What is nested in it streamed in parts, or was split as it was put in: no splitNested.)
    this.#counted(node);
  }

  /** Append finished nodes, in order. */
  append(nodes) {
    for (const node of Array.from(nodes)) {
      if (node.nodeType === 3 && (this.kind === "code" || this.kind === "p")) this.#text(node.data);
      else this.#node(node);
    }
  }

  #cutBefore(node) {
    return (
      this.cutNext ||
      (this.kind === "list" && node.nodeName === "LI" && this.size >= this.limit) ||
      (this.kind === "blocks" && this.#blockCut(node))
    );
  }

  #node(node) {
    if (this.#cutBefore(node)) {
      this.#newPart();
      if (this.el.nodeName === "OL" && node.nodeName === "LI") {
        // A part keeps its counters to itself (content-visibility implies style containment):
        // its items would count from the list's start again. They go on from the items before.
        node.setAttribute("value", String(this.el.start + this.items));
      }
    }
    // A finished item or block: the big blocks nested in it go in parts too (an item or a quote
    // of the top-level blocks is rendered whole, so the same parts whichever way it came).
    if (node.nodeType === 1 && (this.kind === "list" || this.kind === "blocks")) splitNested(node);
    this.#put(node);
    this.#counted(node);
  }

  #counted(node) {
    if (node.nodeName === "LI") this.items++;
    this.size += textLength(node, this.limit - this.size);
    // An element between them: the text before it cannot end a sentence for a cut after it.
    if (node.nodeType !== 3) this.prev = "";
  }

  /** Whether a part of blocks ends before `node`. The blocks before it are finished, but may have
   * grown since they were appended (an open code block is appended empty): their size is read now. */
  #blockCut(node) {
    if (node.nodeType !== 1 || !isEven(node)) return false;
    const target = this.part ?? this.el;
    let prev = target.lastElementChild;
    if (prev && prev === this.live) prev = prev.previousElementSibling;
    prev ??= this.shelves?.last?.lastElementChild;
    if (!prev || !isEven(prev)) return false;
    const live = this.live?.parentNode === target ? this.live.textContent.length : 0;
    return target.textContent.length - live >= this.limit;
  }

  #text(data) {
    let rest = data;
    while (rest) {
      if (this.cutNext) this.#newPart();
      const cut = this.#cutAt(rest);
      if (cut < 0) break;
      this.#put(this.el.ownerDocument.createTextNode(rest.slice(0, cut)));
      this.prev = rest.slice(Math.max(0, cut - 2), cut);
      rest = rest.slice(cut);
      this.cutNext = true;
    }
    if (rest) {
      this.#put(this.el.ownerDocument.createTextNode(rest));
      this.size += rest.length;
      this.prev = (this.prev + rest).slice(-2);
    }
  }

  /** Where in `text` (appended now) the part ends, or -1 if it does not end in it. */
  #cutAt(text) {
    let from = Math.max(1, this.limit - this.size);
    while (from <= text.length) {
      const at = this.kind === "code" ? text.indexOf("\n", from - 1) : text.indexOf(" ", from - 1);
      if (at < 0) return -1;
      const before = at > 0 ? text[at - 1] : this.prev.at(-1);
      if (this.kind === "code" || (before && ".!?".includes(before))) return at + 1;
      from = at + 2;
    }
    return -1;
  }

  #put(node) {
    const target = this.part ?? this.el;
    if (this.live?.parentNode === target) target.insertBefore(node, this.live);
    else target.append(node);
  }

  #newPart() {
    this.cutNext = false;
    if (!this.part) {
      // The first cut: everything so far becomes the first part.
      const first = newPart(this.el, this.kind);
      first.append(...Array.from(this.el.childNodes).filter((n) => n !== this.live));
      this.shelves = new Shelves(this.el, this.kind);
      this.shelves.add(first);
      this.part = first;
    }
    const done = this.part;
    this.part = newPart(this.el, this.kind);
    if (this.live) this.part.append(this.live);
    sizeHint(done, this.kind); // once the live node has moved on: finished content only
    this.shelves.add(this.part, done);
    this.size = 0;
    this.limit = LIMIT[this.kind];
  }

  /** The block is complete: its children go back into it, unsplit, as rendering it at once gives
   * (for a paragraph, whose parts would show). Call after `setLive(null)`. */
  unsplit() {
    if (!this.part || this.el.textContent.length > PARA_JOIN) return;
    const nodes = [];
    for (const shelf of Array.from(this.el.children)) {
      for (const part of Array.from(shelf.children)) nodes.push(...part.childNodes);
    }
    this.el.replaceChildren(...nodes);
    this.el.normalize(); // one text node where the text was cut, as the parser makes it
    this.part = this.shelves = null;
  }
}

/** The length of `node`'s textContent, counted only until it reaches `need`: a part's size is
 * only ever compared with its limit, and a list item kept as it streamed (keepLive) may hold a
 * megabyte of text, which reading whole at its end would cost time in proportion. */
function textLength(node, need) {
  if (node.nodeType !== 1 && node.nodeType !== 11) return node.textContent.length;
  let n = 0;
  for (let child = node.firstChild; child && n < need; child = child.nextSibling) {
    if (child.nodeType === 1) n += textLength(child, need - n);
    else if (child.nodeType === 3 || child.nodeType === 4) n += child.data.length;
  }
  return n;
}

function newPart(el, kind, className = "ipyagent-part") {
  const part = el.ownerDocument.createElement(PART_TAG[kind]);
  part.className = className;
  return part;
}

/** The shelves of a split block: parts go in the last one, SHELF at most in each. */
class Shelves {
  constructor(el, kind) {
    this.el = el;
    this.kind = kind;
    this.shelf = null;
    this.count = 0;
    this.last = null; // the last finished part
  }

  /** Put `part` on the last shelf (or a new one); `done` is the part before it, now finished. */
  add(part, done = null) {
    if (done) this.last = done;
    if (!this.shelf || this.count === SHELF) {
      if (this.shelf) this.#hint();
      this.shelf = newPart(this.el, this.kind, "ipyagent-part ipyagent-shelf");
      this.el.append(this.shelf);
      this.count = 0;
    }
    this.shelf.append(part);
    this.count++;
  }

  /** A full shelf is as tall as its parts are about to be. */
  #hint() {
    let lines = 0;
    for (const part of this.shelf.children) {
      lines += Number(part.style.getPropertyValue("--ipyagent-lines")) || 0;
    }
    this.shelf.style.setProperty("--ipyagent-lines", String(lines));
  }
}

function isEven(el) {
  return EVEN.test(el.nodeName) || el.classList.contains("ipyagent-table");
}

/** How tall a finished part is about to be, for the page to keep its height while it is skipped
 * off screen (ipyagent.css reads --ipyagent-lines). Exact for code; an estimate for text. */
function sizeHint(part, kind) {
  const text = part.textContent;
  let lines;
  if (kind === "code") lines = text.split("\n").length - 1;
  else if (kind === "p") lines = Math.ceil(text.length / 110);
  else lines = part.children.length + Math.ceil(text.length / 110);
  part.style.setProperty("--ipyagent-lines", String(lines));
}

/** A writer of a table's body rows: past TABLE_ROWS rows, the table goes on in another table
 * (each in a part of its own), all with the column widths the first rows suggest, the whole in
 * a <div class="ipyagent-table"> where the table was; `unsplit` makes it one table again. */
export class TableParts {
  constructor(table) {
    this.first = table;
    this.table = table;
    this.tbody = null;
    this.rows = 0;
    this.total = 0; // rows in all the parts
    this.cols = null; // the <colgroup> every part shares, once split
    this.shelves = null;
  }

  append(nodes) {
    for (const node of Array.from(nodes)) {
      if (node.nodeName === "TR" && this.rows === TABLE_ROWS) this.#newPart();
      if (!this.tbody) {
        this.tbody = this.table.ownerDocument.createElement("tbody");
        this.table.append(this.tbody);
      }
      this.tbody.append(node);
      if (node.nodeName === "TR") {
        this.rows++;
        this.total++;
      }
    }
  }

  #newPart() {
    const doc = this.table.ownerDocument;
    let done = null;
    if (!this.cols) {
      this.cols = columnWidths(this.table);
      const whole = doc.createElement("div");
      whole.className = "ipyagent-table";
      this.table.replaceWith(whole);
      const first = newPart(whole, "table", "ipyagent-part ipyagent-rows");
      first.append(this.table);
      this.#fix(this.table, first);
      this.shelves = new Shelves(whole, "table");
      this.shelves.add(first);
      done = first;
    }
    const part = newPart(this.table, "table", "ipyagent-part ipyagent-rows ipyagent-rows-more");
    const table = doc.createElement("table");
    this.tbody = doc.createElement("tbody");
    table.append(this.tbody);
    part.append(table);
    this.shelves.add(part, done ?? this.table.parentNode);
    this.table = table;
    this.#fix(table, part);
    this.rows = 0;
  }

  /** The table is complete: its rows go back into its first table, which takes the place of the
   * parts, without the column widths (the browser sizes the columns by all the rows). */
  unsplit() {
    if (!this.cols || this.total > TABLE_JOIN) return;
    const whole = this.first.closest(".ipyagent-table");
    const body = this.first.tBodies[0];
    for (const table of Array.from(whole.querySelectorAll(".ipyagent-rows > table")).slice(1)) {
      body.append(...table.tBodies[0].childNodes);
    }
    this.first.querySelector(":scope > colgroup").remove();
    whole.replaceWith(this.first);
    this.table = this.first;
    this.tbody = body;
    this.cols = this.shelves = null;
  }

  #fix(table, part) {
    table.prepend(this.cols.group.cloneNode(true));
    part.style.width = this.cols.width; // the table's own style stays unset, to be as marked made it
    part.style.setProperty("--ipyagent-lines", String(TABLE_ROWS + 2));
  }
}

/** Column widths for a table that goes on in parts: in proportion to the longest cell of each
 * column among the header and the first rows (capped), as the same <colgroup> for every part. */
function columnWidths(table) {
  const widths = [];
  for (const row of table.rows) {
    Array.from(row.cells).forEach((cell, i) => {
      widths[i] = Math.max(widths[i] ?? 3, Math.min(MAX_COLUMN, cell.textContent.trim().length));
    });
  }
  const chars = widths.map((w) => w + 2); // a cell's padding is about two characters
  const total = chars.reduce((a, b) => a + b, 0);
  const group = table.ownerDocument.createElement("colgroup");
  for (const w of chars) {
    const col = table.ownerDocument.createElement("col");
    col.style.width = `${((100 * w) / total).toFixed(2)}%`;
    group.append(col);
  }
  return { group, width: `min(100%, ${total}ch)` };
}

/** Split the big blocks among the top-level elements of `fragment` (a block rendered at once)
 * exactly as they would be split had they streamed in, and those nested in them. */
export function splitBlocks(fragment) {
  for (const el of Array.from(fragment.children)) {
    split(el);
    splitNested(el);
  }
  return fragment;
}

/** Split `el` if it is a code block or a list past its size and not split yet, or a paragraph or
 * a table too big to be joined again had it streamed in. */
function split(el) {
  const kind = partsKind(el);
  if (kind === "table") {
    const body = el.tBodies[0];
    if (!body || body.rows.length <= TABLE_JOIN) return;
    const rows = Array.from(body.childNodes);
    body.remove();
    new TableParts(el).append(rows);
    return;
  }
  if (!kind || el.textContent.length < (kind === "p" ? PARA_JOIN + 1 : LIMIT[kind])) return;
  const holder = kind === "code" ? el.firstElementChild : el;
  if (holder.querySelector(":scope > .ipyagent-shelf")) return;
  const children = Array.from(holder.childNodes);
  holder.replaceChildren();
  new Parts(holder, kind).append(children); // a list's items split what is nested in them
}

/** Split the big blocks nested in `el` (in a list item, in a quote), as they are split had they
 * streamed in (stream_nested.js). Not in a table: its cells are never split. */
function splitNested(el) {
  if (el.nodeName === "TABLE" || el.textContent.length < CODE_PART) return;
  const nested = ":scope pre, :scope ul, :scope ol, :scope p, :scope table";
  for (const inner of Array.from(el.querySelectorAll(nested))) {
    const table = inner.parentElement.closest("table");
    if (!table || !el.contains(table)) split(inner);
  }
}

