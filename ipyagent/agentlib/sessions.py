"""Durable conversations: an append-only JSONL file per conversation.

A session file holds one JSON object a line. The first is the header; every later line is a
record, appended as the agent commits it and never rewritten::

    {"type": "session", "format": "ipyagent.session", "version": 1, "id": "ses_…", "created": "…",
     "model": "openai/gpt-4.1", "notebook": "analysis.ipynb", "forked_from": null,
     "parent": null}                                a sub-agent's: {"session": id, "file": name,
                                                    "call_id": the delegate call}
    {"type": "message", "message": {…}}            a committed message
    {"type": "usage", "usage": {…}}                 one model request's usage (with "utility": true,
                                                    a side call's: a compaction's or plugin's summary)
    {"type": "run", "seconds": 12.5}                 one run's wall time, when it ends
    {"type": "settings", "model": …, "thinking": …, "max_tokens": …, "temperature": …}
    {"type": "compaction", "dropped": 12, "kept": 6, "summary_hash": "…", "summary": {…}, …}
    {"type": "repair", "index": 7, "replace": false, "message": {…}, "call_ids": […]}
    {"type": "reset"}                               the conversation starts afresh (history stays;
                                                    its usage and run time count from zero again)
    {"type": "subagent", "call_id": "…", "session": "ses_…", "file": "analysis.agent.delegate-1.jsonl"}
                                                    a delegate call handed work to a sub-agent,
                                                    whose conversation is in that file (beside)

Loading replays the records: a ``compaction`` replaces the first ``dropped`` messages with its
summary, a ``reset`` empties the transcript, a ``repair`` inserts (or replaces) the message that
answers tool calls a crash left without results, right after the message holding those calls
(found by their ids, so a lost line before it does not shift it). Unknown record types are kept
(:attr:`SessionState.unknown`) and otherwise ignored, so older readers survive newer writers of
the same format version; a newer *version* is refused with a clear error.

Crash safety: each record is one ``write`` of a whole line, followed by ``fsync`` (on by
default). A line torn by a crash can only be the last one: it is skipped with a
:class:`SessionWarning` and cut off when the file is next opened for writing, so no earlier line
is ever lost (a whole last line that only lacks its newline is kept, and the newline added).
The file is read with :func:`.jsonl.read_lines` under this module's :data:`POLICY`.

Damage elsewhere (a bad disk, a hand edit) never stops a file from opening, and never yields a
transcript a provider rejects: an unreadable line (not JSON, or not a record this version can
read) is skipped and left in the file, a tool result whose call was lost
is dropped, a call whose result was lost is answered as interrupted — each said in a
:class:`SessionWarning`, which the agent also reports at the start of its next run.

One writer at a time: the file is locked (``flock``) while open for writing; a second opener
gets a :class:`~ipyagent.agentlib.errors.UserError`, or asks for a read-only view. On platforms
without ``fcntl`` (Windows) there is no lock.

This module owns the file format and the store. It never writes provider configuration: the
header and records are built from a fixed set of fields, so keys and headers cannot leak in; and a
key that reaches a record anyway (typed in a prompt, printed by a tool) is written as
``[redacted]``, like in a cassette (:func:`ipyagent.agentlib.redact.known_secrets`).
Where session files live (``analysis.agent.jsonl`` beside ``analysis.ipynb``) is the kernel
layer's business.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import warnings
import weakref
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from .errors import UserError
from .jsonl import Policy, append_line, json_line, open_for_append, read_lines, settle_tail
from .messages import MESSAGE_ADAPTER, Message, ToolResultBlock, new_id
from .redact import redact_json_line
from .usage import Usage

_flock: Callable[[int, int], Any] | None
try:  # POSIX advisory locks; Windows has none that suit (msvcrt's are mandatory and block readers)
    import fcntl

    _flock, _LOCK_FLAGS = fcntl.flock, fcntl.LOCK_EX | fcntl.LOCK_NB
except ImportError:  # pragma: no cover - exercised only on Windows
    _flock, _LOCK_FLAGS = None, 0

__all__ = [
    "FORMAT",
    "FORMAT_VERSION",
    "INTERRUPTED_RESULT",
    "SETTINGS_KEYS",
    "Session",
    "SessionState",
    "SessionWarning",
    "read_session",
]

FORMAT = "ipyagent.session"
FORMAT_VERSION = 1
#: The only settings a session records; nothing else of the agent's or provider's configuration.
SETTINGS_KEYS = ("model", "thinking", "max_tokens", "temperature")
INTERRUPTED_RESULT = (
    "Interrupted: the session ended (the kernel stopped or crashed) before this tool call returned "
    "a result. It may or may not have taken effect; check before repeating it."
)


class SessionWarning(UserWarning):
    """Something in a session file was skipped or repaired on load (the file stays usable)."""


@dataclass
class SessionState:
    """What a session file holds once its records are replayed."""

    id: str
    version: int
    created: str
    model: str | None = None
    notebook: str | None = None
    forked_from: dict[str, Any] | None = None
    #: A sub-agent's conversation: ``{"session": id, "file": name, "call_id": ...}`` of the
    #: conversation that delegated to it.
    parent: dict[str, Any] | None = None
    #: The sub-agents this conversation delegated to, as recorded (``call_id``, ``session``, ``file``).
    subagents: list[dict[str, Any]] = field(default_factory=list)
    messages: list[Message] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)
    #: The part of ``usage`` spent on side calls (records marked ``"utility": true``).
    utility_usage: Usage = field(default_factory=Usage)
    #: Wall time summed over the runs recorded (a conversation's time budget counts it).
    run_seconds: float = 0.0
    #: The last recorded value of each of :data:`SETTINGS_KEYS` (model included).
    settings: dict[str, Any] = field(default_factory=dict)
    compactions: int = 0
    resets: int = 0
    repairs: int = 0
    records: int = 0
    #: Records of types this version does not know, kept as read.
    unknown: list[dict[str, Any]] = field(default_factory=list)
    #: What was skipped or repaired, in words (also issued as :class:`SessionWarning`).
    warnings: list[str] = field(default_factory=list)
    #: Bytes up to the end of the last complete line (a torn tail starts here).
    good_length: int = 0


# -- the store -----------------------------------------------------------------------------------


class Session:
    """An open session file. Use :meth:`open`; ``Agent(session=path)`` does it for you.

    Writable sessions hold an advisory lock until :meth:`close` (or garbage collection, or the
    process ending). ``state`` is the conversation as loaded when the file was opened.
    """

    def __init__(self, path: Path, state: SessionState, fd: int | None, *, fsync: bool) -> None:
        self.path = path
        self.state = state
        self.fsync = fsync
        self._fd = fd
        self._finalizer = weakref.finalize(self, os.close, fd) if fd is not None else None

    @classmethod
    def open(
        cls,
        path: str | os.PathLike[str],
        *,
        read_only: bool = False,
        fsync: bool = True,
        model: str | None = None,
        notebook: str | None = None,
        forked_from: dict[str, Any] | None = None,
        parent: dict[str, Any] | None = None,
        exclusive: bool = False,
    ) -> Session:
        """Open the session at ``path``, creating it when absent (unless ``read_only``).

        Args:
            read_only: Read without locking; appends raise. Works while another agent writes.
            fsync: Force every record to disk before returning (slower, survives power loss).
            model, notebook: Written in the header of a new file.
            forked_from: ``{"session": id, "at": n}`` for a fork's header.
            parent: ``{"session": id, "file": name, "call_id": id}`` for a sub-agent's header.
            exclusive: Refuse a file that already exists.
        """
        path = Path(path)
        if read_only:
            if not path.is_file():
                raise UserError(
                    f"No session file at {path}.",
                    hint="Check the path, or open it writable to create it.",
                    code="session_not_found",
                )
            with open(path, "rb") as f:
                state = _parse(f, path)
            if state is None:
                raise _not_a_session(path, "it has no complete header line")
            _drop_orphans(state, path)
            _issue(state)
            # Repaired in memory only, and quietly: the writer may still be running that tool.
            _repair(state, path)
            return cls(path, state, None, fsync=fsync)
        if not path.parent.is_dir():
            raise UserError(
                f"Cannot create the session {path}: the folder {path.parent} does not exist.",
                hint="Create the folder first, or pass a path in an existing folder.",
                code="session_folder_missing",
            )
        try:
            fd = open_for_append(path, exclusive=exclusive, settle=False)  # settled once locked
        except FileExistsError:
            raise UserError(
                f"The session file {path} already exists.",
                hint="Pick another path for the new session (or open this one to resume it).",
                code="session_exists",
            ) from None
        except OSError as exc:
            raise UserError(
                f"Cannot open the session file {path}: {exc.strerror}.",
                hint="Check the path and its permissions.",
                code="session_unwritable",
            ) from exc
        try:
            _lock(fd, path)
            state = _load_or_create(
                fd, path, model=model, notebook=notebook, forked_from=forked_from, parent=parent
            )
            _drop_orphans(state, path)
            for record in _repair(state, path):
                _append(fd, record, fsync=fsync)
            session = cls(path, state, fd, fsync=fsync)
        except BaseException:
            os.close(fd)
            raise
        _issue(state)
        return session

    # -- properties ------------------------------------------------------------------------------

    @property
    def id(self) -> str:
        return self.state.id

    @property
    def model(self) -> str | None:
        """The model the conversation last used (the header's, or the latest settings change)."""
        value = self.state.settings.get("model", self.state.model)
        return value if isinstance(value, str) else None

    @property
    def notebook(self) -> str | None:
        return self.state.notebook

    @property
    def parent(self) -> dict[str, Any] | None:
        """A sub-agent's conversation: the delegating one's ``{"session", "file", "call_id"}``."""
        return self.state.parent

    @property
    def read_only(self) -> bool:
        return self._fd is None

    @property
    def closed(self) -> bool:
        return self._finalizer is not None and not self._finalizer.alive

    # -- appending -------------------------------------------------------------------------------

    def append_message(self, message: Message) -> None:
        """Append a committed message (flushed, and fsynced unless ``fsync=False``)."""
        self._write('{"type":"message","message":' + message.model_dump_json() + "}\n")

    def append_usage(self, usage: Usage, *, utility: bool = False) -> None:
        record: dict[str, Any] = {"type": "usage", "usage": usage.model_dump(mode="json")}
        if utility:
            record["utility"] = True  # a side call's: summed apart too (older readers ignore it)
        self._write(json_line(record))

    def append_run(self, seconds: float) -> None:
        self._write(json_line({"type": "run", "seconds": round(seconds, 3)}))

    def append_settings(self, settings: dict[str, Any]) -> None:
        """Record a settings change: only :data:`SETTINGS_KEYS` are written."""
        record = {"type": "settings", **{k: _jsonable(settings.get(k)) for k in SETTINGS_KEYS}}
        self._write(json_line(record))
        self.state.settings.update({k: record[k] for k in SETTINGS_KEYS})

    def append_compaction(
        self, *, dropped: int, kept: int, summary: Message, summary_hash: str, reason: str, fallback: bool
    ) -> None:
        record = {
            "type": "compaction",
            "dropped": dropped,
            "kept": kept,
            "summary_hash": summary_hash,
            "reason": reason,
            "fallback": fallback,
            "summary": summary.model_dump(mode="json"),
        }
        self._write(json_line(record))

    def append_reset(self) -> None:
        self._write(json_line({"type": "reset", "at": _now()}))

    def append_subagent(self, *, call_id: str, session: str, file: str) -> None:
        """Record that the call ``call_id`` delegated to a sub-agent saved in ``file`` (its name,
        beside this one), whose session id is ``session``."""
        record = {"type": "subagent", "call_id": call_id, "session": session, "file": file}
        self._write(json_line(record))
        self.state.subagents.append({k: record[k] for k in ("call_id", "session", "file")})

    def close(self) -> None:
        """Release the lock and close the file (idempotent)."""
        if self._finalizer is not None:
            self._finalizer()

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        mode = "read-only" if self.read_only else ("closed" if self.closed else "open")
        return f"Session({str(self.path)!r}, id={self.id!r}, {mode})"

    def _write(self, line: str) -> None:
        if self._fd is None:
            raise UserError(
                f"The session {self.path} is open read-only.",
                hint="Fork it to continue in a new file: agent.fork(session='new.agent.jsonl').",
                code="session_read_only",
            )
        if self.closed:
            raise UserError(
                f"The session {self.path} is closed.",
                hint="Open it again (Agent(session=path)) to continue the conversation.",
                code="session_closed",
            )
        _append(self._fd, line, fsync=self.fsync)


def _append(fd: int, line: str, *, fsync: bool) -> None:
    """Append one whole record line (its secrets redacted) to the file open on ``fd``."""
    append_line(fd, redact_json_line(line), fsync=fsync)


def read_session(path: str | os.PathLike[str]) -> SessionState:
    """Read a session without opening it for writing (no lock; safe while an agent writes)."""
    return Session.open(path, read_only=True).state


# -- loading -------------------------------------------------------------------------------------


def _lock(fd: int, path: Path) -> None:
    if _flock is None:  # pragma: no cover - Windows: no advisory lock, document and go on
        return
    try:
        _flock(fd, _LOCK_FLAGS)
    except BlockingIOError:
        raise UserError(
            f"The session {path} is already open in another agent or kernel.",
            hint="Close the other one (agent.close(), or shut down its kernel), or open a read-only "
            "view: Session.open(path, read_only=True).",
            code="session_locked",
        ) from None


def _load_or_create(
    fd: int,
    path: Path,
    *,
    model: str | None,
    notebook: str | None,
    forked_from: dict[str, Any] | None,
    parent: dict[str, Any] | None,
) -> SessionState:
    with open(path, "rb") as f:  # another descriptor: the lock stays on ``fd``
        state = _parse(f, path)
        f.seek(0)
        head = f.read(len(_HEADER_START))
    if state is not None:
        settle_tail(fd)  # a torn tail is cut, so the next line starts clean
        return state
    # Empty, or only a header torn while it was first written: nothing was committed.
    if not _HEADER_START.startswith(head):
        raise _not_a_session(path, "it has no complete header line")
    os.ftruncate(fd, 0)
    state = SessionState(
        id=new_id("ses"),
        version=FORMAT_VERSION,
        created=_now(),
        model=model,
        notebook=notebook,
        forked_from=forked_from,
        parent=parent,
    )
    header = {
        "type": "session",
        "format": FORMAT,
        "version": FORMAT_VERSION,
        "id": state.id,
        "created": state.created,
        "model": model,
        "notebook": notebook,
        "forked_from": forked_from,
        **({"parent": parent} if parent is not None else {}),
    }
    os.write(fd, json_line(header).encode())
    os.fsync(fd)
    state.good_length = os.fstat(fd).st_size
    return state


_MESSAGE_PREFIX = b'{"type":"message","message":'
_HEADER_START = b'{"type":"session",'
_USAGE_FIELDS = tuple(Usage.model_fields)


#: A session must open whatever a bad disk or a hand edit did to it, and never lose a line it
#: could not read: such a line is skipped with a warning and stays in the file.
POLICY = Policy(
    what="session",
    damaged="skip",
    torn="it is cut off when the file is next opened for writing",
    hint="The line stays in the file; the conversation goes on without it.",
    code="session_damaged",
)


def _parse(lines: Iterable[bytes], path: Path) -> SessionState | None:
    """Replay a session's lines; ``None`` when it has no complete header line (a new file)."""
    state: SessionState | None = None
    usage: dict[str, Any] = {}

    def parse(line: bytes, number: int) -> None:
        nonlocal state
        if state is None:  # the header: a bad one is not a session at all (a UserError)
            state = _header(line, path)
            return
        _replay(state, line, usage)
        state.records += 1

    read = read_lines(lines, path, parse, POLICY)
    if state is not None:
        state.warnings.extend(read.notes)
        state.good_length = read.whole_length
        state.utility_usage = Usage.model_validate(usage.pop("utility", {}))
        state.usage = Usage.model_validate(usage)
    return state


def _replay(state: SessionState, raw: bytes, usage: dict[str, Any]) -> None:
    if raw.startswith(_MESSAGE_PREFIX) and raw.endswith(b"}"):
        try:  # the common case, parsed and validated in one go
            state.messages.append(MESSAGE_ADAPTER.validate_json(raw[len(_MESSAGE_PREFIX) : -1]))
        except ValidationError:  # e.g. a newer writer's extra key after the message
            _apply(state, _record(raw))
        return
    record = _record(raw)
    if record.get("type") == "usage":  # summed at the end: Usage.__add__ is not free
        utility = usage.setdefault("utility", {}) if record.get("utility") is True else None
        for key, value in record["usage"].items():
            if key in _USAGE_FIELDS and isinstance(value, (int, float)):
                usage[key] = usage.get(key, 0) + value
                if utility is not None:
                    utility[key] = utility.get(key, 0) + value
    else:
        if record.get("type") == "reset":  # a new conversation: its budget counts from here
            usage.clear()
        _apply(state, record)


def _record(raw: bytes) -> dict[str, Any]:
    record = json.loads(raw)
    if not isinstance(record, dict):
        raise ValueError("not a JSON object")
    return record


def _header(raw: bytes, path: Path) -> SessionState:
    try:
        header = json.loads(raw)
    except ValueError:
        raise _not_a_session(path, "its first line is not JSON") from None
    if not isinstance(header, dict) or header.get("type") != "session" or header.get("format") != FORMAT:
        raise _not_a_session(path, "its first line is not an ipyagent session header")
    version = header.get("version")
    if not isinstance(version, int) or version > FORMAT_VERSION:
        raise UserError(
            f"The session {path} was written by a newer ipyagent (format version {version}; this "
            f"version reads up to {FORMAT_VERSION}).",
            hint="Upgrade ipyagent (pip install -U ipyagent), or start a new session file.",
            code="session_too_new",
        )
    model = header.get("model")
    forked = header.get("forked_from")
    parent = header.get("parent")
    return SessionState(
        id=str(header.get("id") or new_id("ses")),
        version=version,
        created=str(header.get("created") or ""),
        model=model if isinstance(model, str) else None,
        notebook=header.get("notebook") if isinstance(header.get("notebook"), str) else None,
        forked_from=forked if isinstance(forked, dict) else None,
        parent=parent if isinstance(parent, dict) else None,
    )


def _apply(state: SessionState, record: dict[str, Any]) -> None:
    kind = record.get("type")
    if kind == "message":
        state.messages.append(MESSAGE_ADAPTER.validate_python(record["message"]))
    elif kind == "settings":
        state.settings.update({k: record[k] for k in SETTINGS_KEYS if k in record})
    elif kind == "compaction":
        summary = MESSAGE_ADAPTER.validate_python(record["summary"])
        dropped, kept = int(record["dropped"]), int(record.get("kept", -1))
        if 0 <= kept <= len(state.messages) and dropped + kept != len(state.messages):
            dropped = len(state.messages) - kept  # a line before it was lost: keep the last ``kept``
        state.messages[:dropped] = [summary]
        state.compactions += 1
    elif kind == "repair":
        _apply_repair(state, record, MESSAGE_ADAPTER.validate_python(record["message"]))
        state.repairs += 1
    elif kind == "run":
        seconds = record["seconds"]
        if isinstance(seconds, (int, float)) and not isinstance(seconds, bool) and 0 <= seconds < 1e9:
            state.run_seconds += seconds
    elif kind == "subagent":
        state.subagents.append({k: str(record[k]) for k in ("call_id", "session", "file")})
    elif kind == "reset":
        state.messages.clear()
        state.run_seconds = 0.0
        state.resets += 1
    else:  # a record type from a newer writer of this format version: keep it, ignore it
        state.unknown.append(record)


def _apply_repair(state: SessionState, record: dict[str, Any], message: Message) -> None:
    """Put a recorded repair after the message holding its tool calls, found by their ids: an
    index counts messages, and is off by one for every line lost before it."""
    messages = state.messages
    ids = {str(i) for i in record.get("call_ids") or ()}
    if ids:
        at = next((i for i in reversed(range(len(messages))) if ids & _call_ids(messages[i])), None)
        if at is None:
            raise ValueError("it answers tool calls whose line is missing")
        index = at + 1
    else:  # a record without call ids: trust its index, within bounds
        index = int(record["index"])
        if not 0 <= index <= len(messages):
            raise IndexError(f"it repairs message {index} of {len(messages)}")
    # A replacement carries the id of the message it replaced; anything else is inserted.
    if record.get("replace") and index < len(messages) and messages[index].id == message.id:
        messages[index] = message
    else:
        messages.insert(index, message)


def _call_ids(message: Message) -> set[str]:
    return {c.id for c in message.tool_calls}


def _drop_orphans(state: SessionState, path: Path) -> None:
    """Drop tool results that answer no call of the message before them (that call's line was
    lost, or the file was edited): providers reject a transcript holding one."""
    kept: list[Message] = []
    dropped: list[ToolResultBlock] = []
    for message in state.messages:
        if message.tool_results:
            calls = _call_ids(kept[-1]) if kept and message.role == "user" else set()
            seen: set[str] = set()
            content = []
            for block in message.content:
                if isinstance(block, ToolResultBlock):
                    if block.tool_call_id not in calls or block.tool_call_id in seen:
                        dropped.append(block)
                        continue
                    seen.add(block.tool_call_id)
                content.append(block)
            if len(content) < len(message.content):
                if not content:
                    continue
                message = message.model_copy(update={"content": tuple(content)})
        kept.append(message)
    if dropped:
        state.messages[:] = kept
        names = ", ".join(sorted({r.name or "?" for r in dropped}))
        count = f"{len(dropped)} tool result" + ("s" if len(dropped) > 1 else "")
        state.warnings.append(
            f"{path.name}: dropped {count} ({names}) answering no tool call on file (the call's "
            "line was lost); the model no longer sees them."
        )


def _repair(state: SessionState, path: Path) -> list[str]:
    """Answer every tool call left without a result; return the records that say so."""
    records: list[str] = []
    messages = state.messages
    i = 0
    while i < len(messages):
        calls = messages[i].tool_calls
        if not calls:
            i += 1
            continue
        following = messages[i + 1] if i + 1 < len(messages) else None
        answered = {r.tool_call_id for r in following.tool_results} if following else set()
        missing = [c for c in calls if c.id not in answered]
        if missing:
            results = tuple(
                ToolResultBlock(tool_call_id=c.id, name=c.name, content=INTERRUPTED_RESULT, is_error=True)
                for c in missing
            )
            replace = following is not None and following.role == "user"
            if following is not None and replace:
                fixed = following.model_copy(update={"content": (*results, *following.content)})
                messages[i + 1] = fixed
            else:
                fixed = Message(role="user", content=results)
                messages.insert(i + 1, fixed)
            record = {
                "type": "repair",
                "index": i + 1,
                "replace": replace,
                "call_ids": [c.id for c in missing],
                "reason": "tool calls without results (the session ended mid-tool)",
                "message": fixed.model_dump(mode="json"),
            }
            records.append(json_line(record))
            state.repairs += 1
            names = ", ".join(sorted({c.name for c in missing}))
            state.warnings.append(
                f"{path.name}: {len(missing)} tool call(s) ({names}) had no result — the session "
                "ended mid-tool, or the result's line was lost; they were answered as interrupted."
            )
        i += 1
    return records


def _issue(state: SessionState) -> None:
    for text in state.warnings:
        warnings.warn(text, SessionWarning, stacklevel=4)


def _not_a_session(path: Path, why: str) -> UserError:
    return UserError(
        f"{path} is not an ipyagent session file ({why}); it was left untouched.",
        hint="Pass the path of a .agent.jsonl session, or a new path to start one.",
        code="not_a_session",
    )


# -- helpers -------------------------------------------------------------------------------------


def _jsonable(value: Any) -> Any:
    return value if value is None or isinstance(value, (str, int, float, bool)) else str(value)


def _now() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
