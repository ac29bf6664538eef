"""What the local model may write: GBNF grammars over tool calls and text, and which tools a
turn offers.

This module owns the constraints (:func:`tool_grammar`, :func:`answer_grammar`,
:func:`typed_answer_grammar`, :func:`callable_tools`, and :func:`allowed_calls`, which maps a
request's ``tool_choice`` onto them); llama.cpp applies them (:mod:`._local_llama`), and
:mod:`._local_parse` reads what comes out. Which tools a request may call is the loop's decision
(``request.tool_choice``, see :mod:`ipyagent.agentlib.tool_choice`); nothing here reads what the
user wrote.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any, Literal

from ..model import ModelRequest, ToolSpec

__all__ = [
    "AfterResults",
    "allowed_calls",
    "answer_grammar",
    "callable_tools",
    "tool_call_schema",
    "tool_grammar",
    "typed_answer_grammar",
]


def _prefixed_refs(value: Any, prefix: str) -> Any:
    if isinstance(value, dict):
        return {
            k: (
                f"#/$defs/{prefix}{v.removeprefix('#/$defs/')}"
                if k == "$ref" and isinstance(v, str) and v.startswith("#/$defs/")
                else _prefixed_refs(v, prefix)
            )
            for k, v in value.items()
        }
    if isinstance(value, list):
        return [_prefixed_refs(v, prefix) for v in value]
    return value


def tool_call_schema(tools: Sequence[ToolSpec]) -> dict[str, Any]:
    """A JSON schema matching ``{"name": <a tool>, "arguments": <valid for that tool>}``."""
    defs: dict[str, Any] = {}
    options = []
    for i, tool in enumerate(tools):
        params = _prefixed_refs(dict(tool.parameters), f"t{i}-")
        defs.update({f"t{i}-{k}": v for k, v in params.pop("$defs", {}).items()})
        # Small models invent arguments ("units" for a calculator): only declared ones are allowed.
        params = {"type": "object", "additionalProperties": False, **params}
        options.append(
            {
                "type": "object",
                "properties": {"name": {"const": tool.name}, "arguments": params},
                "required": ["name", "arguments"],
                "additionalProperties": False,
            }
        )
    schema: dict[str, Any] = {"oneOf": options} if len(options) > 1 else options[0]
    return {**schema, "$defs": defs} if defs else schema


# A text reply may not open the way a tool call does: "<" (a tag), "{" (bare JSON) or a fenced
# JSON block, which is how small models such as Qwen2.5-Coder-0.5B like to write calls; those
# openings belong to the call branches, where the JSON is held to the tools' schemas. Other code
# fences ("```python") and everything after the first characters are free.
_TEXT_RULES = (
    'x-text ::= [^<{`] x-any | "`" ([^`] x-any | "`" ([^`] x-any | "`" x-fence-tail)?)?\n'
    'x-fence-tail ::= ([^j\\n] x-any | "j" ([^s] x-any | "s" ([^o] x-any | "o" ([^n] x-any)?)?)?)?\n'
    "x-any ::= [^\\x00]*\n"
)


def _schema_rules(schemas: dict[str, dict[str, Any]]) -> str:
    """GBNF rules for JSON valid for each schema, the rule for each named by its key: one
    converter for all, so rules they share (``space``, ``string``) are defined once."""
    from llama_cpp.llama_grammar import SchemaConverter

    make: Any = SchemaConverter  # untyped
    converter = make(prop_order={}, allow_fetch=False, dotall=False, raw_pattern=False)
    for name, schema in schemas.items():
        converter.visit(converter.resolve_refs(json.loads(json.dumps(schema)), name), name)
    rules: str = converter.format_grammar()
    return rules


def typed_answer_grammar(schema: dict[str, Any]) -> str:
    """GBNF for a typed answer: one JSON document valid for ``schema`` (a request's
    ``output_schema``), and nothing else."""
    from llama_cpp.llama_grammar import json_schema_to_gbnf

    rules: str = json_schema_to_gbnf(json.dumps(schema))
    return rules


def tool_grammar(
    tools: Sequence[ToolSpec], *, text: bool = True, answer: dict[str, Any] | None = None
) -> str:
    """GBNF for "call tools with valid arguments (in ``<tool_call>`` tags, or as a fenced JSON
    block) | answer in text". The model's own first tokens pick the branch; once it opens a
    call, the name is one of ``tools`` and the arguments match that tool's schema. With no
    tools: text only. With ``text=False`` the reply must be calls in tags, as many as there are
    tools at most: told to call one tool, small models otherwise chain calls with made-up
    arguments (``describe_variable(name="sales_region_units_max")`` ...). With an ``answer``
    schema (a typed answer), the reply that is not a call is JSON valid for it, not free text."""
    if not tools:
        return typed_answer_grammar(answer) if answer is not None else "root ::= x-text\n" + _TEXT_RULES
    if answer is not None:
        calls = _schema_rules({"x-tool-call-json": tool_call_schema(tools), "x-answer": answer})
    else:
        from llama_cpp.llama_grammar import json_schema_to_gbnf

        calls = json_schema_to_gbnf(json.dumps(tool_call_schema(tools)))
        calls = re.sub(r"^root ::=", "x-tool-call-json ::=", calls, count=1, flags=re.MULTILINE)
    if text:
        root = f"root ::= x-tool-calls | x-fenced-call | {'x-answer' if answer is not None else 'x-text'}\n"
    else:
        root = "root ::= x-tool-call" + ' ("\\n" x-tool-call)?' * (len(tools) - 1) + "\n"
    return (
        root + 'x-tool-calls ::= x-tool-call ("\\n" x-tool-call)*\n'
        'x-tool-call ::= "<tool_call>\\n" x-tool-call-json "\\n</tool_call>"\n'
        'x-fenced-call ::= "```json\\n" x-tool-call-json "\\n```"\n'
        + (_TEXT_RULES if answer is None else "")
        + calls
    )


AfterResults = Literal["all", "others", "none"]


def callable_tools(request: ModelRequest, after_results: AfterResults = "none") -> list[ToolSpec]:
    """The tools the grammar offers for this turn.

    After a turn whose tool calls all returned without error, small models tend to call a tool
    again instead of answering with the result (Qwen2.5-Coder-0.5B did on most tasks of
    bench/local_model.py, and called *other* tools when only the same one was held back). So by
    default (``"none"``) such a turn may only answer in text; ``"others"`` holds back only the
    tools that just answered; ``"all"`` offers every tool. A failed call keeps every tool, so
    the model can fix it. A turn offering no tools after results answers in an envelope (see
    :data:`~._local_prompt.ANSWER_OPENER`).
    """
    last = request.messages[-1] if request.messages else None
    results = last.tool_results if last is not None and last.role == "user" else []
    if not results or after_results == "all" or any(r.is_error for r in results):
        return list(request.tools)
    if after_results == "none":
        return []
    answered = {r.name for r in results}
    return [t for t in request.tools if t.name not in answered]


def allowed_calls(request: ModelRequest, after_results: AfterResults = "none") -> tuple[list[ToolSpec], bool]:
    """The tools the reply may call, and whether it may answer in text instead, for the
    request's ``tool_choice``: ``"auto"`` offers :func:`callable_tools` or text; ``"none"`` no
    tool; ``"required"`` every tool and no text; names only those tools and no text."""
    choice = request.tool_choice
    if choice == "auto":
        return callable_tools(request, after_results), True
    if choice == "none":
        return [], True
    if choice == "required":
        return list(request.tools), False
    return [t for t in request.tools if t.name in choice], False


def answer_grammar() -> str:
    """GBNF for the rest of an answer envelope after its opener (``{"answer": "``): a non-empty
    JSON string, then ``}`` at once. No whitespace may come between them: the reply cannot end
    before the ``}``, so a model that wants to end there would otherwise be pushed into writing
    whitespace, possibly for ever."""
    return (
        'root ::= x-char x-char* "\\"}"\n'
        'x-char ::= [^"\\\\\\x00-\\x1f] | "\\\\" (["\\\\/bfnrt] | "u" x-hex x-hex x-hex x-hex)\n'
        "x-hex ::= [0-9a-fA-F]\n"
    )
