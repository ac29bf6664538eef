// The run view: one per `%%agent` cell. Everything it shows comes from the shared view shell;
// Stop and Retry live in its footer.

import { AgentView } from "./common.js";

export default {
  render({ model, el }) {
    const view = new AgentView(model, el, { kind: "run" });
    return () => view.destroy();
  },
};
