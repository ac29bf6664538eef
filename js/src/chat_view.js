// The chat widget: the shared view shell (a scrolling transcript) plus an input bar — a text box
// (Enter sends, Shift+Enter makes a new line), Attach, Send, Stop, a model picker and "New
// conversation".

import { AttachmentTray } from "./attach.js";
import { AgentView } from "./common.js";
import { h, setText } from "./dom.js";

export default {
  render({ model, el }) {
    let composer = null;
    const view = new AgentView(model, el, {
      kind: "chat",
      footerStop: false,
      scroll: true,
      onRender: (state) => composer?.update(state),
    });
    composer = buildComposer(view, model);
    view.root.append(composer.el);
    composer.update(view.store.state);
    const onModels = () => composer.setModels(model.get("models"));
    model.on("change:models", onModels);
    return () => {
      model.off("change:models", onModels);
      view.destroy();
    };
  },
};

function buildComposer(view, model) {
  const input = h("textarea", {
    class: "ipyagent-input",
    rows: 2,
    placeholder: "Ask the agent…  (Enter to send, Shift+Enter for a new line)",
    "aria-label": "Message",
    data: { role: "input" },
  });
  const send = button("send", "Send", "ipyagent-primary");
  const stop = button("stop", "Stop", "ipyagent-stop");
  const fresh = button("new", "New conversation", "ipyagent-secondary");
  const picker = modelPicker((name) => view.act({ action: "model", model: name }));
  const tray = new AttachmentTray(() => update(state));
  // JupyterLab ignores its keyboard shortcuts inside this attribute, so typing "a" or pressing
  // Shift+Enter here edits the message instead of inserting or running cells.
  const el = h(
    "div",
    { class: "ipyagent-composer", "data-lm-suppress-shortcuts": "true" },
    tray.el,
    input,
    h(
      "div",
      { class: "ipyagent-composer-bar" },
      picker.el,
      fresh,
      tray.button,
      h("span", { class: "ipyagent-spacer" }),
      stop,
      send,
    ),
  );
  let state = view.store.state;

  tray.listen(el);
  let reading = false;

  // Sending while a run is in flight is allowed: the kernel joins the message to that run.
  const submit = async () => {
    const text = input.value;
    if (!text.trim() || view.pending("send") || reading) return;
    reading = true; // the files' bytes are read before the message goes
    update(state);
    try {
      const files = await tray.take();
      view.act({ action: "send", text, files: files.meta }, "send", null, files.buffers);
      input.value = "";
    } finally {
      reading = false;
      update(state);
    }
  };
  input.addEventListener("keydown", (e) => {
    if (e.key !== "Enter" || e.isComposing) return;
    e.preventDefault();
    if (e.shiftKey) insertNewline(input);
    else submit();
  });
  input.addEventListener("input", () => update(state));
  send.addEventListener("click", submit);
  stop.addEventListener("click", () => view.act({ action: "stop" }, "stop"));
  fresh.addEventListener("click", () => view.act({ action: "new" }));

  function update(next) {
    state = next;
    stop.hidden = state.status !== "running";
    stop.disabled = view.pending("stop");
    setText(stop, view.pending("stop") ? "Stopping…" : "Stop");
    send.disabled = view.pending("send") || reading || !input.value.trim();
    picker.setCurrent(state.model);
  }

  picker.setModels(model.get("models"));
  return { el, update, setModels: (models) => picker.setModels(models) };
}

/**
 * Shift+Enter inserts the line break itself: inside a notebook cell JupyterLab 4 cancels the
 * browser's own line break (its "insertLineBreak" guard, meant for Shift+Enter = run cell).
 * execCommand keeps the browser's undo history; setRangeText is the fallback.
 */
function insertNewline(textarea) {
  const doc = textarea.ownerDocument;
  if (typeof doc.execCommand === "function" && doc.execCommand("insertText", false, "\n")) return;
  textarea.setRangeText("\n", textarea.selectionStart, textarea.selectionEnd, "end");
  textarea.dispatchEvent(new Event("input", { bubbles: true }));
}

function button(action, text, extraClass) {
  return h("button", { class: `ipyagent-button ${extraClass}`, type: "button", data: { action }, text });
}

/**
 * A <select> over the `models` trait when the kernel offers a list, else a free text box (commit
 * with Enter or by leaving it). The kernel's current model always shows, listed or not.
 */
function modelPicker(onPick) {
  const el = h("span", { class: "ipyagent-model-picker" });
  let control = null;
  let models = [];
  let current = "";

  function build() {
    if (models.length) {
      control = h("select", { "aria-label": "Model", data: { role: "model" } });
      const names = models.includes(current) || !current ? models : [current, ...models];
      control.append(...names.map((name) => h("option", { value: name, text: name })));
      control.value = current;
      control.addEventListener("change", () => onPick(control.value));
    } else {
      control = h("input", {
        type: "text",
        "aria-label": "Model",
        placeholder: "model",
        data: { role: "model" },
      });
      control.value = current;
      const commit = () => {
        const name = control.value.trim();
        if (name && name !== current) onPick(name);
      };
      control.addEventListener("change", commit);
      control.addEventListener("keydown", (e) => {
        if (e.key === "Enter" && !e.isComposing) commit();
      });
    }
    el.replaceChildren(control);
  }

  return {
    el,
    setModels(list) {
      const next = (Array.isArray(list) ? list : []).map(modelName).filter(Boolean);
      if (JSON.stringify(next) === JSON.stringify(models) && control) return;
      models = next;
      build();
    },
    /** Show the kernel's model. Also puts back a choice the kernel refused (it keeps its model and
     * shows an error), except in a text box the user is typing into. */
    setCurrent(name) {
      current = typeof name === "string" ? name : "";
      if (!control || control.value === current) return; // built by the first setModels
      if (control.tagName === "INPUT" && control.ownerDocument.activeElement === control) return;
      if (models.length && !models.includes(current) && current) build();
      else control.value = current;
    },
  };
}

/** `models` entries may be names or objects with a name/id. */
function modelName(entry) {
  if (typeof entry === "string") return entry;
  if (entry && typeof entry === "object") return String(entry.name ?? entry.id ?? "");
  return "";
}
