"""The view model: every block, patch, message and user action the views exchange, typed.

This module is the source of truth for the protocol in docs/widget-protocol.md. The reducer
builds these, the text renderers (:mod:`.text`) and the kernel's renderers read them, the front
end (``js/src``) applies and draws them, and a controller receives the user's actions from a
view. Every branch over a block's ``kind``, a patch's ``op`` or an action's ``action`` ends in
``assert_never``, as branches over the core's events do.

The types are ``Literal``-tagged TypedDicts: at run time they are the plain JSON dicts that go over
the comm and into the saved notebook, so typing them costs nothing per patch.

What comes from the front end is untrusted: :func:`parse_action` turns a comm message into an
:data:`Action`, or None for anything it does not recognise.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal, TypeAlias

from typing_extensions import NotRequired, TypedDict

from ..agentlib.events import Decision

__all__ = [
    "AckMessage",
    "Action",
    "AddPatch",
    "AnswerAction",
    "AppendPatch",
    "Block",
    "BlockFields",
    "ClaimSourceView",
    "ClaimView",
    "ErrorBlock",
    "HelloAction",
    "MimeBundle",
    "ModelAction",
    "NewAction",
    "Patch",
    "PatchesMessage",
    "PermissionAction",
    "QuestionBlock",
    "RemovePatch",
    "RetryAction",
    "RuntimeAction",
    "RuntimeMessage",
    "SendAction",
    "SetPatch",
    "StopAction",
    "SubagentView",
    "SyncAction",
    "TextBlock",
    "ThinkingBlock",
    "ToolBlock",
    "ToolStatus",
    "TopFields",
    "TopPatch",
    "UsageView",
    "UserBlock",
    "ViewMessage",
    "ViewState",
    "ViewStatus",
    "WarningBlock",
    "new_state",
    "parse_action",
]

ViewStatus = Literal["idle", "running", "completed", "failed", "cancelled", "exhausted"]
#: ``stopped``: its run ended first (Stop, an error); ``waiting``: for a permission decision.
ToolStatus = Literal["streaming", "waiting", "running", "done", "failed", "denied", "stopped"]
MimeBundle: TypeAlias = dict[str, Any]


# -- blocks (every block has ``id`` and ``kind``) ------------------------------------------------


class UserBlock(TypedDict):
    """What the user asked."""

    id: str
    kind: Literal["user"]
    parent: NotRequired[str]  # a sub-agent's block: the id of the delegate card it is shown in
    text: str


class TextBlock(TypedDict):
    """The model's text: Markdown, growing while ``streaming``."""

    id: str
    kind: Literal["text"]
    parent: NotRequired[str]  # a sub-agent's block: the id of the delegate card it is shown in
    text: str
    streaming: bool
    #: The answer's numbers and named values in this text, set when the run completes: each
    #: marked as traced to a tool output or not (the kernel decided; the view only shows it).
    claims: NotRequired[list[ClaimView]]


class ClaimView(TypedDict):
    """A claim of the answer as the view marks it: ``text`` as written, and which occurrence of
    it in the block's text (``nth``, from 0, counted outside fenced code) it is."""

    text: str
    nth: int
    kind: Literal["number", "name"]
    source: ClaimSourceView | None  # None: found in no tool output of the run


class ClaimSourceView(TypedDict):
    """The tool call a claim was found in, and the line of its output."""

    call: str
    tool: str
    line: str


class ThinkingBlock(TypedDict):
    id: str
    kind: Literal["thinking"]
    parent: NotRequired[str]  # a sub-agent's block: the id of the delegate card it is shown in
    text: str
    streaming: bool
    duration: float | None  # seconds, once done


class ToolBlock(TypedDict):
    """A tool card. The id is the call's id."""

    id: str
    kind: Literal["tool"]
    parent: NotRequired[str]  # a sub-agent's block: the id of the delegate card it is shown in
    name: str
    args: str  # JSON text, possibly partial while streaming
    status: ToolStatus
    duration: float | None
    result: str | None
    display: list[MimeBundle] | None  # what the tool showed the user (image/png, text/html, ...)
    permission: bool  # true while a decision is awaited
    #: Why this call is asked even under auto-approve (it would change a control file such as
    #: ``.mcp.json``); shown with the question, which then offers no "Always".
    caution: NotRequired[str]
    child: NotRequired[SubagentView | None]  # a delegate call's sub-agent, once it started


class SubagentView(TypedDict):
    """The sub-agent a ``delegate`` call started, shown in the call's card; the blocks of its
    work are the view's blocks whose ``parent`` is the card's id."""

    status: ViewStatus
    model: str
    task: str
    tools: list[str]
    session: str | None  # the name of the file its conversation is saved in
    usage: UsageView | None


class QuestionBlock(TypedDict):
    id: str
    kind: Literal["question"]
    parent: NotRequired[str]  # a sub-agent's block: the id of the delegate card it is shown in
    question: str
    choices: list[str]
    answer: str | None  # None until answered


class WarningBlock(TypedDict):
    id: str
    kind: Literal["warning"]
    parent: NotRequired[str]  # a sub-agent's block: the id of the delegate card it is shown in
    text: str
    hint: NotRequired[str]  # what to do about it, when the warning says


class AttachmentBlock(TypedDict):
    """What went to the model with the prompt besides its text: the notebook's context, a
    mentioned variable, a file. Shown folded, with its size."""

    id: str
    kind: Literal["attachment"]
    parent: NotRequired[str]  # a sub-agent's block: the id of the delegate card it is shown in
    label: str
    text: str
    tokens: int


class ErrorBlock(TypedDict):
    id: str
    kind: Literal["error"]
    parent: NotRequired[str]  # a sub-agent's block: the id of the delegate card it is shown in
    code: str
    message: str
    hint: str
    retryable: bool


Block: TypeAlias = (
    UserBlock
    | TextBlock
    | ThinkingBlock
    | ToolBlock
    | QuestionBlock
    | WarningBlock
    | ErrorBlock
    | AttachmentBlock
)


class BlockFields(TypedDict, total=False):
    """The fields a ``set`` patch may replace, on whichever block it addresses."""

    streaming: bool
    duration: float | None
    args: str
    status: ToolStatus
    result: str | None
    display: list[MimeBundle] | None
    permission: bool
    caution: str
    answer: str | None
    child: SubagentView | None
    claims: list[ClaimView]


# -- the state of one view -----------------------------------------------------------------------


class UsageView(TypedDict):
    input: int
    output: int
    cost: float | None
    cached: int  # prompt tokens read from the provider's prompt cache (counted apart from input)
    saved: float | None  # what prompt caching saved, in dollars (None: nothing cached or no price)
    context: str  # the context window readout, e.g. "~1,280 / 32,768 tokens (4%)"
    budget: str | None  # what the run has spent of its caps, e.g. "$0.21 / $0.50"; None: no caps


class ViewState(TypedDict):
    seq: int  # number of the last patch batch folded into this state
    status: ViewStatus
    model: str
    blocks: list[Block]  # in display order
    usage: UsageView | None
    live: bool  # the kernel saw a front end show this view (hello acknowledged)


class TopFields(TypedDict, total=False):
    """The top-level fields a ``top`` patch may replace."""

    status: ViewStatus
    model: str
    usage: UsageView | None
    live: bool


def new_state() -> ViewState:
    return {"seq": 0, "status": "idle", "model": "", "blocks": [], "usage": None, "live": False}


# -- patches, kernel → front end -----------------------------------------------------------------


class AddPatch(TypedDict):
    op: Literal["add"]
    block: Block


class AppendPatch(TypedDict):
    """Grow a text field of a block (a text's or thinking's ``text``, a tool card's ``args``)."""

    op: Literal["append"]
    id: str
    field: Literal["text", "args"]
    value: str


class SetPatch(TypedDict):
    op: Literal["set"]
    id: str
    fields: BlockFields


class RemovePatch(TypedDict):
    """Drop a block (a retried request discards what it streamed; a new conversation, all)."""

    op: Literal["remove"]
    id: str


class TopPatch(TypedDict):
    op: Literal["top"]
    fields: TopFields


Patch: TypeAlias = AddPatch | AppendPatch | SetPatch | RemovePatch | TopPatch


class PatchesMessage(TypedDict):
    """One batch of patches; batches are numbered consecutively."""

    kind: Literal["patches"]
    seq: int
    patches: list[Patch]


class AckMessage(TypedDict):
    """The kernel's answer to the front end's hello."""

    kind: Literal["ack"]
    of: Literal["hello"]


class RuntimeMessage(TypedDict):
    """The front end's runtime, whose code travels as the message's one binary buffer."""

    kind: Literal["runtime"]
    hash: str


ViewMessage: TypeAlias = PatchesMessage | AckMessage | RuntimeMessage


# -- user actions, front end → kernel ------------------------------------------------------------


class HelloAction(TypedDict):
    """A front end shows the view (re-sent until acknowledged): a person can click."""

    action: Literal["hello"]


class SyncAction(TypedDict):
    """The page folded in the patches up to ``seq`` and may have missed some: the view sends the
    whole state if the page is behind."""

    action: Literal["sync"]
    seq: int


class RuntimeAction(TypedDict):
    """A page without the front end's runtime asks for it (once per ``page`` and ``round``)."""

    action: Literal["runtime"]
    hash: str
    page: str
    round: int


class StopAction(TypedDict):
    action: Literal["stop"]


class PermissionAction(TypedDict):
    action: Literal["permission"]
    id: str  # the tool call's id
    decision: Decision


class AnswerAction(TypedDict):
    action: Literal["answer"]
    id: str  # the question's id
    answer: str | None  # None: declined


class RetryAction(TypedDict):
    """Run the last prompt again (offered on retryable errors)."""

    action: Literal["retry"]


class PickedFile(TypedDict):
    """A file the user attached to a chat message: its name and its bytes (a comm buffer)."""

    name: str
    data: bytes


class SendAction(TypedDict):
    """Chat only: the text typed in the input box, and the files attached to it."""

    action: Literal["send"]
    text: str
    files: list[PickedFile]


class NewAction(TypedDict):
    """Chat only: start a new conversation."""

    action: Literal["new"]


class ModelAction(TypedDict):
    """Chat only: the model picked."""

    action: Literal["model"]
    model: str


Action: TypeAlias = (
    HelloAction
    | SyncAction
    | RuntimeAction
    | StopAction
    | PermissionAction
    | AnswerAction
    | RetryAction
    | SendAction
    | NewAction
    | ModelAction
)


def parse_action(content: object, buffers: Sequence[object] = ()) -> Action | None:
    """A message from the front end as an :data:`Action`; None when it is not one we know (an
    unknown action, a permission with no valid decision, a file list that does not match the
    message's buffers, ...)."""
    if not isinstance(content, dict):
        return None
    action = content.get("action")
    if action == "hello":
        return {"action": "hello"}
    if action == "sync":
        seq = content.get("seq")
        return {"action": "sync", "seq": seq} if isinstance(seq, int) else None
    if action == "runtime":
        page, round_ = content.get("page"), content.get("round", 0)
        if not isinstance(page, str) or not isinstance(round_, int):
            return None
        return {"action": "runtime", "hash": str(content.get("hash", "")), "page": page, "round": round_}
    if action == "stop":
        return {"action": "stop"}
    if action == "permission":
        decision = _decision(content.get("decision"))
        if decision is None:
            return None
        return {"action": "permission", "id": str(content.get("id")), "decision": decision}
    if action == "answer":
        answer = content.get("answer")
        return {
            "action": "answer",
            "id": str(content.get("id")),
            "answer": None if answer is None else str(answer),
        }
    if action == "retry":
        return {"action": "retry"}
    if action == "send":
        files = _picked_files(content.get("files", []), buffers)
        if files is None:
            return None
        return {"action": "send", "text": str(content.get("text", "")), "files": files}
    if action == "new":
        return {"action": "new"}
    if action == "model":
        return {"action": "model", "model": str(content.get("model") or "")}
    return None


def _picked_files(names: object, buffers: Sequence[object]) -> list[PickedFile] | None:
    """``[{"name": ...}, ...]`` paired with the message's buffers, one each, in order."""
    if not isinstance(names, list) or len(names) != len(buffers):
        return None
    files: list[PickedFile] = []
    for entry, buffer in zip(names, buffers, strict=True):
        name = entry.get("name") if isinstance(entry, dict) else None
        if not isinstance(name, str) or not isinstance(buffer, bytes | bytearray | memoryview):
            return None
        files.append({"name": name, "data": bytes(buffer)})
    return files


def _decision(value: object) -> Decision | None:
    if value == "allow":
        return "allow"
    if value == "always":
        return "always"
    if value == "deny":
        return "deny"
    return None
