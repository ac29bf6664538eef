"""An answer's claims in the view: set on the text blocks that show the answer as the run
completes, located by occurrence for the front end, and named in the text output when untraced."""

from __future__ import annotations

from typing import Any

from ipyagent import Agent, tool
from ipyagent.agentlib import events as ev
from ipyagent.agentlib.claims import Claim, Source
from ipyagent.agentlib.usage import Usage
from ipyagent.kernel.render import DisplayRenderer, TerminalRenderer
from ipyagent.testing import ScriptedModel, tool_call
from ipyagent.widgets.claim_marks import claim_views
from ipyagent.widgets.reducer import ViewReducer
from ipyagent.widgets.text import block_markdown, plain_text
from ipyagent.widgets.view_state import Block


@tool(read_only=True)
def run_python(code: str) -> str:
    """Run code."""
    return "median    12.5\ncount      40"


def answering(answer: str) -> Agent:
    return Agent(model=ScriptedModel([tool_call("run_python", {"code": "df.describe()"}), answer]))


async def reduce(agent: Agent, prompt: str = "Describe df.") -> ViewReducer:
    reducer = ViewReducer()
    agent.on("*", reducer.feed)
    await agent.run(prompt)
    return reducer


def answer_block(reducer: ViewReducer) -> dict[str, Any]:
    return dict([b for b in reducer.state["blocks"] if b["kind"] == "text"][-1])


async def test_the_answer_block_carries_its_claims_traced_or_not() -> None:
    agent = answering("The median is 12.5 over 40 rows; the mean is 13.1.")
    agent.tools = [run_python]
    reducer = await reduce(agent)
    claims = answer_block(reducer)["claims"]
    assert [(c["text"], c["nth"], c["source"] is not None) for c in claims] == [
        ("12.5", 0, True),
        ("40", 0, True),
        ("13.1", 0, False),
    ]
    call = next(b for b in reducer.state["blocks"] if b["kind"] == "tool")
    assert claims[0]["source"] == {"call": call["id"], "tool": "run_python", "line": "median    12.5"}
    assert plain_text(reducer.state).endswith(
        "The median is 12.5 over 40 rows; the mean is 13.1.\n⚠ Not found in any tool output: 13.1"
    )


async def test_a_fully_traced_answer_reads_as_before() -> None:
    agent = answering("The median is 12.5.")
    agent.tools = [run_python]
    reducer = await reduce(agent)
    block: Block = [b for b in reducer.state["blocks"] if b["kind"] == "text"][-1]
    assert block["kind"] == "text" and block.get("claims")
    assert plain_text(reducer.state).endswith('→ run_python(code="df.describe()") ✓\nThe median is 12.5.')
    assert block_markdown(block) == "The median is 12.5."


def test_a_claim_is_located_by_its_occurrence_outside_code_and_per_block() -> None:
    first = "Of 1.5 and 5:\n```\n5\n```\n"
    second = "then 5."
    blocks: list[Block] = [
        {"id": "r1.1.1.0", "kind": "text", "text": "An earlier turn: 5", "streaming": False},
        {"id": "r1.2.1.0", "kind": "text", "text": first, "streaming": False},
        {"id": "r1.2.1.1", "kind": "text", "text": second, "streaming": False},
    ]
    source = Source("c1", "run_python", "5")
    answer = first + second
    claims = [
        Claim("1.5", 3, 6, "number", source),
        Claim("5", 11, 12, "number", source),
        Claim("5", len(first) + 5, len(first) + 6, "number", None),
    ]

    def finished(answer: str) -> ev.RunFinished:
        return ev.RunFinished(run_id="r", status="completed", text=answer, usage=Usage(), claims=(*claims,))

    marked = claim_views(blocks, finished(answer), "r1.")
    assert [(block, [(c["text"], c["nth"]) for c in views]) for block, views in marked] == [
        ("r1.2.1.0", [("1.5", 0), ("5", 1)]),  # the "5" of "1.5" comes first
        ("r1.2.1.1", [("5", 0)]),
    ]
    # Blocks that do not hold exactly the answer get no marks rather than misplaced ones.
    assert claim_views(blocks, finished(answer + " more"), "r1.") == []


async def test_without_a_widget_the_untraced_values_follow_the_answer_as_an_output() -> None:
    shown: list[Any] = []
    renderer = DisplayRenderer()
    renderer._display = lambda obj, **_: shown.append(obj)
    agent = answering("The median is 12.5; the mean is 13.1.")
    agent.tools = [run_python]
    agent.on("*", renderer.handle)
    result = await agent.run("Describe df.")
    renderer.finish(result)
    plain = [o.plain for o in shown]
    assert plain[-2:] == ["The median is 12.5; the mean is 13.1.", "⚠ Not found in any tool output: 13.1"]


async def test_the_terminal_names_the_untraced_values_after_the_answer(capsys: Any) -> None:
    renderer = TerminalRenderer()
    agent = answering("The mean is 13.1.")
    agent.tools = [run_python]
    agent.on("*", renderer.handle)
    renderer.finish(await agent.run("Describe df."))
    assert capsys.readouterr().out.endswith("The mean is 13.1.\n⚠ Not found in any tool output: 13.1\n")
