// Streaming markdown in time proportional to what arrives. The text is cut into top-level regions
// at points where the markdown lexer would end a block anyway; a finished region is rendered once
// and never again. The open region is rendered by kind (one class each):
//   a fenced code block: the complete lines each update brings are highlighted once, as one
//     batch, and appended (a batch is kept only when the highlighter ends it outside any string
//     or comment, so the pieces join into exactly what highlighting the whole block gives); the
//     rest shows as plain text for now;
//   a table: each complete row is rendered once; an update's rows are appended together;
//   a list and a long paragraph: see stream_text.js (item by item; sentence by sentence);
//   a quote: its content, the markers taken off, streams through a MarkdownStream of its own
//     (stream_nested.js), and so does a list item's once it is big;
//   anything else: re-rendered only when it has grown by half since the last time (amortized
//     linear), the newest text shown as plain text in between.
// DOM-free: it drives a `sink` (dom_sink.js applies it to the page; the tests build strings), and
// the HTML it hands out, joined, equals marked's rendering of the whole text.

import { GrowingText } from "./growing_text.js";
import { codeShellHtml, highlightSegment, lexBlocks, markdownHtml } from "./markdown.js";
import { QUOTE_START, QuoteRegion } from "./stream_nested.js";
import { ANY_FENCE, LIST_ITEM, ListRegion, PIECE, ParagraphRegion, showGrowing } from "./stream_text.js";

const FENCE_OPEN = /^(`{3,}|~{3,})([^\n]*)$/;
const ATX_HEADING = /^ {0,3}#{1,6}(?:[ \t]|$)/;
const TABLE_DELIM = /^ {0,3}\|?[ \t]*:?-+:?[ \t]*(?:\|[ \t]*:?-+:?[ \t]*)*\|?[ \t]*$/;
// Constructs whose meaning reaches across regions (link reference definitions, in a quote or an
// item too; raw HTML blocks, which may span blank lines): a text with any of them gets one whole
// render at the end. Each line is tested once, as it is read (no match spans a newline, so this is
// the test of the whole text): the end of a long text costs no scan of it.
const NON_LOCAL = /^ {0,3}<|^[ \t>]*(?:(?:[*+-]|\d{1,9}[.)])[ \t]+)?\[[^\]\n]+\]:/m;

export class MarkdownStream {
  /** `render`: the HTML of markdown source rendered at once (a list item's content renders
   * otherwise than the top level's: markdown.js itemBodyHtml); `paragraphs`: whether a long
   * paragraph may stream in pieces (its <p> is the top level's). */
  constructor(sink, { render = markdownHtml, paragraphs = true } = {}) {
    this.sink = sink;
    this.render = render;
    this.paragraphs = paragraphs;
    this.reset();
  }

  /** A stream for the content of a block nested in this one (a quote, a list item), into `sink`. */
  nested(sink, options) {
    const inner = new MarkdownStream(sink, options);
    inner.streaming = true;
    return inner;
  }

  reset() {
    this.text = new GrowingText();
    this.streaming = null;
    this.scan = 0; // start of the first line not yet looked at
    this.nonLocal = false; // a line read so far matches NON_LOCAL
    this.region = new TextRegion(this, 0);
    this.sink.reset();
  }

  /** Show `text`; `streaming` false means it is complete. `appended`, if given, are the pieces
   * appended to the text since the last update: then the text itself is not read. */
  update(value, streaming, appended) {
    streaming = Boolean(streaming);
    let more = appended ? appended.join("") : null;
    const length = value == null ? 0 : (value.length ?? String(value).length);
    const grown = more !== null && length === this.text.length + more.length;
    if (!this.streaming || !grown) {
      // No record of what was appended (or it does not add up): compare the whole text.
      const whole = String(value ?? "");
      const old = this.text.toString();
      if (whole === old && streaming === this.streaming) return undefined;
      if (!this.streaming || !whole.startsWith(old)) {
        this.reset();
        if (!streaming) return this.#whole(whole);
      }
      more = whole.slice(this.text.length);
    } else if (!more && streaming === this.streaming) {
      return undefined;
    }
    return this.append(more, streaming);
  }

  /** `more` was appended to the text; `streaming` false: the text is complete. (A nested stream
   * is fed through this alone.) */
  append(more, streaming) {
    this.text.append(more);
    this.streaming = streaming;
    const text = this.text;
    let nl;
    while ((nl = text.indexOf("\n", this.scan)) !== -1) {
      const at = this.scan;
      this.scan = nl + 1;
      const line = text.slice(at, nl);
      if (!this.nonLocal) this.nonLocal = NON_LOCAL.test(line);
      this.region.line(line, at);
    }
    // What arrived in this update is handed over as one batch, not line by line.
    this.region.flush();
    if (streaming) return this.region.show();
    // The unfinished last line is the text's last line.
    const partial = text.slice(this.scan);
    if (this.nonLocal || NON_LOCAL.test(partial)) return this.#whole(text.toString());
    if (partial && !(this.region instanceof CodeRegion)) {
      const at = this.scan;
      this.scan = text.length;
      this.region.line(partial, at);
      this.region.flush();
    }
    this.region.close(text.length);
    this.sink.done();
    return undefined;
  }

  #whole(text) {
    this.reset();
    this.sink.freeze(this.render(text));
    this.text = new GrowingText(text);
    this.streaming = false;
  }

  /** Close the open region at `end` (its rendering is final) and open a text region there. */
  cut(end) {
    this.region.close(end);
    this.region = new TextRegion(this, end);
  }

  /** The open region turned out not to be what its kind assumed (a paragraph underlined into a
   * heading, say): drop what it showed and render it as text from `start`, the lines up to `end`
   * read again. Rare, and once per region. */
  fallback(start, end) {
    this.sink.drop();
    this.region = new TextRegion(this, start, { plain: true });
    let at = start;
    let nl;
    while (at < end && (nl = this.text.indexOf("\n", at)) !== -1 && nl < end) {
      this.region.line(this.text.slice(at, nl), at);
      at = nl + 1;
    }
  }
}

/** Paragraphs, headings, quotes and whatever else: rendered whole, amortized. A list or a long
 * paragraph at its start hands the region over to the classes of stream_text.js. */
class TextRegion {
  constructor(stream, start, { plain = false } = {}) {
    this.s = stream;
    this.start = start;
    this.plain = plain; // never hand over to a list or paragraph region (a fallback)
    this.lines = 0; // complete lines in the region
    this.fence = null; // inside a fence that does not start a code region (indented, in a list)
    this.prevBlank = false;
    this.hasList = false;
    this.firstLine = null;
    this.heading = false; // the first line is an ATX heading: a block of its own
    this.lastLine = null; // start of the last complete line
    this.shown = { len: 0, to: start }; // for showGrowing
    this.paraAt = 2 * PIECE; // size at which to check again whether the region is one paragraph
  }

  line(line, at) {
    const s = this.s;
    const blank = line.trim() === "";
    if (this.fence) {
      const m = ANY_FENCE.exec(line);
      const closes = m && m[1][0] === this.fence[0] && m[1].length >= this.fence.length && !m[2].trim();
      if (closes) this.fence = null;
      this.lines++;
      return;
    }
    const open = FENCE_OPEN.exec(line);
    if (open && !(open[1][0] === "`" && open[2].includes("`"))) {
      if (this.lines) s.cut(at);
      s.region = new CodeRegion(s, line, open[1]);
      return;
    }
    const fence = ANY_FENCE.exec(line);
    if (fence && !(fence[1][0] === "`" && fence[2].includes("`"))) this.fence = fence[1];
    if (this.lines === 0 && !this.plain && QUOTE_START.test(line)) {
      s.region = new QuoteRegion(s, at);
      s.region.line(line, at);
      return;
    }
    const item = LIST_ITEM.test(line);
    const flush = !/^\s/.test(line);
    if (this.heading || (this.prevBlank && !blank && flush && (!item || !this.hasList) && !this.fence)) {
      s.cut(at);
      s.region.line(line, at);
      return;
    }
    if (item && flush && !this.fence && !this.plain && !this.hasList && this.#listStarts(line, at)) return;
    if (item && flush) this.hasList = true;
    if (this.lines === 1 && TABLE_DELIM.test(line) && this.firstLine.includes("|")) {
      const tokens = lexBlocks(`${this.firstLine}\n${line}\n`);
      if (tokens.length === 1 && tokens[0].type === "table") {
        s.region = new TableRegion(s, this.start, this.firstLine, line);
        return;
      }
    }
    if (this.lines === 0) {
      this.firstLine = line;
      this.heading = ATX_HEADING.test(line);
    }
    this.prevBlank = blank;
    this.lastLine = at;
    this.lines++;
  }

  /** Whether `line` starts a list here (then the region before it ends and a list region opens). */
  #listStarts(line, at) {
    const s = this.s;
    const tokens = lexBlocks(`${s.text.slice(this.start, at)}${line}\n`);
    const last = tokens.at(-1);
    if (last?.type !== "list" || last.raw.trimEnd() !== line.trimEnd()) return false;
    if (this.lines) s.cut(at);
    s.region = new ListRegion(s, at, line, last);
    return true;
  }

  flush() {}

  show() {
    const s = this.s;
    if (this.lines === 0 && !this.plain && QUOTE_START.test(s.text.slice(s.scan, s.scan + 4))) {
      // A quote on one long line so far (a paragraph).
      s.region = new QuoteRegion(s, this.start);
      s.region.show();
      return;
    }
    const len = s.text.length - this.start;
    if (!this.plain && s.paragraphs && len >= this.paraAt && !this.fence) {
      this.paraAt = len * 2;
      const src = s.text.slice(this.start);
      const tokens = lexBlocks(src);
      if (tokens.length === 1 && tokens[0].type === "paragraph") {
        const start = this.start + /^(?:[ \t]*\n)*/.exec(src)[0].length; // after blank lines
        s.region = new ParagraphRegion(s, start, this.lastLine >= start ? this.lastLine : null);
        s.region.show();
        return;
      }
    }
    showGrowing(s, this.start, this.shown, s.render);
  }

  close(end) {
    const src = this.s.text.slice(this.start, end);
    if (src.trim()) this.s.sink.freeze(this.s.render(src));
    else this.s.sink.live("");
  }
}

/** A fenced code block, highlighted an update's complete lines at a time. */
class CodeRegion {
  constructor(stream, line, marker) {
    this.s = stream;
    this.marker = marker;
    const lang = lexBlocks(line)[0]?.lang ?? "";
    this.lang = String(lang).trim().split(/\s+/)[0];
    this.pending = []; // complete content lines not highlighted yet
    this.pendingChars = 0;
    this.retryAt = 0; // pending size at which to try highlighting again after a failed try
    stream.sink.codeOpen(codeShellHtml(this.lang));
  }

  #isCloser(line) {
    const m = /^ {0,3}(`+|~+) *$/.exec(line);
    return Boolean(m && m[1][0] === this.marker[0] && m[1].length >= this.marker.length);
  }

  line(line, at) {
    if (this.#isCloser(line)) {
      this.#end(null);
      this.s.region = new TextRegion(this.s, at + line.length + 1);
      return;
    }
    this.pending.push(line);
    this.pendingChars += line.length + 1;
    this.s.sink.codePending(`${line}\n`);
  }

  flush() {
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
    this.s.sink.codeHtml(html, `${last}\n`);
  }

  show() {
    const partial = this.s.text.slice(this.s.scan);
    this.s.sink.codePartial(this.#isCloser(partial) ? "" : partial);
  }

  /** The text ends inside the block: its last line is the unfinished one. */
  close() {
    const partial = this.s.text.slice(this.s.scan);
    this.#end(this.#isCloser(partial) ? null : partial);
  }

  #end(partial) {
    const lines = partial ? [...this.pending, partial] : this.pending;
    // marked's code text is the lines joined, and one newline more when the last one is blank.
    const tail = lines.at(-1) === "" ? "\n" : "";
    const { html } = highlightSegment(`${lines.join("\n")}${tail}`, this.lang);
    this.s.sink.codeClose(html);
    this.pending = [];
  }
}

/** A table, rendered a row at a time. */
class TableRegion {
  constructor(stream, start, header, delim) {
    this.s = stream;
    this.start = start;
    this.header = `${header}\n${delim}\n`;
    this.rows = ""; // rendered rows not handed to the sink yet
    stream.sink.tableOpen(markdownHtml(this.header));
  }

  line(line, at) {
    const tokens = line.trim() ? lexBlocks(`${this.header}${line}\n`) : [];
    if (tokens.length === 1 && tokens[0].type === "table" && tokens[0].rows.length === 1) {
      const html = markdownHtml(`${this.header}${line}\n`);
      this.rows += html.slice(html.indexOf("<tbody>") + 7, html.lastIndexOf("</tbody>"));
      return;
    }
    this.s.cut(at);
    this.s.region.line(line, at);
  }

  flush() {
    if (this.rows) this.s.sink.tableRow(this.rows);
    this.rows = "";
  }

  show() {}

  close() {
    this.flush();
    this.s.sink.tableClose();
  }
}
