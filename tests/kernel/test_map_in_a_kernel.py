"""``await agent.map(...)`` in a real kernel: it runs on the kernel's loop, shows its progress
in the cell, and a rerun after an interrupt asks only for the items not finished."""

from __future__ import annotations

import json
import time
from pathlib import Path

from conftest import Kernel, text_of

SETUP = """
import json
from ipyagent import Agent
from ipyagent.testing import ScriptedModel, pause, text

def reply(request):
    n = int(request.messages[0].text.split()[-1])
    return [pause(0.05), text(json.dumps({"result": 2 * n}))]
"""


def test_a_map_shows_its_progress_and_resumes_after_an_interrupt(kernel: Kernel, jupyter_env: Path) -> None:
    reply, _ = kernel.run(SETUP + "m = ScriptedModel([reply] * 40)")
    assert reply["status"] == "ok", reply
    reply, outputs = kernel.run(
        "out = await Agent(model=m).map(range(6), 'Double {item}', output_type=int, checkpoint='six.jsonl')\n"
        "print(list(out))"
    )
    assert reply["status"] == "ok", reply
    shown = text_of(outputs)
    assert "[0, 2, 4, 6, 8, 10]" in shown
    progress = "".join(o["text"] for o in outputs if o["type"] == "stream" and o["name"] == "stderr")
    assert "\rmap 6/6 · " in progress and progress.endswith("completed\n")

    # An interrupt mid-map: the finished items are on file; the rerun asks for the others only.
    msg_id = kernel.send(
        "big = await Agent(model=m).map(range(30), 'Double {item}', output_type=int, concurrency=2, "
        "checkpoint='big.jsonl', progress=False)"
    )
    checkpoint = jupyter_env / "big.jsonl"
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and (
        not checkpoint.exists() or len(checkpoint.read_text().splitlines()) < 5
    ):
        time.sleep(0.05)
    kernel.km.interrupt_kernel()
    reply, _ = kernel.collect(msg_id)
    assert reply["status"] == "error"
    finished = {json.loads(line)["i"] for line in checkpoint.read_text().splitlines()[1:]}
    assert 4 <= len(finished) < 30
    kernel.run("m2 = ScriptedModel([reply] * 30)")
    reply, outputs = kernel.run(
        "big = await Agent(model=m2).map(range(30), 'Double {item}', output_type=int, concurrency=2, "
        "checkpoint='big.jsonl', progress=False)\n"
        "print(list(big) == [2 * n for n in range(30)], len(m2.requests))"
    )
    assert reply["status"] == "ok", reply
    assert text_of(outputs).split() == ["True", str(30 - len(finished))]


def test_a_progress_bar_widget_shows_in_the_cell(kernel: Kernel) -> None:
    kernel.run(SETUP + "m = ScriptedModel([reply] * 3)\nfrom ipyagent.widgets import MapProgressBar")
    reply, outputs = kernel.run(
        "bar = MapProgressBar()\n"
        "out = await Agent(model=m).map(\n"
        "    range(3), 'Double {item}', output_type=int, checkpoint=False, progress=bar\n"
        ")\n"
        "print(bar.bar.value, bar.bar.bar_style, bar.label.value.startswith('map 3/3'))"
    )
    assert reply["status"] == "ok", reply
    views = [o for o in outputs if "application/vnd.jupyter.widget-view+json" in o.get("data", {})]
    assert len(views) == 1  # displayed once, then updated in place
    assert text_of(outputs).strip().endswith("3 success True")
