"""Compaction: fit a long conversation back into the model's window.

:func:`compact` replaces the older part of a transcript with a summary written by the model it is
given — the agent's utility model (``Agent(utility_model=...)``), by default its endpoint's small
model or the run's own (a plain request: no tools, a summarizing system prompt, the older turns
rendered as text) and keeps the most recent messages verbatim — at least ``keep`` of them, more
when needed so that a tool call is never separated from its result. When the model fails or returns nothing, a
deterministic digest stands in, so compaction always makes progress.

:func:`compact` is pure apart from the one model request: it returns a :class:`CompactionResult`
(what it decided: the summary, how many messages it replaces, the usage it spent) and changes
nothing. The :class:`~ipyagent.agentlib.conversation.Conversation` applies it; the loop
(:func:`compact_conversation`) announces it. When to compact is the loop's
call (the context crossing a threshold, or the provider reporting an overflow, once per run) or
the user's (``await agent.compact()``).
"""

from __future__ import annotations

import hashlib
import logging
from collections import Counter
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

from .clip import clip, clip_middle
from .errors import AgentError, ErrorInfo
from .events import AgentEvent, CompactionCompleted, CompactionStarted, RunWarning
from .messages import Message, TextBlock, ThinkingBlock, ToolCallBlock, ToolResultBlock
from .model import ModelRequest, ModelSettings, Provider, TextChunk, UsageReport, open_stream
from .prices import priced
from .redact import redact_text
from .retry import Retries, RetryPolicy
from .usage import CHARS_PER_TOKEN, Usage, request_usage

if TYPE_CHECKING:  # the conversation applies a compaction's result: it imports this module
    from .conversation import Conversation

__all__ = [
    "SUMMARY_PREFIX",
    "SUMMARY_SYSTEM_PROMPT",
    "CompactionResult",
    "ask_for_text",
    "compact",
    "compact_conversation",
    "fallback_summary",
    "is_summary",
    "render_transcript",
    "split_point",
]

log = logging.getLogger("ipyagent")

SUMMARY_PREFIX = "[Summary of the earlier conversation]"
SUMMARY_SYSTEM_PROMPT = (
    "You summarize a conversation between a user and an AI assistant that works in the user's "
    "Python/Jupyter environment with tools. The assistant will continue the work with only your "
    "summary and the most recent messages, so keep everything it needs: the user's goals and "
    "requests, decisions and constraints, facts discovered (variable names, file paths, data "
    "shapes, numbers, results), what the tools did and showed, errors met and how they were "
    "resolved, and what remains to be done. Be concise and concrete; do not invent anything. "
    "Answer with the summary only, in plain text or markdown, without a preamble."
)
#: Each block is cut to this many characters in the text the summarizer reads.
BLOCK_CHARS = 4_000
#: The rendered transcript's budget when the model's window is unknown.
DEFAULT_INPUT_CHARS = 400_000


@dataclass(frozen=True)
class CompactionResult:
    """The outcome of :func:`compact`. ``messages`` is the new transcript (the summary, then the
    kept messages); with ``dropped == 0`` nothing was worth compacting and it is the old one."""

    messages: list[Message]
    dropped: int
    kept: int
    summary: Message | None = None
    summary_hash: str = ""
    fallback: bool = False
    usage: Usage = field(default_factory=Usage)
    error: ErrorInfo | None = None

    def __str__(self) -> str:
        if not self.dropped:
            return "Nothing to compact: the conversation is already short."
        how = "a mechanical digest (the model could not summarize)" if self.fallback else "a summary"
        return f"Compacted {self.dropped} messages into {how}; the last {self.kept} are kept verbatim."


def is_summary(message: Message) -> bool:
    """Whether ``message`` is the summary an earlier compaction left."""
    return message.role == "user" and message.text.startswith(SUMMARY_PREFIX)


def split_point(messages: Sequence[Message], keep: int) -> int:
    """Index of the first message kept verbatim: ``keep`` from the end, moved earlier until no
    tool call is separated from its result. 0 means there is nothing to compact."""
    cut = max(0, len(messages) - max(0, keep))
    while 0 < cut < len(messages) and messages[cut - 1].tool_calls:
        cut -= 1
    if cut == 1 and is_summary(messages[0]):
        return 0  # only an earlier summary is left to drop: summarizing it again gains nothing
    return cut


async def compact(
    messages: Sequence[Message],
    provider: Provider,
    *,
    keep: int = 6,
    focus: str = "",
    settings: ModelSettings | None = None,
    retry: RetryPolicy | None = None,
    screen: Callable[[ModelRequest], Awaitable[ModelRequest]] | None = None,
) -> CompactionResult:
    """Summarize all but the last ``keep`` messages of ``messages`` with ``provider``.

    Args:
        keep: Messages kept verbatim at the end (more when a tool call and its result straddle
            the cut).
        focus: What the summary should pay most attention to (e.g. ``"the plotting code"``).
        settings: The conversation's model settings (``max_tokens`` is honoured).
        retry: Retries for rate limits and dropped connections; other failures fall back at once.
        screen: What the summary request goes through before it is sent (the redaction of
            secrets and the policies, :func:`~ipyagent.agentlib.hooks.screener`); when it
            raises (a policy blocked), nothing is sent and the digest stands in.
    """
    transcript = list(messages)
    cut = split_point(transcript, keep)
    if cut == 0:
        return CompactionResult(messages=transcript, dropped=0, kept=len(transcript))
    older, kept = transcript[:cut], transcript[cut:]
    budget = _input_budget(provider.context_limit)
    prompt = render_transcript(older, budget=budget)
    if focus.strip():
        prompt += f"\n\nWhen summarizing, focus especially on: {focus.strip()}"
    request = ModelRequest(
        model=provider.model_id.split("/", 1)[-1],
        system=SUMMARY_SYSTEM_PROMPT,
        messages=[Message.user(prompt)],
        # A one-off prompt: a cache write (1.25x the input price at Anthropic) would never be read.
        settings=ModelSettings(max_tokens=settings.max_tokens if settings else None, prompt_cache="off"),
    )
    error: ErrorInfo | None
    try:
        request = request if screen is None else await screen(request)
    except AgentError as exc:
        text, usage, error = "", Usage(), exc.info
    else:
        text, usage, error = await ask_for_text(provider, request, retry or RetryPolicy())
    fallback = not text.strip()
    if fallback:
        text = fallback_summary(older)
    summary = Message.user(f"{SUMMARY_PREFIX} ({len(older)} messages summarized)\n\n{text.strip()}")
    return CompactionResult(
        messages=[summary, *kept],
        dropped=len(older),
        kept=len(kept),
        summary=summary,
        summary_hash=hashlib.sha256(summary.text.encode()).hexdigest()[:16],
        fallback=fallback,
        usage=usage,
        error=error,
    )


async def ask_for_text(
    provider: Provider, request: ModelRequest, policy: RetryPolicy
) -> tuple[str, Usage, ErrorInfo | None]:
    """One plain request outside a run's loop (a summary: this module's, a run's summary), retried
    as ``policy`` says: the text ("" on failure), the usage it cost (priced as ``provider``'s
    model), and the failure if any."""
    usage = Usage()

    async def send(attempt: int) -> str:
        nonlocal usage
        pieces: list[str] = []
        reported: Usage | None = None
        try:
            async with open_stream(provider, request) as stream:
                async for chunk in stream:
                    if isinstance(chunk, TextChunk):
                        pieces.append(chunk.text)
                    elif isinstance(chunk, UsageReport):
                        reported = chunk.usage
        except AgentError:
            usage = usage + priced(request_usage(reported), provider.model_id)  # it was still made
            raise
        usage = usage + priced(request_usage(reported), provider.model_id)
        return "".join(pieces)

    try:
        text = await Retries(policy, provider).run(send)
    except AgentError as exc:
        return "", usage, exc.info
    except Exception as exc:  # a provider bug must not lose the conversation: fall back
        said = redact_text(f"{type(exc).__name__}: {exc}")
        log.warning("ipyagent: the summary request raised %s", said)
        return "", usage, ErrorInfo(code="unexpected_error", layer="provider", message=said)
    return text, usage, None


def _input_budget(context_limit: int | None) -> int:
    if not context_limit:
        return DEFAULT_INPUT_CHARS
    # Leave room for the system prompt and the summary itself.
    return max(8_000, int(context_limit * CHARS_PER_TOKEN * 0.6))


def render_transcript(messages: Sequence[Message], *, budget: int = DEFAULT_INPUT_CHARS) -> str:
    """The messages as text for the summarizer: long blocks cut in the middle; when the whole is
    over ``budget`` characters, the oldest messages (after an earlier summary) are left out."""
    rendered = [_render(m) for m in messages]
    head: list[str] = []
    if rendered and is_summary(messages[0]):
        head, rendered = rendered[:1], rendered[1:]
    total = sum(map(len, head))
    tail: list[str] = []
    for text in reversed(rendered):
        if total + len(text) > budget and tail:
            tail.append(f"[… {len(rendered) - len(tail)} older messages left out to fit …]")
            break
        tail.append(text)
        total += len(text)
    body = "\n\n".join([*head, *reversed(tail)])
    return f"Summarize this conversation:\n\n<conversation>\n{body}\n</conversation>"


def _render(message: Message) -> str:
    lines = [f"## {message.role}"]
    for block in message.content:
        if isinstance(block, TextBlock):
            lines.append(clip_middle(block.text, BLOCK_CHARS))
        elif isinstance(block, ToolCallBlock):
            lines.append(f"→ called {block.name}({clip_middle(block.raw_arguments, 1_000)})")
        elif isinstance(block, ToolResultBlock):
            status = "error" if block.is_error else "result"
            lines.append(f"← {block.name or 'tool'} {status}: {clip_middle(block.content, BLOCK_CHARS)}")
        elif isinstance(block, ThinkingBlock):
            continue  # private reasoning: signatures and all stay out of the summary
        else:
            lines.append("[image]")
    return "\n".join(lines)


def fallback_summary(messages: Sequence[Message]) -> str:
    """A deterministic digest of ``messages`` for when the model cannot summarize: the user's
    requests, the tools used, and the last reply."""
    parts = ["(Automatic digest: the model could not write a summary.)"]
    if messages and is_summary(messages[0]):
        parts.append("Earlier summary:\n" + clip_middle(messages[0].text, 3_000))
        messages = messages[1:]
    requests = [m.text.strip() for m in messages if m.role == "user" and m.text.strip()]
    if requests:
        shown = requests[-20:]
        lines = [f"- {_one_line(t, 300)}" for t in shown]
        more = f" (the last {len(shown)} of {len(requests)})" if len(requests) > len(shown) else ""
        parts.append(f"The user asked{more}:\n" + "\n".join(lines))
    calls = Counter(c.name for m in messages for c in m.tool_calls)
    failures = Counter(r.name for m in messages for r in m.tool_results if r.is_error)
    if calls:
        used = ", ".join(
            f"{name} ×{n}" + (f" ({failures[name]} failed)" if failures[name] else "")
            for name, n in sorted(calls.items())
        )
        parts.append(f"Tools used: {used}.")
    last = next((m.text.strip() for m in reversed(messages) if m.role == "assistant" and m.text.strip()), "")
    if last:
        parts.append("The assistant's last reply in this part:\n" + clip_middle(last, 1_500))
    return "\n\n".join(parts)


def _one_line(text: str, limit: int) -> str:
    return clip(" ".join(text.split()), limit)


async def compact_conversation(
    conversation: Conversation,
    provider: Provider,
    *,
    keep: int,
    settings: ModelSettings,
    retry: RetryPolicy,
    reason: Literal["threshold", "overflow", "manual"],
    focus: str = "",
    emit: Callable[[AgentEvent], None],
    screen: Callable[[ModelRequest], Awaitable[ModelRequest]] | None = None,
) -> CompactionResult:
    """Compact ``conversation`` now: announce it, let :func:`~ipyagent.agentlib.compaction.compact`
    decide (its request through ``screen``), have the conversation apply the decision, and
    report how it went."""
    emit(CompactionStarted(reason=reason, messages=len(conversation.messages)))
    result = await compact(
        conversation.messages, provider, keep=keep, focus=focus, settings=settings, retry=retry, screen=screen
    )
    conversation.apply_compaction(result, reason=reason)
    if result.error is not None:
        emit(
            RunWarning(
                code="compaction_fallback",
                message=f"The model could not summarize the conversation ({result.error.message}); "
                "a mechanical digest was used instead.",
                hint=result.error.hint,
            )
        )
    summary = result.summary
    emit(
        CompactionCompleted(
            dropped=result.dropped,
            kept=result.kept,
            summary=summary.text if summary else "",
            summary_hash=result.summary_hash,
            fallback=result.fallback,
        )
    )
    return result
