"""The opening of the local model's prompt, kept on disk between processes (xllamacpp only).

Every conversation with the embedded model opens with the same system turn: the system prompt
and the tool schemas, about 2,800 tokens. A new kernel reads them before its first answer, and
on two cores that is most of the first answer's time (about a minute on the 1.5B model). llama.cpp's
server can save a slot's KV cache to a file and restore it in milliseconds. So the first process
to meet an opening evaluates it alone, saves it, and every later process with the same model,
window and opening restores it instead of reading it again.

Only the opening is saved, never the conversation: the user's messages and tool results stay in
the process. The file's name is a digest of the runtime's version, the model file (path, size,
modification time), the window and the opening's tokens, so a changed system prompt, tool set
or model never meets an old state. A file the server cannot restore (another llama.cpp build) is
deleted and the opening is read as before. The folder keeps the :data:`KEEP` most recently used
states; it is :func:`~.local_backend.prompt_cache_dir` (``$IPYAGENT_PROMPT_CACHE``
moves it, ``off`` turns the cache off).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import time
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

import httpx

__all__ = ["KEEP", "MIN_TOKENS", "SUFFIX", "prune", "restore", "save", "state_name"]

#: Openings shorter than this are read faster than a file is restored and saved.
MIN_TOKENS = 256
#: A part older than this was left by a process that died while saving.
STALE_PART_S = 600.0
#: States kept in the folder (about 80 MB each for the 1.5B model's opening): the most recently
#: used, so a few system prompts (plain runs, sub-agents, typed answers) stay warm.
KEEP = 6
SUFFIX = ".kv"


def _runtime_version() -> str:
    try:
        return version("xllamacpp")
    except PackageNotFoundError:
        return "unknown"


def state_name(model: Path, n_ctx: int, n_batch: int, tokens: list[int]) -> str:
    """The file name (no folder) of the state of ``tokens`` read by this model and window."""
    stat = model.stat()
    head = json.dumps(
        [_runtime_version(), str(model.resolve()), stat.st_size, stat.st_mtime_ns, n_ctx, n_batch]
    )
    digest = hashlib.sha256(head.encode())
    digest.update(b"".join(t.to_bytes(4, "little", signed=True) for t in tokens))
    return digest.hexdigest()[:32] + SUFFIX


def restore(client: Any, folder: Path, name: str) -> bool:
    """Load the state ``name`` into the server's slot; whether it was there and loaded. A file
    the server refuses is deleted, so the opening is read and saved again."""
    path = folder / name
    if not path.is_file():
        return False
    try:
        reply = client.post("/slots/0?action=restore", json={"filename": name})
    except httpx.HTTPError:
        return False  # a cache: the opening is read instead
    if reply.status_code != 200:
        path.unlink(missing_ok=True)
        return False
    with contextlib.suppress(OSError):
        os.utime(path)  # most recently used: the last that prune() removes
    return True


def save(client: Any, folder: Path, name: str) -> bool:
    """Save the slot's KV cache as ``name``, whole or not at all; whether it was saved."""
    partial = f"{name}.{os.getpid()}.part"
    written = folder / partial
    try:
        reply = client.post("/slots/0?action=save", json={"filename": partial})
        if reply.status_code != 200 or not written.is_file():
            written.unlink(missing_ok=True)
            return False
        os.chmod(written, 0o600)
        os.replace(written, folder / name)  # another process saving the same opening: either wins
        prune(folder)
    except (httpx.HTTPError, OSError):  # a full disk, a folder gone: the run goes on uncached
        written.unlink(missing_ok=True)
        return False
    return True


def prune(folder: Path, keep: int = KEEP) -> None:
    """Remove all but the ``keep`` most recently used states, and parts left by a crash (not
    those another process is writing now)."""
    states: list[tuple[float, Path]] = []
    for path in folder.iterdir():
        try:
            used = path.stat().st_mtime
        except OSError:
            continue
        if path.name.endswith(SUFFIX):
            states.append((used, path))
        elif path.name.endswith(".part") and used < time.time() - STALE_PART_S:
            with contextlib.suppress(OSError):
                path.unlink()
    for _, path in sorted(states, reverse=True)[keep:]:
        with contextlib.suppress(OSError):
            path.unlink()
