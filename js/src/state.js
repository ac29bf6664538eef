// View state and patch application (docs/widget-protocol.md), with no DOM: the kernel is the only
// place that turns agent events into state; this module only folds the kernel's patches into a
// local copy and records what changed, so the renderer can redraw just those blocks.

/** Top-level fields a `top` patch may not touch: they belong to the patch machinery itself. */
const RESERVED_TOP = new Set(["seq", "blocks"]);

/** A fresh record of what a batch of patches changed (see Store.takeChanges). `appended` keeps
 * what `append` patches added, block id -> field -> pieces in order, so that a view can take in
 * just those (reading a long streamed string whole copies it; see growing_text.js); null for a
 * block or field given a new value in the batch. `onlyAppends`: true when `append` patches, and
 * nothing else, changed something (streaming text grew: a view may wait a little to draw it),
 * false when anything else did, null while nothing has. */
export function emptyChanges() {
  return { blocks: new Set(), structure: false, top: false, appended: new Map(), onlyAppends: null };
}

/** A well-formed private copy of a `state` trait value (the trait object itself is never mutated:
 * it is shared by every view of the model and saved with the notebook). */
export function normalizeState(raw) {
  const src = raw && typeof raw === "object" ? raw : {};
  const state =
    typeof structuredClone === "function" ? structuredClone(src) : JSON.parse(JSON.stringify(src));
  state.seq = Number.isFinite(state.seq) ? state.seq : 0;
  state.status = typeof state.status === "string" ? state.status : "idle";
  state.blocks = Array.isArray(state.blocks) ? state.blocks.filter(isBlock) : [];
  state.usage = state.usage && typeof state.usage === "object" ? state.usage : {};
  return state;
}

/**
 * Where each block is drawn: `[block, parentId]` in list order, `parentId` being the id of the
 * delegate card that holds a sub-agent's block (its `parent`), or null for the view's own
 * blocks. A block whose parent is not an earlier block of the list is drawn at the top level, so
 * nothing is ever lost from sight.
 */
export function placements(blocks) {
  const seen = new Set();
  const out = [];
  for (const block of blocks) {
    const parent = block.parent == null ? null : String(block.parent);
    out.push([block, parent !== null && seen.has(parent) ? parent : null]);
    seen.add(String(block.id));
  }
  return out;
}

function isBlock(b) {
  return b && typeof b === "object" && b.id != null && typeof b.kind === "string";
}

/**
 * Holds one view's state and applies `patches` messages to it.
 *
 * Sequencing: a message `{kind: "patches", seq: N, patches}` is applied whole when N is greater
 * than state.seq, and then state.seq becomes N; otherwise it is ignored. If the individual
 * patches carry their own numeric `seq`, each is filtered on its own instead. Either way a
 * message that the `state` trait already contains is dropped, whatever N counts (messages, or
 * the first or last patch of the batch), as long as the kernel writes the trait between batches.
 */
export class Store {
  constructor(rawState) {
    this.replace(rawState);
  }

  /** Replace the whole state (the `state` trait changed). Everything is marked dirty. */
  replace(rawState) {
    this.state = normalizeState(rawState);
    this.index = new Map(this.state.blocks.map((b) => [String(b.id), b]));
    this.changes = emptyChanges();
    this.changes.structure = true;
    this.changes.top = true;
    this.changes.onlyAppends = false;
    for (const id of this.index.keys()) {
      this.changes.blocks.add(id);
      this.changes.appended.set(id, null); // new values: whatever streamed before is not their start
    }
  }

  /** Fold one custom message in. Returns true if it changed anything. */
  applyMessage(msg) {
    if (!msg || msg.kind !== "patches" || !Array.isArray(msg.patches)) return false;
    const seq = Number(msg.seq);
    const perPatch = msg.patches.some((p) => p && Number.isFinite(p.seq));
    if (!perPatch) {
      if (!Number.isFinite(seq) || seq <= this.state.seq) return false;
      msg.patches.forEach((p) => this.applyPatch(p));
      this.state.seq = seq;
      return true;
    }
    let applied = false;
    for (const p of msg.patches) {
      if (!p || !Number.isFinite(p.seq) || p.seq <= this.state.seq) continue;
      this.applyPatch(p);
      this.state.seq = p.seq;
      applied = true;
    }
    return applied;
  }

  /** Apply one patch op. Unknown ops and unknown block ids are ignored: a view that missed a
   * message must keep working, and the final `state` trait repairs it when the run ends. */
  applyPatch(patch) {
    if (!patch || typeof patch !== "object") return;
    this.changes.onlyAppends = patch.op === "append" && this.changes.onlyAppends !== false;
    switch (patch.op) {
      case "add":
        return this.#add(patch.block);
      case "append":
        return this.#append(patch.id, patch.field, patch.value);
      case "set":
        return this.#set(patch.id, patch.fields);
      case "remove":
        return this.#remove(patch.id);
      case "top":
        return this.#top(patch.fields);
      default:
        return undefined;
    }
  }

  /** What changed since the last call; resets the record. */
  takeChanges() {
    const changes = this.changes;
    this.changes = emptyChanges();
    return changes;
  }

  block(id) {
    return this.index.get(String(id));
  }

  #add(block) {
    if (!isBlock(block)) return;
    const id = String(block.id);
    const copy = { ...block };
    const old = this.index.get(id);
    if (old) {
      // Re-adding an id replaces the block in place (idempotent if a batch is ever re-sent).
      this.state.blocks[this.state.blocks.indexOf(old)] = copy;
      if (old.kind !== copy.kind) this.changes.structure = true;
    } else {
      this.state.blocks.push(copy);
      this.changes.structure = true;
    }
    this.index.set(id, copy);
    this.changes.blocks.add(id);
    this.changes.appended.set(id, null); // a new value, not an extension of the old one
  }

  #append(id, field, value) {
    const block = this.block(id);
    if (!block || typeof field !== "string" || value == null) return;
    const old = block[field];
    block[field] = (typeof old === "string" ? old : old == null ? "" : String(old)) + String(value);
    const key = String(block.id);
    this.changes.blocks.add(key);
    const record = this.#appendedTo(key);
    if (!record || record.get(field) === null) return; // given a new value in this batch
    if (!record.has(field)) record.set(field, []);
    record.get(field).push(String(value));
  }

  /** The record of appends to block `key` in this batch (null: the block was replaced). */
  #appendedTo(key) {
    if (!this.changes.appended.has(key)) this.changes.appended.set(key, new Map());
    return this.changes.appended.get(key);
  }

  #set(id, fields) {
    const block = this.block(id);
    if (!block || !fields || typeof fields !== "object") return;
    const { id: _ignoredId, ...rest } = fields;
    if (typeof rest.kind === "string" && rest.kind !== block.kind) this.changes.structure = true;
    Object.assign(block, rest);
    this.changes.blocks.add(String(block.id));
    const record = this.#appendedTo(String(block.id));
    for (const field of Object.keys(rest)) record?.set(field, null);
  }

  #remove(id) {
    const block = this.block(id);
    if (!block) return;
    this.state.blocks.splice(this.state.blocks.indexOf(block), 1);
    this.index.delete(String(block.id));
    this.changes.structure = true;
    this.changes.blocks.delete(String(block.id));
    this.changes.appended.delete(String(block.id));
  }

  #top(fields) {
    if (!fields || typeof fields !== "object") return;
    for (const [key, value] of Object.entries(fields)) {
      if (!RESERVED_TOP.has(key)) this.state[key] = value;
    }
    this.changes.top = true;
  }
}
