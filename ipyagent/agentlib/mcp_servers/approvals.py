"""Which entries of notebook folders' ``.mcp.json`` a person approved, kept outside any folder.

A folder's file is what the folder says, not what the user wrote: a folder downloaded or checked
out from a pull request may name any program and hand it any key of the kernel (``"env": {"K":
"${OPENAI_API_KEY}"}``). Such an entry starts only once a person approved *that exact entry*, by
its :meth:`~.config.ServerConfig.digest`. This module owns:

- where approvals are: ``mcp-approvals.json`` beside ``config.toml`` (written atomically, mode
  0600, so approving in one kernel holds in the next), and the allow list the user writes in
  ``config.toml`` (``[mcp] allow = ["sha256:..."]``) for a run nobody attends (CI);
- what a person is shown before approving (:func:`describe`): the file, command and args, cwd,
  the env variables' and headers' names with the variables they expand, secrets masked;
- the question (:func:`question`, the entry in a verbatim block, every character that could fake
  a line escaped) and what is said where nobody could be asked (:func:`not_started`,
  :func:`how_to_allow`).

It decides nothing about when to ask (see :mod:`.servers`).
"""

from __future__ import annotations

import json
import os
import re
import shlex
import unicodedata
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from ..atomic import atomic_bytes
from ..config_file import config_path, read_config
from ..errors import UserError
from ..redact import MASK, is_secret_header, known_secrets, mask_secrets
from .config import ServerConfig

__all__ = [
    "approvals_path",
    "command_line",
    "describe",
    "how_to_allow",
    "is_approved",
    "not_started",
    "question",
    "remember",
    "visible",
]

_DIGEST = re.compile(r"sha256:[0-9a-f]{64}")
_SPLIT = re.compile(r"(\$\{[A-Za-z_][A-Za-z0-9_]*\})")
#: Words of an ``Authorization`` value that are not the secret.
_SCHEMES = {"bearer", "basic", "token", "digest"}
#: Unicode categories shown escaped: control, format (bidi overrides, zero-width), line and
#: paragraph separators, unassigned and private-use characters.
_HIDDEN = {"Cc", "Cf", "Zl", "Zp", "Cn", "Co", "Cs"}


def approvals_path() -> Path:
    """``mcp-approvals.json`` in the folder of the user's ``config.toml``."""
    return config_path().parent / "mcp-approvals.json"


def approved_digests() -> set[str]:
    """The digests approved in the approvals file and allowed in ``config.toml``'s ``[mcp] allow``."""
    table = read_config(config_path()).get("mcp", {})
    allowed = table.get("allow", []) if isinstance(table, dict) else None
    if not isinstance(allowed, list) or not all(isinstance(d, str) and _DIGEST.fullmatch(d) for d in allowed):
        raise UserError(
            f'In {config_path()}, [mcp] allow must be a list of digests like "sha256:<64 hex digits>".',
            hint="Copy the digest that `%agent mcp list` or the warning shows, e.g. "
            'allow = ["sha256:3f2a..."] (the whole 64 digits).',
            code="invalid_config",
        )
    return set(allowed) | set(_read_approvals())


def is_approved(config: ServerConfig) -> bool:
    return config.digest() in approved_digests()


def remember(config: ServerConfig) -> Path:
    """Record that a person approved ``config``; returns the file it is kept in."""
    path = approvals_path()
    approved = _read_approvals()
    approved[config.digest()] = {
        "name": config.name,
        "file": config.source,
        "target": mask_secrets(config.target, known_secrets(), MASK),
        "approved": datetime.now(timezone.utc).isoformat(timespec="seconds"),
    }
    body = json.dumps({"version": 1, "approved": approved}, indent=2, ensure_ascii=False) + "\n"
    with atomic_bytes(path) as out:
        if hasattr(os, "fchmod"):  # whose programs may run: nobody else's to read or change
            os.fchmod(out.fileno(), 0o600)
        out.write(body.encode("utf-8"))
    return path


def _read_approvals() -> dict[str, Any]:
    path = approvals_path()
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as exc:
        raise _damaged(path, str(exc)) from exc
    approved = data.get("approved") if isinstance(data, dict) else None
    if not isinstance(approved, dict):
        raise _damaged(path, 'it has no "approved" table')
    return {k: v for k, v in approved.items() if isinstance(k, str) and _DIGEST.fullmatch(k)}


def _damaged(path: Path, why: str) -> UserError:
    return UserError(
        f"Could not read the MCP approvals in {path}: {why}.",
        hint="Fix or delete the file (the servers of notebook folders are then asked about again).",
        code="invalid_config",
    )


def describe(config: ServerConfig) -> str:
    """What a person reads before approving a folder's entry: every part its digest covers,
    with no secret's value (a ``${VAR}`` is shown as written; a literal value of a secret-looking
    name is masked)."""
    lines = [f"file: {visible(config.source)} (a notebook folder's file, not your own configuration)"]
    if config.command is not None:
        lines.append(f"command: {command_line(config)}")
        cwd = visible(config.cwd) if config.cwd is not None else "(the kernel's working folder)"
        lines.append(f"cwd: {cwd}")
    else:
        lines.append(f"url: {command_line(config)}")
    handed = config.variables()
    for kind, values in (("env", config.env), ("header", config.headers)):
        for name, value in sorted(values.items()):
            line = f"{kind}: {visible(name)} = {visible(_shown(name, value))}"
            names = handed.get(f"{kind}:{name}")
            if names:
                line += f"  (hands over your {', '.join(f'${n}' for n in names)})"
            lines.append(line)
    lines.append(f"digest: {config.digest()}")
    return "\n".join(lines)


def verbatim(text: str) -> str:
    """``text`` as a markdown block shown as it is (the question is rendered as markdown): fenced
    with more backticks than any run inside it, so the entry cannot close the block."""
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}\n{text}\n{fence}"


def visible(text: str) -> str:
    """``text`` with what could fake or hide part of a line escaped: line breaks, terminal escapes,
    other control characters, and invisible format characters (right-to-left overrides,
    zero-width spaces), which would let an entry show one command and run another."""
    return "".join(ch if unicodedata.category(ch) not in _HIDDEN else ascii(ch)[1:-1] for ch in text)


def command_line(config: ServerConfig) -> str:
    """The command line as a shell would read it (or the URL), any secret in it masked."""
    shown = shlex.join([config.command, *config.args]) if config.command is not None else config.url or ""
    return visible(mask_secrets(shown, known_secrets(), MASK))


def _shown(name: str, value: str) -> str:
    secret = is_secret_header(name)
    parts = []
    for part in _SPLIT.split(value):
        if _SPLIT.fullmatch(part) or not secret:
            parts.append(part)
        else:  # a literal in a secret-looking value: keep the scheme word ("Bearer"), mask the rest
            words = re.split(r"(\s+)", part)
            parts.append("".join(w if not w.strip() or w.lower() in _SCHEMES else MASK for w in words))
    return mask_secrets("".join(parts), known_secrets(), MASK)


def question(config: ServerConfig) -> str:
    """The question that enables a folder's entry: where it comes from, and all it covers."""
    return (
        f"Enable the MCP server `{config.name}`? It comes from a notebook folder's file, not from your "
        "own configuration: starting it runs this program as you, handing it what the entry says, and "
        f"its tools join this conversation.\n{verbatim(describe(config))}\n"
        "Allow remembers this exact entry (a changed entry is asked about again)."
    )


def not_started(config: ServerConfig) -> str:
    """Said where nobody could approve a folder's entry; it is what a log shows (a CI run's), so it
    names the way to allow it on purpose."""
    return (
        f"The MCP server {config.name!r} of the folder's file {visible(config.source)} was not started: "
        "nobody could approve it in this run, and auto_approve never does. To allow this exact entry: "
        f"{_allow_command(config)} (digest {config.digest()})."
    )


def _allow_command(config: ServerConfig) -> str:
    return f"python -m ipyagent mcp allow {visible(shlex.quote(config.source))} {config.name}"


def how_to_allow(config: ServerConfig) -> str:
    """How a person approves ``config`` (a folder's entry), for where nobody could be asked."""
    shell = _allow_command(config)
    return (
        f"If you trust this entry ({command_line(config)}), approve it once: "
        f"`%agent mcp allow {config.name}` in a notebook of that folder, or `{shell}` in a shell "
        f"(both show the entry and remember its digest in {approvals_path()}), "
        f'or add it to {config_path()}: [mcp] allow = ["{config.digest()}"]. '
        "auto_approve (-y) never enables a server of a folder's file; a changed entry needs a new approval."
    )
