"""A kernelspec, "Python 3 (ipyagent)", that starts an IPython kernel with the extension loaded.

python -m ipyagent.kernel install [--user | --sys-prefix | --prefix PATH] [--name NAME]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

__all__ = ["install", "kernel_json", "main"]

NAME = "ipyagent"
DISPLAY_NAME = "Python 3 (ipyagent)"


def kernel_json(python: str | None = None) -> dict[str, object]:
    return {
        "argv": [
            python or sys.executable,
            "-m",
            "ipykernel_launcher",
            "-f",
            "{connection_file}",
            "--ext=ipyagent",
        ],
        "display_name": DISPLAY_NAME,
        "language": "python",
        "metadata": {"debugger": True},
    }


def install(*, user: bool = False, prefix: str | None = None, name: str = NAME) -> str:
    """Install the kernelspec; return the folder it went to."""
    from jupyter_client.kernelspec import KernelSpecManager

    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "kernel.json").write_text(json.dumps(kernel_json(), indent=2))
        return str(KernelSpecManager().install_kernel_spec(tmp, kernel_name=name, user=user, prefix=prefix))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ipyagent.kernel", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    command = commands.add_parser("install", help="install the 'Python 3 (ipyagent)' kernelspec")
    where = command.add_mutually_exclusive_group()
    where.add_argument("--user", action="store_true", help="for this user only")
    where.add_argument("--sys-prefix", action="store_true", help="into this Python environment")
    where.add_argument("--prefix", help="under this prefix")
    command.add_argument("--name", default=NAME, help=f"kernel name (default: {NAME})")
    args = parser.parse_args(argv)
    prefix = sys.prefix if args.sys_prefix else args.prefix
    folder = install(user=args.user or not prefix, prefix=prefix, name=args.name)
    print(f"Installed kernelspec {args.name!r} ({DISPLAY_NAME}) in {folder}")
    return 0
