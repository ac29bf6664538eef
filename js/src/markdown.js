// Markdown, sanitizing and highlighting. Model output is untrusted HTML: everything that becomes
// markup goes through DOMPurify and comes back as a DocumentFragment, so no caller ever assigns
// innerHTML. The pieces streaming needs (a list item, a paragraph's inline HTML, a stretch of
// highlighted code) are rendered here too, by the same marked instance, so they join into
// exactly what rendering the whole text gives (stream.js, dom_sink.js).

import DOMPurify from "dompurify";
import hljs from "highlight.js/lib/core";
import bash from "highlight.js/lib/languages/bash";
import json from "highlight.js/lib/languages/json";
import python from "highlight.js/lib/languages/python";
import sql from "highlight.js/lib/languages/sql";
import { Marked } from "marked";
import { splitBlocks } from "./parts.js";

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
  // Once, not per call: a streaming view sanitizes many small pieces, and parsing the options
  // again for each is a good part of the cost. (This bundle's DOMPurify is its own.)
  DOMPurify.setConfig(PURIFY_OPTIONS);
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
  return DOMPurify.sanitize(String(html));
}

/** A sanitized DocumentFragment for markdown source, its big blocks in parts (parts.js). */
export function markdownFragment(src) {
  return splitBlocks(sanitizedFragment(marked.parse(String(src))));
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

/** marked's inline HTML for a paragraph's text (or a piece of it). */
export function inlineHtml(src) {
  return marked.parseInline(String(src));
}

/**
 * What the inline markup of `src` (a piece of a paragraph that ends with a space) leaves open for
 * text after it, and what in it might close something left open before it. marked matches an
 * emphasis, code span or link opener with what follows it, so a piece can be rendered on its own
 * only if nothing across its ends would match:
 *   blocked: an HTML element left open, or text that may become a tag (never cut after it);
 *   opens:   delimiters left unmatched that text after may still close ("*", "_", "~", "`", "[");
 *   lastOpen: where the last of those is in `src` (-1: none);
 *   closes:  delimiters that may close one left open before ("*", "_", "~", "`", "]").
 * Conservative: a run that cannot open or close by CommonMark's rules may count too.
 */
export function inlineScan(src) {
  const scan = { blocked: false, opens: "", lastOpen: -1, closes: "" };
  const add = (key, chars) => {
    for (const c of chars) if (!scan[key].includes(c)) scan[key] += c;
  };
  const open = (c, at) => {
    add("opens", c);
    scan.lastOpen = Math.max(scan.lastOpen, at);
  };
  const tags = []; // HTML elements open at this point
  let offset = 0;
  for (const token of marked.Lexer.lexInline(String(src), marked.defaults)) {
    const raw = token.raw;
    const at = offset;
    offset += raw.length;
    if (token.type === "html") {
      const m = /^<(\/?)([A-Za-z][\w-]*)[^>]*?(\/?)>$/.exec(raw);
      if (!m) continue; // a comment, a processing instruction: complete in itself
      const name = m[2].toLowerCase();
      if (m[1]) {
        if (tags.at(-1) === name) tags.pop();
        else scan.blocked = true;
      } else if (!m[3] && !VOID_TAGS.has(name)) {
        tags.push(name);
      }
    }
    if (token.type === "text" && /<[A-Za-z/!?]/.test(raw)) scan.blocked = true; // may become a tag
    if (raw.includes("`")) add("closes", "`");
    if (raw.includes("]")) add("closes", "]");
    if (token.type !== "text") continue;
    if (raw.includes("`")) open("`", at + raw.lastIndexOf("`"));
    if (raw.includes("[")) open("[", at + raw.lastIndexOf("["));
    for (const m of raw.matchAll(/[*_~]+/g)) {
      const before = raw[m.index - 1] ?? "";
      const after = raw[m.index + m[0].length] ?? "x"; // the token's end: may be followed by text
      const c = m[0][0];
      if (/\S/.test(after) && !(c === "_" && /[\p{L}\p{N}]/u.test(before))) open(c, at + m.index);
      if (before === "" || /\S/.test(before)) add("closes", c);
    }
  }
  if (tags.length) scan.blocked = true;
  return scan;
}

const VOID_TAGS = new Set("area base br col embed hr img input link meta source track wbr".split(" "));

/** What marked renders a list item's content into (inside its <li>): lexed as an item's content
 * is, its paragraphs as bare text, or as paragraphs where the list is `loose`. */
export function itemBodyHtml(src, loose) {
  const lexer = new marked.Lexer(marked.defaults);
  lexer.state.top = false;
  const tokens = lexer.blockTokens(String(src), []);
  for (const next of lexer.inlineQueue) {
    lexer.state.inRawBlock = false;
    lexer.inlineTokens(next.src, next.tokens);
  }
  if (loose) for (const t of tokens) if (t.type === "text") t.type = "paragraph";
  return marked.parser(tokens);
}

/** The `<ul>`/`<ol>` around a list's items, empty: its attributes come from the list token. */
export function listShellHtml(list) {
  const html = marked.parser([{ ...list, items: [] }]);
  return html;
}

/** One item of a list (a list_item token), as `<li>…</li>\n`; `loose` as the whole list is. */
export function listItemHtml(list, item, loose) {
  const html = marked.parser([{ ...list, loose, items: [loose ? loosen(item) : item] }]);
  return html.slice(html.indexOf("\n") + 1, html.lastIndexOf("</"));
}

/** A tight list's item as marked's lexer makes it in a loose list: its text in paragraphs, a task's
 * checkbox inside the first one. */
function loosen(item) {
  let tokens = item.tokens;
  if (item.loose) return item;
  if (tokens[0]?.type === "checkbox") {
    const [box, next, ...rest] = tokens;
    const first =
      next && ["paragraph", "text"].includes(next.type) && next.tokens
        ? { ...next, raw: box.raw + next.raw, text: box.raw + next.text, tokens: [box, ...next.tokens] }
        : null;
    tokens = first
      ? [first, ...rest]
      : [{ type: "paragraph", raw: box.raw, text: box.raw, tokens: [box] }, ...tokens.slice(1)];
  }
  tokens = tokens.map((t) => (t.type === "text" ? { ...t, type: "paragraph" } : t));
  return { ...item, loose: true, tokens };
}
