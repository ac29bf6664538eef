"""The sandbox's launcher: confines itself, then becomes the command.

Run as ``python -E -s -S _launch.py SPEC`` (no site packages, no environment variables read, so
it starts in a few milliseconds and nothing installed can change what it does). ``SPEC`` is one
JSON object: the confinement (see :func:`._confine.enter`), ``argv`` and ``env``. When a step of
the confinement fails, the command is not run: the launcher writes ``ipyagent-sandbox: why``
to stderr and exits with status 125.
"""

from __future__ import annotations

import json
import os
import sys

if __package__:
    from ._confine import CONFINE_FAILED, enter
else:  # run as a script by path: this folder is sys.path[0]
    from _confine import CONFINE_FAILED, enter  # type: ignore[import-not-found,no-redef]


def main() -> None:
    spec = json.loads(sys.argv[1])
    try:
        enter(spec)
    except OSError as exc:
        os.write(2, f"ipyagent-sandbox: {exc.strerror or exc}\n".encode())
        os._exit(CONFINE_FAILED)
    try:
        os.execvpe(spec["argv"][0], spec["argv"], spec["env"])
    except OSError as exc:  # as a shell says it: the command is not there, or not runnable
        os.write(2, f"{spec['argv'][0]}: {exc.strerror}\n".encode())
        os._exit(127 if isinstance(exc, FileNotFoundError) else 126)


if __name__ == "__main__":
    main()
