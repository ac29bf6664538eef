"""Recording with the local model is reproducible: the same conversation recorded twice, each in
a new process as a notebook's kernel would be, gives byte-identical cassettes."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

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
    # recording with the first one's KV cache, which no new kernel has.
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
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
