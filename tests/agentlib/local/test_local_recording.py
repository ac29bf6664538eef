"""Recording with the local model is reproducible: the same conversation recorded twice, each in
a new process as a notebook's kernel would be, gives byte-identical cassettes."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from ipyagent.agentlib.local_models import ENV_PROMPT_CACHE

# Two requests, the second reusing the first's KV cache, as a notebook's cells do. The model's
# default temperature (0.2, no seed) is left as it is: the recording is what makes it greedy.
RECORD = """
import asyncio, sys
from ipyagent import Agent
from ipyagent.agentlib.providers.local import LocalModel
from ipyagent.testing import ReplayModel

async def main(gguf: str, cassette: str) -> None:
    model = ReplayModel(LocalModel(gguf, name="tiny", n_ctx=1024), cassette=cassette, mode="record")
    agent = Agent(model=model, max_tokens=48)
    await agent.run("Hello! Who are you?")
    await agent.run("Tell me more, at length.")

asyncio.run(main(*sys.argv[1:]))
"""


def record(gguf: Path, cassette: Path) -> bytes:
    # A new process per recording: a model loaded once and reused would start the second
    # recording with the first one's KV cache, which no new kernel has. No prompt opening kept
    # on disk either: the first recording would read it and the second restore it, and their
    # usage would differ (their text does not: see test_local_opening.py).
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path), ENV_PROMPT_CACHE: "off"}
    done = subprocess.run(
        [sys.executable, "-c", RECORD, str(gguf), str(cassette)],
        env=env,
        cwd=cassette.parent,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return cassette.read_bytes()


def test_recording_the_same_conversation_twice_gives_the_same_cassette(
    tiny_gguf: Path, tmp_path: Path
) -> None:
    first = record(tiny_gguf, tmp_path / "first.cassette.jsonl")
    second = record(tiny_gguf, tmp_path / "second.cassette.jsonl")
    assert first.count(b"\n") == 3  # the header and two requests
    assert b'"type":"text"' in first  # the model did write something
    assert first == second


def test_recording_the_same_notebook_twice_gives_the_same_cassette_and_outputs(
    tiny_gguf: Path, tmp_path: Path
) -> None:
    import nbformat

    cells = [
        "%load_ext ipyagent\n%agent model local/default\nfrom ipyagent import tool\n\n"
        '@tool(read_only=True)\ndef today() -> str:\n    "The day of the week."\n    return "Monday"',
        # One small tool: the kernel's own would not fit the tiny model's context.
        "%%agent --new --quiet --tools today -o first\nHello! Who are you?",
        "%%agent --quiet --tools today -o second\nTell me more, at length.",
        "print(first.text == '', second.text == '')",
    ]
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(c) for c in cells]
    notebook = tmp_path / "chat.ipynb"
    env = {k: v for k, v in os.environ.items() if k not in ("JPY_SESSION_NAME", "IPYAGENT_REPLAY")}
    env |= {
        "IPYAGENT_LOCAL_MODEL": str(tiny_gguf),
        "PYTHONPATH": os.pathsep.join(sys.path),
        ENV_PROMPT_CACHE: "off",
    }
    saved = []
    # Recorded twice where it lives: the model sees the workspace's path and today's date, so
    # the same prompt means the same folder on the same day.
    for _ in range(2):
        nbformat.write(nb, str(notebook))
        done = subprocess.run(
            [sys.executable, "-m", "ipyagent", "run", str(notebook), "--record"],
            cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300,
        )  # fmt: skip
        assert done.returncode == 0, done.stdout + done.stderr
        recorded = nbformat.read(str(notebook), as_version=4)
        outputs = [[o.get("text") for o in c.outputs] for c in recorded.cells]
        saved.append(((tmp_path / "chat.cassette.jsonl").read_bytes(), outputs))
    assert saved[0][0].count(b"\n") == 3, "the header and two requests"
    assert saved[0] == saved[1]
