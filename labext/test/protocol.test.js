import assert from "node:assert/strict";
import { test } from "node:test";
import { PROTOCOL, hello, mismatchMessage } from "../src/protocol.js";

test("the hello names the protocol, the version, the client and the document", () => {
  assert.deepEqual(hello({ version: "0.1.0", client: "JupyterLab 4.6.6", path: "a/b.ipynb" }), {
    kind: "hello",
    protocol: PROTOCOL,
    version: "0.1.0",
    client: "JupyterLab 4.6.6",
    path: "a/b.ipynb",
  });
});

test("an older page is told to reload, an older kernel to restart, the action first", () => {
  const olderPage = mismatchMessage({ pageProtocol: 1, pageVersion: "0.1.0", kernelProtocol: 2, kernelVersion: "0.2.0" });
  assert.equal(olderPage.action, "reload");
  assert.match(olderPage.text, /^ipyagent: Reload the page\./);
  assert.match(olderPage.text, /\(0\.1\.0, protocol 1\) is older than the kernel's ipyagent \(0\.2\.0, protocol 2\)/);
  assert.doesNotMatch(olderPage.text, /Restart/);
  const olderKernel = mismatchMessage({ pageProtocol: 2, pageVersion: "0.2.0", kernelProtocol: 1, kernelVersion: "0.1.0" });
  assert.equal(olderKernel.action, "restart");
  assert.match(olderKernel.text, /^ipyagent: Restart the kernel\./);
  assert.match(olderKernel.text, /kernel's environment/);
  assert.doesNotMatch(olderKernel.text, /Reload/);
});
