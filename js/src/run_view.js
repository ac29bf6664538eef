// The run view's module (its `_esm`): one per `%%agent` cell. The view itself lives in the
// runtime (runtime.js), loaded once per page by loader.js.

import { widget } from "./loader.js";

export default widget("run", __IPYAGENT_RUNTIME__);
