// Markdown, sanitizing and highlighting. Model output is untrusted HTML: everything that becomes
// markup goes through DOMPurify and comes back as a DocumentFragment, so no caller ever assigns
// innerHTML. Streaming text is rendered in stable chunks so a long answer is parsed once, not
// once per frame.

import DOMPurify from "dompurify";
import hljs from "highlight.js/lib/core";
import bash from "highlight.js/lib/languages/bash";
import json from "highlight.js/lib/languages/json";
import python from "highlight.js/lib/languages/python";
import sql from "highlight.js/lib/languages/sql";
import { Marked } from "marked";
import { MarkdownStream } from "./stream.js";

hljs.registerLanguage("python", python);
hljs.registerLanguage("json", json);
hljs.registerLanguage("bash", bash);
hljs.registerLanguage("sql", sql);
hljs.registerAliases(["shell", "console", "sh", "zsh"], { languageName: "bash" });
hljs.registerAliases(["py", "ipython", "python3", "pycon"], { languageName: "python" });

/** Escape text for the few HTML strings built here (marked's code renderer returns a string). */
export function escapeHtml(text) {
  return String(text).replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
}

/** Highlighted HTML for `code` (escaped plain text when the language is unknown). */
export function highlightHtml(code, lang) {
  const name = String(lang || "")
    .trim()
    .split(/\s+/)[0]
    .toLowerCase();
  if (name && hljs.getLanguage(name)) {
    try {
      return hljs.highlight(code, { language: name, ignoreIllegals: true }).value;
    } catch {
      // A highlighter bug must never hide the code itself.
    }
  }
  return escapeHtml(code);
}

const marked = new Marked({
  gfm: true,
  breaks: false,
  renderer: {
    code({ text, lang }) {
      const name = String(lang || "")
        .trim()
        .split(/\s+/)[0];
      const cls = name ? ` class="hljs language-${escapeHtml(name)}"` : ' class="hljs"';
      return `<pre><code${cls}>${highlightHtml(text, name)}</code></pre>\n`;
    },
  },
});

// Tags a model must not inject into the page: <style> restyles all of JupyterLab, and form
// controls could pass for ipyagent's own buttons. Inline styles could overlay the page, so they
// go too (our CSS and JupyterLab's rendered-HTML styles cover tables and code).
const PURIFY_OPTIONS = {
  USE_PROFILES: { html: true },
  FORBID_TAGS: ["style", "form", "button", "textarea", "select", "option", "dialog"],
  FORBID_ATTR: ["style"],
  RETURN_DOM_FRAGMENT: true,
};

let hooksInstalled = false;

/** Links open in a new tab (never navigate the notebook away), and remote images in model output
 * become links: an <img> with a URL made up by the model is a classic way to leak data out of
 * the conversation, so the user has to click it. Data URLs (inline images) stay images. */
function installHooks() {
  if (hooksInstalled || !DOMPurify.isSupported) return;
  hooksInstalled = true;
  DOMPurify.addHook("afterSanitizeAttributes", (node) => {
    if (node.tagName === "A" && node.hasAttribute("href")) {
      node.setAttribute("target", "_blank");
      node.setAttribute("rel", "noopener noreferrer");
    }
    if (node.tagName === "IMG") {
      const src = node.getAttribute("src") || "";
      if (!/^data:image\/(png|jpe?g|gif|webp);/i.test(src)) blockImage(node, src);
    }
  });
}

function blockImage(img, src) {
  const link = img.ownerDocument.createElement("a");
  link.className = "ipyagent-blocked-img";
  link.textContent = `[image: ${img.getAttribute("alt") || src || "blocked"}]`;
  if (/^https?:/i.test(src)) {
    link.setAttribute("href", src);
    link.setAttribute("target", "_blank");
    link.setAttribute("rel", "noopener noreferrer");
  }
  link.title = "Remote image not loaded automatically; click to open";
  img.replaceWith(link);
}

/** A sanitized DocumentFragment for untrusted HTML. */
export function sanitizedFragment(html) {
  installHooks();
  return DOMPurify.sanitize(String(html), PURIFY_OPTIONS);
}

/** A sanitized DocumentFragment for markdown source. */
export function markdownFragment(src) {
  return sanitizedFragment(marked.parse(String(src)));
}

/** marked's HTML for markdown source (not sanitized: see markdownFragment). */
export function markdownHtml(src) {
  return marked.parse(String(src));
}

/** The top-level block tokens of `src` (blank-line tokens left out). */
export function lexBlocks(src) {
  return marked.lexer(String(src)).filter((t) => t.type !== "space");
}

/** The name a code block's info string gives its language ("py" for "py title=x"). */
function langName(lang) {
  return String(lang || "")
    .trim()
    .split(/\s+/)[0];
}

/** The `<pre><code>` a fenced block renders into, empty (the code renderer above fills it). */
export function codeShellHtml(lang) {
  const name = langName(lang);
  const cls = name ? ` class="hljs language-${escapeHtml(name)}"` : ' class="hljs"';
  return `<pre><code${cls}></code></pre>\n`;
}

/** Highlighted HTML for one piece of a code block, and whether the highlighter ended it outside
 * any string, comment or other span: only then does the next piece highlight on its own exactly
 * as it would as part of the whole block. */
export function highlightSegment(code, lang) {
  const name = langName(lang).toLowerCase();
  if (name && hljs.getLanguage(name)) {
    try {
      const result = hljs.highlight(code, { language: name, ignoreIllegals: true });
      return { html: result.value, clean: !result._top?.parent };
    } catch {
      return { html: escapeHtml(code), clean: false };
    }
  }
  return { html: escapeHtml(code), clean: true };
}

/** Highlighted HTML a streaming code block gathers in one part before it starts another. */
const CODE_PART = 8192;

/** Applies a MarkdownStream's output to an element: finished HTML goes in place, sanitized, once.
 * An open paragraph or list lives in a tail element that goes when the text is complete; an open
 * code block or table is built where it will stay (moving it at the end would lay it all out
 * again). The browser's work per frame follows what changed: a code block grows by parts that
 * are blocks of their own (each lays out on its own), unwrapped once when the block closes. */
class DomSink {
  constructor(el) {
    this.el = el;
  }

  reset() {
    this.el.replaceChildren();
    this.tail = null;
  }

  #tail() {
    if (!this.tail) {
      this.tail = this.el.ownerDocument.createElement("div");
      this.tail.className = "ipyagent-md-tail";
      this.el.append(this.tail);
    }
    return this.tail;
  }

  #settle(nodes) {
    if (this.tail) this.tail.before(...nodes);
    else this.el.append(...nodes);
    this.tail?.replaceChildren();
  }

  freeze(html) {
    this.#settle([sanitizedFragment(html)]);
  }

  live(html) {
    this.#tail().replaceChildren(sanitizedFragment(html));
  }

  liveText(text) {
    let at = this.#tail();
    while (at.lastElementChild && /^(P|LI|UL|OL|BLOCKQUOTE)$/.test(at.lastElementChild.tagName)) {
      at = at.lastElementChild;
    }
    at.append(text);
  }

  codeOpen(shellHtml) {
    const frag = sanitizedFragment(shellHtml);
    this.code = frag.querySelector("code");
    this.part = null;
    this.partSize = 0;
    this.pending = this.el.ownerDocument.createElement("span");
    this.partial = this.el.ownerDocument.createTextNode("");
    this.pending.append(this.partial);
    this.code.append(this.pending);
    this.#settle([frag]);
  }

  codePending(text) {
    this.partial.before(text);
  }

  codeHtml(html, rest) {
    if (!this.part || this.partSize > CODE_PART) {
      this.part = this.el.ownerDocument.createElement("span");
      this.part.className = "ipyagent-code-part";
      this.pending.before(this.part);
      this.partSize = 0;
    }
    this.part.append(sanitizedFragment(html));
    this.partSize += html.length;
    this.pending.replaceChildren(rest, this.partial);
  }

  codePartial(text) {
    if (this.partial.data !== text) this.partial.data = text;
  }

  codeClose(html) {
    this.pending.replaceWith(sanitizedFragment(html));
    for (const part of this.code.querySelectorAll(":scope > .ipyagent-code-part")) {
      part.replaceWith(...part.childNodes);
    }
    this.code = this.part = this.pending = this.partial = null;
  }

  tableOpen(html) {
    const frag = sanitizedFragment(html);
    this.table = frag.querySelector("table");
    this.tbody = null;
    this.#settle([frag]);
  }

  tableRow(html) {
    if (!this.tbody) {
      this.tbody = this.el.ownerDocument.createElement("tbody");
      this.table.append(this.tbody);
    }
    const rows = sanitizedFragment(`<table><tbody>${html}</tbody></table>`).querySelector("tbody");
    this.tbody.append(...rows.childNodes);
  }

  tableClose() {
    this.table = this.tbody = null;
  }

  done() {
    this.tail?.remove();
    this.tail = null;
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

  update(text, streaming) {
    this.stream.update(text, streaming);
  }
}
