// The chat widget's module (its `_esm`). The view itself lives in the runtime (runtime.js,
// chat_view.js), loaded once per page by loader.js.

import { widget } from "./loader.js";

export default widget("chat", __IPYAGENT_RUNTIME__);
