"""The prompt's opening kept on disk between processes (xllamacpp): a new process restores the
system turn instead of reading it, gets the same reply, and never meets a stale or broken state.

Each "kernel" is a subprocess, as a new kernel is: the server and its slot live per process.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from ipyagent.agentlib.providers import _local_opening as opening

SYSTEM = "You answer questions about the user's data. " * 12  # ~530 byte tokens: above MIN_TOKENS

KERNEL = """
import asyncio, json, sys
from ipyagent.agentlib.messages import Message
from ipyagent.agentlib.model import ModelRequest, ModelSettings, TextChunk, UsageReport
from ipyagent.agentlib.providers.local import LocalModel

path, cache, system = sys.argv[1], sys.argv[2], sys.argv[3]
model = LocalModel(path, n_ctx=2048, prompt_cache=False if cache == "off" else cache)
request = ModelRequest(
    model="tiny", system=system, messages=[Message.user("How many rows?")],
    settings=ModelSettings(max_tokens=6, temperature=0.0),
)

async def main():
    text, usage = "", None
    async for event in model.stream(request):
        if isinstance(event, TextChunk):
            text += event.text
        elif isinstance(event, UsageReport):
            usage = event.usage
    print(json.dumps({"text": text, "read": usage.input_tokens, "cached": usage.cache_read_tokens}))

asyncio.run(main())
"""


@pytest.fixture
def kernel(backend: str, tiny_gguf: Path, tmp_path: Path) -> Any:
    if backend != "xllamacpp":
        pytest.skip("only the xllamacpp backend keeps openings on disk")

    def run(cache: Path | str, system: str = SYSTEM) -> dict[str, Any]:
        done = subprocess.run(
            [sys.executable, "-c", KERNEL, str(tiny_gguf), str(cache), system],
            capture_output=True,
            text=True,
            timeout=120,
            env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
        )
        assert done.returncode == 0, done.stderr[-2000:]
        answer: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
        return answer

    return run


def states(folder: Path) -> list[Path]:
    return sorted(folder.glob(f"*{opening.SUFFIX}"))


def test_a_new_process_restores_the_opening_and_replies_the_same(kernel: Any, tmp_path: Path) -> None:
    cache = tmp_path / "prompts"
    first = kernel(cache)
    assert first["cached"] == 0  # nothing to restore: the opening was read (and saved)
    [saved] = states(cache)
    assert saved.stat().st_mode & 0o777 == 0o600 and cache.stat().st_mode & 0o777 == 0o700
    second = kernel(cache)
    total = first["read"] + first["cached"]
    assert second["read"] + second["cached"] == total
    assert second["cached"] >= opening.MIN_TOKENS and second["read"] < total - opening.MIN_TOKENS
    assert second["text"] == first["text"]  # the restored state is the state the first one read
    assert states(cache) == [saved]


def test_another_system_prompt_is_another_state(kernel: Any, tmp_path: Path) -> None:
    cache = tmp_path / "prompts"
    kernel(cache)
    other = kernel(cache, SYSTEM.replace("data", "code"))
    assert other["cached"] == 0
    assert len(states(cache)) == 2


def test_a_state_the_server_cannot_restore_is_read_again_and_replaced(kernel: Any, tmp_path: Path) -> None:
    cache = tmp_path / "prompts"
    first = kernel(cache)
    [saved] = states(cache)
    saved.write_bytes(b"not a llama.cpp slot state")
    again = kernel(cache)
    assert again["cached"] == 0 and again["text"] == first["text"]
    assert saved.stat().st_size > 100  # saved anew, whole


def test_nothing_is_kept_when_the_cache_is_off(kernel: Any, tmp_path: Path) -> None:
    first = kernel("off")
    assert kernel("off")["cached"] == first["cached"] == 0
    assert not list(tmp_path.rglob(f"*{opening.SUFFIX}"))


def test_prune_keeps_the_most_recently_used_and_removes_stale_parts(tmp_path: Path) -> None:
    now = time.time()
    for age in range(opening.KEEP + 2):
        state = tmp_path / f"{age:032x}{opening.SUFFIX}"
        state.write_bytes(b"x")
        os.utime(state, (now - age, now - age))
    stale = tmp_path / f"{0:032x}{opening.SUFFIX}.123.part"
    stale.write_bytes(b"x")
    os.utime(stale, (now - 2 * opening.STALE_PART_S, now - 2 * opening.STALE_PART_S))
    fresh = tmp_path / f"{1:032x}{opening.SUFFIX}.456.part"  # another process is writing it
    fresh.write_bytes(b"x")
    opening.prune(tmp_path)
    kept = sorted(p.name for p in tmp_path.iterdir())
    assert kept == sorted([fresh.name] + [f"{age:032x}{opening.SUFFIX}" for age in range(opening.KEEP)])


def test_the_state_name_follows_the_tokens_the_window_and_the_model_file(tmp_path: Path) -> None:
    model = tmp_path / "m.gguf"
    model.write_bytes(b"weights")
    name = opening.state_name(model, 2048, 256, [1, 2, 3])
    assert name == opening.state_name(model, 2048, 256, [1, 2, 3])
    assert name != opening.state_name(model, 2048, 256, [1, 2, 4])
    assert name != opening.state_name(model, 4096, 256, [1, 2, 3])
    model.write_bytes(b"other weights")
    assert name != opening.state_name(model, 2048, 256, [1, 2, 3])


def test_an_opening_counts_only_when_the_prompt_starts_with_its_tokens() -> None:
    from ipyagent.agentlib.providers.local import _opening_length

    assert _opening_length([1, 2, 3, 4], [1, 2, 3]) == 3
    # A template or tokenizer that joins the system turn to what follows: nothing is kept.
    assert _opening_length([1, 2, 9, 4], [1, 2, 3]) == 0
    assert _opening_length([1, 2], []) == 0
