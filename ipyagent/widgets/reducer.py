"""Agent events → view state and patches (the types are in :mod:`.view_state`).

Pure and synchronous: the kernel side of every view feeds events in and sends the patches that
come out; tests feed events and look at the state. The same :func:`apply_patch` the front end
implements keeps :attr:`ViewReducer.state` current, so the state written at the end of a run is
exactly what the patches built. Turning the state into text is :mod:`.text`'s job.

A sub-agent's events (``event.via`` names the delegate call they came through) are folded by a
reducer of their own, one per delegate call, and its patches lifted into this view: its blocks
get ``parent`` (the delegate card's id) and ids of their own (a text's, prefixed with the call's
id; a tool card or question keeps its call's or question's id, which the buttons answer), and its
status, model and usage become the card's ``child``.
"""

from __future__ import annotations

import json
from typing import Any, cast

from typing_extensions import Unpack, assert_never

from ..agentlib import events as ev
from ..agentlib.messages import Message, TextBlock, ToolCallBlock
from .claim_marks import claim_views
from .view_state import (
    Block,
    BlockFields,
    Patch,
    SubagentView,
    ToolStatus,
    TopFields,
    ViewState,
    WarningBlock,
    new_state,
)

__all__ = [
    "MAX_SHOWN_ARGS",
    "ViewReducer",
    "apply_patch",
    "history_blocks",
    "merge_patches",
    "new_state",
]

# A tool card in one of these when its run ends will never hear of its call again.
UNFINISHED_TOOL = ("streaming", "waiting", "running")

#: What a tool card keeps of a call's arguments. The view is sent to the front end, patch by
#: patch, and saved in the notebook; a call the model wrote with megabytes of arguments (a whole
#: file's content, ask_user with 10,000 choices) is the session's to keep, not the view's. Enough
#: to read what the call was about; the rest is named, not shown.
MAX_SHOWN_ARGS = 20_000


def shown_args(text: str) -> str:
    """A call's arguments as its card shows them: cut at :data:`MAX_SHOWN_ARGS` characters."""
    if len(text) <= MAX_SHOWN_ARGS:
        return text
    return f"{text[:MAX_SHOWN_ARGS]}… [{len(text) - MAX_SHOWN_ARGS:,} more characters not shown]"


def apply_patch(state: ViewState, patch: Patch) -> None:
    """Apply one patch in place (the front end does the same, in JavaScript)."""
    blocks = state["blocks"]
    if patch["op"] == "add":
        blocks.append(cast("Block", dict(patch["block"])))
        return
    if patch["op"] == "top":
        cast("dict[str, Any]", state).update(patch["fields"])  # TopFields are ViewState's
        return
    block_id = patch["id"]
    block = next((b for b in reversed(blocks) if b["id"] == block_id), None)
    if block is None:
        return
    # A patch names fields of whichever block it addresses; the reducer's helpers type what they
    # send, so here, as in the front end, a block is a plain dict.
    fields = cast("dict[str, Any]", block)
    if patch["op"] == "append":
        fields[patch["field"]] = fields.get(patch["field"], "") + patch["value"]
    elif patch["op"] == "set":
        fields.update(patch["fields"])
    elif patch["op"] == "remove":
        blocks.remove(block)
    else:
        assert_never(patch)


def merge_patches(patches: list[Patch]) -> list[Patch]:
    """Fold runs of appends to the same field into one: a batch carries text, not tokens."""
    merged: list[Patch] = []
    for patch in patches:
        last = merged[-1] if merged else None
        if (
            last is not None
            and patch["op"] == "append"
            and last["op"] == "append"
            and last["id"] == patch["id"]
            and last["field"] == patch["field"]
        ):
            merged[-1] = {**last, "value": last["value"] + patch["value"]}
        else:
            merged.append(patch)
    return merged


class ViewReducer:
    """Turns the events of one or more runs into patches on one view state."""

    def __init__(self) -> None:
        self.state = new_state()
        self._pending: list[Patch] = []
        self._run = 0
        self._request = ""
        self._attempt: list[str] = []  # blocks the current request added (dropped on retry)
        self._denied: set[str] = set()
        self._streamed_args: dict[str, int] = {}  # characters of each call's arguments appended
        #: Finished blocks shown before :attr:`state`'s (see :meth:`show_history`).
        self.history: list[Block] = []
        #: The sub-agents' own reducers, by delegate call id.
        self._nested: dict[str, _NestedRun] = {}

    # -- patches ---------------------------------------------------------------------------------

    def _emit(self, patch: Patch) -> None:
        apply_patch(self.state, patch)
        self._pending.append(patch)

    def _add(self, block: Block) -> None:
        self._attempt.append(block["id"])
        self._emit({"op": "add", "block": block})

    def _set(self, block_id: str, **fields: Unpack[BlockFields]) -> None:
        self._emit({"op": "set", "id": block_id, "fields": fields})

    def _top(self, **fields: Unpack[TopFields]) -> None:
        self._emit({"op": "top", "fields": fields})

    def _end_streaming(self) -> None:
        """A run that ends (Stop, an error) sends no TextEnd/ThinkingEnd for the text it was
        streaming, nor a result for a tool call it was preparing or waiting on: finish those
        blocks here, or the view keeps their caret or their "preparing…" for good."""
        for block in self.state["blocks"]:
            if (block["kind"] == "text" or block["kind"] == "thinking") and block["streaming"]:
                self._set(block["id"], streaming=False)
            if block["kind"] == "tool" and block["status"] in UNFINISHED_TOOL:
                self._set(block["id"], status="stopped", permission=False)
            if block["kind"] == "tool" and (child := block.get("child")) and child["status"] == "running":
                self._set(block["id"], child={**child, "status": "cancelled"})

    @property
    def has_pending(self) -> bool:
        return bool(self._pending)

    def take(self) -> tuple[int, list[Patch]] | None:
        """The pending patches as one numbered batch, or None when there are none."""
        if not self._pending:
            return None
        patches, self._pending = merge_patches(self._pending), []
        self.state["seq"] += 1
        return self.state["seq"], patches

    # -- inputs ----------------------------------------------------------------------------------

    def add_user(self, text: str) -> None:
        self._emit(
            {"op": "add", "block": {"id": f"u{len(self.state['blocks'])}", "kind": "user", "text": text}}
        )

    def set_live(self, live: bool) -> None:
        self._top(live=live)

    def set_model(self, model: str) -> None:
        self._top(model=model)

    def show_history(self, messages: list[Message]) -> None:
        """The conversation so far (a resumed session), as finished blocks in :attr:`history`.

        Not patches and not part of :attr:`state`: a view sends the history once, on its own
        (the chat's ``history`` trait), so each later run writes only its own blocks."""
        self.history = history_blocks(messages)

    def clear(self) -> None:
        """A new conversation: every block goes, the history too."""
        self.history = []
        for block in list(self.state["blocks"]):
            self._emit({"op": "remove", "id": block["id"]})
        self._top(status="idle", usage=None)

    def add_error(self, code: str, message: str, hint: str = "", retryable: bool = False) -> None:
        self._emit(
            {
                "op": "add",
                "block": {
                    "id": f"e{len(self.state['blocks'])}",
                    "kind": "error",
                    "code": code,
                    "message": message,
                    "hint": hint,
                    "retryable": retryable,
                },
            }
        )

    def feed(self, event: ev.AgentEvent) -> None:
        if event.via:
            self._feed_nested(event)
        elif isinstance(event, ev.RunStarted):
            self._run += 1
            self._top(status="running", model=event.model)
        elif isinstance(event, ev.RequestStarted):
            self._request = f"r{self._run}.{event.turn}.{event.attempt}"
            self._attempt = []
        elif isinstance(event, ev.TextStart):
            self._add({"id": f"{self._request}.{event.index}", "kind": "text", "text": "", "streaming": True})
        elif isinstance(event, ev.TextDelta):
            self._emit(
                {
                    "op": "append",
                    "id": f"{self._request}.{event.index}",
                    "field": "text",
                    "value": event.delta,
                }
            )
        elif isinstance(event, ev.TextEnd):
            self._set(f"{self._request}.{event.index}", streaming=False)
        elif isinstance(event, ev.ThinkingStart):
            self._add(
                {
                    "id": f"{self._request}.{event.index}",
                    "kind": "thinking",
                    "text": "",
                    "streaming": True,
                    "duration": None,
                }
            )
        elif isinstance(event, ev.ThinkingDelta):
            self._emit(
                {
                    "op": "append",
                    "id": f"{self._request}.{event.index}",
                    "field": "text",
                    "value": event.delta,
                }
            )
        elif isinstance(event, ev.ThinkingEnd):
            self._set(f"{self._request}.{event.index}", streaming=False, duration=round(event.duration, 2))
        elif isinstance(event, ev.ToolCallStart):
            self._add(
                {
                    "id": event.call_id,
                    "kind": "tool",
                    "name": event.name,
                    "args": "",
                    "status": "streaming",
                    "duration": None,
                    "result": None,
                    "display": None,
                    "permission": False,
                }
            )
        elif isinstance(event, ev.ToolCallDelta):
            streamed = self._streamed_args.get(event.call_id, 0)
            if streamed < MAX_SHOWN_ARGS:  # past the cut, ToolCallEnd says how much more there was
                piece = event.delta[: MAX_SHOWN_ARGS - streamed]
                self._streamed_args[event.call_id] = streamed + len(piece)
                self._emit({"op": "append", "id": event.call_id, "field": "args", "value": piece})
        elif isinstance(event, ev.ToolCallEnd):
            self._streamed_args.pop(event.call_id, None)
            self._set(event.call_id, args=shown_args(event.raw_arguments))
        elif isinstance(event, ev.ToolExecuting):
            arguments = shown_args(json.dumps(event.arguments, ensure_ascii=False))
            self._set(event.call_id, status="running", args=arguments)
        elif isinstance(event, ev.ToolResult):
            status: ToolStatus = (
                "denied" if event.call_id in self._denied else ("failed" if event.is_error else "done")
            )
            display = (
                event.display
                if isinstance(event.display, list)
                else [event.display]
                if event.display
                else None
            )
            self._set(
                event.call_id,
                status=status,
                result=event.content,
                display=display,
                duration=round(event.duration, 2),
                permission=False,
            )
        elif isinstance(event, ev.PermissionRequired):
            if event.warning:
                self._set(event.call_id, status="waiting", permission=True, caution=event.warning)
            else:
                self._set(event.call_id, status="waiting", permission=True)
        elif isinstance(event, ev.PermissionResolved):
            if event.decision == "deny":
                self._denied.add(event.call_id)
                self._set(event.call_id, status="denied", permission=False)
            else:
                self._set(event.call_id, status="running", permission=False)
        elif isinstance(event, ev.AskUserRequired):
            self._add(
                {
                    "id": event.question_id,
                    "kind": "question",
                    "question": event.question,
                    "choices": event.choices,
                    "answer": None,
                }
            )
        elif isinstance(event, ev.AskUserAnswered):
            self._set(event.question_id, answer=event.answer)
        elif isinstance(event, ev.BlockedByPolicy):
            # A blocked call's card reads "denied" and its result is the policy's message; a
            # blocked request is shown by the run's error, which follows.
            if event.call_id is not None:
                self._denied.add(event.call_id)
        elif isinstance(event, ev.SubagentStarted):
            child: SubagentView = {
                "status": "running",
                "model": event.model,
                "task": event.task,
                "tools": event.tools,
                "session": event.session,
                "usage": None,
            }
            self._set(event.call_id, child=child)
        elif isinstance(event, ev.RunWarning):
            block_id = f"w{len(self.state['blocks'])}"
            warning: WarningBlock = {"id": block_id, "kind": "warning", "text": event.message}
            if event.hint:
                warning["hint"] = event.hint
            self._add(warning)
        elif isinstance(event, ev.RequestError):
            if event.will_retry:  # the failed attempt's output is discarded, as the agent does
                for block_id in self._attempt:
                    self._emit({"op": "remove", "id": block_id})
                self._attempt = []
        elif isinstance(event, ev.UsageUpdated):
            self._top(
                usage={
                    "input": event.total.input_tokens,
                    "output": event.total.output_tokens,
                    "cost": event.total.cost,
                    "cached": event.total.cache_read_tokens,
                    "saved": event.total.cache_saved,
                    "context": str(event.context),
                    "budget": event.budget,
                }
            )
        elif isinstance(event, ev.RunFinished):
            self._end_streaming()
            run = f"r{self._run}."  # the answer's claims, on the blocks that show it
            for block_id, claims in claim_views(self.state["blocks"], event, run):
                self._set(block_id, claims=claims)
            if event.status == "exhausted" and event.message:
                self._add({"id": f"w{len(self.state['blocks'])}", "kind": "warning", "text": event.message})
            self._top(status=event.status)
        elif isinstance(event, ev.RunFailed):
            self._end_streaming()
            error = event.error
            self.add_error(error.code, error.message, error.hint, error.retryable)
            self._top(status="failed")
        elif isinstance(event, ev.RunCancelled):
            self._end_streaming()
            self._top(status="cancelled")
        elif isinstance(event, ev.AttachmentSent):
            block_id = f"a{len(self.state['blocks'])}"
            self._add(
                {
                    "id": block_id,
                    "kind": "attachment",
                    "label": event.label,
                    "text": event.text,
                    "tokens": event.tokens,
                }
            )
        elif isinstance(event, ev.CompactionCompleted):
            text = f"Summarized {event.dropped} earlier messages to free context."
            self._add({"id": f"w{len(self.state['blocks'])}", "kind": "warning", "text": text})
        elif isinstance(
            event, (ev.RequestDone, ev.MessageCommitted, ev.CompactionStarted, ev.MapProgress)
        ):  # nothing to show (a map's progress has its own display)
            pass
        else:
            assert_never(event)

    def _feed_nested(self, event: ev.AgentEvent) -> None:
        """A sub-agent's event: folded by the delegate call's own reducer, its patches lifted."""
        call_id = event.via[0]
        nested = self._nested.get(call_id)
        if nested is None:
            nested = self._nested[call_id] = _NestedRun(call_id)
        nested.reducer.feed(event.model_copy(update={"via": event.via[1:]}))
        batch = nested.reducer.take()
        for patch in batch[1] if batch else ():
            lifted = nested.lift(patch)
            if lifted is not None:
                self._emit(lifted)
            elif patch["op"] == "top":
                self._update_child(call_id, nested.reducer.state)

    def _update_child(self, call_id: str, state: ViewState) -> None:
        """The sub-agent's status, model and usage, on its delegate card."""
        card = next((b for b in reversed(self.state["blocks"]) if b["id"] == call_id), None)
        if card is None or card["kind"] != "tool":
            return
        child: SubagentView = card.get("child") or {
            "status": "running",
            "model": "",
            "task": "",
            "tools": [],
            "session": None,
            "usage": None,
        }
        updated: SubagentView = {
            **child,
            "status": state["status"],
            "model": state["model"] or child["model"],
            "usage": state["usage"],
        }
        if updated != child:
            self._set(call_id, child=updated)


class _NestedRun:
    """The view of one sub-agent, folded apart and lifted into its parent's view."""

    def __init__(self, call_id: str) -> None:
        self.call_id = call_id
        self.reducer = ViewReducer()
        self._ids: dict[str, str] = {}

    def lift(self, patch: Patch) -> Patch | None:
        """The patch as the parent's view applies it; None for a ``top`` patch (the parent puts
        the sub-agent's status on its card instead)."""
        if patch["op"] == "add":
            block = cast("dict[str, Any]", dict(patch["block"]))
            inner = str(block["id"])
            # Buttons answer a call or a question by its own id: those keep theirs (unique to
            # the conversation and its sub-agents); the rest are numbered per run, so prefixed.
            outer = inner if block["kind"] in ("tool", "question") else f"{self.call_id}/{inner}"
            self._ids[inner] = outer
            block["id"] = outer
            block["parent"] = self._outer(block["parent"]) if block.get("parent") else self.call_id
            return {"op": "add", "block": cast("Block", block)}
        if patch["op"] == "top":
            return None
        if patch["op"] == "append":
            return {**patch, "id": self._outer(patch["id"])}
        if patch["op"] == "set":
            return {**patch, "id": self._outer(patch["id"])}
        if patch["op"] == "remove":
            return {**patch, "id": self._outer(patch["id"])}
        assert_never(patch)

    def _outer(self, inner: str) -> str:
        return self._ids.get(inner) or f"{self.call_id}/{inner}"


def history_blocks(messages: list[Message]) -> list[Block]:
    """Saved messages as finished view blocks, in order (ids ``h{message}.{block}``; tool cards
    keep their call's id)."""
    blocks: list[Block] = []
    for i, message in enumerate(messages):
        # A call's result is in the message right after it.
        results = {r.tool_call_id: r for r in messages[i + 1].tool_results} if i + 1 < len(messages) else {}
        for j, block in enumerate(message.content):
            key = f"h{i}.{j}"
            if isinstance(block, TextBlock) and message.role == "user" and block.attached:
                tokens = len(block.text) // 4 + 1  # the usual ~4 characters a token
                label, text = block.attached, block.text
                attachment: Block = {
                    "id": key,
                    "kind": "attachment",
                    "label": label,
                    "text": text,
                    "tokens": tokens,
                }
                blocks.append(attachment)
            elif isinstance(block, TextBlock) and message.role == "user":
                blocks.append({"id": key, "kind": "user", "text": block.text})
            elif isinstance(block, TextBlock):
                blocks.append({"id": key, "kind": "text", "text": block.text, "streaming": False})
            elif isinstance(block, ToolCallBlock):
                result = results.get(block.id)
                status: ToolStatus = (
                    "failed" if result is None else "denied" if result.denied
                    else "failed" if result.is_error else "done"
                )  # fmt: skip
                args = shown_args(block.raw_arguments)
                blocks.append({
                    "id": block.id, "kind": "tool", "name": block.name, "args": args,
                    "status": status, "duration": None, "result": result.content if result else None,
                    "display": None, "permission": False,
                })  # fmt: skip
    return blocks
