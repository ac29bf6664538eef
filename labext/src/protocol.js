// The page's half of the live-notebook protocol (the kernel's half: ipyagent/kernel/live_protocol.py;
// both are described in docs/live-notebook-protocol.md). Pure: no JupyterLab import, tested by node.

/** The protocol this page speaks; the kernel must speak the same number (a test checks both).
 * 2: `read_notebook` reads a range of cells and says where the notable ones are.
 * 3: `edit` and `undo_edit` change the open document (the kernel relies on them).
 * 4: `undo_run` undoes a run's changes (`%agent undo`).
 * 5: the `cell_outputs` notice shows a cell the agent runs: outputs, `[*]`, execution count.
 * 6: an edit's provenance may say `fix` (`%agent fix`): Keep on its review runs the cell.
 * 7: the page asks the kernel too: `undo_variables` after Undo run puts the run's variables back. */
export const PROTOCOL = 7;
/** The comm target the kernel registers at `%load_ext ipyagent`; the page opens comms to it. */
export const TARGET = "ipyagent.notebook";
/** The comm target the page registers: the kernel opens a comm to it to say "ipyagent is loaded". */
export const ANNOUNCE_TARGET = "ipyagent.notebook.announce";

/**
 * What to do when the page and the kernel speak different protocols, said to the user, the
 * action first (a notification shows the first ~140 characters). The side with the lower number
 * runs the older ipyagent: a page with an old extension is reloaded; a kernel that imported an
 * old ipyagent is restarted. `action` names the button that does it.
 */
export function mismatchMessage({ pageProtocol, pageVersion, kernelProtocol, kernelVersion }) {
  const page = `${pageVersion}, protocol ${pageProtocol}`;
  const kernel = `${kernelVersion}, protocol ${kernelProtocol}`;
  if (pageProtocol < kernelProtocol) {
    return {
      action: "reload",
      text:
        `ipyagent: Reload the page. Its ipyagent extension (${page}) is older than the kernel's ` +
        `ipyagent (${kernel}); until then the agent works on the saved file.`,
    };
  }
  return {
    action: "restart",
    text:
      `ipyagent: Restart the kernel. It imported ipyagent ${kernel}, older than this page's ` +
      `extension (${page}); until then the agent works on the saved file. If this comes back, ` +
      "upgrade ipyagent in the kernel's environment.",
  };
}

/** The hello the page sends when it opens its comm. */
export function hello({ version, client, path }) {
  return { kind: "hello", protocol: PROTOCOL, version, client, path };
}
