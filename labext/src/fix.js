// The Fix button on a failed cell: which cells show it, the command it runs in the kernel, and
// what the user is told after. Pure (no JupyterLab import), tested by node; index.js draws the
// button (review.js) and runs the command.
//
// The button runs `%agent fix CELL_ID --quiet` as an execute request of its own, not as a cell:
// nothing is added to the user's notebook, no execution count is taken (store_history: false),
// and the cell's own outputs stay as they are. What the run says (its explanation, then what
// became of the fix) is shown on the cell's review of the fix, or in a notification when no fix
// was proposed. The fix itself is an edit like any other (diff, Keep, Undo), marked `fix` in its
// provenance, so that its Keep runs the cell.

/** The ids the page passes to the kernel's command line (nbformat's: letters, digits, - and _). */
const CELL_ID = /^[A-Za-z0-9_-]{1,64}$/;

/** Whether a cell's outputs (nbformat JSON) hold an error. */
export function hasError(outputs) {
  return Array.isArray(outputs) && outputs.some((output) => output && output.output_type === "error");
}

/** Whether a code cell offers Fix: it failed, and it is not an agent's cell (a failed run's
 * error says what to do; there is no code to fix). */
export function offersFix(source, outputs) {
  if (!hasError(outputs)) return false;
  return !String(source).split("\n").some((line) => /^\s*%%?agent\b/.test(line));
}

/** The execute request's content that fixes cell `cellId`. */
export function fixRequest(cellId) {
  if (typeof cellId !== "string" || !CELL_ID.test(cellId)) throw new Error(`not a cell id: ${JSON.stringify(cellId)}`);
  return {
    code: `%agent fix ${cellId} --quiet`,
    silent: false,
    store_history: false,
    allow_stdin: false,
    stop_on_error: false,
  };
}

/**
 * Gathers what the fix's run says: its stdout (the explanation and the outcome) and its error,
 * from the request's IOPub messages. `onMessage` takes each; `outcome(reply)` sums them up.
 */
export class FixOutput {
  constructor() {
    this.text = "";
    this.error = null;
  }

  onMessage(msg) {
    const type = msg && msg.header && msg.header.msg_type;
    const content = (msg && msg.content) || {};
    if (type === "stream" && content.name === "stdout") this.text += String(content.text || "");
    else if (type === "error") this.error = `${content.ename}: ${content.evalue}`;
  }

  /**
   * `{ok, text}`: ok when the run ended without an error; text what to show the user, without
   * the kernel's own notices (lines starting "ipyagent: ", e.g. which model it uses).
   */
  outcome(reply) {
    const content = (reply && reply.content) || {};
    const failed = content.status === "error" || this.error !== null;
    const error = this.error || (content.ename ? `${content.ename}: ${content.evalue}` : "");
    const lines = this.text.split("\n").filter((line) => !line.startsWith("ipyagent: "));
    const text = lines.join("\n").trim();
    if (!failed) return { ok: true, text };
    return { ok: false, text: [text, error].filter(Boolean).join("\n") || "the kernel gave no reason" };
  }
}
