// Tiny DOM and formatting helpers shared by the views. Text always goes in as text nodes;
// markup only ever comes from markdown.js as a sanitized fragment.

/** Milliseconds on a monotonic clock. */
export const clockNow = () => (typeof performance !== "undefined" ? performance.now() : Date.now());

/**
 * Create an element. `props`: `class`, `data` (an object of data-* attributes), `on` (event
 * handlers), `text` (text content), any other key becomes an attribute (skipped when null/false).
 */
export function h(tag, props = {}, ...children) {
  const el = document.createElement(tag);
  for (const [key, value] of Object.entries(props)) {
    if (value == null || value === false) continue;
    if (key === "class") el.className = value;
    else if (key === "text") el.textContent = String(value);
    else if (key === "data") for (const [k, v] of Object.entries(value)) setData(el, k, v);
    else if (key === "on") for (const [ev, fn] of Object.entries(value)) el.addEventListener(ev, fn);
    else el.setAttribute(key, value === true ? "" : String(value));
  }
  el.append(...children.flat().filter((c) => c != null && c !== false));
  return el;
}

/** Set (or remove, for null/undefined) a data-* attribute, only when it changes. */
export function setData(el, key, value) {
  const attr = `data-${key}`;
  if (value == null) {
    if (el.hasAttribute(attr)) el.removeAttribute(attr);
  } else if (el.getAttribute(attr) !== String(value)) {
    el.setAttribute(attr, String(value));
  }
}

/** Set text content only when it differs (avoids needless layout). */
export function setText(el, text) {
  const value = String(text ?? "");
  if (el.textContent !== value) el.textContent = value;
}

/** "0.4 s", "12 s", "2 min 5 s". */
export function formatDuration(seconds) {
  if (!Number.isFinite(seconds) || seconds < 0) return "";
  if (seconds < 10) return `${seconds.toFixed(1)} s`;
  if (seconds < 60) return `${Math.round(seconds)} s`;
  const minutes = Math.floor(seconds / 60);
  return `${minutes} min ${Math.round(seconds - minutes * 60)} s`;
}

/** 1234 -> "1,234"; locale-independent so screenshots and tests are stable. */
export function formatInt(n) {
  return Number.isFinite(n)
    ? Math.round(n)
        .toString()
        .replace(/\B(?=(\d{3})+(?!\d))/g, ",")
    : "";
}

/** "$0.0123" (more digits for small amounts, which are the usual case). */
export function formatCost(cost) {
  if (!Number.isFinite(cost)) return "";
  if (cost > 0 && cost < 0.0001) return "<$0.0001";
  if (cost === 0 || cost >= 0.1) return `$${cost.toFixed(2)}`;
  return `$${cost.toPrecision(2)}`;
}

/** Shorten to `max` characters with an ellipsis. */
export function truncate(text, max) {
  const s = String(text ?? "");
  return s.length > max ? `${s.slice(0, Math.max(0, max - 1))}…` : s;
}

/**
 * A <details> whose open state follows `wanted` until the user toggles it, then stays as the
 * user left it (a block must not snap shut while someone is reading it). `force` opens or shuts
 * it whatever the user did, and hands it back to `wanted` (a question inside must be seen).
 */
export function controlledDetails(el) {
  let userSet = false;
  let expected = el.open;
  // "toggle" fires asynchronously, after our own changes too: a state we did not set is the user's.
  el.addEventListener("toggle", () => {
    if (el.open !== expected) userSet = true;
  });
  return (wanted, force = false) => {
    if (force) userSet = false;
    if (userSet || el.open === wanted) return;
    expected = wanted;
    el.open = wanted;
  };
}
