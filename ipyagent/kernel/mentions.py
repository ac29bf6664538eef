"""``@name`` in a chat message: the variable ``name`` of the user's namespace goes with the
message as a summary (what ``describe_variable`` would tell the model: type, shape, a
DataFrame's columns, dtypes and first rows), so the model need not ask for it.

Only names of the namespace count, as whole words after an ``@`` that does not follow a letter
or a dot: "@sales" attaches ``sales``; "user@example.com", "@decorator" of an unknown name and
"@@" do not. Each variable is attached once per message, at most :data:`MAX_MENTIONS` of them.

A prompt to the embedded model attaches plainly named data too ("In df, what is …"): a small
model given the frame's columns and first rows computes on them; without them it guessed a
file to read. Only names whose value is data count, so "print" or "pd" never attach.

Such a prompt is a question about the data, and the embedded model answers it by running code
first (:func:`compute_first`): given the frame's one-line summary, Qwen2.5-Coder-1.5B otherwise
answered from the summary itself — the whole frame's row count for "how many penguins live on
Biscoe" — in most of the data questions of ``bench/data_tasks.py``; and after a failed call it
told the user to fix the path it had guessed instead of calling again.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Collection, Container, Mapping, Sequence
from typing import Any

from ..agentlib.messages import Message, TextBlock
from ..agentlib.model import ToolChoice, ToolSpec
from ..agentlib.tool_choice import ToolChoicePolicy, call_named_tools, named_calls
from .context import shape_of
from .tools.python import cap, describe

__all__ = ["COMPUTE_TRIES", "MAX_MENTIONS", "compute_first", "mentioned_variables"]

MAX_MENTIONS = 8
#: Columns a plain name's line lists.
MAX_COLUMNS = 40
_MENTION = re.compile(r"(?<![\w.@])@([A-Za-z_]\w*)")
# A name written plainly: not an attribute (``.name``), a mention, or a call (``name(``).
_BARE = re.compile(r"(?<![\w.@])([A-Za-z_]\w*)(?![\w(])")


def mentioned_variables(
    text: str, namespace: Mapping[str, Any], *, bare: bool = False, hidden: Container[str] = ()
) -> list[TextBlock]:
    """A summary block for each variable of ``namespace`` that ``text`` mentions as ``@name``;
    with ``bare``, also each name it writes plainly (``df``, `` `df` ``) whose value is data —
    not a module, a function, a class, nor one of ``hidden`` (IPython's own names)."""
    named = [(n, f"@{n}") for n in _MENTION.findall(text) if n in namespace]
    if bare:
        named += [(n, n) for n in _BARE.findall(text) if n in namespace and _is_data(namespace[n])]
    chosen: dict[str, str] = {}  # each name once, as first written (the mentions first)
    for name, label in named:
        if name not in chosen and not name.startswith("_") and name not in hidden:
            chosen[name] = label
    blocks = []
    for name, label in list(chosen.items())[:MAX_MENTIONS]:
        # A plain name gets one line (type, shape, columns and dtypes): the head and statistics
        # of a 14-column frame are ~1,500 tokens, minutes of prompt on a CPU for a small model.
        summary = (
            cap(describe(namespace[name], name)) if label.startswith("@") else _line(name, namespace[name])
        )
        text = f'<variable name="{name}">\n{summary}\n</variable>'
        blocks.append(TextBlock(text=text, attached=label))
    return blocks


#: Failed ``run_python`` calls after which a data question is left to the model.
COMPUTE_TRIES = 3


def compute_first(attachments: Sequence[object], tools: Collection[str]) -> ToolChoicePolicy | None:
    """The tool-choice policy of a prompt whose attachments include plainly named data (only a
    prompt to the embedded model has them, see :func:`mentioned_variables`): each request must
    call ``run_python`` until a call has succeeded (or :data:`COMPUTE_TRIES` have failed), then
    the model answers from the result; a prompt that tells the model which tool to call keeps
    the default policy. None: the usual choice."""
    # A plain name's block is labelled with the name itself; a mention's with "@name", and the
    # notebook context's with words.
    bare = any(isinstance(b, TextBlock) and (b.attached or "").isidentifier() for b in attachments)
    return _until_computed if bare and "run_python" in tools else None


def _until_computed(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> ToolChoice:
    if messages and named_calls(messages[0].text, tools):
        return call_named_tools(messages, tools)  # "call describe_variable on df": as the user says
    # After a failed call (a guessed file, a typo) the 1.5B told the user to fix the path rather
    # than call again; held to run_python it reads the error and corrects the code.
    results = [r for m in messages for r in m.tool_results if r.name == "run_python"]
    if any(not r.is_error for r in results) or len(results) >= COMPUTE_TRIES:
        return "auto"
    return ("run_python",)


def _line(name: str, value: Any) -> str:
    line = f"{name}: {shape_of(value)}"
    columns, dtypes = getattr(value, "columns", None), getattr(value, "dtypes", None)
    if columns is not None and dtypes is not None and type(value).__module__.startswith("pandas"):
        shown = [f"{c} ({dtypes[c]})" for c in list(columns)[:MAX_COLUMNS]]
        more = f", … {len(columns) - MAX_COLUMNS} more" if len(columns) > MAX_COLUMNS else ""
        line += f"; columns: {', '.join(shown)}{more}"
    # Made to call run_python, the 1.5B began its code with pd.read_csv('df.csv') in 3 of the
    # first 4 questions of bench/data_tasks.py, and still did when told only that the frame is
    # loaded; shown how it is used, it computed on the name.
    loaded = f"`{name}` is already loaded in run_python's namespace."
    return f"{line}\n{loaded} Do not read a file; compute on it directly, e.g. `{name}.head()`."


def _is_data(value: Any) -> bool:
    return not (inspect.ismodule(value) or isinstance(value, type) or callable(value))
