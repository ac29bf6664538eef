"""Writing a whole file so that readers see the old file or the new one, never half of either.

Every "replace this file" outside the file tools goes through :func:`atomic_file` (the notebook
a headless run saves, the notebook tools' writes, a cassette's first record, the local model's
weights): the data goes to a temporary file beside the target, is flushed to disk, and replaces
the target in one ``os.replace``. A failure part-way leaves the target as it was and removes the
temporary. (The file tools write through folder descriptors instead, see
``kernel/tools/_safe_io.py``, because the agent chooses their paths.)
"""

from __future__ import annotations

import contextlib
import os
import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import IO

__all__ = ["atomic_bytes", "atomic_write"]

_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_BINARY", 0)


@contextlib.contextmanager
def atomic_bytes(path: Path) -> Iterator[IO[bytes]]:
    """A binary file to write ``path``'s new content into; it replaces ``path`` when the block
    ends without an exception. The new file keeps the mode of the one it replaces; a new file gets
    the mode ``open()`` would give it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        mode: int | None = path.stat().st_mode & 0o777
    except FileNotFoundError:
        mode = None
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(4)}.tmp")
    # 0o666 lets the umask decide, as for any new file; reading the umask instead would mean
    # setting it, which races with other threads creating files.
    fd = os.open(tmp, _FLAGS, 0o600 if mode is not None else 0o666)
    try:
        with os.fdopen(fd, "wb") as handle:
            yield handle
            handle.flush()
            os.fsync(handle.fileno())
            if mode is not None:
                os.chmod(tmp, mode)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def atomic_write(path: Path, data: str | bytes) -> None:
    """Replace ``path``'s content with ``data`` atomically (see :func:`atomic_bytes`)."""
    with atomic_bytes(path) as out:
        out.write(data.encode("utf-8") if isinstance(data, str) else data)
