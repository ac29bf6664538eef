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
    this.html += html;
    this.open = null;
  }
  live(html) {
    this.renders += html.length;
  }
  liveText() {}
  codeOpen(shell) {
    const at = shell.indexOf("</code>");
    this.open = { head: shell.slice(0, at), body: "", foot: shell.slice(at) };
  }
  codePending() {}
  codeHtml(html) {
    this.open.body += html;
  }
  codePartial() {}
  codeClose(html) {
    this.html += this.open.head + this.open.body + html + this.open.foot;
    this.open = null;
  }
  tableOpen(html) {
    const at = html.lastIndexOf("</table>");
    this.open = { head: html.slice(0, at), rows: "", foot: html.slice(at) };
  }
  tableRow(html) {
    this.open.rows += html;
  }
  tableClose() {
    const { head, rows, foot } = this.open;
    this.html += head + (rows ? `<tbody>${rows}</tbody>` : "") + foot;
    this.open = null;
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

/** Stream `text` in chunks of the given sizes (cycled), then mark it complete. */
function streamed(text, sizes) {
  const sink = new StringSink();
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
};
SHAPES.mix = Object.values(SHAPES).join("\n\n");

describe("streamed markdown equals the one-shot render", () => {
  for (const [name, text] of Object.entries(SHAPES)) {
    test(name, () => {
      const whole = markdownHtml(text);
      const fine = text.length < 2000 ? [[1], [3]] : [[13]];
      for (const sizes of [...fine, [7, 1, 20], [64], [text.length]]) {
        const sink = streamed(text, sizes);
        assert.equal(sink.html, whole, `chunks ${sizes}`);
        assert.ok(sink.finished || sink.open === null);
      }
      const random = rng(name.length * 7919);
      for (let run = 0; run < 10; run++) {
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

  test("a text that is replaced, not extended, starts over", () => {
    const sink = new StringSink();
    const stream = new MarkdownStream(sink);
    stream.update("```py\nold = 1\n", true);
    stream.update("New *text*", true);
    stream.update("New *text*", false);
    assert.equal(sink.html, markdownHtml("New *text*"));
  });
});

describe("streaming work is proportional to what arrives", () => {
  const sizes = [100, 900, 30, 500];
  const big = (shape, n) => {
    if (shape === "code") return `\`\`\`python\n${Array.from({ length: n }, (_, i) => PY[i % PY.length]).join("\n")}\n`;
    if (shape === "table") return `| a | b |\n|---|---|\n${"| x | *y* |\n".repeat(n)}`;
    if (shape === "list") return "- item *x*\n".repeat(n);
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

  for (const shape of ["code", "table", "list", "paragraph"]) {
    test(shape, () => {
      // Re-rendering the open region on every update would cost ~n²/chunk; the budget is linear.
      const text = big(shape, 4000);
      const sink = streamed(text, sizes);
      assert.ok(sink.renders < 6 * markdownHtml(text).length, `${sink.renders} characters re-rendered`);
      assert.equal(sink.html, markdownHtml(text));
    });
  }
});
