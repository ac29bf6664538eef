"""The ``summaries`` plugin: each finished run compacted into a summary and advice, and the last
few replayed into the later conversations of the same notebook.

    from ipyagent import Agent, Summaries

    agent = Agent(model=..., session="analysis.agent.jsonl", plugins=[Summaries()])
    agent.plugins.get("summaries").records()   # what it keeps; .clear() deletes it

When a run completes, the agent's utility model (its endpoint's small model, else the run's; see
``Agent(utility_model=...)``) is asked (one plain request, through the redaction of
secrets and the policies, as a compaction's) for a short summary of what the run did and found
and advice for later work; when the model fails, a deterministic digest of the run stands in. A
run that stopped at a cap (``exhausted``: its budget, ``max_turns``) gets the digest without a
request, which would spend past the cap. The record is appended to ``<notebook>.summaries.jsonl``
beside the conversation's session file (``analysis.summaries.jsonl`` for ``analysis.agent.jsonl``),
or to ``path``; an agent
with neither keeps them in memory. A conversation is told the last ``replay`` summaries recorded
before it began — a new conversation (``%%agent --new``, another session, the kernel restarted)
reads what the earlier ones did; its own runs are in its transcript already.

The file is read with :func:`.jsonl.read_lines` under :data:`POLICY`: a line that cannot be read
is skipped with a :class:`SummariesWarning`. This module owns the summary request, the record and
its file; when it runs is the loop's.
"""

from __future__ import annotations

import json
import os
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .atomic import atomic_write
from .clip import clip
from .compaction import ask_for_text, fallback_summary, render_transcript
from .errors import AgentError, ErrorInfo
from .events import RunWarning
from .jsonl import Policy, append_line, json_line, open_for_append, read_lines
from .messages import Message
from .model import ModelRequest, ModelSettings
from .plugins import Plugin, PluginRun
from .redact import redact_text
from .result import RunResult
from .sessions import Session
from .usage import Usage

__all__ = ["SUMMARIES_SYSTEM_PROMPT", "RunSummary", "Summaries", "SummariesWarning", "summaries_path"]

SUMMARIES_SYSTEM_PROMPT = (
    "You write the notes a data analyst keeps about a finished piece of work with an AI assistant in "
    "a Jupyter notebook. Read the run below and answer in two short parts, plain text:\n"
    "Summary: what was asked, what was done, and what was found (names of variables, files, numbers).\n"
    "Advice: what to keep in mind next time (what worked, what failed and why, what is left to do).\n"
    "At most 120 words in all; do not invent anything."
)
#: The run's transcript as the summarizer reads it, at most this many characters.
INPUT_CHARS = 40_000


@dataclass(frozen=True)
class RunSummary:
    """One finished run, compacted: ``summary`` and ``advice`` (``fallback`` when the model
    could not write them and a digest stands in)."""

    at: float
    run_id: str
    status: str
    summary: str
    advice: str = ""
    session: str = ""
    fallback: bool = False

    def to_json(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if v not in ("", False)}

    @classmethod
    def from_json(cls, record: dict[str, Any]) -> RunSummary:
        fields = {k: record[k] for k in cls.__dataclass_fields__ if k in record}
        return cls(**fields)

    def __str__(self) -> str:
        when = time.strftime("%Y-%m-%d %H:%M", time.localtime(self.at))
        advice = f"\nAdvice: {self.advice}" if self.advice else ""
        return f"[{when}] {self.summary}{advice}"


def summaries_path(session: Session) -> Path:
    """Where the summaries of ``session``'s notebook go: ``<notebook>.summaries.jsonl`` in the
    session's folder (the notebook's name from the session's header, else the file's first part)."""
    stem = Path(session.notebook).stem if session.notebook else session.path.name.split(".", 1)[0]
    return session.path.with_name(f"{stem}.summaries.jsonl")


class SummariesWarning(UserWarning):
    """A line of a summaries file could not be read and was skipped (a torn or damaged line)."""


#: Summaries are background for later conversations: a line that cannot be read is skipped with a
#: warning rather than stopping every run of the notebook. The next rewrite (``keep``, ``forget``)
#: leaves it out.
POLICY = Policy(
    what="summaries file",
    damaged="skip",
    torn="the summary it held is lost",
    hint="Delete that line of {path}, or every summary with summaries.clear().",
    code="summaries_damaged",
)


class Summaries(Plugin):
    """Compact each finished run into a summary and advice, and tell later conversations of the
    same notebook the last ``replay`` of them.

    Args:
        path: The JSONL file they are kept in (default: beside the conversation's session file,
            ``<notebook>.summaries.jsonl``; in memory for an agent without a session).
        replay: How many of the latest summaries a new conversation is told (0: none).
        max_chars: Each summary and each advice is cut to this many characters.
        keep: How many summaries are kept; past that, the oldest are deleted.
    """

    name = "summaries"

    def __init__(
        self,
        path: str | os.PathLike[str] | None = None,
        *,
        replay: int = 3,
        max_chars: int = 800,
        keep: int = 100,
    ) -> None:
        self.path = Path(path) if path is not None else None
        self.replay = replay
        self.max_chars = max_chars
        self.keep = keep
        self._kept: list[RunSummary] = []  # without a file

    # -- what the user reads and deletes --------------------------------------------------------

    def records(self) -> list[RunSummary]:
        """Every summary kept, oldest first."""
        if self.path is None:
            return list(self._kept)
        try:
            handle = self.path.open("rb")
        except FileNotFoundError:
            return []
        with handle:
            read = read_lines(handle, self.path, _summary, POLICY)
        for note in read.notes:
            warnings.warn(note, SummariesWarning, stacklevel=2)
        return read.records

    def clear(self) -> int:
        """Delete every summary kept (the file too); returns how many there were."""
        count = len(self.records())
        self._kept.clear()
        if self.path is not None:
            self.path.unlink(missing_ok=True)
        return count

    def forget(self, run_id: str) -> bool:
        """Delete the summary of run ``run_id``; False when there is none."""
        kept = self.records()
        rest = [r for r in kept if r.run_id != run_id]
        if len(rest) == len(kept):
            return False
        if self.path is None:
            self._kept = rest
        else:
            atomic_write(self.path, "".join(json_line(r.to_json()) for r in rest))
        return True

    # -- the plugin -----------------------------------------------------------------------------

    def context(self, run: PluginRun) -> str | None:
        self._settle_path(run)
        if self.replay <= 0:
            return None
        started = run.conversation_started
        earlier = [r for r in self.records() if r.at < started][-self.replay :]
        if not earlier:
            return None
        body = "\n\n".join(str(r) for r in earlier)
        return (
            "What earlier conversations in this notebook did (their summaries, oldest first; "
            f"use them as background, the user may have changed things since):\n\n{body}"
        )

    async def on_run_end(self, result: RunResult, run: PluginRun) -> None:
        if result.status not in ("completed", "exhausted") or not result.messages:
            return
        self._settle_path(run)
        if result.status == "exhausted":  # it met a cap: a digest, which costs no request
            text, usage, error = "", Usage(), None
        else:
            text, usage, error = await self._ask(result, run)
        run.count_usage(usage)
        summary, advice = _parts(text)
        fallback = not summary
        if fallback and result.status == "exhausted":
            summary, advice = fallback_summary(result.messages), ""
        elif fallback:
            summary, advice = fallback_summary(result.messages), ""
            problem = error.message if error is not None else "it returned nothing"
            run.emit(
                RunWarning(
                    code="summary_fallback",
                    message=f"The model could not summarize the run ({problem}); a digest was kept instead.",
                    hint=error.hint if error is not None else "",
                )
            )
        record = RunSummary(
            at=time.time(),
            run_id=result.run_id,
            status=result.status,
            summary=self._clip(summary),
            advice=self._clip(advice),
            session=run.session.id if run.session is not None else "",
            fallback=fallback,
        )
        self._keep(record)

    # -- plumbing -------------------------------------------------------------------------------

    def _settle_path(self, run: PluginRun) -> None:
        if self.path is None and run.session is not None:
            self.path = summaries_path(run.session)

    def _keep(self, record: RunSummary) -> None:
        if self.path is None:
            self._kept = [*self._kept, record][-self.keep :]
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = open_for_append(self.path)  # a torn last line is cut: the record starts a line
        try:
            append_line(fd, json_line(record.to_json()))
        finally:
            os.close(fd)
        kept = self.records()
        if len(kept) > self.keep:
            atomic_write(self.path, "".join(json_line(r.to_json()) for r in kept[-self.keep :]))

    def _clip(self, text: str) -> str:
        text = redact_text(" ".join(text.split()))
        return clip(text, self.max_chars)

    async def _ask(self, result: RunResult, run: PluginRun) -> tuple[str, Usage, ErrorInfo | None]:
        """The model's answer ("" when it failed), the usage it cost, and the failure if any."""
        provider = run.utility_provider
        asked = ModelRequest(
            model=provider.model_id.split("/", 1)[-1],
            system=SUMMARIES_SYSTEM_PROMPT,
            messages=[Message.user(render_transcript(result.messages, budget=INPUT_CHARS))],
            # A one-off prompt: a cache write would never be read back.
            settings=ModelSettings(max_tokens=run.settings.max_tokens, prompt_cache="off"),
        )
        try:
            request = asked if run.screen is None else await run.screen(asked)
        except AgentError as exc:  # a policy blocked it: nothing is sent
            return "", Usage(), exc.info
        return await ask_for_text(provider, request, run.retry)


def _summary(line: bytes, number: int) -> RunSummary:
    record = json.loads(line)
    if not isinstance(record, dict):
        raise ValueError("not a JSON object")
    return RunSummary.from_json(record)


def _parts(text: str) -> tuple[str, str]:
    """``(summary, advice)`` of the model's answer ("Summary: ... Advice: ...")."""
    text = text.strip()
    head, sep, advice = text.partition("Advice:")
    summary = head.strip()
    if summary.lower().startswith("summary:"):
        summary = summary[len("summary:") :].strip()
    return summary, advice.strip() if sep else ""
