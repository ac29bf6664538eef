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

const FENCE = /^ {0,3}(`{3,}|~{3,})(.*)$/;

/**
 * The offset in `text` (at or after `from`, which must be outside any code fence) up to which
 * the markdown is stable: the start of the last line that follows a blank line, lies outside a
 * fenced code block and is not indented (an indented line could continue a list item or be
 * indented code). Text before that offset renders the same however the rest grows — nearly:
 * reference-style links defined later and loose lists split in two differ, which the full
 * render at the end of streaming repairs. Returns `from` when there is no such point.
 */
export function stableBoundary(text, from = 0) {
  let boundary = from;
  let fence = null; // the opening fence marker while inside a fenced block
  let prevBlank = false;
  let pos = from;
  while (pos < text.length) {
    const nl = text.indexOf("\n", pos);
    if (nl === -1) break; // the last line is still growing: never split inside or before it by it
    const line = text.slice(pos, nl);
    const blank = line.trim() === "";
    if (fence) {
      const m = FENCE.exec(line);
      if (m && m[1][0] === fence[0] && m[1].length >= fence.length && m[2].trim() === "") fence = null;
    } else {
      if (prevBlank && !blank && !/^\s/.test(line)) boundary = pos;
      const m = FENCE.exec(line);
      if (m && !(m[1][0] === "`" && m[2].includes("`"))) fence = m[1];
    }
    prevBlank = blank && !fence;
    pos = nl + 1;
  }
  // The unfinished last line may start a new block too.
  if (!fence && prevBlank && pos < text.length && !/^\s/.test(text.slice(pos, pos + 1))) {
    boundary = Math.max(boundary, pos);
  }
  return boundary;
}

/**
 * Renders a growing markdown text into `el`. While streaming, text up to the last stable
 * boundary is rendered once per chunk and kept; only the tail is re-rendered on each update.
 * When streaming ends the whole text is rendered once, exactly as a reloaded page shows it.
 */
export class StreamingMarkdown {
  constructor(el) {
    this.el = el;
    this.reset();
  }

  reset() {
    this.el.replaceChildren();
    this.committed = 0; // length of the source rendered into stable chunks
    this.source = ""; // the text last rendered
    this.streaming = null;
    this.tail = null;
  }

  update(text, streaming) {
    text = String(text ?? "");
    streaming = Boolean(streaming);
    if (text === this.source && streaming === this.streaming) return;
    if (!streaming) {
      this.reset();
      this.el.append(markdownFragment(text));
    } else {
      this.#stream(text);
    }
    this.source = text;
    this.streaming = streaming;
  }

  #stream(text) {
    // A text that is not a continuation (a `set` replaced it, or we rendered it complete) starts over.
    if (!this.streaming || !text.startsWith(this.source.slice(0, this.committed)) || !this.tail) {
      this.reset();
      this.tail = this.el.ownerDocument.createElement("div");
      this.tail.className = "ipyagent-md-tail";
      this.el.append(this.tail);
    }
    const boundary = stableBoundary(text, this.committed);
    if (boundary > this.committed) {
      const chunk = this.el.ownerDocument.createElement("div");
      chunk.className = "ipyagent-md-chunk";
      chunk.append(markdownFragment(text.slice(this.committed, boundary)));
      this.tail.before(chunk);
      this.committed = boundary;
    }
    this.tail.replaceChildren(markdownFragment(text.slice(this.committed)));
  }
}
