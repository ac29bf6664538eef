// A document's checkpoints across a page reload: the runs' edits (their inverse ops), which cells
// were kept, and the reviews still open, kept in the browser's localStorage under the notebook's
// path. Pure (the storage is passed in), tested by node; index.js saves after every change.
//
// Why the browser and not the notebook's metadata: an undo record holds what the run replaced or
// deleted, outputs included (a deleted cell whole, images and all). In the file it would travel
// with the notebook to everyone it is shared with (a cell the user deleted would still be in it),
// grow the file, and make every edit of the agent a change of the document's metadata. The cost:
// the records are those of this browser; another browser, or a renamed notebook, has none.
//
// After a reload the document is the saved file: the edits not saved are gone, and the records
// that refer to them find cells that do not hold what they expect. The guards of the undo
// (edits.js) then leave those cells alone and say so, as for any cell changed since.

import { REMEMBERED } from "./edits.js";

/** Bumped when the stored shape changes: a record of another shape is ignored, not misread. */
export const STORE_VERSION = 1;
/** Characters the records of one document may take (localStorage has a few MB per site). */
export const STORE_CHARS = 1_000_000;

export function storageKey(path) {
  return `ipyagent:checkpoints:${path}`;
}

/**
 * What is kept of a document: the runs with something left to undo, newest last, each with its
 * edits and kept cells, and the open reviews of those runs; the oldest runs are left out until it
 * fits `limit` characters. The JSON text, or null when there is nothing to keep.
 */
export function snapshotText({ edits, runs, reviews }, limit = STORE_CHARS) {
  const lookup = (id) => edits.get(id);
  let kept = [...runs.runs.keys()].filter((run) => runs.pendingCells(run, lookup).length > 0);
  while (kept.length > 0) {
    const data = {
      version: STORE_VERSION,
      runs: kept.map((run) => {
        const known = runs.runs.get(run);
        const ids = known.editIds.filter((id) => lookup(id));
        return { run, kept: [...known.kept], edits: ids.map((id) => ({ id, answer: lookup(id).answer, undo: lookup(id).undo })) };
      }),
      reviews: [...reviews].filter(([, review]) => kept.includes(review.run)),
    };
    const text = JSON.stringify(data);
    if (text.length <= limit) return text;
    kept = kept.slice(1);
  }
  return null;
}

/** Put the records of `text` (from snapshotText) back into an empty page's logs. */
export function restore(text, { edits, runs, reviews }) {
  let data;
  try {
    data = JSON.parse(text);
  } catch (err) {
    return false;
  }
  if (!data || data.version !== STORE_VERSION || !Array.isArray(data.runs)) return false;
  for (const { run, kept, edits: entries } of data.runs.slice(-REMEMBERED)) {
    for (const { id, answer, undo } of entries) {
      edits.remember(id, { answer, undo });
      runs.add(run, id);
    }
    runs.keep(run, kept);
  }
  for (const [cellId, review] of data.reviews || []) reviews.set(cellId, review);
  return true;
}
