// The regions of stream.js for lists and long paragraphs, where the open block would otherwise
// be re-rendered whole as it grows:
//   a list: each top-level item is rendered once, when the next one starts (an update's items
//     are handed over together); only the open item is re-rendered as it grows, and once it is
//     big its content streams on its own (stream_nested.js ItemBody) and is not rendered again;
//   a long paragraph: closed a piece at a time, at a sentence end (". " before more text), so
//     that the pieces' inline HTML joins into exactly the paragraph's: a piece leaves no HTML tag
//     open, and what it leaves unmatched (a stray "*", say) must stay unmatched: a later piece
//     that might close it sends the paragraph back to being rendered whole. Only the text after
//     the last piece is re-rendered as it grows.
// Each region checks its assumptions with marked's own lexer on a small window (an item and the
// next item's first line; the paragraph's last line and the new one); when one fails (a
// paragraph underlined into a heading, say) it falls back to rendering the region as text.

import { inlineHtml, inlineScan, lexBlocks, listItemHtml, listShellHtml } from "./markdown.js";
import { ItemBody } from "./stream_nested.js";

/** Regions up to this size are simply re-rendered on every update (marked takes ~1 ms per KB). */
export const SMALL = 2048;
/** A paragraph this long is streamed in pieces (then closed whenever this much is open). */
export const PIECE = 512;
export const ANY_FENCE = /^ {0,3}(`{3,}|~{3,})(.*)$/;
export const LIST_ITEM = /^ {0,3}(?:[*+-]|\d{1,9}[.)])(?:[ \t]|$)/;
const ITEM_START = /^( {0,3})([*+-]|\d{1,9}[.)])([ \t]*)(.*)$/;
const FENCE_IN_ITEM = /^\s*(?:[*+-]\s+|\d{1,9}[.)]\s+)?(`{3,}|~{3,})(.*)$/;
// Lines that are no lazy continuation of an item's paragraph: a heading, a rule, a fence, a quote,
// HTML. Not indented as far as the item's content, they may end the list (checked by lexing).
const BLOCK_START = /^ {0,3}(?:#{1,6}(?:[ \t]|$)|>|`{3,}|~{3,}|<[A-Za-z/!?]|(?:[*_-][ \t]*){3,}$)/;

/** Show the open end of a region, from `from`: re-rendered while small or when it has grown by
 * half since the last time, the newest text appended as plain text in between (amortized
 * linear). `shown` keeps { len, to } between calls. */
export function showGrowing(s, from, shown, render) {
  const len = s.text.length - from;
  if (len <= SMALL || len >= shown.len * 1.5) {
    s.sink.live(render(s.text.slice(from)));
    shown.len = len;
  } else if (s.text.length > shown.to) {
    s.sink.liveText(s.text.slice(shown.to));
  }
  shown.to = s.text.length;
}

function indentOf(line) {
  let width = 0;
  for (const c of line) {
    if (c === " ") width++;
    else if (c === "\t") width += 4 - (width % 4);
    else break;
  }
  return width;
}

/** The column an item's content starts at (CommonMark: 1 to 4 spaces after the marker). */
function contentIndent(line) {
  const [, lead, marker, gap, rest] = ITEM_START.exec(line) ?? ["", "", "-", " ", ""];
  const spaces = indentOf(gap);
  return lead.length + marker.length + (!rest || spaces > 4 ? 1 : spaces);
}

export class ListRegion {
  constructor(stream, start, line, token) {
    this.s = stream;
    this.start = start;
    this.list = token; // the list's own attributes (ordered, start) come from its first item
    this.items = []; // tokens of the finished items, kept in case the list turns loose
    this.loose = false;
    this.html = ""; // finished items not handed over yet
    this.#openItem(start, line);
    stream.sink.listOpen(listShellHtml(token));
  }

  #openItem(at, line) {
    this.itemStart = at;
    this.indent = contentIndent(line);
    this.prevBlank = false;
    this.fence = null;
    this.shown = { len: 0, to: at };
    this.#trackFence(line);
    this.body = null; // the item's content streaming on its own (ItemBody), once it is big
    // A task's checkbox, a tab in the marker's line: the item is rendered whole as it grows.
    this.bodyFails = /^[ \t]*(?:[*+-]|\d{1,9}[.)])[ \t]+\[[ xX]\](?:[ \t]|$)|^[^\t]*\t/.test(line);
    this.itemLoose = false; // a blank line in the item, before more of it, made the list loose
    // The item's lines inside a code block, but blank ones ([from, to) each): whether the list
    // goes on and is loose does not depend on them, so while the content streams on its own the
    // item is lexed without them (a long code block in an item is not lexed whole again). Of a
    // run of blank lines left between them one stays: one tells the lexer what many would.
    this.skips = [];
    this.fenceBlank = false; // the last line kept in a code block was blank
  }

  /** The open item's text up to `to`, as lexed to check it (see `skips`). */
  #itemText(to) {
    const s = this.s;
    if (!this.body || !this.skips.length) return s.text.slice(this.itemStart, to);
    let out = "";
    let at = this.itemStart;
    for (const [from, end] of this.skips) {
      out += s.text.slice(at, from);
      at = end;
    }
    return out + s.text.slice(at, to);
  }

  /** A finished item's token (see #finished). */
  #token(entry) {
    if (!entry.window) return entry;
    return lexBlocks(this.s.text.slice(entry.window[0], entry.window[1]) + entry.window[2])[0].items[0];
  }

  #trackFence(line) {
    const m = FENCE_IN_ITEM.exec(line);
    if (!m) return;
    if (!this.fence) {
      if (!(m[1][0] === "`" && m[2].includes("`"))) this.fence = m[1];
    } else if (m[1][0] === this.fence[0] && m[1].length >= this.fence.length && !m[2].trim()) {
      this.fence = null;
    }
  }

  line(line, at) {
    const s = this.s;
    if (this.fence) {
      this.#trackFence(line);
      this.prevBlank = false;
      const blank = !line.trim();
      if (this.fence && (!blank || this.fenceBlank)) {
        const last = this.skips.at(-1);
        if (last?.[1] === at) last[1] = at + line.length + 1;
        else this.skips.push([at, at + line.length + 1]);
      } else {
        this.fenceBlank = Boolean(this.fence) && blank;
      }
      this.#toBody(line, at);
      return;
    }
    this.fenceBlank = false;
    if (!line.trim()) {
      this.prevBlank = true;
      this.#toBody(line, at);
      return;
    }
    const shallow = indentOf(line) < this.indent;
    if (shallow && LIST_ITEM.test(line)) {
      this.#nextItem(line, at);
      return;
    }
    if (shallow && (this.prevBlank || BLOCK_START.test(line)) && this.#endsBefore(line, at)) {
      s.cut(at);
      s.region.line(line, at);
      return;
    }
    if (this.prevBlank && !this.loose && !this.itemLoose) this.itemLoose = this.#looseWith(line, at);
    this.#trackFence(line);
    this.prevBlank = false;
    this.#toBody(line, at);
  }

  #toBody(line, at) {
    if (this.body && !this.body.line(line, at)) this.#dropBody();
  }

  /** The open item's content cannot stream on its own: it is rendered whole again as it grows. */
  #dropBody() {
    this.body = null;
    this.bodyFails = true;
    this.shown = { len: 0, to: this.itemStart };
  }

  /** Stream the open item's content on its own from now on: its lines so far, again. */
  #startBody() {
    const s = this.s;
    this.body = new ItemBody(s, this.itemStart, this.indent, this.loose);
    for (let at = this.itemStart, nl; at < s.scan; at = nl + 1) {
      nl = s.text.indexOf("\n", at);
      if (!this.body.line(s.text.slice(at, nl), at)) {
        this.#dropBody();
        return;
      }
    }
  }

  /** Whether the open item with `line` after a blank line makes the list loose (marked's view). */
  #looseWith(line, at) {
    const list = lexBlocks(`${this.#itemText(at)}${line}\n`)[0];
    return list?.type === "list" && list.loose;
  }

  /** The list is loose: its items so far, again, once. */
  #turnLoose() {
    this.loose = true;
    this.s.sink.listOpen(listShellHtml(this.list));
    this.html = this.items.map((t) => listItemHtml(this.list, this.#token(t), true)).join("");
    if (this.body) {
      this.body = null; // its <li> went with the list: it starts again
      this.shown = { len: 0, to: this.itemStart };
    }
  }

  /** Whether the list ends before `line` (marked's view of the open item and that line). */
  #endsBefore(line, at) {
    const item = this.#itemText(at);
    const tokens = lexBlocks(`${item}${line}\n`);
    return (
      tokens.length > 1 &&
      tokens[0].type === "list" &&
      tokens[0].items.length === 1 &&
      tokens[0].raw.trimEnd() === item.trimEnd()
    );
  }

  /** `line` looks like the next item's first line: then the open item is finished. */
  #nextItem(line, at) {
    const s = this.s;
    const tokens = lexBlocks(`${this.#itemText(at)}${line}\n`);
    const list = tokens[0];
    if (tokens.length === 1 && list.type === "list" && list.items.length === 2) {
      this.#finished(list.items[0], list.loose, [this.itemStart, at, `${line}\n`]);
      this.#openItem(at, line);
    } else if (this.#endsBefore(line, at)) {
      s.cut(at); // another kind of bullet (another list) or a rule
      s.region.line(line, at);
    } else {
      s.fallback(this.start, at);
      s.region.line(line, at);
    }
  }

  /** The open item is finished: `item` is its token, lexed from `window` ([start, end, what
   * follows]) less its skipped lines if it was streaming on its own. */
  #finished(item, loose, window) {
    const lexed = Boolean(this.body && this.skips.length);
    // A blank line between items makes the whole list loose.
    if (loose && !this.loose) this.#turnLoose();
    const body = this.body;
    this.body = null;
    if (body?.finish(this.loose)) {
      // The item as it streamed is the item: it stays (after the items finished before it).
      this.items.push(lexed ? { window } : item);
      this.flush();
      this.s.sink.itemKeep();
      return;
    }
    const token = lexed ? this.#token({ window }) : item;
    this.items.push(token);
    this.html += listItemHtml(this.list, token, this.loose);
  }

  flush() {
    if (this.html) this.s.sink.listItems(this.html);
    this.html = "";
  }

  show() {
    const s = this.s;
    if (this.itemLoose && !this.loose) this.#turnLoose();
    if (!this.body && !this.bodyFails && s.text.length - this.itemStart > SMALL) this.#startBody();
    if (this.body) {
      this.body.show();
      return;
    }
    showGrowing(s, this.itemStart, this.shown, (src) => {
      const token = lexBlocks(src)[0];
      if (token?.type !== "list") return "";
      return listItemHtml(this.list, token.items[0], this.loose || token.loose);
    });
  }

  close(end) {
    const s = this.s;
    const tokens = lexBlocks(this.#itemText(end));
    const list = tokens[0];
    if (tokens.length !== 1 || list.type !== "list" || list.items.length !== 1) {
      // Not the one item it was taken for: the region, rendered whole.
      s.sink.drop();
      s.sink.freeze(s.render(s.text.slice(this.start, end)));
      return;
    }
    this.#finished(list.items[0], list.loose, [this.itemStart, end, ""]);
    this.flush();
    s.sink.listClose();
  }
}

/** A delimiter left unmatched this far back is taken for a stray one (an emphasis or a link
 * this long is rare; if it closes after all, the paragraph is rendered whole). */
const STRAY = 1024;
/** Sentence ends tried, from the last one back, each time a paragraph looks for a piece. */
const TRIES = 4;

/** The sentence ends in `text` with more text after them, last first: the indices after their
 * space. */
function* sentenceEnds(text) {
  let i = text.lastIndexOf(" ", text.length - 2);
  while (i > 1) {
    if (".!?".includes(text[i - 1]) && !/\s/.test(text[i + 1])) yield i + 1;
    i = text.lastIndexOf(" ", i - 1);
  }
}

export class ParagraphRegion {
  constructor(stream, start, lastLine) {
    this.s = stream;
    this.start = start;
    this.lastLine = lastLine; // start of the paragraph's last complete line, if any
    this.closedTo = start; // the text before this is in pieces handed over
    this.strays = ""; // delimiters the pieces left unmatched (inlineScan)
    this.retryAt = 0; // open size at which to look for a piece again after a failed look
    this.shown = { len: 0, to: start };
    stream.sink.paraOpen();
  }

  line(line, at) {
    const s = this.s;
    if (!line.trim()) {
      s.cut(at);
      s.region.line(line, at);
      return;
    }
    if (this.lastLine === null) {
      this.lastLine = at;
      return;
    }
    // The last line read after a line of paragraph: the new line goes on with the paragraph,
    // or starts a block after it, or changes it (an underline makes it a heading, a delimiter
    // row its last line a table's header).
    const probe = `x\n${s.text.slice(this.lastLine, at - 1)}`;
    const tokens = lexBlocks(`${probe}\n${line}\n`);
    if (tokens.length === 1 && tokens[0].type === "paragraph") {
      this.lastLine = at;
    } else if (tokens[0]?.type === "paragraph" && tokens[0].raw.trimEnd() === probe.trimEnd()) {
      s.cut(at);
      s.region.line(line, at);
    } else {
      s.fallback(this.start, at);
      s.region.line(line, at);
    }
  }

  flush() {
    const s = this.s;
    const open = s.text.length - this.closedTo;
    if (open < PIECE || open < this.retryAt) return;
    // The last sentence end behind which no HTML element, and no emphasis, code span or link
    // opened in the last STRAY characters, is left open.
    let tries = TRIES;
    let cut = -1;
    let scan = null;
    const text = s.text.slice(this.closedTo);
    for (const at of sentenceEnds(text)) {
      scan = inlineScan(text.slice(0, at));
      if (!scan.blocked && (scan.lastOpen < 0 || at - scan.lastOpen > STRAY)) {
        cut = this.closedTo + at;
        break;
      }
      if (--tries === 0) break;
    }
    if (cut < 0) {
      this.retryAt = open * 2; // look again when twice as long
      return;
    }
    if (this.#closesStray(scan)) {
      s.fallback(this.start, s.scan);
      s.region.show();
      return;
    }
    this.strays += scan.opens;
    s.sink.paraHtml(inlineHtml(s.text.slice(this.closedTo, cut)));
    this.closedTo = cut;
    this.retryAt = 0;
    this.shown = { len: 0, to: cut };
  }

  /** Whether a piece might close a delimiter an earlier piece left unmatched. */
  #closesStray(scan) {
    return [...scan.closes].some((c) => this.strays.includes(c === "]" ? "[" : c));
  }

  show() {
    showGrowing(this.s, this.closedTo, this.shown, inlineHtml);
  }

  close(end) {
    const s = this.s;
    // The paragraph's text is its lines without the last newline (as marked takes it).
    const stop = s.text.at(end - 1) === "\n" ? end - 1 : end;
    const rest = s.text.slice(this.closedTo, stop);
    if (rest && this.#closesStray(inlineScan(rest))) {
      s.sink.drop();
      s.sink.freeze(s.render(s.text.slice(this.start, end)));
      return;
    }
    if (rest) s.sink.paraHtml(inlineHtml(rest));
    s.sink.paraClose();
  }
}
