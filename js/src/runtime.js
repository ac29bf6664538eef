// The runtime: everything the views need (the run view, the chat, marked, DOMPurify, highlight.js
// and the stylesheet), loaded once per page by loader.js — never sent with each view.

import { AgentView } from "./common.js";
import chatView from "./chat_view.js";

/** The stylesheet (js/src/*.css), put in by js/build.mjs. */
const CSS = typeof __IPYAGENT_CSS__ === "string" ? __IPYAGENT_CSS__ : "";
const STYLE_ID = "ipyagent-style";

const runView = {
  render({ model, el }) {
    const view = new AgentView(model, el, { kind: "run" });
    return () => view.destroy();
  },
};

/** The anywidget view objects, by kind; each puts the stylesheet where it renders first. */
export const views = {
  run: withStyle(runView),
  chat: withStyle(chatView),
};

function withStyle(view) {
  return {
    render(props) {
      setup(styleRoot(props.el));
      return view.render(props);
    },
  };
}

/** Where a view's styles go: its shadow root if it has one, else the page. */
function styleRoot(el) {
  const root = el?.getRootNode?.();
  if (root && typeof ShadowRoot === "function" && root instanceof ShadowRoot) return root;
  return el?.ownerDocument ?? globalThis.document;
}

/** Put the stylesheet into `root` (a document or a shadow root), once. */
export function setup(root) {
  if (!root || !CSS) return;
  const doc = root.ownerDocument ?? root;
  let style = root.getElementById?.(STYLE_ID) ?? null;
  if (!style) {
    style = doc.createElement("style");
    style.id = STYLE_ID;
    (root.head ?? root).append(style);
  }
  if (style.textContent !== CSS) style.textContent = CSS;
}
