"""A pipeline in a real kernel: ``await pipe.invoke(...)`` in a cell, an interrupt mid-map that
loses only the items in flight, ``await pipe.resume()`` going on from there, and the run shown
as text and HTML."""

from __future__ import annotations

import json
import time
from pathlib import Path

from conftest import Kernel

SETUP = """
import json
from ipyagent import Agent, Pipeline, map_step
from ipyagent.testing import ScriptedModel, pause, text

def reply(request):
    n = int(request.messages[0].text.split()[-1])
    return [pause(0.05), text(json.dumps({"result": 2 * n}))]

m = ScriptedModel([reply] * 80)
pipe = Pipeline("doubles", store="runs")

@pipe.step
def load(state):
    return {"numbers": list(range(state["n"]))}

pipe.add(map_step(Agent(model=m), items_from="numbers", prompt="Double {item}", output_type=int,
                  concurrency=2, progress=False, into="doubled"))

@pipe.step
async def total(state):
    return {"total": sum(state["doubled"])}
"""

# The map step's usage counts the items finished before the interrupt and after it, once each.
SHOWN = (
    "Pipeline 'doubles': completed\n"
    "  ✓ load     python                 done\n"
    "  ✓ doubled  map numbers → doubled  done · 30 ok · 5,490 in / 120 out\n"
    "  ✓ total    python                 done"
)


def test_a_pipeline_runs_in_a_cell_resumes_after_an_interrupt_and_shows_its_steps(
    kernel: Kernel, jupyter_env: Path
) -> None:
    reply, _ = kernel.run(SETUP)
    assert reply["status"] == "ok", reply

    msg_id = kernel.send("run = await pipe.invoke({'n': 30})")
    runs = jupyter_env / "runs" / "doubles"
    deadline = time.monotonic() + 30
    checkpoints: list[Path] = []
    while time.monotonic() < deadline:
        checkpoints = list(runs.glob("*/doubled.1.map.jsonl"))
        if checkpoints and len(checkpoints[0].read_text().splitlines()) >= 6:
            break
        time.sleep(0.05)
    kernel.km.interrupt_kernel()
    reply, _ = kernel.collect(msg_id)
    assert reply["status"] == "error"
    (run_file,) = runs.glob("*.jsonl")
    kinds = [json.loads(line).get("kind") for line in run_file.read_text().splitlines()[1:]]
    assert kinds == ["input", "start", "done", "start", "cancelled"]
    finished = len(checkpoints[0].read_text().splitlines()) - 1
    assert 5 <= finished < 30

    reply, outputs = kernel.run("asked = len(m.requests)\nrun = await pipe.resume()\nrun")
    assert reply["status"] == "ok", reply
    (shown,) = [o for o in outputs if o["type"] == "execute_result"]
    assert shown["data"]["text/plain"] == SHOWN
    page = shown["data"]["text/html"]
    assert page.startswith('<div class="ipyagent-pipeline">') and "<code>doubled</code>" in page
    assert "30 ok" in page and run_file.stem not in page

    reply, outputs = kernel.run("print(run.state['total'], len(m.requests) - asked)")
    assert reply["status"] == "ok", reply
    printed = "".join(o["text"] for o in outputs if o["type"] == "stream").split()
    assert printed == ["870", str(30 - finished)]
