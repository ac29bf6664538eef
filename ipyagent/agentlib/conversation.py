"""The conversation: the transcript and everything counted along with it.

A :class:`Conversation` owns the messages, the tool-call ids they hold, the usage summed over
every request made for them, the last context-window readout, and the session file they are
saved in. It is the only code that appends to the transcript or rewrites it: the loop
(:mod:`~ipyagent.agentlib.run`) commits messages and records usage through it, a compaction
(:mod:`~ipyagent.agentlib.compaction`) returns what it decided and the conversation applies it,
and the :class:`~ipyagent.agentlib.agent.Agent` holds one and hands it to each run.

It does not talk to a model, decide when to compact, or know the agent's configuration; it
emits one kind of event itself, the warning that the session file could no longer be written.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Sequence, Set

from .compaction import CompactionResult
from .errors import UserError
from .events import AgentEvent, RunWarning
from .messages import Message
from .model import ModelSettings
from .sessions import SETTINGS_KEYS, Session
from .usage import ContextWindow, Usage, estimate_tokens
from .vision import holds_images

__all__ = ["Conversation", "open_session"]


class Conversation:
    """A transcript, its usage and context readout, and the session file it is saved in.

    Args:
        emit: Where the conversation reports that its session file failed (a ``Warning`` event).
        session: An open session: the conversation resumes what it holds (messages, usage) and
            appends every change to it.
    """

    def __init__(self, *, emit: Callable[[AgentEvent], None], session: Session | None = None) -> None:
        self._emit = emit
        self._session = session
        self._session_broken = False
        state = session.state if session is not None else None
        self._messages: list[Message] = list(state.messages) if state else []
        # Every tool-call id the transcript ever held: a new call must not reuse one. Kept as the
        # transcript grows (never rebuilt per turn) and not shrunk by a compaction.
        self._call_ids: set[str] = {call.id for m in self._messages for call in m.tool_calls}
        # How many messages carry images: counted as they are committed, never per request.
        self._with_images = sum(map(holds_images, self._messages))
        self._usage = state.usage if state else Usage()
        self._utility_usage = state.utility_usage if state else Usage()
        self._seconds = state.run_seconds if state else 0.0
        self._context: ContextWindow | None = None
        #: Messages before this index are counted in ``_context`` when it is exact.
        self._context_mark: int | None = None
        self._load_warnings: list[str] = list(state.warnings) if state else []
        # The session's id outlives the kernel, so a resumed conversation keeps its cache key.
        self._cache_key = session.id if session is not None else uuid.uuid4().hex

    # -- reading ---------------------------------------------------------------------------------

    @property
    def messages(self) -> Sequence[Message]:
        """The transcript, read-only (it is not copied: copy it to keep a snapshot)."""
        return self._messages

    @property
    def cache_key(self) -> str:
        """A stable name for this conversation, sent to providers that route requests to their
        prompt caches by one (OpenAI's ``prompt_cache_key``): the session's id, or a random id
        for a conversation without a session file. It names nothing else and holds no secret."""
        return self._cache_key

    @property
    def call_ids(self) -> Set[str]:
        """Every tool-call id used in this conversation, read-only (it grows with the transcript)."""
        return self._call_ids

    @property
    def has_images(self) -> bool:
        """Whether any message of the transcript carries a tool result's images."""
        return self._with_images > 0

    @property
    def usage(self) -> Usage:
        """Usage summed over every request made for this conversation."""
        return self._usage

    @property
    def seconds(self) -> float:
        """Wall time summed over this conversation's finished runs."""
        return self._seconds

    @property
    def context(self) -> ContextWindow | None:
        """The last context-window readout (``None`` before the first request, or after the
        transcript was rewritten)."""
        return self._context

    def context_used(self, prompt: str) -> int:
        """Tokens the next request will fill, with ``prompt`` (system prompt and tool schemas)
        before the transcript: the last exact readout plus an estimate of what was committed
        since, or else an estimate of the whole."""
        known, mark = self._context, self._context_mark
        if known is not None and not known.approximate and mark is not None:
            return known.used + estimate_tokens("", self._messages[mark:])
        return estimate_tokens(prompt, self._messages)

    @property
    def session(self) -> Session | None:
        """The session file this conversation is saved in, if any."""
        return self._session

    def require_writable(self, what: str) -> None:
        """Raise a :class:`UserError` when the session file cannot take ``what``'s changes."""
        session = self._session
        if session is not None and (session.read_only or session.closed):
            state = "open read-only" if session.read_only else "closed"
            raise UserError(
                f"Cannot {what}: the session {session.path} is {state}.",
                hint="Continue in a new file with agent.fork(session='new.agent.jsonl'), or open the "
                "session again for writing (close the agent or kernel that holds it first).",
                code="session_read_only" if session.read_only else "session_closed",
            )

    def take_load_warnings(self) -> list[str]:
        """What was repaired when the session was loaded, once (the next run reports it)."""
        warnings, self._load_warnings = self._load_warnings, []
        return warnings

    # -- changing --------------------------------------------------------------------------------

    def append(self, message: Message) -> None:
        """Commit ``message`` to the transcript (and the session)."""
        self._messages.append(message)
        self._call_ids.update(call.id for call in message.tool_calls)
        self._with_images += holds_images(message)
        if self._session is not None:
            self._write(lambda s: s.append_message(message))

    @property
    def utility_usage(self) -> Usage:
        """The part of :attr:`usage` spent on side calls (compaction's and plugins' summaries)."""
        return self._utility_usage

    def add_usage(self, usage: Usage, *, utility: bool = False) -> None:
        """Count one request's usage (the loop's turns and the summarizer's requests alike);
        ``utility``: a side call's, also counted in :attr:`utility_usage`."""
        self._usage = self._usage + usage
        if utility:
            self._utility_usage = self._utility_usage + usage
        self._write(lambda s: s.append_usage(usage, utility=utility))

    def add_run_time(self, seconds: float) -> None:
        """Count one finished run's wall time."""
        self._seconds += seconds
        self._write(lambda s: s.append_run(seconds))

    def observe_context(self, window: ContextWindow, *, counted: int | None = None) -> None:
        """Take a context readout. ``counted``: how many messages an exact readout covers (the
        request's and its reply), so later estimates add only what came after them."""
        self._context = window
        if counted is not None:
            self._context_mark = counted

    def apply_compaction(self, compaction: CompactionResult, *, reason: str) -> None:
        """Apply what a compaction decided: count its usage and, when it summarized something,
        replace the first ``dropped`` messages with its summary and record that in the session."""
        if compaction.usage.requests:
            self.add_usage(compaction.usage, utility=True)
        summary = compaction.summary
        if not compaction.dropped or summary is None:
            return
        self._messages[: compaction.dropped] = [summary]
        self._with_images = sum(map(holds_images, self._messages))  # once per compaction
        self._context = None
        self._context_mark = None
        self._write(
            lambda s: s.append_compaction(
                dropped=compaction.dropped,
                kept=compaction.kept,
                summary=summary,
                summary_hash=compaction.summary_hash,
                reason=reason,
                fallback=compaction.fallback,
            )
        )

    def reset(self) -> None:
        """Start afresh: an empty transcript, and usage and run time counted from zero (so a
        conversation budget applies anew); a session keeps its history and records the reset."""
        self._messages.clear()
        self._with_images = 0
        self._usage = Usage()
        self._utility_usage = Usage()
        self._seconds = 0.0
        self._call_ids.clear()
        self._context = None
        self._context_mark = None
        self._write(lambda s: s.append_reset())

    def record_settings(self, model: str | None, settings: ModelSettings) -> None:
        """Append a settings record when the model or settings differ from the last recorded."""
        session = self._session
        if session is None or session.read_only or session.closed:
            return
        current = {"model": model, **settings.model_dump()}
        recorded = dict.fromkeys(SETTINGS_KEYS) | {"model": session.state.model} | session.state.settings
        if {k: current.get(k) for k in SETTINGS_KEYS} != {k: recorded.get(k) for k in SETTINGS_KEYS}:
            self._write(lambda s: s.append_settings(current))

    def record_subagent(self, call_id: str, child: Session) -> None:
        """Record that the call ``call_id`` delegated to a sub-agent whose conversation is saved
        in ``child`` (a file beside this one)."""
        self._write(lambda s: s.append_subagent(call_id=call_id, session=child.id, file=child.path.name))

    def close(self) -> None:
        """Close the session file (releasing its lock)."""
        if self._session is not None:
            self._session.close()

    def _write(self, write: Callable[[Session], None]) -> None:
        """Write to the session; a failing disk becomes a warning, not a lost conversation."""
        session = self._session
        if session is None or self._session_broken or session.read_only:
            return
        try:
            write(session)
        except OSError as exc:
            self._session_broken = True
            self._emit(
                RunWarning(
                    code="session_write_failed",
                    message=f"Could not write to the session {session.path}: {exc}. The conversation "
                    "goes on in memory but is no longer saved.",
                    hint="Free disk space or fix the permissions, then save it to a new file with "
                    "agent.fork(session='new.agent.jsonl').",
                )
            )


def open_session(
    session: str | os.PathLike[str] | Session,
    *,
    model: str | None,
    notebook: str | None,
    messages: Sequence[Message],
) -> Session:
    """The session an agent's conversation is saved in: ``session`` itself when open, else the
    file opened (created when absent). One that already holds a conversation takes no
    ``messages``: the agent would have two transcripts."""
    if isinstance(session, Session):
        opened = session
    else:
        opened = Session.open(session, model=model, notebook=notebook)
    if opened.state.messages and messages:
        if not isinstance(session, Session):
            opened.close()
        raise UserError(
            f"The session {opened.path} already holds a conversation, and messages= was given too.",
            hint="Pass one or the other; to start from other messages, fork: agent.fork(session=...).",
            code="session_has_messages",
        )
    return opened
