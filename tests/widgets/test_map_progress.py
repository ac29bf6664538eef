"""MapProgressBar: a map's progress events as a bar and a line of text, updated in place."""

from __future__ import annotations

import json
from typing import Any

from ipyagent import Agent
from ipyagent.agentlib.events import MapProgress
from ipyagent.agentlib.model import ModelRequest
from ipyagent.agentlib.usage import Usage
from ipyagent.testing import ScriptedModel
from ipyagent.widgets import MapProgressBar


def test_events_move_the_bar_and_the_line() -> None:
    shown: list[Any] = []
    bar = MapProgressBar(display=shown.append)
    bar(MapProgress(total=10, done=0, failed=0, usage=Usage(), elapsed=0.0))
    assert len(shown) == 1 and shown[0] is bar.box  # shown once, on the first event
    bar(
        MapProgress(
            total=10,
            done=3,
            failed=1,
            usage=Usage(input_tokens=900, output_tokens=100),
            elapsed=4,
            remaining=6,
        )
    )
    assert (bar.bar.value, bar.bar.max) == (4, 10)
    assert bar.label.value == "map 4/10 · 1 failed · 1,000 tokens · 6s left"
    assert bar.bar.bar_style == ""
    bar(MapProgress(total=10, done=9, failed=1, usage=Usage(), elapsed=9, finished=True, status="completed"))
    assert bar.bar.bar_style == "danger"  # an item failed
    assert len(shown) == 1


def test_the_style_at_the_end_says_how_the_map_ended() -> None:
    for status, failed, style in (
        ("completed", 0, "success"),
        ("exhausted", 0, "warning"),
        ("cancelled", 0, "danger"),
    ):
        bar = MapProgressBar(display=lambda _: None)
        bar(
            MapProgress(
                total=2,
                done=2 - failed,
                failed=failed,
                usage=Usage(),
                elapsed=1,
                finished=True,
                status=status,
            )
        )
        assert bar.bar.bar_style == style


async def test_a_map_drives_it() -> None:
    def reply(request: ModelRequest) -> str:
        return json.dumps({"result": 2 * int(request.messages[0].text.split()[-1])})

    bar = MapProgressBar(display=lambda _: None)
    result = await Agent(model=ScriptedModel([reply] * 4)).map(
        range(4), "Double {item}", output_type=int, checkpoint=False, progress=bar
    )
    assert list(result) == [0, 2, 4, 6]
    assert bar.bar.value == 4 and bar.bar.bar_style == "success"
    assert bar.label.value.startswith("map 4/4 · ") and bar.label.value.endswith("completed")
