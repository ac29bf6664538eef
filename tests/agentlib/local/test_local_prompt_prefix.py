"""The embedded model reuses its KV cache for the prompt prefix shared with the previous request
(``_local_llama.Job``): that only helps if turn N's prompt *is* a prefix of turn N+1's. These
tests render a conversation turn by turn with the plain ChatML template and with the template
the default model (Qwen2.5-Coder) ships, copied from its GGUF file into templates/."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest

from ipyagent.agentlib.messages import Message, TextBlock, ToolCallBlock, ToolResultBlock
from ipyagent.agentlib.model import ModelRequest, ModelSettings, ToolSpec
from ipyagent.agentlib.providers._local_prompt import render_prompt

QWEN = (Path(__file__).parent / "templates" / "qwen2.5-coder.jinja").read_text("utf-8")
TOOLS = [
    ToolSpec(
        name="get_rate",
        description="The exchange rate of a currency.",
        parameters={"type": "object", "properties": {"cur": {"type": "string"}}, "required": ["cur"]},
    )
]


def turns(count: int) -> list[list[Message]]:
    """The transcript before each of ``count`` requests of a conversation with tool calls."""
    messages = [Message.user("What is the EUR rate? And the notebook context: df has 3 rows.")]
    out = [list(messages)]
    for i in range(count - 1):
        if i % 2 == 0:  # the model calls a tool, the result comes back
            call = ToolCallBlock(
                id=f"c{i}", name="get_rate", arguments={"cur": "EUR"}, raw_arguments='{"cur": "EUR"}'
            )
            messages += [
                Message(role="assistant", content=(TextBlock(text="Checking."), call)),
                Message(role="user", content=(ToolResultBlock(tool_call_id=f"c{i}", content=f"1.0{i}"),)),
            ]
        else:  # the model answers, the user asks again
            messages += [
                Message(role="assistant", content=(TextBlock(text=f"It is 1.0{i}."),)),
                Message.user(f"And now ({i})?"),
            ]
        out.append(list(messages))
    return out


@pytest.mark.parametrize("template", [None, QWEN], ids=["chatml", "qwen2.5"])
@pytest.mark.parametrize("thinking", [None, "none"])
def test_each_prompt_is_a_prefix_of_the_next(template: str | None, thinking: str | None) -> None:
    settings = ModelSettings(thinking=thinking)  # type: ignore[arg-type]
    prompts = [
        render_prompt(
            template, ModelRequest(model="m", system="Be brief.", messages=m, tools=TOOLS, settings=settings)
        )
        for m in turns(10)
    ]
    for n, (before, after) in enumerate(itertools.pairwise(prompts)):
        assert after.startswith(before), f"turn {n + 1}'s prompt is not a prefix of turn {n + 2}'s"
    assert len(prompts[-1]) > 2 * len(prompts[0])  # the conversation did grow
