"""One run of the agent loop.

Append the user's message; stream a model turn; commit the assistant message; execute every
tool call of that turn; append the results; repeat until the model stops calling tools, a guard
trips, the run is cancelled or an error cannot be recovered. Whatever happens, the transcript it
leaves behind is one the next request accepts: every tool call has a result.

This module owns the loop's rules (retries, guards, permissions, hooks, timeouts, and when to
compact: once per run, when the context nears the model's window or the provider reports an
overflow). A run is given everything it touches: the
:class:`~ipyagent.agentlib.conversation.Conversation` it appends to, a frozen
:class:`RunConfig` (what it reads of the agent's configuration), and the channels a person
reaches it through (the event bus, pending answers, the inbox of sent input). It needs no
:class:`~ipyagent.agentlib.agent.Agent`, which builds those and starts the run.
"""

from __future__ import annotations

import asyncio
import json
import logging
import sys
import time
from collections.abc import Container, Sequence
from dataclasses import replace
from typing import Any, Literal

from .asks import Inbox, PendingAnswers
from .attachments import attachment_label
from .budget import Hold, Spending, TokenLedger, spent_tokens
from .bus import EventBus
from .claims import UntracedCheck, trace_claims
from .compaction import compact_conversation, split_point
from .control_files import CONTROL_HINT, control_changes, control_denied, control_refusal, control_warning
from .conversation import Conversation
from .errors import AgentError, ContextOverflowError, ErrorInfo, HookError, PolicyBlocked, RunError
from .events import (
    AgentEvent,
    AskUserAnswered,
    AskUserRequired,
    AttachmentSent,
    Decision,
    MessageCommitted,
    PermissionRequired,
    PermissionResolved,
    RequestDone,
    RequestError,
    RequestStarted,
    RunCancelled,
    RunFailed,
    RunFinished,
    RunStarted,
    RunWarning,
    ToolExecuting,
    ToolResult,
    UsageUpdated,
)
from .hooks import (
    BlockToolCall,
    ToolCallBlocked,
    ToolCallInfo,
    check_tool_call,
    fail_open,
    prepare_request,
    screener,
)
from .messages import ContentBlock, ImageBlock, Message, TextBlock, ToolCallBlock, ToolResultBlock, new_id
from .model import ModelRequest, open_stream
from .output import AnswerCheck
from .parent_run import ParentRun, either
from .parts import PartsAssembler
from .plugins import PluginRun, plugins_on_run_end, plugins_on_turn, start_plugins
from .redact import known_secrets, redact, redact_strings, redact_text
from .request_redaction import RequestRedactor
from .result import RunResult
from .retry import Retries
from .run_config import RunConfig
from .tool_choice import choose, expects_tool_call
from .tool_sources import SourceContext, gather_tools
from .tools import RunContext, Tool, ToolArgumentsError, ToolOutput, call_groups, jsonable, to_output
from .usage import ContextWindow, Usage, estimate_tokens, request_usage
from .vision import accepts_images, images_rejected, without_images

__all__ = ["AgentRun", "RunConfig"]

log = logging.getLogger("ipyagent")

#: Images kept of one tool result (figures for vision models); more are described in its text.
MAX_RESULT_IMAGES = 4

CANCELLED_RESULT = "Cancelled: the user stopped the run before this tool call finished."
OVER_BUDGET_RESULT = "Not run: the reply that asked for it took the run past its token budget."


class _OutOfBudget(Exception):
    """The token ledger has too little left for the next request: the run ends ``exhausted``."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class AgentRun:
    """The state of one run. Created by ``Agent.run``; :meth:`execute` never raises an
    :class:`AgentError` — failures become a ``failed`` result (cancellation a ``cancelled`` one).

    Args:
        conversation: The transcript the run continues and commits to.
        config: What the run reads of the agent's configuration.
        prompt: The user's message that starts the run.
        attachments: Blocks sent with it (files, images, variable summaries).
        bus: Where events go; a listener or stream on it is who can answer permission prompts
            and questions.
        answers: Where those answers arrive (from any thread).
        inbox: Input sent while the run is in flight; it is taken between turns.
        always_allowed: Tools the user allowed for the rest of the conversation; the run adds to it.
        ledger: The token budget to draw on, shared with the run that started this one (a
            sub-agent's); by default the run's own, made from its caps.
    """

    def __init__(
        self,
        conversation: Conversation,
        config: RunConfig,
        prompt: str,
        *,
        attachments: Sequence[ContentBlock] = (),
        bus: EventBus,
        answers: PendingAnswers | None = None,
        inbox: Inbox | None = None,
        always_allowed: set[str] | None = None,
        reserved_ids: Container[str] = (),
        ledger: TokenLedger | None = None,
    ) -> None:
        self.conversation = conversation
        self.config = config
        self.provider = config.provider
        self.prompt = prompt
        self.attachments = tuple(attachments)
        self.bus = bus
        self.answers = answers if answers is not None else PendingAnswers()
        self.inbox = inbox if inbox is not None else Inbox()
        self.always_allowed = always_allowed if always_allowed is not None else set()
        #: Tool-call ids the model may not reuse: the conversation's, and a parent run's.
        self.taken_ids = either(conversation.call_ids, reserved_ids)
        self.run_id = new_id("run")
        self.turn = 0
        self.usage = Usage()
        self.messages: list[Message] = []
        self.tools: dict[str, Tool] = {t.name: t for t in config.tools}
        # Guards.
        self._last_call: tuple[str, str] | None = None
        self._repeats = 0
        self._failures = 0
        # Calls refused at the permission prompt: their results are marked ``denied``.
        self._denied: set[str] = set()
        # What a cancellation must tidy up.
        self._assembler: PartsAssembler | None = None
        self._calls: Sequence[ToolCallBlock] = ()
        self._results: dict[str, ToolResultBlock] = {}
        # Compaction: at most once per run; the transcript length when the last request was built.
        self._compacted = False
        self._request_mark = 0
        self.spending = Spending(
            config.budget,
            config.conversation_budget,
            conversation_seconds=conversation.seconds,
            conversation_tokens=spent_tokens(conversation.usage),
            ledger=ledger,
        )
        self._redactor = RequestRedactor() if config.redact_requests else None
        self._typed = AnswerCheck(config.output, config.output_retries) if config.output else None
        self._verify = UntracedCheck() if config.verify else None

    # -- the loop --------------------------------------------------------------------------------

    async def execute(self) -> RunResult:
        result = await self._execute()
        if self.config.plugins:  # the run has ended and said so; its plugins are told last
            await plugins_on_run_end(self._plugin_run(), result)
        return result

    async def _execute(self) -> RunResult:
        self._emit(RunStarted(run_id=self.run_id, model=self.provider.model_id, prompt=self.prompt))
        for text in self.conversation.take_load_warnings():
            self._emit(RunWarning(code="session_repaired", message=text))
        config = self.config
        self.spending.start_timer()
        started = False
        try:
            if spent := self.spending.before_run(self.conversation.usage):
                return self._finish("exhausted", spent)  # before the prompt: nothing is committed
            started = True
            self.conversation.record_settings(config.model, config.settings)
            notes = await self._gather_tools() if config.tool_sources else ()
            if config.plugins:  # their context and tools join this run's
                self.config = await start_plugins(self._plugin_run())
                self.tools = {t.name: t for t in self.config.tools}
            config = self.config
            self._commit(Message.user(_join(self.prompt, self.inbox.take()), *self.attachments, *notes))
            for block in self.attachments:
                if isinstance(block, TextBlock | ImageBlock):
                    text = block.text if isinstance(block, TextBlock) else ""
                    tokens = estimate_tokens("", [Message.user("", block)])
                    self._emit(AttachmentSent(label=attachment_label(block), text=text, tokens=tokens))
            while True:
                if self.turn >= config.max_turns:
                    return self._finish(
                        "exhausted",
                        f"Stopped after {config.max_turns} model turns (max_turns). "
                        "Run again to let the agent continue, or raise max_turns.",
                    )
                prompt = self.conversation.context_used(config.prompt_text)
                if spent := self.spending.before_request(self.usage, self.conversation.usage, prompt):
                    return self._finish("exhausted", spent)
                self.turn += 1
                reply = await self._model_turn()
                self._commit(reply)
                await self._after_model(reply)
                if over := self.spending.overspent(self.usage, self.conversation.usage):
                    if reply.tool_calls:  # not run, but answered: the transcript stays valid
                        unrun = [
                            self._result_block(c, OVER_BUDGET_RESULT, is_error=True) for c in reply.tool_calls
                        ]
                        self._commit(Message(role="user", content=tuple(unrun)))
                    return self._finish("exhausted", over)
                if not reply.tool_calls:
                    if reply.finish_reason == "pause":  # the provider asks us to let it go on
                        continue
                    if queued := self.inbox.take():
                        self._commit(Message.user(queued))
                        continue
                    if config.output is not None and (again := self._read_answer(reply)) is not None:
                        self._commit(again)
                        continue
                    verify = self._verify if self.turn < config.max_turns else None  # room for one more
                    if verify and (ask := verify.check(self._final_text(), self.messages, self.prompt)):
                        self._emit(RunWarning(code="verify", message=ask.warning))
                        self._commit(Message.user(ask.prompt))
                        continue
                    return self._finish("completed")
                results = await self._run_tools(reply.tool_calls)
                queued = self.inbox.take()
                extra: tuple[ContentBlock, ...] = (TextBlock(text=queued),) if queued else ()
                self._commit(Message(role="user", content=(*results, *extra)))
                if self._failures >= config.max_consecutive_failures:
                    raise RunError(
                        f"Stopped after {self._failures} tool calls in a row failed.",
                        hint="Read the tool errors above; fix the tool or its inputs, or rephrase.",
                        code="repeated_tool_failure",
                    )
        except _OutOfBudget as exc:
            self._tidy_after_interruption()
            return self._finish("exhausted", exc.reason)
        except asyncio.CancelledError:
            if out_of_time := self.spending.out_of_time():
                self._tidy_after_interruption()
                return self._finish("exhausted", out_of_time)
            return self._cancelled()
        except AgentError as exc:
            return self._failed(exc.info)
        except Exception as exc:  # a bug, or a provider that leaked a foreign exception
            log.exception("ipyagent: unexpected error in run %s", self.run_id)
            return self._failed(
                ErrorInfo(
                    code="unexpected_error",
                    layer="run",
                    severity="fatal",
                    message=redact_text(f"Unexpected {type(exc).__name__}: {exc}"),
                    hint="This is a bug in ipyagent or in a custom provider; the conversation is intact, "
                    "so you can try again.",
                )
            )
        finally:
            self.spending.stop_timer()
            if started and sys.exc_info()[0] is None:  # not as the process goes down
                self.conversation.add_run_time(self.spending.elapsed)

    async def _gather_tools(self) -> tuple[TextBlock, ...]:
        """Add the tool sources' tools to this run's (see :mod:`.tool_sources`); returns the notes."""
        config = self.config
        context = SourceContext(ask=self._ask_user, auto_approve=config.auto_approve)
        added, notes = await gather_tools(config.tool_sources, context, known=self.tools, emit=self._emit)
        if added:
            tools = (*config.tools, *added)
            system = config.system_for(tools) if config.system_for else config.system
            self.config, self.tools = replace(config, tools=tools, system=system), {t.name: t for t in tools}
        return notes

    def _read_answer(self, reply: Message) -> Message | None:
        """Take the typed answer from the reply that ends the run; when it is not valid, the
        message that asks again (past ``output_retries``, :class:`OutputValidationError`)."""
        assert self._typed is not None
        again = self._typed.check(reply.text)
        if again is None:
            return None
        self._emit(RunWarning(code="invalid_output", message=again.warning))
        return Message.user(again.prompt)

    # -- model turns -----------------------------------------------------------------------------

    async def _model_turn(self) -> Message:
        await self._compact_if_near_limit()
        retries = Retries(self.config.retry, self.provider)
        empty_replies = 0
        while True:
            reply = await retries.run(self._send, on_error=self._request_failed)
            if reply.text.strip() or reply.tool_calls:
                return reply
            empty_replies += 1
            if empty_replies > 1:
                raise RunError(
                    "The model returned an empty reply twice in a row.",
                    hint="Try again, rephrase the prompt, or pick another model.",
                    code="empty_response",
                )
            self._emit(
                RunWarning(code="empty_response", message="The model returned an empty reply; asking again.")
            )

    async def _send(self, attempt: int) -> Message:
        """One attempt at the turn's request: reserve what it may cost, build it, stream the
        reply, count its usage."""
        config = self.config
        capped = self.spending.ledger is not None  # the estimate is needed only under a token cap
        prompt = self.conversation.context_used(config.prompt_text) if capped else 0
        hold = await self.spending.reserve(prompt, config.settings.max_tokens)
        if isinstance(hold, str):
            raise _OutOfBudget(hold)
        try:
            request = await self._build_request(hold)
            self._emit(RequestStarted(turn=self.turn, attempt=attempt, model=self.provider.model_id))
            started = time.monotonic()
            assembler = self._assembler = PartsAssembler(taken_ids=self.taken_ids)
            try:
                async with open_stream(self.provider, request) as stream:
                    async for chunk in stream:
                        for event in assembler.feed(chunk):
                            self._emit(event)
                for event in assembler.finish():
                    self._emit(event)
            except AgentError:
                self._assembler = None
                raise
            self._assembler = None
            reply = assembler.message(model=self.provider.model_id)
            usage = self._record_usage(assembler, request)
            hold.settle(spent_tokens(usage))
        finally:
            hold.settle(0)  # failed or cancelled: what it did not report is not counted
        self._emit(
            RequestDone(
                turn=self.turn,
                finish_reason=reply.finish_reason or "stop",
                usage=usage,
                duration=time.monotonic() - started,
            )
        )
        return reply

    async def _request_failed(self, exc: AgentError, attempt: int, delay: float | None) -> bool:
        """Report a failed attempt; on an overflow, compact and ask to send again at once."""
        if isinstance(exc, HookError):
            return False  # a before-model hook failed: nothing was sent, and it is not retried
        overflow = isinstance(exc, ContextOverflowError) and self._can_compact()
        self._emit(
            RequestError(
                turn=self.turn,
                attempt=attempt,
                error=exc.info,
                will_retry=delay is not None or overflow,
                retry_in=delay,
            )
        )
        if overflow:  # make room, then send the turn again (once: the run compacts once)
            await self._compact("overflow")
            return True
        rejected = images_rejected(exc, self.provider.model_id, self.conversation.messages)
        if rejected is not None:  # send the figures' descriptions instead, at once
            self._emit(rejected)
            return True
        if delay is not None:
            self._emit(
                RunWarning(
                    code="retrying",
                    message=f"{exc.info.message} Retrying in {delay:.1f} s "
                    f"(attempt {attempt + 1} of {self.config.retry.attempts}).",
                    hint=exc.info.hint,
                )
            )
        return False

    async def _build_request(self, hold: Hold) -> ModelRequest:
        config = self.config
        specs = [t.spec for t in config.tools]
        self._request_mark = len(self.conversation.messages)
        # Every part is already validated; re-validating the whole transcript each turn would
        # make a long conversation quadratic.
        choice = choose(config.tool_choice, self.messages, specs)  # see tool_choice.py
        settings = config.settings
        cap = hold.reply  # a reply may not take the run past its token cap
        if (
            hold.ledger is not None
            and cap is not None
            and (settings.max_tokens is None or cap < settings.max_tokens)
        ):
            settings = settings.model_copy(update={"max_tokens": cap})
        messages = list(self.conversation.messages)
        if self.conversation.has_images and not accepts_images(self.provider.model_id):
            messages = without_images(messages)  # their text describes them
        output = config.output
        request = ModelRequest.model_construct(
            model=self.provider.model_id.split("/", 1)[-1],
            system=_join(config.system, output.instructions) if output else config.system,
            messages=messages,
            tools=specs,
            settings=settings,
            tool_choice=choice,
            expects_tool_call=expects_tool_call(choice, self.messages, specs),
            output_schema=output.schema if output else None,
            cache_key=self.conversation.cache_key,  # prompt caching: one key per conversation
        )
        try:
            return await prepare_request(config.hooks, request, redact=self._redactor)
        except PolicyBlocked as exc:
            if exc.blocked is not None:
                self._emit(exc.blocked.event("model_request"))
            raise

    # -- compaction ------------------------------------------------------------------------------

    def _can_compact(self) -> bool:
        return not self._compacted and split_point(self.conversation.messages, self.config.compact_keep) > 0

    async def _compact_if_near_limit(self) -> None:
        threshold = self.config.compact_threshold
        known = self.conversation.context
        limit = self.provider.context_limit or (known.limit if known else None)
        if threshold is None or not limit or not self._can_compact():
            return
        if self.conversation.context_used(self.config.prompt_text) >= threshold * limit:
            await self._compact("threshold")

    async def _compact(self, reason: Literal["threshold", "overflow"]) -> None:
        self._compacted = True
        config = self.config
        result = await compact_conversation(
            self.conversation,
            config.utility_provider,
            keep=config.compact_keep,
            settings=config.settings,
            retry=config.retry,
            reason=reason,
            emit=self._emit,
            screen=screener(config.hooks, self._redactor, self._emit),
        )
        self.usage = self.usage + result.usage
        if self.spending.ledger is not None:  # sent without a reservation; counted all the same
            self.spending.ledger.charge(spent_tokens(result.usage))

    async def _after_model(self, reply: Message) -> None:
        for fn in [fn for h in self.config.hooks.chain() for fn in h.after_model]:
            await fail_open(fn, reply, emit=self._emit)
        if self.config.plugins:
            await plugins_on_turn(self._plugin_run(), reply)

    def _record_usage(self, assembler: PartsAssembler, request: ModelRequest) -> Usage:
        reported = assembler.usage
        usage = self.spending.priced(request_usage(reported), self.provider.model_id)
        if warning := self.spending.unpriced_warning(usage, self.provider.model_id):
            self._emit(warning)
        self.usage = self.usage + usage
        self.conversation.add_usage(usage)
        limit = assembler.context_limit or self.provider.context_limit
        if reported and reported.input_tokens:
            context = ContextWindow(
                used=reported.input_tokens + reported.output_tokens + reported.cache_read_tokens,
                limit=limit,
                approximate=False,
            )
            # The readout counts the request's messages and the reply about to be committed.
            self.conversation.observe_context(context, counted=self._request_mark + 1)
        else:
            context = ContextWindow(
                used=estimate_tokens(request.system, self.conversation.messages), limit=limit
            )
            self.conversation.observe_context(context)
        self._emit(
            UsageUpdated(
                request=usage,
                total=self.conversation.usage,
                context=context,
                budget=self.spending.readout(self.usage),
            )
        )
        return usage

    # -- tools -----------------------------------------------------------------------------------

    async def _run_tools(self, calls: Sequence[ToolCallBlock]) -> list[ToolResultBlock]:
        """Run every call: consecutive read-only calls together, each mutating call alone, in order."""
        self._calls, self._results = calls, {}
        for group in call_groups(calls, self.tools):
            if self._failures >= self.config.max_consecutive_failures:
                for call in group:
                    self._results[call.id] = self._result_block(
                        call, "Not run: the run stopped after repeated tool failures.", is_error=True
                    )
                continue
            if len(group) == 1:
                await self._run_call(group[0])
            else:
                await asyncio.gather(*(self._run_call(call) for call in group))
        results = [self._results[call.id] for call in calls]
        self._calls, self._results = (), {}
        return results

    async def _run_call(self, call: ToolCallBlock) -> None:
        started = time.monotonic()
        output, display_args, refused = await self._attempt(call)
        # A person saying no is not the tool failing: it does not count toward the failure guard.
        if not refused:
            self._failures = self._failures + 1 if output.is_error else 0
        secrets = known_secrets()  # after the call: a key it set is masked too
        block = self._result_block(call, output.text, is_error=output.is_error, secrets=secrets)
        if output.images:
            block = block.model_copy(update={"images": tuple(output.images[:MAX_RESULT_IMAGES])})
        if call.id in self._denied:
            block = block.model_copy(update={"denied": True})
        self._results[call.id] = block
        event = ToolResult(
            call_id=call.id,
            name=call.name,
            content=block.content,
            is_error=block.is_error,
            display=redact_strings(output.display, secrets),
            duration=time.monotonic() - started,
        )
        self._emit(event)
        tool = self.tools.get(call.name)
        info = ToolCallInfo(call.id, call.name, display_args, tool.read_only if tool else True)
        for fn in [fn for h in self.config.hooks.chain() for fn in h.after_tool]:
            await fail_open(fn, info, event, emit=self._emit)

    async def _attempt(self, call: ToolCallBlock) -> tuple[ToolOutput, dict[str, Any], bool]:
        """Everything between a call and its output: ``(output, arguments, refused)``. Every
        problem becomes an error *result* the model reads; ``refused`` marks a permission refusal."""
        tool = self.tools.get(call.name)
        if tool is None:
            names = ", ".join(sorted(self.tools)) or "(none)"
            return _error(f"Unknown tool `{call.name}`. Available tools: {names}."), {}, False
        if call.arguments is None:
            raw = call.raw_arguments if len(call.raw_arguments) <= 2000 else call.raw_arguments[:2000] + "…"
            return (
                _error(
                    f"The arguments for `{call.name}` are not a valid JSON object: {raw!r}. "
                    "Call the tool again with a JSON object that matches its schema."
                ),
                {},
                False,
            )
        arguments = call.arguments
        if self._is_repeat(call.name, arguments):
            return (
                _error(
                    f"You have called `{call.name}` with the same arguments {self._repeats} times in a row; "
                    "the result will not change. Change your approach: use a different tool or different "
                    "arguments, or answer with what you have."
                ),
                arguments,
                False,
            )
        info = ToolCallInfo(call.id, call.name, arguments, tool.read_only)
        try:
            arguments = (await check_tool_call(self.config.hooks, info)).arguments
        except BlockToolCall as exc:
            return _error(str(exc)), arguments, False
        except ToolCallBlocked as exc:
            # A policy saying no is a refusal, like a person's: the call shows as denied and
            # does not count toward the failure guard.
            self._denied.add(call.id)
            self._emit(exc.blocked.event("tool_call", call_id=call.id, tool=call.name))
            return _error(f"Blocked by policy: {exc.blocked.message}"), arguments, True
        try:
            kwargs = tool.validate(arguments)
        except ToolArgumentsError as exc:
            return _error(str(exc)), arguments, False
        # A call that changes a control file is asked about whatever the tool or the run says.
        control = control_changes(tool.subjects, kwargs)
        if not tool.read_only or control:
            refusal = await self._permission(call, tool, arguments, control)
            if refusal is not None:
                return _error(refusal), arguments, True
        return await self._invoke(call, tool, kwargs), arguments, False

    async def _invoke(self, call: ToolCallBlock, tool: Tool, kwargs: dict[str, Any]) -> ToolOutput:
        self._emit(ToolExecuting(call_id=call.id, name=call.name, arguments=jsonable(kwargs)))
        lend = lambda: ParentRun.of(self, call.id)  # noqa: E731 - what a delegate call starts a child with
        warn = lambda code, message, hint: self._emit(RunWarning(code=code, message=message, hint=hint))  # noqa: E731
        context = RunContext(self.run_id, call.id, call.name, _ask=self._ask_user, _parent=lend, _warn=warn)
        timeout = tool.timeout if tool.timeout is not None else self.config.tool_timeout
        started = time.monotonic()
        try:
            if sys.version_info >= (3, 11):  # no task per call, as wait_for makes
                async with asyncio.timeout(timeout):
                    value = await tool.call(kwargs, context)
            else:  # pragma: no cover - 3.10
                value = await asyncio.wait_for(tool.call(kwargs, context), timeout)
        except asyncio.TimeoutError as exc:
            if time.monotonic() - started < timeout:
                return _error(f"`{call.name}` raised TimeoutError: {exc}")
            return _error(f"`{call.name}` timed out after {timeout:g} s and was abandoned.")
        except Exception as exc:
            return _error(f"`{call.name}` raised {type(exc).__name__}: {exc}")
        return to_output(value)

    def count_usage(self, usage: Usage) -> None:
        """Count usage spent on this run's behalf elsewhere (a sub-agent's requests): against
        its budget, in its conversation's usage and session, and in a ``usage_updated`` event."""
        self.usage = self.usage + usage
        self.conversation.add_usage(usage)
        messages, limit = self.conversation.messages, self.provider.context_limit
        context = self.conversation.context or ContextWindow(
            used=estimate_tokens(self.config.system, messages), limit=limit
        )
        budget = self.spending.readout(self.usage)
        self._emit(UsageUpdated(request=usage, total=self.conversation.usage, context=context, budget=budget))

    def _is_repeat(self, name: str, arguments: dict[str, Any]) -> bool:
        signature = (name, json.dumps(arguments, sort_keys=True, default=str))
        self._repeats = self._repeats + 1 if signature == self._last_call else 1
        self._last_call = signature
        return self._repeats >= self.config.max_repeated_calls

    async def _permission(
        self, call: ToolCallBlock, tool: Tool, arguments: dict[str, Any], control: Sequence[str] = ()
    ) -> str | None:
        """None when the call may run; otherwise the refusal the model reads. ``control``: the
        control files the call would change; then only a person's answer lets it run."""
        config = self.config
        if not config.can_write:
            return f"Refused: `{tool.name}` changes things and this agent may not (can_write=False)."
        if not control and (config.auto_approve or tool.name in self.always_allowed):
            return None
        if not self._someone_can_answer("permission_required"):
            self._denied.add(call.id)
            self._emit(PermissionResolved(call_id=call.id, decision="deny", reason="nobody to ask"))
            if control:
                refusal = control_refusal(tool.name, control)
                self._emit(RunWarning(code="control_file_refused", message=refusal, hint=CONTROL_HINT))
                return refusal
            return (
                f"Denied: `{tool.name}` changes things and needs the user's permission, but nobody can "
                "answer in this run. The user can allow it with auto_approve=True (or --yes)."
            )
        key = f"permission:{call.id}"
        future = self.answers.open(key)
        self._emit(
            PermissionRequired(
                call_id=call.id,
                name=tool.name,
                arguments=jsonable(arguments),
                description=tool.description,
                warning=control_warning(tool.name, control) if control else "",
            )
        )
        answer: tuple[Decision, str] = await self.answers.wait(key, future)
        decision, reason = answer
        if decision == "always":
            self.always_allowed.add(tool.name)
        if decision == "deny":
            self._denied.add(call.id)
        self._emit(PermissionResolved(call_id=call.id, decision=decision, reason=reason))
        if decision == "deny" and control:
            return control_denied(tool.name, control, reason)
        if decision == "deny" and reason:
            return f"Denied: `{tool.name}` was not run: {reason}."
        if decision == "deny":
            return (
                f"The user declined to run `{tool.name}`. Do not retry it; go on without it or ask the user."
            )
        return None

    async def _ask_user(self, question: str, choices: list[str]) -> str | None:
        if not self._someone_can_answer("ask_user_required"):
            return None
        question_id = new_id("ask")
        key = f"ask:{question_id}"
        future = self.answers.open(key)
        self._emit(AskUserRequired(question_id=question_id, question=question, choices=choices))
        answer: str | None = await self.answers.wait(key, future)
        self._emit(AskUserAnswered(question_id=question_id, answer=answer))
        return answer

    def _result_block(
        self, call: ToolCallBlock, text: str, *, is_error: bool, secrets: list[str] | None = None
    ) -> ToolResultBlock:
        # Every tool result passes here: a key a tool prints is masked before the model, the
        # view, the session or a cassette sees it.
        text = redact(text, known_secrets() if secrets is None else secrets)
        limit = self.config.max_result_chars
        if len(text) > limit:
            text = f"{text[:limit]}\n… [truncated: {limit:,} of {len(text):,} characters shown]"
        return ToolResultBlock(tool_call_id=call.id, name=call.name, content=text, is_error=is_error)

    # -- endings ---------------------------------------------------------------------------------

    def _finish(self, status: Literal["completed", "exhausted"], message: str = "") -> RunResult:
        text = self._final_text()
        claims = trace_claims(text, self.messages, self.prompt) if status == "completed" else ()
        self._emit(
            RunFinished(
                run_id=self.run_id, status=status, text=text, usage=self.usage, message=message, claims=claims
            )
        )
        return RunResult(
            run_id=self.run_id,
            status=status,
            text=text,
            messages=self.messages,
            usage=self.usage,
            reason=message,
            output=(self._typed.value if self._typed else text) if status == "completed" else None,
            claims=claims,
        )

    def _failed(self, error: ErrorInfo) -> RunResult:
        self._tidy_after_interruption()
        self._emit(RunFailed(run_id=self.run_id, error=error, usage=self.usage))
        return RunResult(
            run_id=self.run_id,
            status="failed",
            text=self._final_text(),
            messages=self.messages,
            usage=self.usage,
            error=error,
            reason=str(error),
        )

    def _cancelled(self) -> RunResult:
        self._tidy_after_interruption()
        self._emit(RunCancelled(run_id=self.run_id, usage=self.usage))
        return RunResult(
            run_id=self.run_id,
            status="cancelled",
            text=self._final_text(),
            messages=self.messages,
            usage=self.usage,
            reason="Cancelled by the user.",
        )

    def _final_text(self) -> str:
        return next((m.text for m in reversed(self.messages) if m.role == "assistant" and m.text), "")

    def cancelled_before_start(self) -> RunResult:
        self._emit(RunStarted(run_id=self.run_id, model=self.provider.model_id, prompt=self.prompt))
        return self._cancelled()

    def _tidy_after_interruption(self) -> None:
        """Leave a transcript the next request accepts: keep what was streamed, answer every call."""
        if self._assembler is not None:
            partial = self._assembler.message(model=self.provider.model_id, interrupted=True)
            self._assembler = None
            if partial.content:
                self._commit(partial)
        if self._calls:
            results = [
                self._results.get(call.id) or self._result_block(call, CANCELLED_RESULT, is_error=True)
                for call in self._calls
            ]
            self._calls, self._results = (), {}
            self._commit(Message(role="user", content=tuple(results)))

    # -- plumbing --------------------------------------------------------------------------------

    def _commit(self, message: Message) -> None:
        self.conversation.append(message)
        self.messages.append(message)
        self._emit(MessageCommitted(message=message))

    def _emit(self, event: AgentEvent) -> None:
        self.bus.emit(event)

    def _plugin_run(self) -> PluginRun:
        screen = screener(self.config.hooks, self._redactor, self._emit)
        return PluginRun(self.run_id, self.conversation, self.config, self.turn, self._emit, screen)

    def _someone_can_answer(self, event_type: str) -> bool:
        return self.bus.has_listener(event_type) or self.bus.has_stream


def _error(text: str) -> ToolOutput:
    return ToolOutput(text=text, is_error=True)


def _join(*texts: str) -> str:
    return "\n\n".join(t for t in texts if t)
