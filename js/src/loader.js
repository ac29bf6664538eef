// The small module anywidget loads for every run view and chat (their `_esm`), in place of the
// views' code itself. That code — the runtime: the views, marked, DOMPurify, highlight.js and
// the stylesheet, ~160 KB — is loaded once per page: a view finds it already loaded (a page-global
// registry keyed by the runtime's hash), or waits for the one request in flight, or asks the
// kernel for it (`{action: "runtime"}` on its comm; the kernel answers `{kind: "runtime", hash}`
// with the code as a binary buffer). Views may initialize and render in any order; a reloaded
// page starts with an empty registry and asks again. If no kernel answers (a notebook reopened
// without its kernel), the view shows the text its saved state holds until the runtime comes.
//
// The request is repeated until answered, as the views' hello is: JupyterLab sends a comm's first
// messages on the kernel's main shell until the comm's subshell is ready, and the main shell may
// be busy with the very cell that shows the view. Each repeat goes through the newest view's comm
// (a notebook reopened with its saved widget state has views whose comms no kernel holds; the
// views made since are live). The kernel answers each round of requests of a page once (by the
// page's id and the round's number); a page starts a new round only when a round went
// unanswered and another view comes.
//
// No imports: this file is bundled alone, once per view, and must stay small.

/** Where the runtimes loaded on this page live (one per hash), across every view's module. */
const REGISTRY = Symbol.for("ipyagent.runtimes");
/** When to ask again while no answer came (then wait for a new view); also when to say hello
 * again while the runtime loads. */
export const RETRY_MS = [250, 500, 1000, 2000, 2000, 2000, 2000];
/** After this long without the runtime, show the saved text instead of an empty output. */
export const FALLBACK_AFTER_MS = 1500;

/**
 * The anywidget module of one kind of view ("run" or "chat") that uses runtime `hash`.
 * `options` (tests): scope (holds the registry; globalThis), importCode (code -> module),
 * setTimeout/clearTimeout, document.
 */
export function widget(kind, hash, options = {}) {
  const env = {
    scope: globalThis,
    importCode: importFromBlob,
    setTimeout: (fn, ms) => globalThis.setTimeout(fn, ms),
    clearTimeout: (id) => globalThis.clearTimeout(id),
    document: globalThis.document,
    ...options,
  };
  const loader = () => runtimeLoader(hash, env);
  return {
    initialize({ model }) {
      const onMessage = (msg, buffers) => {
        if (msg && msg.kind === "runtime") loader().receive(msg, buffers);
      };
      model.on("msg:custom", onMessage);
      loader().want(model);
      return () => {
        model.off("msg:custom", onMessage);
        loader().forget(model);
      };
    },

    render({ model, el }) {
      const runtime = loader();
      let cleanup = null;
      let disposed = false;
      const timers = new Set();
      const later = (fn, ms) => {
        const id = env.setTimeout(() => {
          timers.delete(id);
          fn();
        }, ms);
        timers.add(id);
      };
      const stopTimers = () => {
        for (const id of timers) env.clearTimeout(id);
        timers.clear();
      };
      const show = (mod) => {
        if (disposed) return;
        stopTimers();
        cleanup = mod.views[kind].render({ model, el });
      };
      if (runtime.module) {
        show(runtime.module); // the usual case after the first view: synchronous, no flash
      } else {
        // The view is on screen: tell the kernel now (a run that ends before the runtime is
        // here must not write its text again as outputs; a question must wait for the user).
        // The view says hello again itself once it renders.
        const hello = (i) => {
          send(model, { action: "hello" });
          if (i < RETRY_MS.length) later(() => hello(i + 1), RETRY_MS[i]);
        };
        hello(0);
        later(() => {
          if (!cleanup) renderSaved(model, el, env.document);
        }, FALLBACK_AFTER_MS);
        runtime.ready.then(show);
      }
      return () => {
        disposed = true;
        stopTimers();
        if (typeof cleanup === "function") cleanup();
      };
    },
  };
}

/** The page's loader of runtime `hash`, made by the first view that needs it. */
export function runtimeLoader(hash, env) {
  const registry = (env.scope[REGISTRY] ??= new Map());
  let loader = registry.get(hash);
  if (!loader) {
    loader = new RuntimeLoader(hash, env);
    registry.set(hash, loader);
  }
  return loader;
}

/** Send on a model's comm; false when it has none. */
function send(model, msg) {
  try {
    model.send(msg);
    return true;
  } catch (err) {
    console.debug("[ipyagent] could not send", msg, err);
    return false;
  }
}

class RuntimeLoader {
  constructor(hash, env) {
    this.hash = hash;
    this.env = env;
    /** This page, for the kernel: it answers each page once, however often the page asks. */
    this.page = `${Date.now().toString(36)}-${Math.random().toString(36).slice(2)}`;
    this.module = null;
    this.models = []; // models waiting for the runtime, in the order they came
    this.dead = new Set(); // ...of which these have no comm to ask through
    this.round = 0;
    this.tries = 0; // requests in the current round
    this.importing = false;
    this.timer = null;
    /** What this page did (read by the browser tests). */
    this.stats = { requests: 0, answers: 0, bytes: 0, loads: 0 };
    this.ready = new Promise((resolve) => {
      this.resolve = resolve;
    });
  }

  /** A model of this runtime's views exists: it will use the runtime, and can ask for it. */
  want(model) {
    if (this.module) {
      this.module.attach?.(model);
      return;
    }
    if (!this.models.includes(model)) this.models.push(model);
    if (this.timer == null && !this.importing) {
      // A first view, or one after a round that got no answer: a new round, asked now.
      this.round += 1;
      this.tries = 0;
      this.ask();
    }
  }

  forget(model) {
    this.models = this.models.filter((m) => m !== model);
    this.dead.delete(model);
  }

  /** Ask through the newest model that can send; again after each delay of RETRY_MS. */
  ask() {
    this.timer = null;
    if (this.module || this.importing || this.tries > RETRY_MS.length) return;
    const msg = { action: "runtime", hash: this.hash, page: this.page, round: this.round };
    const live = this.models.filter((m) => !this.dead.has(m));
    while (live.length && !send(live.at(-1), msg)) this.dead.add(live.pop());
    if (!live.length) return;
    this.stats.requests += 1;
    this.tries += 1;
    if (this.tries <= RETRY_MS.length) {
      this.timer = this.env.setTimeout(() => this.ask(), RETRY_MS[this.tries - 1]);
    }
  }

  /** The kernel's answer, through any model's comm. Later copies (a second page on the same
   * kernel asked too: the kernel's messages reach every page) are ignored. */
  receive(msg, buffers) {
    const buffer = buffers && buffers[0];
    this.stats.answers += 1;
    this.stats.bytes += buffer ? buffer.byteLength : 0;
    if (this.module || this.importing || !buffer) return;
    if (msg.hash !== this.hash) {
      // A view saved by another version of ipyagent: the kernel's runtime is the one that
      // speaks its protocol, so use it.
      console.debug(`[ipyagent] the kernel sent runtime ${msg.hash}, the view asked for ${this.hash}`);
    }
    this.importing = true;
    if (this.timer != null) this.env.clearTimeout(this.timer);
    const code = new TextDecoder().decode(buffer);
    Promise.resolve()
      .then(() => this.env.importCode(code))
      .then(
        (mod) => {
          this.module = mod;
          this.stats.loads += 1;
          for (const model of this.models) mod.attach?.(model);
          this.models = [];
          this.dead.clear();
          this.resolve(mod);
        },
        (err) => {
          // Asking again would bring the same code: the views keep showing their saved text.
          console.error("[ipyagent] could not load the views' code", err);
        },
      );
  }
}

async function importFromBlob(code) {
  const url = URL.createObjectURL(new Blob([code], { type: "text/javascript" }));
  try {
    return await import(/* webpackIgnore: true */ /* @vite-ignore */ url);
  } finally {
    URL.revokeObjectURL(url);
  }
}

/** Until the runtime comes (or for good, without a kernel): the saved text, as plain text. */
export function renderSaved(model, el, doc) {
  if (!doc) return;
  const state = model.get("state") || {};
  const history = model.get("history");
  const blocks = [...(Array.isArray(history) ? history : []), ...(state.blocks || [])];
  const root = doc.createElement("div");
  root.className = "ipyagent-saved";
  root.style.cssText = "font: inherit; white-space: pre-wrap; overflow-wrap: anywhere";
  const depth = new Map(); // block id -> how many delegate cards hold it
  for (const block of blocks) {
    const parent = block && block.parent != null ? String(block.parent) : null;
    const level = parent !== null && depth.has(parent) ? depth.get(parent) + 1 : 0;
    if (block && block.id != null) depth.set(String(block.id), level);
    // A sub-agent's work is summed up under its card: its calls, not its text (the card's result).
    if (level > 0 && block.kind === "text") continue;
    const text = savedText(block);
    const line = text && "  ".repeat(level) + text;
    if (!line) continue;
    const div = doc.createElement("div");
    div.textContent = line;
    div.style.margin = "0.25em 0";
    root.append(div);
  }
  const note = doc.createElement("div");
  note.textContent = "(ipyagent: the live view appears when the kernel is connected)";
  note.style.cssText = "opacity: 0.6; font-size: 0.85em";
  root.append(note);
  el.replaceChildren(root);
}

function savedText(block) {
  if (!block || typeof block !== "object") return "";
  switch (block.kind) {
    case "user":
      return `> ${block.text ?? ""}`;
    case "text":
    case "warning":
      return String(block.text ?? "");
    case "tool":
      return `→ ${block.name ?? "tool"} (${block.status ?? ""})`;
    case "question":
      return `? ${block.question ?? ""}${block.answer != null ? ` → ${block.answer}` : ""}`;
    case "error":
      return `✗ ${block.message ?? ""}`;
    default:
      return ""; // thinking stays folded away, as in the live view
  }
}
