"""The "Python 3 (ipyagent)" kernelspec: installed, and a kernel from it has the magics loaded."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from conftest import Kernel, text_of


def test_install_writes_a_kernelspec_that_preloads_the_extension(jupyter_env: Path, tmp_path: Path) -> None:
    prefix = tmp_path / "prefix"
    done = subprocess.run(
        [sys.executable, "-m", "ipyagent.kernel", "install", "--prefix", str(prefix), "--name", "ipyagent-x"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert "Installed kernelspec 'ipyagent-x'" in done.stdout
    spec = prefix / "share" / "jupyter" / "kernels" / "ipyagent-x" / "kernel.json"
    assert '"Python 3 (ipyagent)"' in spec.read_text()
    # A kernel started from that spec knows %%agent without %load_ext.
    target = jupyter_env.parent / "jupyter" / "kernels" / "ipyagent-test" / "kernel.json"
    target.write_text(spec.read_text())
    kernel = Kernel(jupyter_env)
    try:
        reply, outputs = kernel.run("%agent help")
        assert reply["status"] == "ok", text_of(outputs)
        assert "%%agent [options]" in text_of(outputs)
    finally:
        kernel.close()
