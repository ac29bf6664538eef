"""Sync tools and sync policies that never return: each is abandoned at its timeout, and the
calls after it still get a worker (the default executor has six on two cores, which six stuck
calls used to take for good)."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import threading
from collections.abc import Iterator

import pytest

from ipyagent import Agent, Block, Hooks, Pass, tool
from ipyagent.agentlib.hooks import ToolCallInfo
from ipyagent.agentlib.workers import WorkerPool, WorkersExhausted
from ipyagent.testing import ScriptedModel, tool_call

HUNG = 20
#: Released when each test ends, so that the threads it left blocked end too.
release = threading.Event()


@pytest.fixture(autouse=True)
def _release_at_the_end() -> Iterator[None]:
    release.clear()
    yield
    release.set()


@tool(read_only=True, timeout=0.05)
def hang(i: int) -> str:
    """Wait for the end of the test."""
    release.wait()
    return "released"


@tool(read_only=True)
def answer(i: int) -> str:
    """Answer at once."""
    return f"answer {i}"


def results_of(agent: Agent) -> list[tuple[str, str, bool]]:
    return [(r.name, r.content, r.is_error) for m in agent.messages for r in m.tool_results]


async def test_after_twenty_hung_sync_tools_a_sync_tool_still_answers() -> None:
    model = ScriptedModel(
        [[tool_call("hang", {"i": i}) for i in range(HUNG)], [tool_call("answer", {"i": 1})], "done"]
    )
    # A generous bound: before the fix the answer waited behind the stuck calls until it timed out.
    agent = Agent(model=model, tools=[hang, answer], tool_timeout=10, max_consecutive_failures=HUNG + 1)
    result = await agent.run("go")
    assert result.status == "completed"
    found = results_of(agent)
    assert [r for r in found if r[0] == "hang"] == [
        ("hang", "`hang` timed out after 0.05 s and was abandoned.", True)
    ] * HUNG
    assert found[-1] == ("answer", "answer 1", False)


async def test_after_twenty_hung_sync_policies_a_sync_policy_still_answers() -> None:
    hooks = Hooks()

    @hooks.tool_policy(timeout=1.0)
    def stuck_on_hang(call: ToolCallInfo) -> Pass | Block:
        if call.name == "hang":
            release.wait()
        return Pass()

    model = ScriptedModel(
        [[tool_call("hang", {"i": i}) for i in range(HUNG)], [tool_call("answer", {"i": 2})], "done"]
    )
    agent = Agent(model=model, tools=[hang, answer], hooks=hooks, tool_timeout=10)
    result = await agent.run("go")
    assert result.status == "completed"
    found = results_of(agent)
    hung = [r for r in found if r[0] == "hang"]
    assert len(hung) == HUNG and all(r[2] and "did not answer within 1 s" in r[1] for r in hung)
    assert found[-1] == ("answer", "answer 2", False)  # its policy passed it: a worker was free


async def test_a_pool_replaces_stuck_workers_up_to_its_cap_then_says_what_is_stuck() -> None:
    pool = WorkerPool("test", workers=2, max_abandoned=3)
    for _ in range(3):  # each one's worker is abandoned and another started
        with pytest.raises(asyncio.TimeoutError):
            await asyncio.wait_for(pool.run(release.wait, label="hang"), 0.05)
    assert (pool.abandoned, pool.workers) == (3, 0)
    with pytest.raises(WorkersExhausted) as info:  # at the cap, with no worker left: at once
        await pool.run(lambda: "never", label="quick")
    assert "3 calls that timed out are still running in their threads (hang ×3)" in str(info.value)
    assert "Restart the kernel" in (info.value.info.hint or "")
    release.set()  # the stuck calls return, their threads end and make room again
    for _ in range(500):
        if pool.abandoned == 0:
            break
        await asyncio.sleep(0.01)
    assert pool.abandoned == 0
    assert await asyncio.wait_for(pool.run(lambda: "back"), 10) == "back"


async def test_a_call_cancelled_before_it_started_never_runs() -> None:
    pool = WorkerPool("test", workers=1)
    ran: list[int] = []
    with pytest.raises(asyncio.TimeoutError):
        await asyncio.wait_for(pool.run(release.wait), 0.05)  # takes the one worker's place
    blocker = asyncio.ensure_future(pool.run(release.wait))
    queued = asyncio.ensure_future(pool.run(ran.append, (1,)))
    await asyncio.sleep(0)
    queued.cancel()
    release.set()
    await asyncio.wait_for(blocker, 10)
    assert await asyncio.wait_for(pool.run(lambda: "after"), 10) == "after"
    assert ran == []


def test_a_thread_blocked_forever_does_not_keep_the_process_from_exiting() -> None:
    code = (
        "import asyncio, threading\n"
        "from ipyagent.agentlib.workers import tool_workers\n"
        "async def main():\n"
        "    try:\n"
        "        await asyncio.wait_for(tool_workers().run(threading.Event().wait), 0.05)\n"
        "    except asyncio.TimeoutError:\n"
        "        print('abandoned', flush=True)\n"
        "asyncio.run(main())\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert (done.returncode, done.stdout) == (0, "abandoned\n"), done.stderr
