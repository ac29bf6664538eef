"""``agent.map(..., executor=client)`` on an in-process Dask cluster: the items run
on its workers, results and checkpoint are the same as with the default executor, and a rerun
resumes."""

from __future__ import annotations

import asyncio
import json
import threading
from pathlib import Path
from typing import Any

import pytest

from ipyagent import Agent, UserError
from ipyagent.agentlib.executors import DaskExecutor
from ipyagent.agentlib.model import ModelRequest
from ipyagent.testing import ScriptedModel

distributed = pytest.importorskip("distributed")


def reply(request: ModelRequest) -> str:
    # Which thread answered: the workers' threads, not the caller's.
    n = int(request.messages[0].text.split()[-1])
    return f"{2 * n}@{threading.current_thread().name}"  # a text answer (output_type=str)


def model() -> ScriptedModel:
    # Each task gets its own copy of the model (Dask pickles what it sends), so every turn is alike.
    return ScriptedModel([reply] * 50)


def test_items_run_on_the_cluster_and_a_rerun_resumes(tmp_path: Path) -> None:
    path = tmp_path / "c.jsonl"
    with distributed.Client(
        processes=False, n_workers=1, threads_per_worker=4, dashboard_address=None
    ) as client:
        result = asyncio.run(
            Agent(model=model()).map(
                range(12), "Double {item}", output_type=str, executor=client, checkpoint=path, progress=False,
            )
        )  # fmt: skip
        assert result.status == "completed"
        values = [value.split("@") for value in result]
        assert [int(v) for v, _ in values] == [2 * n for n in range(12)]
        assert all(thread != threading.current_thread().name for _, thread in values)
        assert sorted(json.loads(line)["i"] for line in path.read_text().splitlines()[1:]) == list(range(12))
        # Lose the last 4 items' records, as a crash would have: the rerun runs only those.
        lines = path.read_text().splitlines()
        path.write_text("\n".join(lines[:-4]) + "\n")
        lost = {json.loads(line)["i"] for line in lines[-4:]}
        again = asyncio.run(
            Agent(model=model()).map(
                range(12), "Double {item}", output_type=str, executor=DaskExecutor(client), checkpoint=path,
                progress=False,
            )
        )  # fmt: skip
        assert {item.index for item in again.items if not item.resumed} == lost
        assert [int(v.split("@")[0]) for v in again] == [2 * n for n in range(12)]


async def test_an_asynchronous_client_and_a_budget(tmp_path: Path) -> None:
    async with distributed.Client(
        processes=False,
        n_workers=1,
        threads_per_worker=2,
        dashboard_address=None,
        asynchronous=True,
        local_directory=str(tmp_path),
    ) as client:
        result = await Agent(model=model()).map(
            range(6), "Double {item}", output_type=str, concurrency=1, executor=DaskExecutor(client),
            checkpoint=False, progress=False, budget="tokens=1",
        )  # fmt: skip
        # The first item spends more than the budget: no second one starts.
        assert result.status == "exhausted"
        assert [item.status for item in result.items] == ["ok"] + ["pending"] * 5


async def test_a_configuration_that_cannot_travel_is_refused_before_anything_is_sent() -> None:
    lock = threading.Lock()

    def locked(request: ModelRequest) -> Any:
        with lock:
            return '{"result": "x"}'

    class Client:
        asynchronous = True

        def submit(self, *args: Any, **kwargs: Any) -> Any:
            raise AssertionError("nothing may be sent")

    with pytest.raises(UserError) as raised:
        await Agent(model=ScriptedModel([locked])).map(
            range(2),
            "x {item}",
            output_type=str,
            executor=DaskExecutor(Client()),
            checkpoint=False,
            progress=False,
        )
    assert raised.value.code == "not_portable"
    assert "executor=" in raised.value.hint
