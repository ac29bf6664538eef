// Streaming markdown in time proportional to what arrives. The text is cut into top-level regions
// at points where the markdown lexer would end a block anyway; a finished region is rendered once
// and never again. The open region is rendered by kind:
//   a fenced code block: the complete lines each update brings are highlighted once, as one
//     batch, and appended (a batch is kept only when the highlighter ends it outside any string
//     or comment, so the pieces join into exactly what highlighting the whole block gives); the
//     rest shows as plain text for now;
//   a table: each complete row is rendered once; an update's rows are appended together;
//   anything else (a paragraph, a list): re-rendered only when it has grown by half since the
//     last time (amortized linear), the newest text shown as plain text in between.
// DOM-free: it drives a `sink` (markdown.js applies it to the page; the tests build strings), and
// the HTML it hands out, joined, equals marked's rendering of the whole text.

import { codeShellHtml, highlightSegment, lexBlocks, markdownHtml } from "./markdown.js";

/** Regions up to this size are simply re-rendered on every update. */
const SMALL = 4096;
const FENCE_OPEN = /^(`{3,}|~{3,})([^\n]*)$/;
const ANY_FENCE = /^ {0,3}(`{3,}|~{3,})(.*)$/;
const LIST_ITEM = /^ {0,3}(?:[*+-]|\d{1,9}[.)])(?:[ \t]|$)/;
const TABLE_DELIM = /^ {0,3}\|?[ \t]*:?-+:?[ \t]*(?:\|[ \t]*:?-+:?[ \t]*)*\|?[ \t]*$/;
// Constructs whose meaning reaches across regions (link reference definitions, raw HTML blocks,
// which may span blank lines): a text with any of them gets one whole render at the end.
const NON_LOCAL = /^ {0,3}(?:\[[^\]\n]+\]:|<)/m;

export class MarkdownStream {
  constructor(sink) {
    this.sink = sink;
    this.reset();
  }

  reset() {
    this.text = "";
    this.streaming = null;
    this.scan = 0; // start of the first line not yet looked at
    this.#newRegion(0);
    this.sink.reset();
  }

  /** Show `text`; `streaming` false means it is complete. */
  update(text, streaming) {
    text = String(text ?? "");
    streaming = Boolean(streaming);
    if (text === this.text && streaming === this.streaming) return;
    if (!this.streaming || !text.startsWith(this.text)) {
      this.reset();
      if (!streaming) {
        this.sink.freeze(markdownHtml(text));
        this.text = text;
        this.streaming = false;
        return;
      }
    }
    this.text = text;
    this.streaming = streaming;
    let nl;
    while ((nl = text.indexOf("\n", this.scan)) !== -1) {
      this.#line(text.slice(this.scan, nl), this.scan);
      this.scan = nl + 1;
    }
    // What arrived in this update is highlighted or rendered as one batch, not line by line.
    if (this.mode === "code") this.#highlightPending();
    if (this.mode === "table") this.#flushRows();
    if (streaming) {
      this.#showOpen();
      return;
    }
    if (NON_LOCAL.test(text)) {
      this.reset();
      this.sink.freeze(markdownHtml(text));
      this.text = text;
      this.streaming = false;
      return;
    }
    this.#finish();
  }

  #newRegion(start) {
    this.start = start;
    this.mode = "text";
    this.lines = 0; // complete lines in the region
    this.fence = null; // inside a fence that does not start a code region (indented, in a list)
    this.prevBlank = false;
    this.hasList = false;
    this.firstLine = null;
    this.shownLen = 0; // the region's length when last rendered (text mode)
    this.shownTo = start; // text up to here is on screen (text mode)
    this.live = false;
  }

  /** Close the open region at `end` (its rendering is final) and open a new one there. */
  #cut(end) {
    if (this.mode === "code") this.#closeCode(null);
    else if (this.mode === "table") this.#closeTable();
    else if (this.text.slice(this.start, end).trim()) this.sink.freeze(markdownHtml(this.text.slice(this.start, end)));
    else this.sink.live("");
    this.#newRegion(end);
  }

  #line(line, at) {
    if (this.mode === "code") return this.#codeLine(line, at);
    if (this.mode === "table") return this.#tableLine(line, at);
    const blank = line.trim() === "";
    if (this.fence) {
      const m = ANY_FENCE.exec(line);
      if (m && m[1][0] === this.fence[0] && m[1].length >= this.fence.length && !m[2].trim()) this.fence = null;
      this.lines++;
      return undefined;
    }
    const open = FENCE_OPEN.exec(line);
    if (open && !(open[1][0] === "`" && open[2].includes("`"))) {
      if (this.lines) this.#cut(at);
      return this.#openCode(line, open[1]);
    }
    const fence = ANY_FENCE.exec(line);
    if (fence && !(fence[1][0] === "`" && fence[2].includes("`"))) this.fence = fence[1];
    const item = LIST_ITEM.test(line);
    if (this.prevBlank && !blank && !/^\s/.test(line) && (!item || !this.hasList) && !this.fence) {
      this.#cut(at);
    }
    if (item && !/^\s/.test(line)) this.hasList = true;
    if (this.lines === 1 && TABLE_DELIM.test(line) && this.firstLine.includes("|")) {
      const tokens = lexBlocks(`${this.firstLine}\n${line}\n`);
      if (tokens.length === 1 && tokens[0].type === "table") return this.#openTable(tokens[0], line);
    }
    if (this.lines === 0) this.firstLine = line;
    this.prevBlank = blank;
    this.lines++;
    return undefined;
  }

  // -- code ---------------------------------------------------------------------------------------

  #openCode(line, marker) {
    this.mode = "code";
    this.marker = marker;
    const lang = lexBlocks(line)[0]?.lang ?? "";
    this.lang = String(lang).trim().split(/\s+/)[0];
    this.pending = []; // complete content lines not highlighted yet
    this.pendingChars = 0;
    this.retryAt = 0; // pending size at which to try highlighting again after a failed try
    this.sink.codeOpen(codeShellHtml(this.lang));
  }

  #isCloser(line) {
    const m = /^ {0,3}(`+|~+) *$/.exec(line);
    return Boolean(m && m[1][0] === this.marker[0] && m[1].length >= this.marker.length);
  }

  #codeLine(line, at) {
    if (this.#isCloser(line)) {
      this.#closeCode(null);
      this.#newRegion(at + line.length + 1);
      return;
    }
    this.pending.push(line);
    this.pendingChars += line.length + 1;
    this.sink.codePending(`${line}\n`);
  }

  #highlightPending() {
    // Every pending line but the last is followed by another line of the block: its newline
    // belongs to the code. Highlight those as one batch.
    if (this.pending.length < 2 || this.pendingChars < this.retryAt) return;
    const batch = `${this.pending.slice(0, -1).join("\n")}\n`;
    const { html, clean } = highlightSegment(batch, this.lang);
    if (!clean) {
      this.retryAt = this.pendingChars * 2; // inside a long string: try again when twice as long
      return;
    }
    const last = this.pending[this.pending.length - 1];
    this.pending = [last];
    this.pendingChars = last.length + 1;
    this.retryAt = 0;
    this.sink.codeHtml(html, `${last}\n`);
  }

  /** The block ends (a closing fence, or the end of the text with `partial` as its last line). */
  #closeCode(partial) {
    const lines = partial ? [...this.pending, partial] : this.pending;
    const { html } = highlightSegment(lines.join("\n"), this.lang);
    this.sink.codeClose(html);
  }

  // -- tables -------------------------------------------------------------------------------------

  #openTable(token, delim) {
    this.mode = "table";
    this.header = `${this.firstLine}\n${delim}\n`;
    this.rows = ""; // rendered rows not handed to the sink yet
    this.sink.tableOpen(markdownHtml(this.header));
  }

  #tableLine(line, at) {
    const tokens = line.trim() ? lexBlocks(`${this.header}${line}\n`) : [];
    if (tokens.length === 1 && tokens[0].type === "table" && tokens[0].rows.length === 1) {
      const html = markdownHtml(`${this.header}${line}\n`);
      this.rows += html.slice(html.indexOf("<tbody>") + 7, html.lastIndexOf("</tbody>"));
      return;
    }
    this.#cut(at);
    this.#line(line, at);
  }

  #flushRows() {
    if (this.rows) this.sink.tableRow(this.rows);
    this.rows = "";
  }

  #closeTable() {
    this.#flushRows();
    this.sink.tableClose();
  }

  // -- the open region ----------------------------------------------------------------------------

  #showOpen() {
    const partial = this.text.slice(this.scan);
    if (this.mode === "code") {
      this.sink.codePartial(this.#isCloser(partial) ? "" : partial);
      return;
    }
    if (this.mode === "table") return;
    const len = this.text.length - this.start;
    if (len <= SMALL || len >= this.shownLen * 1.5) {
      this.sink.live(markdownHtml(this.text.slice(this.start)));
      this.shownLen = len;
    } else if (this.text.length > this.shownTo) {
      this.sink.liveText(this.text.slice(this.shownTo));
    }
    this.shownTo = this.text.length;
  }

  #finish() {
    const partial = this.text.slice(this.scan);
    if (this.mode === "code") {
      this.#closeCode(this.#isCloser(partial) ? null : partial);
    } else if (this.mode === "table") {
      if (partial) this.#tableLine(partial, this.scan);
      if (this.mode === "table") this.#closeTable();
      else this.#cut(this.text.length);
    } else {
      this.#cut(this.text.length);
    }
    this.sink.done();
  }
}
