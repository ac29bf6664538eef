// The page's half of the live-notebook protocol (the kernel's half: ipyagent/kernel/live_protocol.py;
// both are described in docs/live-notebook-protocol.md). Pure: no JupyterLab import, tested by node.

/** The protocol this page speaks; the kernel must speak the same number (a test checks both). */
export const PROTOCOL = 1;
/** The comm target the kernel registers at `%load_ext ipyagent`; the page opens comms to it. */
export const TARGET = "ipyagent.notebook";
/** The comm target the page registers: the kernel opens a comm to it to say "ipyagent is loaded". */
export const ANNOUNCE_TARGET = "ipyagent.notebook.announce";

/**
 * What to do when the page and the kernel speak different protocols, said to the user.
 * The side with the lower number runs the older ipyagent: a page with an old extension is
 * reloaded; a kernel that imported an old ipyagent is restarted.
 */
export function mismatchMessage({ pageProtocol, pageVersion, kernelProtocol, kernelVersion }) {
  const page = `this page's ipyagent extension (${pageVersion}, protocol ${pageProtocol})`;
  const kernel = `the kernel's ipyagent (${kernelVersion}, protocol ${kernelProtocol})`;
  if (pageProtocol < kernelProtocol) {
    return (
      `ipyagent: ${page} is older than ${kernel}, so the agent works on the saved file. ` +
      "Reload the page to load the new extension."
    );
  }
  return (
    `ipyagent: ${kernel} is older than ${page}, so the agent works on the saved file. ` +
    "Restart the kernel so that it imports the installed ipyagent; if the message comes back, " +
    "upgrade ipyagent in the kernel's environment."
  );
}

/** The hello the page sends when it opens its comm. */
export function hello({ version, client, path }) {
  return { kind: "hello", protocol: PROTOCOL, version, client, path };
}
