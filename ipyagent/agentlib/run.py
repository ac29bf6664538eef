"""One run of the agent loop.

Append the user's message; stream a model turn; commit the assistant message; execute every
tool call of that turn; append the results; repeat until the model stops calling tools, a guard
trips, the run is cancelled or an error cannot be recovered. Whatever happens, the transcript it
leaves behind is one the next request accepts: every tool call has a result.

This module owns the loop's rules (retries, guards, permissions, hooks, timeouts, and when to
compact: once per run, when the context nears the model's window or the provider reports an
overflow); the :class:`~ipyagent.agentlib.agent.Agent` owns the configuration, the transcript
and its session file.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Literal

from .compaction import compact_conversation, split_point
from .errors import AgentError, ContextOverflowError, ErrorInfo, HookError, RunError
from .events import (
    AskUserAnswered,
    AskUserRequired,
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
    ToolExecuting,
    ToolResult,
    UsageUpdated,
    Warning,
)
from .hooks import BlockToolCall, ToolCallInfo, call_hook, hook_name
from .messages import ContentBlock, Message, TextBlock, ToolCallBlock, ToolResultBlock, new_id
from .model import ModelRequest, Provider, open_stream
from .parts import PartsAssembler
from .redact import known_secrets, redact, redact_strings, redact_text
from .result import RunResult
from .retry import wait_before_retry
from .tools import RunContext, Tool, ToolArgumentsError, ToolOutput, to_output
from .usage import ContextWindow, Usage, estimate_tokens

if TYPE_CHECKING:
    from .agent import Agent

__all__ = ["AgentRun"]

log = logging.getLogger("ipyagent")

CANCELLED_RESULT = "Cancelled: the user stopped the run before this tool call finished."


class AgentRun:
    """The state of one run. Created by ``Agent.run``; :meth:`execute` never raises an
    :class:`AgentError` — failures become a ``failed`` result (cancellation a ``cancelled`` one)."""

    def __init__(self, agent: Agent, provider: Provider, prompt: str) -> None:
        self.agent = agent
        self.provider = provider
        self.prompt = prompt
        self.run_id = new_id("run")
        self.turn = 0
        self.usage = Usage()
        self.messages: list[Message] = []
        agent._refresh_project()
        self.tool_list = agent._tools_for_run()
        self.tools: dict[str, Tool] = {t.name: t for t in self.tool_list}
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

    # -- the loop --------------------------------------------------------------------------------

    async def execute(self) -> RunResult:
        self._emit(RunStarted(run_id=self.run_id, model=self.provider.model_id, prompt=self.prompt))
        for text in self.agent._take_load_warnings():
            self._emit(Warning(code="session_repaired", message=text))
        try:
            self.agent._record_settings()
            self._commit(Message.user(_join(self.prompt, self.agent._take_queued())))
            while True:
                if self.turn >= self.agent.max_turns:
                    return self._finish(
                        "exhausted",
                        f"Stopped after {self.agent.max_turns} model turns (max_turns). "
                        "Run again to let the agent continue, or raise max_turns.",
                    )
                self.turn += 1
                reply = await self._model_turn()
                self._commit(reply)
                await self._after_model(reply)
                if not reply.tool_calls:
                    if reply.finish_reason == "pause":  # the provider asks us to let it go on
                        continue
                    if queued := self.agent._take_queued():
                        self._commit(Message.user(queued))
                        continue
                    return self._finish("completed")
                results = await self._run_tools(reply.tool_calls)
                queued = self.agent._take_queued()
                extra: tuple[ContentBlock, ...] = (TextBlock(text=queued),) if queued else ()
                self._commit(Message(role="user", content=(*results, *extra)))
                if self._failures >= self.agent.max_consecutive_failures:
                    raise RunError(
                        f"Stopped after {self._failures} tool calls in a row failed.",
                        hint="Read the tool errors above; fix the tool or its inputs, or rephrase.",
                        code="repeated_tool_failure",
                    )
        except asyncio.CancelledError:
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

    # -- model turns -----------------------------------------------------------------------------

    async def _model_turn(self) -> Message:
        policy = self.agent.retry
        attempt = 0
        empty_replies = 0
        await self._compact_if_near_limit()
        while True:
            attempt += 1
            request = await self._build_request()
            self._emit(RequestStarted(turn=self.turn, attempt=attempt, model=self.provider.model_id))
            started = time.monotonic()
            assembler = self._assembler = PartsAssembler(taken_ids=self.agent._call_ids)
            try:
                async with open_stream(self.provider, request) as stream:
                    async for chunk in stream:
                        for event in assembler.feed(chunk):
                            self._emit(event)
                for event in assembler.finish():
                    self._emit(event)
            except AgentError as exc:
                self._assembler = None
                overflow = isinstance(exc, ContextOverflowError) and self._can_compact()
                retry = exc.retryable and attempt < policy.attempts
                delay = policy.delay(attempt, exc.retry_after) if retry else None
                self._emit(
                    RequestError(
                        turn=self.turn,
                        attempt=attempt,
                        error=exc.info,
                        will_retry=retry or overflow,
                        retry_in=delay,
                    )
                )
                if overflow:  # make room, then send the turn again (once: the run compacts once)
                    await self._compact("overflow")
                    continue
                if delay is None:
                    raise
                self._emit(
                    Warning(
                        code="retrying",
                        message=f"{exc.info.message} Retrying in {delay:.1f} s "
                        f"(attempt {attempt + 1} of {policy.attempts}).",
                        hint=exc.info.hint,
                    )
                )
                await wait_before_retry(self.provider, delay)
                continue
            self._assembler = None
            reply = assembler.message(model=self.provider.model_id)
            request_usage = self._record_usage(assembler, request)
            self._emit(
                RequestDone(
                    turn=self.turn,
                    finish_reason=reply.finish_reason or "stop",
                    usage=request_usage,
                    duration=time.monotonic() - started,
                )
            )
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
                Warning(code="empty_response", message="The model returned an empty reply; asking again.")
            )

    async def _build_request(self) -> ModelRequest:
        agent = self.agent
        specs = [t.spec for t in self.tool_list]
        self._request_mark = len(agent._messages)
        # Every part is already validated; re-validating the whole transcript each turn would
        # make a long conversation quadratic.
        request = ModelRequest.model_construct(
            model=self.provider.model_id.split("/", 1)[-1],
            system=agent.system_prompt(specs),
            messages=list(agent._messages),
            tools=specs,
            settings=agent.settings,
        )
        for fn in agent.hooks.before_model:
            try:
                replaced = await call_hook(fn, request)
            except Exception as exc:
                raise HookError(
                    f"The before-model hook {hook_name(fn)} raised {type(exc).__name__}: {exc}",
                    hint="Fix or remove the hook (agent.hooks.remove(fn)); it blocks every model call.",
                ) from exc
            if isinstance(replaced, ModelRequest):
                request = replaced
        return request

    # -- compaction ------------------------------------------------------------------------------

    def _can_compact(self) -> bool:
        return not self._compacted and split_point(self.agent._messages, self.agent.compact_keep) > 0

    async def _compact_if_near_limit(self) -> None:
        agent = self.agent
        threshold = agent.compact_threshold
        known = agent._context
        limit = self.provider.context_limit or (known.limit if known else None)
        if threshold is None or not limit or not self._can_compact():
            return
        mark = agent._context_mark
        if known is not None and not known.approximate and mark is not None:
            # The last exact readout, plus an estimate of what was committed since.
            used = known.used + estimate_tokens("", agent._messages[mark:])
        else:
            specs = "".join(json.dumps(t.spec.parameters) + t.spec.description for t in self.tool_list)
            used = estimate_tokens(
                agent.system_prompt([t.spec for t in self.tool_list]) + specs, agent._messages
            )
        if used >= threshold * limit:
            await self._compact("threshold")

    async def _compact(self, reason: Literal["threshold", "overflow"]) -> None:
        self._compacted = True
        result = await compact_conversation(self.agent, self.provider, reason=reason)
        self.usage = self.usage + result.usage

    async def _after_model(self, reply: Message) -> None:
        for fn in self.agent.hooks.after_model:
            await self._fail_open(fn, reply)

    def _record_usage(self, assembler: PartsAssembler, request: ModelRequest) -> Usage:
        reported = assembler.usage
        request_usage = (reported or Usage()).model_copy(update={"requests": 1})
        self.usage = self.usage + request_usage
        self.agent._usage = self.agent._usage + request_usage
        self.agent._persist(lambda s: s.append_usage(request_usage))
        limit = assembler.context_limit or self.provider.context_limit
        if reported and reported.input_tokens:
            context = ContextWindow(
                used=reported.input_tokens + reported.output_tokens + reported.cache_read_tokens,
                limit=limit,
                approximate=False,
            )
            self.agent._context_mark = self._request_mark + 1  # the request, and the reply
        else:
            context = ContextWindow(used=estimate_tokens(request.system, self.agent.messages), limit=limit)
        self.agent._context = context
        self._emit(UsageUpdated(request=request_usage, total=self.agent._usage, context=context))
        return request_usage

    # -- tools -----------------------------------------------------------------------------------

    async def _run_tools(self, calls: Sequence[ToolCallBlock]) -> list[ToolResultBlock]:
        """Run every call: consecutive read-only calls together, each mutating call alone, in order."""
        self._calls, self._results = calls, {}
        for group in self._groups(calls):
            if self._failures >= self.agent.max_consecutive_failures:
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

    def _groups(self, calls: Sequence[ToolCallBlock]) -> list[list[ToolCallBlock]]:
        groups: list[list[ToolCallBlock]] = []
        previous_free = False
        for call in calls:
            tool = self.tools.get(call.name)
            # Calls that cannot execute (unknown tool, bad JSON) only produce an error: no order to keep.
            free = tool is None or tool.read_only or call.arguments is None
            if free and previous_free:
                groups[-1].append(call)
            else:
                groups.append([call])
            previous_free = free
        return groups

    async def _run_call(self, call: ToolCallBlock) -> None:
        started = time.monotonic()
        output, display_args, refused = await self._attempt(call)
        # A person saying no is not the tool failing: it does not count toward the failure guard.
        if not refused:
            self._failures = self._failures + 1 if output.is_error else 0
        block = self._result_block(call, output.text, is_error=output.is_error)
        if call.id in self._denied:
            block = block.model_copy(update={"denied": True})
        self._results[call.id] = block
        event = ToolResult(
            call_id=call.id,
            name=call.name,
            content=block.content,
            is_error=block.is_error,
            display=redact_strings(output.display, known_secrets()),
            duration=time.monotonic() - started,
        )
        self._emit(event)
        tool = self.tools.get(call.name)
        info = ToolCallInfo(call.id, call.name, display_args, tool.read_only if tool else True)
        for fn in self.agent.hooks.after_tool:
            await self._fail_open(fn, info, event)

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
        for fn in self.agent.hooks.before_tool:
            try:
                rewritten = await call_hook(fn, info)
            except BlockToolCall as exc:
                return _error(f"Blocked: {exc}"), arguments, False
            except Exception as exc:  # fail closed: a guard that breaks must not let the call through
                return (
                    _error(f"Blocked by hook {hook_name(fn)}: {type(exc).__name__}: {exc}"),
                    arguments,
                    False,
                )
            if isinstance(rewritten, dict):
                arguments = rewritten
                info = replace(info, arguments=arguments)
        try:
            kwargs = tool.validate(arguments)
        except ToolArgumentsError as exc:
            return _error(str(exc)), arguments, False
        if not tool.read_only:
            refusal = await self._permission(call, tool, arguments)
            if refusal is not None:
                return _error(refusal), arguments, True
        return await self._invoke(call, tool, kwargs), arguments, False

    async def _invoke(self, call: ToolCallBlock, tool: Tool, kwargs: dict[str, Any]) -> ToolOutput:
        self._emit(ToolExecuting(call_id=call.id, name=call.name, arguments=_jsonable(kwargs)))
        context = RunContext(run_id=self.run_id, call_id=call.id, tool_name=call.name, _ask=self._ask_user)
        timeout = tool.timeout if tool.timeout is not None else self.agent.tool_timeout
        started = time.monotonic()
        try:
            value = await asyncio.wait_for(tool.call(kwargs, context), timeout)
        except asyncio.TimeoutError as exc:
            if time.monotonic() - started < timeout:
                return _error(f"`{call.name}` raised TimeoutError: {exc}")
            return _error(f"`{call.name}` timed out after {timeout:g} s and was abandoned.")
        except Exception as exc:
            return _error(f"`{call.name}` raised {type(exc).__name__}: {exc}")
        return to_output(value)

    def _is_repeat(self, name: str, arguments: dict[str, Any]) -> bool:
        signature = (name, json.dumps(arguments, sort_keys=True, default=str))
        self._repeats = self._repeats + 1 if signature == self._last_call else 1
        self._last_call = signature
        return self._repeats >= self.agent.max_repeated_calls

    async def _permission(self, call: ToolCallBlock, tool: Tool, arguments: dict[str, Any]) -> str | None:
        """None when the call may run; otherwise the refusal the model reads."""
        agent = self.agent
        if not agent.can_write:
            return f"Refused: `{tool.name}` changes things and this agent may not (can_write=False)."
        if agent.auto_approve or tool.name in agent._always_allowed:
            return None
        if not agent._someone_can_answer("permission_required"):
            self._denied.add(call.id)
            self._emit(PermissionResolved(call_id=call.id, decision="deny", reason="nobody to ask"))
            return (
                f"Denied: `{tool.name}` changes things and needs the user's permission, but nobody can "
                "answer in this run. The user can allow it with auto_approve=True (or --yes)."
            )
        key = f"permission:{call.id}"
        future = agent._pending.open(key)
        self._emit(
            PermissionRequired(
                call_id=call.id, name=tool.name, arguments=_jsonable(arguments), description=tool.description
            )
        )
        answer: tuple[Decision, str] = await agent._pending.wait(key, future)
        decision, reason = answer
        if decision == "always":
            agent._always_allowed.add(tool.name)
        if decision == "deny":
            self._denied.add(call.id)
        self._emit(PermissionResolved(call_id=call.id, decision=decision, reason=reason))
        if decision == "deny" and reason:
            return f"Denied: `{tool.name}` was not run: {reason}."
        if decision == "deny":
            return (
                f"The user declined to run `{tool.name}`. Do not retry it; go on without it or ask the user."
            )
        return None

    async def _ask_user(self, question: str, choices: list[str]) -> str | None:
        if not self.agent._someone_can_answer("ask_user_required"):
            return None
        question_id = new_id("ask")
        key = f"ask:{question_id}"
        future = self.agent._pending.open(key)
        self._emit(AskUserRequired(question_id=question_id, question=question, choices=choices))
        answer: str | None = await self.agent._pending.wait(key, future)
        self._emit(AskUserAnswered(question_id=question_id, answer=answer))
        return answer

    def _result_block(self, call: ToolCallBlock, text: str, *, is_error: bool) -> ToolResultBlock:
        # Every tool result passes here: a key a tool prints is masked before the model, the
        # view, the session or a cassette sees it.
        text = redact(text, known_secrets())
        limit = self.agent.max_result_chars
        if len(text) > limit:
            text = f"{text[:limit]}\n… [truncated: {limit:,} of {len(text):,} characters shown]"
        return ToolResultBlock(tool_call_id=call.id, name=call.name, content=text, is_error=is_error)

    # -- endings ---------------------------------------------------------------------------------

    def _finish(self, status: Literal["completed", "exhausted"], message: str = "") -> RunResult:
        text = self._final_text()
        self._emit(
            RunFinished(run_id=self.run_id, status=status, text=text, usage=self.usage, message=message)
        )
        return RunResult(
            run_id=self.run_id,
            status=status,
            text=text,
            messages=self.messages,
            usage=self.usage,
            message=message,
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
            message=str(error),
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
            message="Cancelled by the user.",
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
        self.agent._append(message)
        self.messages.append(message)
        self._emit(MessageCommitted(message=message))

    def _emit(self, event: Any) -> None:
        self.agent._bus.emit(event)

    async def _fail_open(self, fn: Any, *args: Any) -> None:
        try:
            await call_hook(fn, *args)
        except Exception as exc:
            log.warning(
                "ipyagent: after-hook %s raised %s: %s (ignored)", hook_name(fn), type(exc).__name__, exc
            )
            self._emit(
                Warning(
                    code="hook_failed", message=f"The hook {hook_name(fn)} raised {type(exc).__name__}: {exc}"
                )
            )


def _error(text: str) -> ToolOutput:
    return ToolOutput(text=text, is_error=True)


def _join(*texts: str) -> str:
    return "\n\n".join(t for t in texts if t)


def _jsonable(value: dict[str, Any]) -> dict[str, Any]:
    result: dict[str, Any] = json.loads(json.dumps(value, default=_to_json))
    return result


def _to_json(value: Any) -> Any:
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        return dump(mode="json")
    return getattr(value, "value", None) if hasattr(value, "value") else str(value)
