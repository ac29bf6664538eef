"""What the local model may write: GBNF grammars over tool calls and text, and which tools a
turn offers.

This module owns the constraints (:func:`tool_grammar`, :func:`answer_grammar`,
:func:`typed_answer_grammar`, :func:`callable_tools`, and :func:`allowed_calls`, which maps a
request's ``tool_choice`` onto them); llama.cpp applies them (:mod:`._local_llama`,
:mod:`._local_xllama`), and :mod:`._local_parse` reads what comes out.

Grammars come in two dialects. ``"gbnf"``: llama.cpp's GBNF, the JSON-schema parts written by
llama-cpp-python's Python converter (``llama_cpp.llama_grammar``). ``"lark"``: llguidance's
Lark-like syntax (``%llguidance``), where each JSON schema is one ``%json {...}`` rule compiled by
llguidance itself; xllamacpp's ``json_schema_to_grammar`` returns exactly that form (it has no
GBNF output), so it is what the xllamacpp backend uses, and it needs no llama-cpp-python. Both
describe the same language. The answer envelope's grammar has no schema and is GBNF for both.

Which tools a request may call is the loop's decision
(``request.tool_choice``, see :mod:`ipyagent.agentlib.tool_choice`); nothing here reads what the
user wrote.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any, Literal

from ..model import ModelRequest, ToolSpec

Dialect = Literal["gbnf", "lark"]

__all__ = [
    "CALL_OPENER",
    "AfterResults",
    "Dialect",
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


def typed_answer_grammar(schema: dict[str, Any], dialect: Dialect = "gbnf") -> str:
    """A grammar for a typed answer: one JSON document valid for ``schema`` (a request's
    ``output_schema``), and nothing else."""
    if dialect == "lark":
        return _LARK_HEAD + "start: " + _lark_json(schema) + "\n"
    from llama_cpp.llama_grammar import json_schema_to_gbnf

    rules: str = json_schema_to_gbnf(json.dumps(schema))
    return rules


def tool_grammar(
    tools: Sequence[ToolSpec],
    *,
    text: bool = True,
    answer: dict[str, Any] | None = None,
    dialect: Dialect = "gbnf",
    opened: str | None = None,
) -> str:
    """GBNF for "call tools with valid arguments (in ``<tool_call>`` tags, or as a fenced JSON
    block) | answer in text". The model's own first tokens pick the branch; once it opens a
    call, the name is one of ``tools`` and the arguments match that tool's schema. With no
    tools: text only. With ``text=False`` the reply must be calls in tags, as many as there are
    tools at most: told to call one tool, small models otherwise chain calls with made-up
    arguments (``describe_variable(name="sales_region_units_max")`` ...). With an ``answer``
    schema (a typed answer), the reply that is not a call is JSON valid for it, not free text.

    ``opened`` (``"lark"`` only, with tools and ``text``): the rest of the reply once its first
    token wrote that much of :data:`CALL_OPENER` (see :mod:`._local_xllama`'s first-token nudge)."""
    if dialect == "lark":
        return _lark_tool_grammar(tools, text, answer, opened)
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


#: How a call in tags opens; a reply whose first token is a prefix of it is a call.
CALL_OPENER = "<tool_call>\n"

_LARK_HEAD = "%llguidance {}\n"

# _TEXT_RULES as one llguidance lexeme: a text reply may not open like a call ("<", "{", a
# ```json fence); after that anything but NUL.
_LARK_TEXT = (
    r"/[^<{`\x00][^\x00]*|`([^`\x00][^\x00]*|`([^`\x00][^\x00]*|`([^j\n\x00][^\x00]*"
    r"|j([^s\x00][^\x00]*|s([^o\x00][^\x00]*|o([^n\x00][^\x00]*)?)?)?)?)?)?/"
)


#: llguidance's JSON whitespace, as the GBNF converter's ``space`` rule: nothing, a space, or one
#: or two newlines and up to 20 spaces or tabs. Its default (any whitespace, unbounded) let the
#: tiny test model spend its whole budget on it; fixed separators (``", "``) are written by
#: forcing bytes, which the tiny model's byte vocabulary cannot tokenize.
_LARK_JSON_OPTIONS = {"whitespace_pattern": "( |\n{1,2}[ \t]{0,20})?"}


def _closed(schema: Any) -> Any:
    """``schema`` with ``additionalProperties: false`` on every object that does not say: the
    GBNF converter allows no undeclared keys unless told to, llguidance follows JSON Schema and
    allows any (a small model then invents keys)."""
    if isinstance(schema, list):
        return [_closed(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out = dict(schema)
    for key in ("properties", "$defs", "definitions", "patternProperties"):
        if isinstance(out.get(key), dict):
            out[key] = {name: _closed(sub) for name, sub in out[key].items()}
    for key in ("items", "additionalProperties", "not", "if", "then", "else", "contains"):
        if isinstance(out.get(key), dict):
            out[key] = _closed(out[key])
    for key in ("anyOf", "oneOf", "allOf", "prefixItems"):
        if isinstance(out.get(key), list):
            out[key] = _closed(out[key])
    if "properties" in out and "additionalProperties" not in out:
        out["additionalProperties"] = False
    return out


def _lark_json(schema: dict[str, Any]) -> str:
    # llguidance reads the schema as JSON on one line after %json.
    options = {**_closed(schema), "x-guidance": _LARK_JSON_OPTIONS}
    return "%json " + json.dumps(options, separators=(",", ":"))


def _lark_tool_grammar(
    tools: Sequence[ToolSpec], text: bool, answer: dict[str, Any] | None, opened: str | None
) -> str:
    if not tools:
        return (
            typed_answer_grammar(answer, "lark")
            if answer is not None
            else _LARK_HEAD + "start: TEXT\nTEXT: " + _LARK_TEXT + "\n"
        )
    other = "answer" if answer is not None else "TEXT"
    if opened is not None:
        rest = json.dumps(CALL_OPENER[len(opened) :]) if len(opened) < len(CALL_OPENER) else ""
        start = f'start: {rest} call_json "\\n</tool_call>" ("\\n" tool_call)*'
    elif text:
        start = f"start: tool_calls | fenced_call | {other}"
    else:
        start = "start: tool_call" + ' ("\\n" tool_call)?' * (len(tools) - 1)
    return (
        _LARK_HEAD
        + start
        + "\n"
        + 'tool_calls: tool_call ("\\n" tool_call)*\n'
        + 'tool_call: "<tool_call>\\n" call_json "\\n</tool_call>"\n'
        + 'fenced_call: "```json\\n" call_json "\\n```"\n'
        + f"call_json: {_lark_json(tool_call_schema(tools))}\n"
        + (f"answer: {_lark_json(answer)}\n" if answer is not None else f"TEXT: {_LARK_TEXT}\n")
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
