// The text a MarkdownStream reads, kept in the pieces it arrived in. A JavaScript string grown by
// `+=` is a rope that the engine copies whole into one flat string the first time anything reads
// it (a slice, an indexOf): read once per update, a 1 MB answer cost a 1 MB copy per update, and
// the garbage of those copies long pauses. Here reading a slice costs what the slice holds.

/** Pieces shorter than this are joined as they arrive, so that there stay few of them. */
const PIECE = 16384;

export class GrowingText {
  constructor(text = "") {
    this.pieces = [];
    this.ends = []; // where each piece ends in the text
    this.length = 0;
    this.append(text);
  }

  append(more) {
    const s = String(more);
    if (!s) return;
    const last = this.pieces.length - 1;
    if (last >= 0 && this.pieces[last].length < PIECE) {
      this.pieces[last] += s;
      this.ends[last] += s.length;
    } else {
      this.pieces.push(s);
      this.ends.push(this.length + s.length);
    }
    this.length += s.length;
  }

  /** The index of the piece that holds position `i` (0 <= i < length). */
  #piece(i) {
    let lo = 0;
    let hi = this.pieces.length - 1;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (this.ends[mid] > i) hi = mid;
      else lo = mid + 1;
    }
    return lo;
  }

  #start(k) {
    return k ? this.ends[k - 1] : 0;
  }

  slice(from, to = this.length) {
    const a = Math.max(0, from);
    const b = Math.min(this.length, to);
    if (a >= b) return "";
    let k = this.#piece(a);
    let out = "";
    for (let start = this.#start(k); start < b; start = this.ends[k++]) {
      out += this.pieces[k].slice(Math.max(0, a - start), b - start);
    }
    return out;
  }

  /** The character at `i`, or "" outside the text. */
  at(i) {
    if (i < 0 || i >= this.length) return "";
    const k = this.#piece(i);
    return this.pieces[k][i - this.#start(k)];
  }

  /** Where `char` (one character) first is at or after `from`, or -1. */
  indexOf(char, from = 0) {
    if (from >= this.length) return -1;
    for (let k = this.#piece(Math.max(0, from)); k < this.pieces.length; k++) {
      const start = this.#start(k);
      const at = this.pieces[k].indexOf(char, Math.max(0, from - start));
      if (at !== -1) return start + at;
    }
    return -1;
  }

  toString() {
    return this.pieces.join("");
  }
}
