// Blocks nested in a quote or a list item, streamed the way the top level is. Rendered whole as
// they grow, a code block, a table or a long paragraph in a quote or an item would cost the square
// of its size; so the container's content, its markers or indentation taken off as marked takes
// them off, goes through a MarkdownStream of its own (stream.js), which writes into the
// container's element through a sink of its own (sink.quoteOpen, sink.itemOpen). marked renders a
// quote as `<blockquote>\n` + its content rendered as the top level + `</blockquote>\n`, and an
// item as `<li>` + its content + `</li>\n` (a tight list's item with its paragraphs as bare
// text: markdown.js itemBodyHtml), so the pieces join into what rendering the whole gives.
//
// What cannot be read line by line is rendered whole as it grows instead (correct, not linear),
// once: a quote with a lazy continuation line (text without the marker that goes on with the
// quote's paragraph) or a tab right after a marker (expanded to a tab stop) falls back to the
// region rendered as text (stream.js `fallback`); an item with a line indented less than its
// content, a tab in its indentation or a task's checkbox, to the item rendered whole.

import { itemBodyHtml, lexBlocks } from "./markdown.js";

export const QUOTE_START = /^ {0,3}>/;
const QUOTE_SHELL = "<blockquote>\n</blockquote>\n";

/** How many characters of a quote line are its marker (with the space after it), or null when a
 * tab follows the marker, or undefined when `line` (a line's start) does not tell yet. */
function quoteMarker(line, complete) {
  const m = QUOTE_START.exec(line);
  if (!m) return undefined;
  const next = line[m[0].length];
  if (next === undefined && !complete) return undefined;
  if (next === "\t") return null;
  return m[0].length + (next === " " ? 1 : 0);
}

/**
 * Hands a container's content to its nested stream: each line without the container's marker
 * (`marker(line, complete)` says how many characters at the start of a line are marker: null if
 * the line cannot be read so, undefined if what has come of it does not tell yet), the open
 * line as far as it has come (a long paragraph is one long line), and what an update brought as
 * one piece. The newline after the last line is handed over only once another line follows: the
 * content ends without it, as marked takes it.
 */
class Feeder {
  constructor(inner, marker) {
    this.inner = inner;
    this.marker = marker;
    this.more = []; // content not handed over yet
    this.fedTo = -1; // where the open line's content handed over so far ends (-1: none of it)
    this.newline = false;
  }

  /** A complete line at `at`; false if the container's marker cannot be read on it. `known`:
   * the marker's length, if the caller knows it. */
  line(line, at, known = undefined) {
    if (this.fedTo >= at) {
      this.more.push(line.slice(this.fedTo - at));
    } else {
      const marker = known ?? this.marker(line, true);
      if (marker == null) return false;
      this.#lineStarts();
      this.more.push(line.slice(marker));
    }
    this.newline = true;
    this.fedTo = -1;
    return true;
  }

  #lineStarts() {
    if (this.newline) this.more.push("\n");
    this.newline = false;
  }

  /** The open line of `text` (a GrowingText), from `at`: what has come of it since last time. */
  partial(text, at) {
    if (this.fedTo < at) {
      const marker = this.marker(text.slice(at, at + 24), false);
      if (marker == null) return;
      this.fedTo = at + marker;
      this.#lineStarts();
    }
    if (this.fedTo < text.length) {
      this.more.push(text.slice(this.fedTo));
      this.fedTo = text.length;
    }
  }

  feed(streaming) {
    if (!this.more.length && streaming) return;
    const more = this.more.join("");
    this.more = [];
    this.inner.append(more, streaming);
  }
}

/** A quote: its content streams through a nested MarkdownStream into the <blockquote>. */
export class QuoteRegion {
  constructor(stream, start) {
    this.s = stream;
    this.start = start;
    const inner = stream.nested(stream.sink.quoteOpen(QUOTE_SHELL));
    this.feeder = new Feeder(inner, quoteMarker);
  }

  line(line, at) {
    const s = this.s;
    // Another block or a blank line ends the quote; a lazy continuation line (or a tab after
    // the marker) has it rendered as text.
    const quoted = QUOTE_START.test(line);
    if (quoted && this.feeder.line(line, at)) return;
    if (!quoted && (!line.trim() || this.#endsBefore(line))) s.cut(at);
    else s.fallback(this.start, at);
    s.region.line(line, at);
  }

  /** Whether the quote ends before `line` (a line without the marker) whatever its content: a
   * line that would not go on with a paragraph in it. */
  #endsBefore(line) {
    const tokens = lexBlocks(`> x\n${line}\n`);
    return tokens.length > 1 && tokens[0].type === "blockquote" && tokens[0].raw === "> x\n";
  }

  flush() {}

  show() {
    this.feeder.partial(this.s.text, this.s.scan);
    this.feeder.feed(true);
  }

  close() {
    this.feeder.feed(false);
    this.s.sink.quoteClose();
  }
}

/** The columns of leading spaces in `line`, or -1 where a tab comes first (its width depends on
 * its column: such a line is not streamed). */
function leadingSpaces(line) {
  const lead = /^[ \t]*/.exec(line)[0];
  return lead.includes("\t") ? -1 : lead.length;
}

/**
 * The content of a list's open item, once it is big (stream_text.js ListRegion): the item's
 * lines without its indentation (the first without its marker) stream through a nested
 * MarkdownStream into the open <li>, rendered as a `loose` list's item or a tight one's. When
 * the item is finished the <li> stays as it is (sink.itemKeep) if marked read the item as it was
 * streamed: the same content, the list as loose or tight as assumed.
 */
export class ItemBody {
  constructor(stream, start, indent, loose) {
    this.s = stream;
    this.start = start;
    this.loose = loose;
    this.inner = stream.nested(stream.sink.itemOpen(), {
      render: (src) => itemBodyHtml(src, loose),
      paragraphs: false, // an item's paragraph is no <p> of the top level's
    });
    this.indent = indent;
    this.feeder = new Feeder(this.inner, (text, complete) => {
      const spaces = leadingSpaces(text);
      if (spaces < 0) return null;
      if (spaces >= indent) return indent;
      if (text.length > spaces) return null; // less indented: a lazy line (rendered whole)
      return complete ? spaces : undefined; // a blank line
    });
  }

  /** A complete line of the item at `at`; false if it cannot be streamed (then the item is
   * rendered whole again). */
  line(line, at) {
    return this.feeder.line(line, at, at === this.start ? this.indent : undefined);
  }

  show() {
    this.feeder.partial(this.s.text, this.s.scan);
    this.feeder.feed(true);
  }

  /** The item is complete, in a list `loose` or not: whether the <li> as streamed is what
   * rendering it gives. Its content is (every line was read with the item's indentation, as
   * marked reads such lines), so it is if the list is as loose or tight as assumed. */
  finish(loose) {
    this.feeder.feed(false);
    return loose === this.loose;
  }
}
