"""Streamed markdown on a real page: the final DOM equals the one-shot render, big blocks included.

No JupyterLab and no kernel: a page loads the bundled views (ipyagent/widgets/static/runtime.js)
with a stand-in model, as bench/browser.py does. One view receives a text block as the kernel streams it
(an ``append`` patch per chunk, each drawn before the next, then ``streaming: false``); another
view opens on the finished block. Both must end with the same HTML: the same markdown, the same
highlighting, the same sanitizing, big code blocks and lists split into the same parts
(js/src/parts.js), and big paragraphs and tables, which stream in parts, joined again.
js/test/stream.test.js checks the HTML strings in node for many more shapes; this checks the DOM
the browser builds from them. Where parts are invisible by design (code, lists), a screenshot of
the split block must match one of the same block with its parts unwrapped.
"""

from __future__ import annotations

import base64
import random
from collections.abc import Callable
from typing import Any

import pytest

from ipyagent.widgets.views import STATIC

ORIGIN = "http://page.invalid"

PAGE = """<!doctype html><meta charset="utf-8">
<style>
/* Whole-pixel lines and margins: a part then starts on a pixel boundary, as the text at its place
   in the whole block does (a part lays out on its own, snapped to whole pixels: with lines of
   18.2 px its text would be drawn 0.2 px higher than in one block, a difference in antialiasing
   only, which the screenshots below would report). */
body .ipyagent-root .ipyagent-md { font-size: 16px; line-height: 22px; }
body .ipyagent-root .ipyagent-md pre { font-size: 15px; line-height: 21px; margin: 8px 0; }
body .ipyagent-root .ipyagent-md h2 { font-size: 20px; line-height: 25px; margin: 16px 0 8px; }
</style>
<body><div id="streamed" style="width: 900px"></div><div id="whole" style="width: 900px"></div>
<script>
// The view draws in animation-frame callbacks: here they run when the test says, one per update.
// Its clock moves only when the test says too: a second between updates, so that streaming text,
// which waits a little after a redraw (common.js STREAM_REDRAW_MS), is drawn at each.
window.frames = [];
window.requestAnimationFrame = (fn) => window.frames.push(fn);
window.cancelAnimationFrame = () => {};
window.clock = 0;
performance.now = () => window.clock;
window.drawFrames = () => {
  while (window.frames.length) for (const fn of window.frames.splice(0)) fn(performance.now());
};
</script>
<script type="module">
import { views } from "/runtime.js"; // its stylesheet comes with it
const view = views.run;
const mount = (id, state) => {
  const handlers = [];
  const model = {
    get: (key) => (key === "state" ? state : undefined),
    set() {}, save_changes() {}, send() {}, off() {},
    on: (name, fn) => { if (name === "msg:custom") handlers.push(fn); },
  };
  const el = document.getElementById(id);
  el.replaceChildren();
  view.render({ model, el });
  drawFrames();
  let seq = 0;
  return (patches, { after = 1000 } = {}) => {
    window.clock += after;
    for (const fn of handlers) fn({ kind: "patches", seq: ++seq, patches });
    drawFrames();
  };
};
const md = (id) => document.querySelector(`#${id} .ipyagent-md`);
window.render = (text, sizes) => {
  const send = mount("streamed", { seq: 0, status: "running", blocks: [], usage: {}, live: true });
  send([{ op: "add", block: { id: "t", kind: "text", text: "", streaming: true } }]);
  // Whether a paragraph or a table was in parts at some point while it streamed (looked at now
  // and then: each look costs a query of the whole block).
  let splitWhileStreaming = false;
  for (let at = 0, i = 0; at < text.length; at += sizes[i++ % sizes.length]) {
    send([{ op: "append", id: "t", field: "text", value: text.slice(at, at + sizes[i % sizes.length]) }]);
    if (i % 4 === 0 && md("streamed").querySelector("p > .ipyagent-shelf, .ipyagent-table")) {
      splitWhileStreaming = true;
    }
  }
  send([
    { op: "set", id: "t", fields: { streaming: false } },
    { op: "top", fields: { status: "completed" } },
  ]);
  const block = { id: "t", kind: "text", text, streaming: false };
  mount("whole", { seq: 0, status: "completed", blocks: [block], usage: {}, live: true });
  return {
    streamed: md("streamed").innerHTML,
    whole: md("whole").innerHTML,
    parts: md("streamed").querySelectorAll(".ipyagent-part").length,
    shelves: md("streamed").querySelectorAll(":not(.ipyagent-md) > .ipyagent-shelf").length,
    tails: document.querySelectorAll(".ipyagent-md-tail, .ipyagent-md-open").length,
    splitWhileStreaming,
    joined: !md("streamed").querySelector("p .ipyagent-part, table .ipyagent-part, .ipyagent-table"),
  };
};
// Streaming text drawn at most every STREAM_REDRAW_MS (100) of the clock; anything else at once.
window.redraws = () => {
  const send = mount("streamed", { seq: 0, status: "running", blocks: [], usage: {}, live: true });
  const text = () => md("streamed").textContent.trim();
  const seen = [];
  send([{ op: "add", block: { id: "t", kind: "text", text: "", streaming: true } }]);
  send([{ op: "append", id: "t", field: "text", value: "Hello" }]);
  seen.push(text()); // a second after the last redraw: drawn
  send([{ op: "append", id: "t", field: "text", value: " there" }], { after: 10 });
  seen.push(text(), window.frames.length); // 10 ms after: waits, no frame asked for
  send([{ op: "top", fields: { status: "running" } }], { after: 10 });
  seen.push(text()); // something else: drawn at once, with the text that waited
  send([{ op: "append", id: "t", field: "text", value: " again" }], { after: 10 });
  seen.push(text());
  window.clock += 1000; // the wait's timer finds the time passed and asks for a frame
  return seen;
};
// The streamed block with its parts unwrapped (where it is: a screenshot elsewhere could fall on
// other pixel boundaries).
window.unwrapParts = () => {
  const el = md("streamed");
  for (const part of el.querySelectorAll(".ipyagent-part")) part.replaceWith(...part.childNodes);
  return el.querySelectorAll(".ipyagent-part").length;
};
window.ready = true;
</script>"""


PIXEL_DIFF = """async ([a, b]) => {
  const load = (src) => new Promise((ok) => {
    const img = new Image();
    img.onload = () => ok(img);
    img.src = `data:image/png;base64,${src}`;
  });
  const pixels = (img) => {
    const canvas = document.createElement("canvas");
    canvas.width = img.width;
    canvas.height = img.height;
    const context = canvas.getContext("2d");
    context.drawImage(img, 0, 0);
    return context.getImageData(0, 0, img.width, img.height).data;
  };
  const [x, y] = await Promise.all([load(a), load(b)]);
  const [p, q] = [pixels(x), pixels(y)];
  let over = 0;
  for (let i = 0; i < Math.min(p.length, q.length); i++) if (Math.abs(p[i] - q[i]) > 32) over++;
  return { size: [`${x.width}x${x.height}`, `${y.width}x${y.height}`], over };
}"""


def _sentence(rng: random.Random, n: int) -> str:
    vocabulary = ["model", "writes", "the", "notebook", "cell", "value", "a", "reads"]
    words = [rng.choice(vocabulary) for _ in range(9)]
    extras = [
        f"`code_{n}`",
        f"**bold {n}**",
        f"[a link. With a stop](https://example.com/{n})",
        f"snake_case_{n}",
        "5 * 3",
        "*emphasis. Across sentences*",
        "<b>html</b>",
    ]
    words.insert(rng.randrange(len(words)), extras[n % len(extras)])
    return " ".join(words).capitalize() + rng.choice([".", ".", "!", "?"])


def code(rng: random.Random) -> str:
    lines = ["Here is the module:", "", "```python"]
    for n in range(1200):
        lines += [
            f"def step_{n}(values, limit={rng.randint(1, 99)}):",
            f'    """Scale batch {n}.',
            "",
            '    Over two lines, with a ``` inside."""',
            f"    return {{'total': sum(values) * {rng.random():.3f}, 'name': \"s_{n}\"}}  # done",
        ]
    return "\n".join([*lines, "```", "", "After the code."])


def table(rng: random.Random) -> str:
    rows = [f"| {n} | `item_{n}` | {rng.random() * 1000:.2f} | {_sentence(rng, n)} |" for n in range(1700)]
    return "\n".join(["| # | name | value | note |", "|---:|---|---:|---|", *rows, "", "After."])


def bullets(rng: random.Random) -> str:
    nested = "\n     - nested *item*"
    items = [f"{n + 1}. {_sentence(rng, n)}" + (nested if n % 9 == 0 else "") for n in range(2600)]
    return "\n".join(items) + "\n\nA paragraph.\n\n- tight\n- list\n\n- that turns\n- loose\n"


def paragraph(rng: random.Random) -> str:
    """Past the size a paragraph streams in parts at (parts.js PARA_WHOLE, 16 KB), short of the one
    it is joined at (PARA_JOIN, 32 KB)."""
    return " ".join(_sentence(rng, n) for n in range(340)) + "\n\nAfter."


def big_paragraph(rng: random.Random) -> str:
    """Past the size a paragraph is joined again at (parts.js PARA_JOIN, 32 KB)."""
    return " ".join(_sentence(rng, n) for n in range(2500)) + "\n\nAfter."


def mix(rng: random.Random) -> str:
    return "\n\n".join(
        [
            "# A report",
            paragraph(rng)[:20000],
            code(rng)[:9000] + "\n```",
            bullets(rng)[:12000],
            "\n".join(table(rng).split("\n")[:80]),
        ]
    )


def nested(rng: random.Random, items: int = 150) -> str:
    """Big code blocks and lists in a list item and in a quote."""
    lines = ["```python", *code(rng).split("\n")[3 : 3 + 2 * items], "```"]
    in_item = [f"   {line}" if line else "" for line in lines]
    in_quote = [f"> {line}" for line in lines]
    quoted_list = [f"> - {_sentence(rng, n)}" for n in range(items)]
    inner_list = [f"   - {_sentence(rng, n)}" for n in range(items)]
    listed = ["1. First, the module:", "", *in_item, "", "2. Then a list:", "", *inner_list, "", "3. Done."]
    return "\n".join(["Before.", "", *listed, "", *in_quote, ">", *quoted_list, "", "After."])


def _quoted(text: str) -> str:
    return "\n".join(f"> {line}" if line else ">" for line in text.split("\n"))


def item_code(rng: random.Random) -> str:
    """A long code block in a list item (streamed on its own: js/src/stream_nested.js)."""
    body = code(rng)
    block = body[body.index("```python") : body.rindex("```") + 3]
    in_item = "\n".join(f"   {line}" if line else "" for line in block.split("\n"))
    return f"1. First, the module:\n\n{in_item}\n\n   Then run it.\n2. Done.\n\nAfter."


def quote_table(rng: random.Random) -> str:
    """A table in a quote, of a size joined again when complete (parts.js: streamed in parts past
    50 rows, joined up to 100)."""
    return _quoted("\n".join(table(rng).split("\n")[:92])) + "\n\nAfter."


def quote_paragraph(rng: random.Random) -> str:
    """One long paragraph in a quote, on one line."""
    return _quoted(paragraph(rng).split("\n")[0]) + "\n\nAfter."


SHAPES: dict[str, Callable[[random.Random], str]] = {
    "code": code,
    "table": table,
    "list": bullets,
    "paragraph": paragraph,
    "big_paragraph": big_paragraph,
    "mix": mix,
    "nested": nested,
    "item_code": item_code,
    "quote_table": quote_table,
    "quote_paragraph": quote_paragraph,
}
#: Shapes with a paragraph or a table that streams in parts and is joined again when complete.
JOINED = {"paragraph", "mix", "quote_table", "quote_paragraph"}
#: Shapes with a paragraph or a table too big to be joined again: in parts, streamed or not.
KEPT_IN_PARTS = {"table", "big_paragraph"}


@pytest.fixture
def md_page(page: Any) -> Any:
    files = {
        "/": ("text/html", PAGE),
        "/runtime.js": ("text/javascript", (STATIC / "runtime.js").read_text()),
    }

    def serve(route: Any) -> None:
        kind, body = files[route.request.url[len(ORIGIN) :] or "/"]
        route.fulfill(status=200, content_type=kind, body=body)

    page.route(f"{ORIGIN}/**", serve)
    page.goto(f"{ORIGIN}/")
    page.wait_for_function("() => window.ready === true")
    return page


@pytest.mark.parametrize("shape", SHAPES)
def test_the_streamed_dom_is_the_one_shot_dom(md_page: Any, shape: str) -> None:
    text = SHAPES[shape](random.Random(shape))
    for sizes in ([1, 17, 300, 3, 64], [997]):
        result = md_page.evaluate("([text, sizes]) => window.render(text, sizes)", [text, sizes])
        assert result["streamed"] == result["whole"], f"chunks {sizes}"
        assert result["tails"] == 0  # nothing of the streaming is left
        # A paragraph or table of a size the browser lays out in one go streamed in parts and is
        # one block again, as it would show unsplit; one past that size stays in parts. Code
        # blocks and lists stay in parts, on several shelves.
        assert result["joined"] == (shape not in KEPT_IN_PARTS)
        if shape in JOINED:
            assert result["splitWhileStreaming"]
        else:
            assert result["parts"] > 2
            assert result["shelves"] > 1 or shape == "nested"


def test_streaming_text_is_redrawn_at_most_ten_times_a_second(md_page: Any) -> None:
    # Each redraw is a frame of style, layout and paint: streaming text waits until 100 ms after
    # the last one; a change of anything else is drawn on the next frame, the text with it.
    seen = md_page.evaluate("() => window.redraws()")
    assert seen == ["Hello", "Hello", 0, "Hello there", "Hello there"]
    # The timer asks for a frame (polled on a timer: animation frames are the test's own here).
    md_page.wait_for_function("() => window.frames.length > 0", polling=50)
    md_page.evaluate("() => window.drawFrames()")
    shown = md_page.evaluate("() => document.querySelector('#streamed .ipyagent-md').textContent")
    assert shown.strip() == "Hello there again"


COPY = """(id) => {
  const code = document.querySelector(`#${id} pre`);
  const range = document.createRange();
  range.selectNodeContents(code);
  getSelection().removeAllRanges();
  getSelection().addRange(range);
}"""


def test_copying_a_code_block_in_parts_gives_its_text(md_page: Any) -> None:
    # What the user copies (select the block, Ctrl+C) and pastes is the code as written, whether
    # the block streamed in parts or is whole. Each part is a block box, and a block's edges are
    # where the browser's text serializers may add line breaks (innerText does).
    md_page.set_viewport_size({"width": 1000, "height": 600})  # most parts are off screen
    source = code(random.Random(2))
    body = source[source.index("```python\n") + 10 : source.index("\n```\n")]
    assert len(body) > 20_000
    result = md_page.evaluate("([text]) => window.render(text, [300, 7])", [source])
    assert result["parts"] > 2 and result["shelves"] > 1
    md_page.evaluate("() => document.body.append(document.createElement('textarea'))")
    paste = md_page.locator("textarea")

    def copied() -> str:
        md_page.evaluate(COPY, "streamed")
        md_page.keyboard.press("Control+C")
        paste.fill("")
        paste.focus()
        md_page.keyboard.press("Control+V")
        text: str = paste.input_value()
        return text

    in_parts = copied()
    assert md_page.evaluate("() => window.unwrapParts()") == 0
    assert copied() == in_parts == body


def loose(rng: random.Random) -> str:
    return "Before.\n\n" + "\n\n".join(f"- {_sentence(rng, n)}" for n in range(120)) + "\n\nAfter."


def blocks(rng: random.Random) -> str:
    parts = [
        f"## Part {n}\n\n{_sentence(rng, n)} {_sentence(rng, n + 1)}\n\n```python\nx = {n}\n```\n\n- a\n- b"
        for n in range(120)
    ]
    return "\n\n".join(parts)


def quotes(rng: random.Random) -> str:
    """Parts that begin with a quote's paragraph, a quote's loose list, a loose list: blocks whose
    first descendants' margins collapse with their own in the whole."""
    parts = [
        f"{_sentence(rng, n)}\n\n> {_sentence(rng, n + 1)}\n\n> - {_sentence(rng, n + 2)}\n>\n> - two\n\n"
        f"- {_sentence(rng, n + 3)}\n\n- loose"
        for n in range(80)
    ]
    return "\n\n".join(parts)


@pytest.mark.parametrize("shape", ["code", "list", "loose", "blocks", "nested", "quotes"])
def test_parts_look_like_the_whole_block(md_page: Any, shape: str) -> None:
    # Tall enough that every part is on screen (content-visibility skips the others).
    md_page.set_viewport_size({"width": 1000, "height": 12000})
    rng = random.Random(1)
    make = {
        "code": lambda: code(rng)[:9000] + "\n```\n",
        "list": lambda: bullets(rng)[:14000],
        "nested": lambda: nested(rng, 60),
    }
    text = make.get(shape, lambda: {"loose": loose, "blocks": blocks, "quotes": quotes}[shape](rng))()
    result = md_page.evaluate("([text]) => window.render(text, [500])", [text])
    assert result["parts"] >= 2
    block = md_page.locator("#streamed .ipyagent-md")
    in_parts = block.screenshot()
    assert md_page.evaluate("() => window.unwrapParts()") == 0
    whole = block.screenshot()
    # The same pixels, up to antialiasing (a rounded corner drawn a fraction of a pixel apart
    # moves a few edge pixels by a few levels; a moved line or a missing marker moves hundreds
    # of pixels by most of the range).
    shots = [base64.b64encode(shot).decode() for shot in (in_parts, whole)]
    diff = md_page.evaluate(PIXEL_DIFF, shots)
    assert diff["size"][0] == diff["size"][1]
    assert diff["over"] == 0, diff
