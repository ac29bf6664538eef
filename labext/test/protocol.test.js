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

test("an older page is told to reload, an older kernel to restart", () => {
  const olderPage = mismatchMessage({ pageProtocol: 1, pageVersion: "0.1.0", kernelProtocol: 2, kernelVersion: "0.2.0" });
  assert.match(olderPage, /Reload the page/);
  assert.match(olderPage, /0\.1\.0, protocol 1/);
  assert.doesNotMatch(olderPage, /Restart the kernel/);
  const olderKernel = mismatchMessage({ pageProtocol: 2, pageVersion: "0.2.0", kernelProtocol: 1, kernelVersion: "0.1.0" });
  assert.match(olderKernel, /Restart the kernel/);
  assert.match(olderKernel, /kernel's environment/);
  assert.doesNotMatch(olderKernel, /Reload the page/);
});
