"""The local model's prompt: our transcript rendered with the GGUF file's own chat template.

This module owns the text the model reads (the Hugging Face ``apply_chat_template`` convention,
run in a sandboxed Jinja environment) and the opening of the answer envelope
(:data:`ANSWER_OPENER`). It does not tokenize, constrain or parse: see
:mod:`._local_grammar` and :mod:`._local_parse`.
"""

from __future__ import annotations

import json
from typing import Any

from ..errors import ProviderError
from ..messages import ImageBlock, Message, TextBlock, ToolCallBlock
from ..model import ModelRequest, ToolSpec

__all__ = ["ANSWER_OPENER", "render_opening", "render_prompt"]

# The reply after successful tool results opens like this, written into the prompt: a JSON
# answer leaves the model no way to call again. In bench/local_model.py, Qwen2.5-Coder-1.5B asked
# for text there wrote a call again (as "```python" once the grammar ruled out fenced JSON) in 8
# of the 13 tasks that got a result; with this opening it answered from the result in 13 of 13.
ANSWER_OPENER = '{"answer": "'

# Used when a GGUF file carries no chat template (rare): ChatML, which most small models know.
_CHATML = (
    "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)

# For templates that know nothing of tools: the Hermes/Qwen convention, said in the system prompt.
_TOOL_PROMPT = (
    "# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
    "You are provided with function signatures within <tools></tools> XML tags:\n<tools>\n{tools}\n"
    "</tools>\n\nFor each function call, return a json object with function name and arguments "
    'within <tool_call></tool_call> XML tags:\n<tool_call>\n{{"name": <function-name>, '
    '"arguments": <args-json-object>}}\n</tool_call>'
)


def _tool_json(tool: ToolSpec) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {"name": tool.name, "description": tool.description, "parameters": tool.parameters},
    }


def _hf_messages(request: ModelRequest, *, native_tools: bool) -> list[dict[str, Any]]:
    """Our transcript in the Hugging Face chat-template convention (OpenAI-like dicts)."""
    system = request.system
    if request.tools and not native_tools:
        listing = "\n".join(json.dumps(_tool_json(t), ensure_ascii=False) for t in request.tools)
        system = f"{system}\n\n{_TOOL_PROMPT.format(tools=listing)}".strip()
    out: list[dict[str, Any]] = [{"role": "system", "content": system}] if system else []
    for message in request.messages:
        out.extend(_hf_message(message, native_tools=native_tools))
    return out


def _hf_message(message: Message, *, native_tools: bool) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    if message.role == "user":
        for result in message.tool_results:
            content = result.content
            if result.is_error and not content.lower().startswith("error"):
                content = f"Error: {content}"  # templates have no error flag: say it in words
            if native_tools:
                out.append({"role": "tool", "name": result.name, "content": content})
            else:
                out.append({"role": "user", "content": f"<tool_response>\n{content}\n</tool_response>"})
        text = "".join(
            b.text if isinstance(b, TextBlock) else "[image omitted]"
            for b in message.content
            if isinstance(b, TextBlock | ImageBlock)
        )
        if text:
            out.append({"role": "user", "content": text})
        return out
    text = "".join(b.text for b in message.content if isinstance(b, TextBlock))
    calls = [b for b in message.content if isinstance(b, ToolCallBlock)]
    entry: dict[str, Any] = {"role": "assistant", "content": text}
    if calls and native_tools:
        entry["tool_calls"] = [
            {"type": "function", "id": c.id, "function": {"name": c.name, "arguments": _args(c)}}
            for c in calls
        ]
    elif calls:
        entry["content"] = text + "".join(
            f"\n<tool_call>\n{json.dumps({'name': c.name, 'arguments': _args(c)})}\n</tool_call>"
            for c in calls
        )
    if entry["content"] or calls:
        out.append(entry)
    return out


def _args(call: ToolCallBlock) -> dict[str, Any] | str:
    return call.arguments if call.arguments is not None else call.raw_arguments


def render_prompt(template: str | None, request: ModelRequest, *, bos: str = "", eos: str = "") -> str:
    """The prompt text for ``request``, rendered with a GGUF chat template (Jinja, as in
    Hugging Face ``apply_chat_template``), ending with the assistant's generation prompt."""
    return _render(template, request, bos=bos, eos=eos, opening=False)


def render_opening(template: str | None, request: ModelRequest, *, bos: str = "", eos: str = "") -> str:
    """The opening every prompt of ``request``'s conversation shares: the system turn (system
    prompt and tools) alone, without the conversation or the generation prompt. Whether the whole
    prompt really starts with it (a template may render the system turn differently once messages
    follow) is for the caller to check, on the tokens it has. Empty when the template cannot
    render a system turn alone."""
    try:
        return _render(template, request, bos=bos, eos=eos, opening=True)
    except ProviderError:
        return ""  # a template that needs a user message: no opening to keep


def _render(template: str | None, request: ModelRequest, *, bos: str, eos: str, opening: bool) -> str:
    import jinja2.sandbox

    source = template or _CHATML
    native_tools = "tools" in source
    env = jinja2.sandbox.ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)

    def raise_exception(message: str) -> None:
        raise jinja2.TemplateError(message)

    def tojson(value: Any, indent: int | None = None, ensure_ascii: bool = False, **_: Any) -> str:
        # jinja's own tojson escapes <, > and & for HTML; chat templates want plain JSON.
        return json.dumps(value, indent=indent, ensure_ascii=ensure_ascii)

    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = lambda fmt: __import__("datetime").datetime.now().strftime(fmt)
    messages = _hf_messages(request, native_tools=native_tools)
    if opening:
        messages = [m for m in messages[:1] if m["role"] == "system"]
    variables: dict[str, Any] = {
        "messages": messages,
        "add_generation_prompt": not opening,
        "bos_token": bos,
        "eos_token": eos,
    }
    if request.tools and native_tools:
        variables["tools"] = [_tool_json(t) for t in request.tools]
    if request.settings.thinking is not None:
        variables["enable_thinking"] = request.settings.thinking != "none"  # Qwen3's switch
    try:
        return env.from_string(source).render(**variables)
    except jinja2.TemplateError as exc:
        raise ProviderError(
            f"The model's chat template failed to render this conversation: {exc}",
            hint="Use another GGUF file, or one whose chat template supports system and tool messages.",
            code="template_error",
        ) from exc
