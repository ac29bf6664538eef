"""The search worker: walks a folder of the workspace and matches a regular expression, in a
process of its own.

``re`` holds the interpreter lock for as long as one match takes, and a pattern with nested
quantifiers can take hours on one line: in the kernel's process that freezes everything, the
tool's timeout and the user's interrupt included. A separate process can be killed at its
deadline whatever the pattern does. It is started with ``-E -s -S`` (no site, no environment)
and needs only the standard library and :mod:`._safe_io`, so it starts in a few milliseconds.

Protocol: one JSON object on stdin; JSON lines on stdout — ``{"match": ...}`` per match as it
is found (kept if the process is killed later), then ``{"done": ..., "secret": n, "deep": n,
"large": [n, names...], "binary": [n, names...]}`` (files not searched because they are over
:data:`MAX_FILE_BYTES` or binary: how many, and the first :data:`SHOWN` names), or
``{"error": ...}`` for a pattern that does not compile.
"""

from __future__ import annotations

import fnmatch
import json
import os
import re
import sys
from typing import Any

if __package__:
    from . import _safe_io as io
else:  # run as a script by path: this folder is sys.path[0]
    import _safe_io as io  # type: ignore[import-not-found,no-redef]

MAX_FILE_BYTES = 5_000_000
#: How many names of skipped files the worker sends for each reason (the count is always sent).
SHOWN = 5


def search(request: dict[str, Any], emit: Any) -> None:
    try:
        regex = re.compile(request["pattern"])
    except re.error as exc:
        emit({"error": f"invalid regular expression {request['pattern']!r}: {exc}"})
        return
    root: str = request["root"]
    glob: str = request["glob"]
    limit: int = request["max_matches"]
    skip = frozenset(request["skip"])
    found = secret = deep = 0
    # What was not searched, by why: the counts, and the first few names to show.
    large: list[str] = []
    binary: list[str] = []

    def done(how: str) -> dict[str, Any]:
        return {
            "done": how,
            "secret": secret,
            "deep": deep,
            "large": [len(large), *large[:SHOWN]],
            "binary": [len(binary), *binary[:SHOWN]],
        }

    for folder, _dirs, others in io.walk(root, request["parts"], skip=skip):
        if others == ["…"] and not _dirs:
            deep += 1
            continue
        for name in others:
            if not fnmatch.fnmatch(name, glob):
                continue
            parts = _regular_inside(root, [*folder, name])
            if parts is None:
                continue  # a link out of the workspace, a dangling link, a pipe, a device
            if io.is_secret([*folder, name]) or io.is_secret(parts):
                secret += 1
                continue
            shown = "/".join([*folder, name])
            try:
                with io.open_regular(root, parts) as fd:
                    info = os.fstat(fd)
                    if io.secret_inode(root, info, skip=skip) is not None:
                        secret += 1  # a hard link to a secrets file is that file
                        continue
                    if info.st_size > MAX_FILE_BYTES:
                        large.append(shown)
                        continue
                    if io.is_binary(fd):
                        binary.append(shown)
                        continue
                    for number, (line, _cut, _end) in enumerate(io.iter_lines(fd), 1):
                        if regex.search(line):
                            emit({"match": f"{shown}:{number}: {line.strip()[:200]}"})
                            found += 1
                            if found >= limit:
                                emit(done("limit"))
                                return
            except (io.WorkspaceError, OSError):
                continue
    emit(done("all"))


def _regular_inside(root: str, parts: list[str]) -> list[str] | None:
    """The real path's components when ``parts`` is (or links to) a regular file inside ``root``."""
    path = os.path.join(root, *parts)
    try:
        if not os.path.islink(path):
            return parts if os.path.isfile(path) else None
        real = os.path.realpath(path)
    except (OSError, ValueError, RecursionError):
        return None
    if os.path.commonpath([root, real]) != root or real == root or not os.path.isfile(real):
        return None
    return os.path.relpath(real, root).split(os.sep)


def main() -> None:
    request = json.loads(sys.stdin.read())

    def emit(item: dict[str, Any]) -> None:
        sys.stdout.write(json.dumps(item) + "\n")
        sys.stdout.flush()  # each match reaches the kernel at once: it survives a kill later

    search(request, emit)


if __name__ == "__main__":
    main()
