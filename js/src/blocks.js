// One renderer per block kind. Each is created once per block id and then updated in place with
// the block's latest fields; an update that changes nothing visible touches no DOM. Renderers get
// a `ctx` (the AgentView of common.js): ctx.act(message, pendingKey, blockId) sends an action and
// ctx.pending(key) says whether it is still in flight (its buttons stay disabled until the kernel
// answers).

import { controlledDetails, formatDuration, formatInt, h, setData, setText, truncate } from "./dom.js";
import { markClaims, unmarkClaims } from "./claims.js";
import { StreamingMarkdown } from "./dom_sink.js";
import { highlightHtml, markdownFragment, sanitizedFragment } from "./markdown.js";

/** The longest tool result shown in full; beyond this the view offers the rest on demand. */
const RESULT_PREVIEW_CHARS = 20_000;

/** Create the renderer for a block: `{ el, update(block) }`. */
export function createBlockView(block, ctx) {
  const make = RENDERERS[block.kind] ?? unknownBlock;
  const view = make(block, ctx);
  view.el.classList.add("ipyagent-block");
  setData(view.el, "kind", block.kind);
  setData(view.el, "id", block.id);
  return view;
}

const RENDERERS = {
  user: userBlock,
  text: textBlock,
  thinking: thinkingBlock,
  tool: toolBlock,
  question: questionBlock,
  warning: warningBlock,
  error: errorBlock,
  attachment: attachmentBlock,
};

function userBlock() {
  const text = h("div", { class: "ipyagent-user-text" });
  const el = h("div", { class: "ipyagent-user" }, text);
  return { el, update: (b) => setText(text, b.text) };
}

function textBlock() {
  const body = h("div", { class: "ipyagent-md jp-RenderedHTMLCommon" });
  const md = new StreamingMarkdown(body);
  const el = h("div", { class: "ipyagent-text" }, body);
  let marked = null; // the text and claims the marks were made for
  return {
    el,
    update(b, appended) {
      setData(el, "streaming", b.streaming ? "true" : null);
      md.update(b.text, b.streaming, appended?.get("text"));
      // A run's claims arrive as it ends, on finished text: mark them once (again only if the
      // text or the claims change, which re-renders or re-marks).
      if (b.streaming || (!b.claims?.length && !marked)) return;
      const claims = JSON.stringify(b.claims ?? []);
      if (marked && marked.text === b.text && marked.claims === claims) return;
      unmarkClaims(body);
      markClaims(body, b.claims ?? []);
      marked = { text: b.text, claims };
    },
  };
}

function thinkingBlock() {
  const label = h("span", { class: "ipyagent-thinking-label" });
  const body = h("div", { class: "ipyagent-md jp-RenderedHTMLCommon" });
  const el = h("details", { class: "ipyagent-thinking", open: true }, h("summary", {}, label), body);
  const md = new StreamingMarkdown(body);
  const setOpen = controlledDetails(el);
  return {
    el,
    update(b, appended) {
      setData(el, "streaming", b.streaming ? "true" : null);
      const took = formatDuration(b.duration);
      setText(label, b.streaming ? "Thinking…" : took ? `Thought for ${took}` : "Thought");
      setOpen(Boolean(b.streaming));
      md.update(b.text, b.streaming, appended?.get("text"));
    },
  };
}

const TOOL_STATUS_TEXT = {
  streaming: "preparing…",
  waiting: "needs permission",
  running: "running…",
  done: "done",
  failed: "failed",
  denied: "denied",
  stopped: "stopped",
};

function toolBlock(block, ctx) {
  const label = h("code", { class: "ipyagent-tool-label" });
  const badge = h("span", { class: "ipyagent-badge" });
  const duration = h("span", { class: "ipyagent-duration" });
  const argsCode = h("div", { class: "ipyagent-tool-args-body" });
  const args = h("details", { class: "ipyagent-tool-args" }, h("summary", { text: "Arguments" }), argsCode);
  const permission = h("div", { class: "ipyagent-permission", hidden: true });
  const resultSummary = h("summary");
  const resultBody = h("div", { class: "ipyagent-tool-result-body" });
  const result = h("details", { class: "ipyagent-tool-result", hidden: true }, resultSummary, resultBody);
  const display = h("div", { class: "ipyagent-tool-display" });
  // A delegate call's sub-agent: its work (the blocks whose parent is this card, placed in
  // `children` by the view) under a summary line; open while it works, folded once it is done.
  const subagentLabel = h("span", { class: "ipyagent-subagent-label" });
  const children = h("div", { class: "ipyagent-subagent-blocks" });
  const subagent = h(
    "details",
    { class: "ipyagent-subagent", hidden: true, open: true },
    h("summary", {}, subagentLabel),
    children,
  );
  const head = h("div", { class: "ipyagent-tool-head" }, label, badge, duration);
  const el = h("div", { class: "ipyagent-tool" }, head, args, permission, subagent, result, display);
  const setArgsOpen = controlledDetails(args);
  const setResultOpen = controlledDetails(result);
  const setSubagentOpen = controlledDetails(subagent);
  const argsView = streamingText(argsCode);
  let last = {};

  return {
    el,
    children,
    /** Open the sub-agent's section: something in it waits for the user. */
    reveal: () => setSubagentOpen(true, true),
    update(b) {
      const status = String(b.status ?? "running");
      const streaming = status === "streaming";
      setData(el, "status", status);
      setData(badge, "status", status);
      setText(badge, TOOL_STATUS_TEXT[status] ?? status);
      setText(duration, formatDuration(b.duration));
      setText(label, `${b.name ?? "tool"}(${summarizeArgs(b.args, streaming)})`);
      setArgsOpen(streaming || status === "waiting" || Boolean(b.permission));
      if (b.args !== last.args || streaming !== last.streaming) argsView(b.args ?? "", streaming);
      const busy = ctx.pending(`permission:${b.id}`);
      if (b.permission !== last.permission || busy !== last.busy) renderPermission(permission, b, busy, ctx);
      if (b.result !== last.result) renderResult(result, resultSummary, resultBody, b.result);
      setResultOpen(status === "failed");
      if (b.display !== last.display) renderDisplays(display, b.display);
      const child = b.child && typeof b.child === "object" ? b.child : null;
      subagent.hidden = !child;
      if (child) {
        setData(subagent, "status", child.status);
        setText(subagentLabel, subagentSummary(child));
        subagent.title = child.session ? `Saved in ${child.session}` : "";
        setSubagentOpen(child.status === "running");
      }
      last = {
        args: b.args,
        streaming,
        permission: b.permission,
        busy,
        result: b.result,
        display: b.display,
      };
    },
  };
}

/** Whether a block waits for the user: a permission prompt, or a question not yet answered. */
export function awaitsUser(block) {
  if (!block || typeof block !== "object") return false;
  if (block.kind === "tool") return Boolean(block.permission);
  return block.kind === "question" && (block.answer === null || block.answer === undefined);
}

const SUBAGENT_STATUS_TEXT = {
  running: "working…",
  completed: "done",
  failed: "failed",
  cancelled: "stopped",
  exhausted: "stopped: limit reached",
};

/** The summary line of a delegate card's sub-agent: "Sub-agent · done · model · 1,200 in · 80 out". */
export function subagentSummary(child) {
  if (!child || typeof child !== "object") return "";
  const parts = ["Sub-agent", SUBAGENT_STATUS_TEXT[child.status] ?? String(child.status ?? "")];
  if (child.model) parts.push(String(child.model));
  const usage = child.usage;
  if (usage && (Number.isFinite(usage.input) || Number.isFinite(usage.output))) {
    parts.push(`${formatInt(usage.input ?? 0)} in · ${formatInt(usage.output ?? 0)} out`);
  }
  return parts.filter(Boolean).join(" · ");
}

/**
 * Shows tool arguments: while they stream, as raw text grown by appending only the new part
 * (partial JSON cannot be parsed and a big argument must not be re-laid out per frame); once
 * complete, pretty-printed and highlighted.
 */
function streamingText(container) {
  let shown = "";
  let raw = null;
  return (text, streaming) => {
    if (!streaming) {
      container.replaceChildren(formatArgs(text));
      raw = null;
      shown = text;
      return;
    }
    if (!raw || !text.startsWith(shown)) {
      raw = h("pre", { class: "ipyagent-code ipyagent-raw" });
      container.replaceChildren(raw);
      shown = "";
    }
    if (text.length > shown.length) raw.append(text.slice(shown.length));
    shown = text;
  };
}

/** Code-like string arguments (code, command, query) get their own highlighted block. */
const CODE_ARGS = {
  code: "python",
  source: "python",
  command: "bash",
  cmd: "bash",
  script: "bash",
  sql: "sql",
  query: "sql",
};

function formatArgs(text) {
  const parsed = parseJson(text);
  if (parsed === undefined) return codeBlock(text, "");
  if (!parsed || typeof parsed !== "object" || Array.isArray(parsed)) {
    return codeBlock(JSON.stringify(parsed, null, 2), "json");
  }
  const frag = document.createDocumentFragment();
  const rest = {};
  for (const [key, value] of Object.entries(parsed)) {
    if (typeof value === "string" && (key in CODE_ARGS || value.includes("\n"))) {
      frag.append(
        h("div", { class: "ipyagent-arg-name", text: key }),
        codeBlock(value, CODE_ARGS[key] ?? ""),
      );
    } else {
      rest[key] = value;
    }
  }
  if (Object.keys(rest).length) frag.prepend(codeBlock(JSON.stringify(rest, null, 2), "json"));
  return frag;
}

function codeBlock(code, lang) {
  const el = h("code", { class: `hljs${lang ? ` language-${lang}` : ""}` });
  el.append(sanitizedFragment(highlightHtml(code, lang)));
  return h("pre", { class: "ipyagent-code" }, el);
}

function parseJson(text) {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

/** The `args…` part of the `name(args…)` label. */
export function summarizeArgs(text, streaming) {
  const raw = String(text ?? "");
  const parsed = streaming ? undefined : parseJson(raw);
  if (parsed && typeof parsed === "object" && !Array.isArray(parsed)) {
    const parts = Object.entries(parsed).map(([k, v]) => `${k}=${truncate(JSON.stringify(v), 40)}`);
    return truncate(parts.join(", "), 80);
  }
  // Only the start can show: never scan a long argument that is still streaming in.
  const compact = raw.slice(0, 200).replace(/\s+/g, " ").trim();
  return streaming && compact ? `${truncate(compact, 60)}…` : truncate(compact, 80);
}

function renderPermission(container, b, busy, ctx) {
  const waiting = Boolean(b.permission);
  container.hidden = !waiting;
  if (!waiting) {
    container.replaceChildren();
    return;
  }
  const key = `permission:${b.id}`;
  const choice = (decision, text, title) =>
    h("button", {
      class: `ipyagent-button ipyagent-${decision}`,
      type: "button",
      title,
      disabled: busy,
      data: { action: decision, id: b.id },
      text,
      on: { click: () => ctx.act({ action: "permission", id: b.id, decision }, key, b.id) },
    });
  // A call that would change a control file is asked every time, so "Always" would promise
  // what the agent does not do: it is not offered, and the reason is shown with the question.
  const caution = b.caution
    ? [h("div", { class: "ipyagent-permission-caution", role: "alert", text: b.caution })]
    : [];
  container.replaceChildren(
    ...caution,
    h("span", { class: "ipyagent-permission-text", text: `Allow ${b.name ?? "this tool"} to run?` }),
    choice("allow", "Allow once", "Run this call"),
    ...(b.caution
      ? []
      : [choice("always", "Always", `Allow ${b.name ?? "this tool"} for the rest of the session`)]),
    choice("deny", "Deny", "Do not run it; the model is told it was denied"),
  );
}

function renderResult(details, summary, body, text) {
  const has = text != null && text !== "";
  details.hidden = !has;
  if (!has) {
    body.replaceChildren();
    return;
  }
  const s = String(text);
  const lines = s.split("\n").length;
  setText(summary, `Result · ${lines} line${lines === 1 ? "" : "s"}`);
  const pre = h("pre", { class: "ipyagent-code ipyagent-result", text: s.slice(0, RESULT_PREVIEW_CHARS) });
  if (s.length <= RESULT_PREVIEW_CHARS) {
    body.replaceChildren(pre);
    return;
  }
  const more = h("button", {
    class: "ipyagent-button ipyagent-link",
    type: "button",
    data: { action: "more" },
    text: `Show ${s.length - RESULT_PREVIEW_CHARS} more characters`,
    on: {
      click: () => {
        pre.textContent = s;
        more.remove();
      },
    },
  });
  body.replaceChildren(pre, more);
}

/** Image MIME types shown as <img>; SVG goes through an <img> too, where scripts cannot run. */
const IMAGE_TYPES = ["image/png", "image/jpeg", "image/gif", "image/webp"];

function renderDisplays(container, displays) {
  const items = Array.isArray(displays) ? displays : [];
  container.replaceChildren(...items.map(displayItem).filter(Boolean));
}

/** One MIME bundle, richest representation first (as Jupyter picks). */
export function displayItem(bundle) {
  if (!bundle || typeof bundle !== "object") return null;
  for (const type of IMAGE_TYPES) {
    if (typeof bundle[type] === "string") {
      const src = `data:${type};base64,${bundle[type].replace(/\s+/g, "")}`;
      return h("img", { class: "ipyagent-display-img", src, alt: bundle["text/plain"] ?? type });
    }
  }
  if (typeof bundle["image/svg+xml"] === "string") {
    const src = `data:image/svg+xml;charset=utf-8,${encodeURIComponent(bundle["image/svg+xml"])}`;
    return h("img", { class: "ipyagent-display-img", src, alt: "SVG image" });
  }
  if (typeof bundle["text/html"] === "string") {
    const el = h("div", { class: "ipyagent-display-html jp-RenderedHTMLCommon" });
    el.append(sanitizedFragment(bundle["text/html"]));
    return el;
  }
  if (typeof bundle["text/markdown"] === "string") {
    const el = h("div", { class: "ipyagent-md jp-RenderedHTMLCommon" });
    el.append(markdownFragment(bundle["text/markdown"]));
    return el;
  }
  if (typeof bundle["text/plain"] === "string") {
    return h("pre", { class: "ipyagent-code ipyagent-display-text", text: bundle["text/plain"] });
  }
  return null;
}

function questionBlock(block, ctx) {
  const question = h("div", { class: "ipyagent-question-text ipyagent-md jp-RenderedHTMLCommon" });
  // Typing an answer must not trigger JupyterLab's notebook shortcuts ("a", "b", "dd"...).
  const controls = h("div", { class: "ipyagent-question-controls", "data-lm-suppress-shortcuts": "true" });
  const el = h("div", { class: "ipyagent-question" }, question, controls);
  let lastQuestion = null;
  let lastControls = null;
  return {
    el,
    update(b) {
      if (b.question !== lastQuestion) {
        question.replaceChildren(markdownFragment(b.question ?? ""));
        lastQuestion = b.question;
      }
      const answered = b.answer !== null && b.answer !== undefined;
      setData(el, "answered", answered ? "true" : null);
      const busy = ctx.pending(`answer:${b.id}`);
      // Rebuild the controls only when they would look different, so typing is not interrupted.
      const key = JSON.stringify(answered ? ["answer", b.answer] : [b.choices ?? [], busy]);
      if (key === lastControls) return;
      lastControls = key;
      if (answered) controls.replaceChildren(h("div", { class: "ipyagent-answer", text: `↳ ${b.answer}` }));
      else renderQuestionControls(controls, b, busy, ctx);
    },
  };
}

function renderQuestionControls(controls, b, busy, ctx) {
  const typed = controls.querySelector("input")?.value ?? "";
  const answer = (value) => ctx.act({ action: "answer", id: b.id, answer: value }, `answer:${b.id}`, b.id);
  const choices = Array.isArray(b.choices) ? b.choices : [];
  const input = h("input", {
    class: "ipyagent-answer-input",
    type: "text",
    value: typed || null,
    disabled: busy,
    placeholder: choices.length ? "Or type an answer…" : "Type an answer…",
    data: { role: "answer" },
    on: {
      keydown: (e) => {
        if (e.key === "Enter" && !e.isComposing && input.value.trim()) answer(input.value);
      },
    },
  });
  const button = (props, text, onClick) =>
    h("button", {
      class: "ipyagent-button",
      type: "button",
      disabled: busy,
      ...props,
      text,
      on: { click: onClick },
    });
  controls.replaceChildren(
    ...choices.map((c, i) =>
      button({ data: { action: "answer", choice: i } }, String(c), () => answer(String(c))),
    ),
    input,
    button(
      { data: { action: "answer", choice: "text" } },
      "Answer",
      () => input.value.trim() && answer(input.value),
    ),
    button({ class: "ipyagent-button ipyagent-secondary", data: { action: "decline" } }, "Skip", () =>
      answer(null),
    ),
  );
}

/** What went to the model with the prompt (the notebook's context, a mentioned variable, a
 * file): folded, with its size; opened, the text as sent. */
function attachmentBlock() {
  const summary = h("summary", { class: "ipyagent-attachment-label" });
  const body = h("pre", { class: "ipyagent-code ipyagent-attachment-text" });
  const el = h("details", { class: "ipyagent-attachment" }, summary, body);
  return {
    el,
    update(b) {
      const tokens = Number.isFinite(b.tokens) ? ` · ~${formatInt(b.tokens)} tokens` : "";
      setText(summary, `Sent with the prompt: ${b.label ?? "attachment"}${tokens}`);
      setText(body, b.text ?? "");
      body.hidden = !b.text;
    },
  };
}

function warningBlock() {
  const text = h("span", { class: "ipyagent-warning-text" });
  const hint = h("div", { class: "ipyagent-warning-hint" });
  const el = h(
    "div",
    { class: "ipyagent-warning", role: "status" },
    h("span", { class: "ipyagent-icon", text: "⚠" }),
    h("div", {}, text, hint),
  );
  return {
    el,
    update(b) {
      setText(text, b.text);
      setText(hint, b.hint ?? "");
      hint.hidden = !b.hint;
    },
  };
}

function errorBlock() {
  const code = h("code", { class: "ipyagent-error-code" });
  const message = h("span", { class: "ipyagent-error-message" });
  const hint = h("div", { class: "ipyagent-error-hint" });
  const el = h("div", { class: "ipyagent-error", role: "alert" }, h("div", {}, code, message), hint);
  return {
    el,
    update(b) {
      setText(code, b.code ?? "");
      code.hidden = !b.code;
      setText(message, b.message ?? "Error");
      setText(hint, b.hint ?? "");
      hint.hidden = !b.hint;
      setData(el, "retryable", b.retryable ? "true" : null);
    },
  };
}

function unknownBlock(block) {
  const el = h("div", { class: "ipyagent-unknown" });
  return { el, update: (b) => setText(el, b.text ?? `(${block.kind})`) };
}
