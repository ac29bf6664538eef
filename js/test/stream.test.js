// Streaming markdown (src/stream.js): whatever the shape and however the text is cut into
// updates, the HTML handed out, joined, is exactly marked's rendering of the whole text (with
// highlighting), and each update's work stays proportional to what arrived.

import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { markdownHtml } from "../src/markdown.js";
import { MarkdownStream } from "../src/stream.js";

/** A sink that builds the final HTML as a string, the way DomSink builds the DOM. */
class StringSink {
  reset() {
    this.html = "";
    this.open = null;
    this.finished = false;
    this.renders = 0; // characters of HTML re-rendered for the open region
  }
  freeze(html) {
    assert.equal(this.open, null, "a region is frozen while a block is open");
    this.html += html;
  }
  live(html) {
    const root = this.root ?? this;
    root.renders += html.length;
    root.maxRender = Math.max(root.maxRender ?? 0, html.length);
  }
  liveText() {}
  drop() {
    this.open = null;
  }
  #openAt(html, at) {
    this.open = { head: html.slice(0, at), body: "", foot: html.slice(at) };
  }
  #close() {
    this.html += this.open.head + this.open.body + this.open.foot;
    this.open = null;
  }
  codeOpen(shell) {
    this.#openAt(shell, shell.indexOf("</code>"));
  }
  codePending() {}
  codeHtml(html) {
    this.open.body += html;
  }
  codePartial() {}
  codeClose(html) {
    this.open.body += html;
    this.#close();
  }
  tableOpen(html) {
    this.#openAt(html, html.lastIndexOf("</table>"));
  }
  tableRow(html) {
    this.open.body += html;
  }
  tableClose() {
    if (this.open.body) this.open.body = `<tbody>${this.open.body}</tbody>`;
    this.#close();
  }
  listOpen(shell) {
    this.#openAt(shell, shell.indexOf("\n") + 1); // replaces an open list: it starts over
  }
  listItems(html) {
    this.open.body += html;
  }
  listClose() {
    this.#close();
  }
  paraOpen() {
    this.#openAt("<p></p>\n", 3);
  }
  paraHtml(html) {
    this.open.body += html;
  }
  paraClose() {
    this.#close();
  }
  /** A quote's content: a sink of its own, whose HTML goes inside the quote. */
  quoteOpen() {
    const inner = new StringSink();
    inner.root = this.root ?? this;
    this.open = { head: "<blockquote>\n", body: "", foot: "</blockquote>\n", inner };
    return inner;
  }
  quoteClose() {
    this.open.body = this.open.inner.html;
    this.#close();
  }
  /** The open list item's content: a sink of its own, kept if the item stays as it streamed. */
  itemOpen() {
    this.item = new StringSink();
    this.item.root = this.root ?? this;
    return this.item;
  }
  itemKeep() {
    this.open.body += `<li>${this.item.html}</li>\n`;
    this.item = null;
  }
  done() {
    this.finished = true;
  }
}

function rng(seed) {
  let x = seed >>> 0 || 1;
  return () => {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    return (x >>> 0) / 2 ** 32;
  };
}

/** A StringSink that counts the calls it gets (sink.calls.name). */
function countingSink() {
  const sink = new StringSink();
  sink.calls = {};
  return new Proxy(sink, {
    get(target, key) {
      const value = target[key];
      if (typeof value !== "function") return value;
      return (...args) => {
        target.calls[key] = (target.calls[key] ?? 0) + 1;
        return value.apply(target, args);
      };
    },
  });
}

/** Stream `text` in chunks of the given sizes (cycled), then mark it complete. */
function streamed(text, sizes) {
  const sink = countingSink();
  const stream = new MarkdownStream(sink);
  let at = 0;
  for (let i = 0; at < text.length; i++) {
    at = Math.min(text.length, at + sizes[i % sizes.length]);
    stream.update(text.slice(0, at), true);
  }
  stream.update(text, false);
  return sink;
}

const PY = [
  "import os",
  "",
  "def f(x, y=2):",
  '    """A docstring',
  "",
  "    spanning lines, with ``` inside",
  '    """',
  "    s = 'a # not a comment'",
  "    return x * y  # a comment",
  "",
  "class A(B):",
  "    @property",
  "    def g(self): return f'{self.x!r}'",
];
const SHAPES = {
  python: `Intro:\n\n\`\`\`python\n${PY.join("\n")}\n\`\`\`\n\nAfter.\n`,
  pythonNoBlank: `Here:\n\`\`\`py\n${PY.join("\n")}\n\`\`\`\nThen text.`,
  bash: "```bash\nfor f in *.txt; do\n  echo \"$f\" | grep -c 'x'\ndone\ncat <<EOF\nheredoc $HOME\nEOF\n```\n",
  json: '```json\n{\n  "a": [1, 2, {"b": "c\\"d"}],\n  "e": null\n}\n```',
  sql: "```sql\nSELECT a, b -- note\nFROM t\nWHERE x = 'it''s'\n/* multi\nline */ ORDER BY 1;\n```\n",
  unknown: "~~~cobol\nDISPLAY 'HI'.\n<tag> & stuff\n~~~\n",
  unclosed: "Start\n\n```python\nx = 1\ny = '''open\n",
  longFence: "````md\n```\ninner\n```\n````\nafter\n",
  table: `| # | name | value |\n|---:|:---|---|\n${Array.from({ length: 40 }, (_, i) => `| ${i} | \`n_${i}\` | **${i * 3}** \\| x |`).join("\n")}\n\nAfter the table.\n`,
  tableEnds: "| a | b |\n|---|---|\n| 1 | 2 |\n- a list ends it\n- two\n",
  tableOnly: "a | b\n--|--\n",
  list: Array.from({ length: 30 }, (_, i) => `- item ${i} with *emphasis* and \`code\``).join("\n"),
  looseList: "- one\n\n- two\n\n  continued\n\n- three\n\nPara.\n\n1. a\n2. b\n",
  paragraph: Array.from({ length: 200 }, (_, i) => `Sentence ${i} has **bold** and _it_ text.`).join(" "),
  wrapped: Array.from({ length: 100 }, (_, i) => `line ${i} of a *long\nparagraph* [link](http://x/${i})`).join("\n"),
  setext: "Title line\nmore title\n===\n\ntext\n---\n",
  nested: "- item\n\n  ```python\n  x = 1\n  ```\n- next\n",
  refs: "See [the doc][d] and <b>raw</b>.\n\n[d]: http://example.com\n",
  html: "<div>\n\n*inside*\n\n</div>\n\ntext",
  // Blank last lines (marked's code text gets a newline more), an empty block, one blank line.
  codeBlankEnd: "```python\nx = 1\n\n\n```\n\n```\n```\n\n```\n\n```\n~~~\nopen\n\n",
};
const SENTENCES = [
  "A plain sentence with `code_span` and my_var = 5 * 3.",
  "Emphasis *that runs. Across a sentence end* and **bold. Too**.",
  "A [link. With a stop](http://x/y) and a <br> tag, then <b>bold. Html</b>!",
  "Snake_case_words and a_b_ stay plain? Yes.",
  "~~Struck. Through~~ and `tick. span` end.",
  "An unclosed *star stays literal for a while.",
];
const sentences = (n, sep = " ") =>
  Array.from({ length: n }, (_, i) => SENTENCES[i % SENTENCES.length]).join(sep);
Object.assign(SHAPES, {
  paraThenList: `${sentences(40)}\n- a list *interrupts*\n- it\n\nAfter.`,
  paraSetext: `${sentences(40)}\nstill the paragraph.\n===\n\nAfter.`,
  paraTable: `${sentences(40)}\nh1 | h2\n--|--\n| 1 | 2 |\n`,
  paraHeading: `${sentences(40)}\n# Heading ends it\ntext`,
  paraLines: `${sentences(60, "\n")}\n\nnext`,
  listLoose: `${Array.from({ length: 30 }, (_, i) => `- tight ${i}`).join("\n")}\n\n- now loose\n- and more`,
  listLooseItem: "- a\n- b\n\n  inside b\n- c\n",
  ordered: "5. five\n6. six\n   - nested\n   - more\n7) other delimiter\n8) eight\n",
  bullets: "- a\n- b\n* c\n* d\n+ e\n",
  listLazy: "- a\ncontinued lazily\n- b\n> a quote ends it\n- c\n",
  listBlocks: "- a\n# heading\n- b\n***\n- c\n<div>x</div>\n\n- d\n<span>y</span>\n- e\n```\ncode\n```\n",
  tasks: "- [ ] todo\n- [x] done\n\n- [ ] loose\n",
  itemCode: "- item\n  ```py\n  - not an item\n  ```\n- next\n\n  para in next\n",
  introList: "Here are the steps:\n1. one\n2. two\n\nDone.",
  itemAfterBlank: "- a\n\nnot in the list\n- new list\n",
});
const quoted = (text) => text.replace(/^/gm, "> ").replace(/^> $/gm, ">");
Object.assign(SHAPES, {
  quote: "> a\n> b\n\n> c\n>d\n",
  quoteCode: `> Intro:\n>\n${quoted(`\`\`\`python\n${PY.join("\n")}\n\`\`\``)}\n> After.\n\nOut.`,
  quoteTable: `Before.\n\n${quoted(SHAPES.table)}\nOut.`,
  quoteList: quoted(SHAPES.looseList),
  quoteLazy: "> x\nlazy line\n> more\n\nafter",
  quoteEnds: "> x\n# heading\n> y\n---\n> z\n```\ncode\n```\n",
  quoteTab: ">\tcode\n>\ttoo\n",
  quoteDeep: "> > inner\n> > more\n> - item\n>   - sub\n> text\n",
  quoteUnclosed: "> ```py\n> x = 1",
  quoteRef: "> [a]: http://example.com\n\nSee [a].\n",
  quoteHtml: "> <div>\n> *x*\n> </div>\n",
});
SHAPES.mix = Object.values(SHAPES).join("\n\n");
// Big enough that lists and paragraphs stream in pieces, kept out of the mix (it is slow enough).
// One stray "*" early on (it stays unmatched: watched, not in the way), then prose.
SHAPES.bigParagraph = `${SENTENCES[5]} ${sentences(400).replaceAll(SENTENCES[5], "A last sentence.")}`;
// A "*" left open that a later one closes: the paragraph is rendered whole after all.
SHAPES.lateClose = `${SENTENCES[5]} ${sentences(120).replaceAll(SENTENCES[5], "More.")} and here it ends*.`;
SHAPES.bigQuote = quoted(SHAPES.bigParagraph);
// List items big enough that their content streams on its own (stream_nested.js ItemBody).
const indented = (text, pad = "  ") => text.replace(/^(?=.)/gm, pad);
const bigCode = `\`\`\`python\n${Array.from({ length: 30 }, () => PY.join("\n")).join("\n")}\n\`\`\``;
const blankCode = `\`\`\`python\n${Array.from({ length: 30 }, () => `${PY.join("\n")}\n\n\n`).join("\n")}\`\`\``;
Object.assign(SHAPES, {
  bigItemCode: `- Here:\n${indented(bigCode)}\n- next\n- and\n${indented(bigCode)}\n  after\n`,
  bigItemLoose: `1. Intro:\n\n${indented(bigCode, "   ")}\n\n   Then text.\n2. two\n`,
  bigItemTurnsLoose: `- a\n${indented(bigCode)}\n\n- b\n- c\n`,
  bigItemTable: `- rows:\n\n${indented(SHAPES.table.replace(/\n\n/, `\n${"| a | b |\n".repeat(90)}\n`))}-\n`,
  bigItemParagraph: `- ${sentences(60, "\n  ")}\n- next\n`,
  bigItemLazy: `- start\n${indented(bigCode.slice(0, 3000))}\nlazy line\n  more\n  \`\`\`\n- next\n`,
  bigItemNested: `- outer\n  - inner\n${indented(bigCode, "    ")}\n  - inner two\n- outer two\n`,
  bigItemTab: `-\tHere:\n${indented(bigCode)}\n`,
  bigItemTask: `- [ ] todo:\n${indented(bigCode)}\n- [x] done\n`,
  bigItemQuote: `- quoted:\n${indented(quoted(bigCode))}\n- next\n`,
  bigQuoteItem: quoted(`- in a quote:\n${indented(bigCode)}\n- next`),
  bigItemUnclosed: `- open:\n${indented(bigCode.slice(0, 4000))}`,
  // Runs of blank lines in an item's code block (one of each run is kept when the item is lexed),
  // the block open when the next item comes (the blank lines before it make the list loose).
  bigItemBlanksOpen: `- open:\n${indented(blankCode.slice(0, -3))}\n\n\n- next\n- and\n`,
  // Blank lines before the closing fence, the item then followed by another, or the last.
  bigItemBlanks: `- blanks:\n${indented(blankCode)}\n- next\n`,
  bigItemBlanksEnd: `- blanks:\n${indented(blankCode)}\n`,
});
SHAPES.bigList = Array.from(
  { length: 300 },
  (_, i) => `${i + 1}. item ${i} ${SENTENCES[i % 6]}${i % 7 ? "" : "\n     - sub *item*\n     - two"}`,
).join("\n");

describe("streamed markdown equals the one-shot render", () => {
  for (const [name, text] of Object.entries(SHAPES)) {
    test(name, () => {
      const whole = markdownHtml(text);
      // Every cut of a short text; fewer of a long one (each costs an update per few characters).
      const fine =
        text.length < 2000 ? [[1], [3], [7, 1, 20]] : text.length < 10000 ? [[13], [7, 1, 20]] : [];
      for (const sizes of [...fine, [64], [text.length]]) {
        const sink = streamed(text, sizes);
        assert.equal(sink.html, whole, `chunks ${sizes}`);
        assert.ok(sink.finished || sink.open === null);
      }
      const random = rng(name.length * 7919);
      for (let run = 0; run < (text.length < 10000 ? 10 : 3); run++) {
        const sizes = Array.from({ length: 8 }, () => 1 + Math.floor(random() * 40));
        assert.equal(streamed(text, sizes).html, whole, `chunks ${sizes}`);
      }
    });
  }

  test("a fence split across chunks", () => {
    const text = "Text\n``";
    const sink = new StringSink();
    const stream = new MarkdownStream(sink);
    stream.update(text, true);
    stream.update(`${text}\`py\nx = 1\n\`\`\`\n`, true);
    stream.update(`${text}\`py\nx = 1\n\`\`\`\nend`, false);
    assert.equal(sink.html, markdownHtml(`${text}\`py\nx = 1\n\`\`\`\nend`));
  });

  test("given what each update appended, the text itself is never read", () => {
    // A streamed string grown by += is copied whole when read: the view passes the pieces.
    for (const name of ["mix", "bigList", "bigParagraph"]) {
      const text = SHAPES[name];
      const sink = new StringSink();
      const stream = new MarkdownStream(sink);
      const unread = (length) => ({ length, toString: () => assert.fail("the whole text was read") });
      stream.update("", true);
      let at = 0;
      for (const size of [5, 300, 1, 64, 900].flatMap((n) => Array(40).fill(n))) {
        if (at >= text.length) break;
        const pieces = [text.slice(at, at + size), text.slice(at + size, at + size + 7)];
        at = Math.min(text.length, at + size + 7);
        stream.update(unread(at), true, pieces);
      }
      stream.update(unread(text.length), true, [text.slice(at)]);
      stream.update(unread(text.length), false, []);
      assert.equal(sink.html, markdownHtml(text), name);
    }
  });

  test("a text that is replaced, not extended, starts over", () => {
    const sink = new StringSink();
    const stream = new MarkdownStream(sink);
    stream.update("```py\nold = 1\n", true);
    stream.update("New *text*", true);
    stream.update("New *text*", false);
    assert.equal(sink.html, markdownHtml("New *text*"));
  });
});

describe("lists and long paragraphs stream in pieces", () => {
  // Each piece is final when handed over: what the page lays out again per update stays small.
  test("a long paragraph, a sentence end at a time", () => {
    const sink = streamed(SHAPES.bigParagraph, [64]);
    assert.ok(sink.calls.paraHtml > 30, `${sink.calls.paraHtml} pieces`);
    assert.equal(sink.calls.drop, undefined);
  });

  test("a list, an item at a time", () => {
    const sink = streamed(SHAPES.bigList, [64]);
    assert.ok(sink.calls.listItems > 100, `${sink.calls.listItems} batches of items`);
    assert.equal(sink.calls.listOpen, 1);
    assert.equal(sink.calls.drop, undefined);
  });

  test("a paragraph that turns out to be a heading or to end in a table is rendered again, once", () => {
    for (const name of ["paraSetext", "paraTable", "lateClose"]) {
      const sink = streamed(SHAPES[name], [64]);
      assert.equal(sink.calls.paraOpen, 1, name);
      assert.equal(sink.calls.drop, 1, name);
    }
    // Interrupted by another block, the paragraph is simply finished.
    for (const name of ["paraThenList", "paraHeading"]) {
      assert.equal(streamed(SHAPES[name], [64]).calls.drop, undefined, name);
    }
  });

  test("a big item streams its content on its own and stays as it streamed", () => {
    for (const name of ["bigItemCode", "bigItemLoose", "bigItemTable", "bigItemNested", "bigItemQuote"]) {
      const sink = streamed(SHAPES[name], [64]);
      assert.ok(sink.calls.itemKeep >= 1, name);
      assert.equal(sink.calls.drop, undefined, name);
    }
    // Those it cannot stream so are rendered whole again, once.
    for (const name of ["bigItemLazy", "bigItemTab", "bigItemTask"]) {
      assert.equal(streamed(SHAPES[name], [64]).calls.itemKeep, undefined, name);
    }
  });

  test("a list that turns loose renders its items again, once", () => {
    const sink = streamed(SHAPES.listLoose, [64]);
    assert.equal(sink.calls.listOpen, 2);
  });

  test("a list ends where marked ends it", () => {
    // Another bullet, a quote, a heading, a rule: a new region each; an inline tag does not end it.
    assert.equal(streamed(SHAPES.bullets, [5]).calls.listOpen, 3);
    assert.equal(streamed(SHAPES.listBlocks, [5]).calls.drop, undefined);
  });
});

describe("streaming work is proportional to what arrives", () => {
  const sizes = [100, 900, 30, 500];
  const big = (shape, n) => {
    if (shape === "code") return `\`\`\`python\n${Array.from({ length: n }, (_, i) => PY[i % PY.length]).join("\n")}\n`;
    if (shape === "table") return `| a | b |\n|---|---|\n${"| x | *y* |\n".repeat(n)}`;
    if (shape === "list") return "- item *x*\n".repeat(n);
    if (shape.startsWith("quote ")) return big(shape.slice(6), n).replace(/^/gm, "> ");
    if (shape.startsWith("item ")) return `- first\n- ${big(shape.slice(5), n).replace(/\n(?=.)/g, "\n  ")}`;
    return "Word **bold** and more. ".repeat(n);
  };
  test("what one update brings to a code block or table reaches the page in one piece", () => {
    // Each piece handed out is sanitized and laid out on its own: per line, a fast stream of
    // short lines would cost a browser task per line.
    for (const [shape, method] of [
      ["code", "codeHtml"],
      ["table", "tableRow"],
    ]) {
      const text = big(shape, 2000);
      const sink = new StringSink();
      let pieces = 0;
      const inner = sink[method].bind(sink);
      sink[method] = (...args) => {
        pieces++;
        inner(...args);
      };
      const stream = new MarkdownStream(sink);
      let updates = 0;
      for (let at = 0; at < text.length; at += 2000, updates++) stream.update(text.slice(0, at + 2000), true);
      stream.update(text, false);
      assert.ok(pieces <= updates + 1, `${shape}: ${pieces} pieces for ${updates} updates`);
      assert.equal(sink.html, markdownHtml(text));
    }
  });

  const shapes = ["code", "table", "list", "paragraph", "quote code", "quote table", "quote paragraph"];
  for (const shape of [...shapes, "item code", "item table", "quote item code"]) {
    test(shape, () => {
      // Re-rendering the open region on every update would cost ~n²/chunk; the budget is linear.
      // Nor is the open block rendered again whole now and then (one such render is one long
      // task in a browser): what is rendered again at once stays small, however big the block.
      const text = big(shape, 4000);
      const sink = streamed(text, sizes);
      assert.ok(sink.renders < 6 * markdownHtml(text).length, `${sink.renders} characters re-rendered`);
      assert.ok((sink.maxRender ?? 0) < 8192, `${sink.maxRender} characters rendered again at once`);
      assert.equal(sink.html, markdownHtml(text));
    });
  }
});
