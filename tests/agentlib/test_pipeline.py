"""Pipelines: named steps over a state, the state persisted after every step, runs that resume
from where they stopped (paying again only for the step in flight), and a stable display."""

from __future__ import annotations

import asyncio
import datetime
import enum
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np
import pandas as pd
import pytest
from pydantic import BaseModel, ConfigDict

from ipyagent import Agent, Pipeline, PipelineRun, UserError, agent_step, map_step
from ipyagent.agentlib import PipelineFailed, PipelineWarning, StepContext
from ipyagent.agentlib.model import ModelRequest
from ipyagent.agentlib.pipeline_state import StateCodec
from ipyagent.testing import ScriptedModel, pause, text, usage


class Ticket(BaseModel):
    category: Literal["billing", "bug", "other"]
    urgency: int


@dataclass
class Window:
    start: datetime.date
    days: int


class Table(BaseModel):
    model_config = ConfigDict(arbitrary_types_allowed=True)

    name: str
    frame: pd.DataFrame


class Report(BaseModel):
    path: str
    count: int = 0
    summary: str = ""


def doubling(request: ModelRequest) -> Any:
    n = int(request.messages[0].text.split()[-1])
    return [text(json.dumps({"result": 2 * n})), usage(input_tokens=90, output_tokens=10)]


def lines(path: Path) -> list[dict[str, Any]]:
    header, *rest = path.read_text().splitlines()
    assert json.loads(header)["format"] == "ipyagent-pipeline"
    return [json.loads(line) for line in rest]


async def test_each_step_sees_what_the_earlier_ones_produced(tmp_path: Path) -> None:
    pipe = Pipeline("numbers", store=tmp_path)

    @pipe.step
    def load(state: dict[str, Any]) -> dict[str, Any]:
        return {"values": list(range(state["n"]))}

    @pipe.step
    async def total(state: dict[str, Any]) -> dict[str, Any]:
        await asyncio.sleep(0)
        return {"total": sum(state["values"])}

    @pipe.step(name="describe")
    def describe_it(state: dict[str, Any], context: StepContext) -> dict[str, Any]:
        return {"text": f"{state['total']} from {len(state['values'])} values ({context.step})"}

    run = await pipe.invoke({"n": 5})
    assert run.status == "completed"
    assert run.state == {
        "n": 5,
        "values": [0, 1, 2, 3, 4],
        "total": 10,
        "text": "10 from 5 values (describe)",
    }
    assert [r.changed for r in run.steps] == [("values",), ("total",), ("text",)]
    assert pipe.steps[2].function is describe_it  # type: ignore[attr-defined]  # returned unchanged


async def test_the_state_is_on_disk_after_every_step(tmp_path: Path) -> None:
    pipe = Pipeline("numbers", store=tmp_path)
    seen: list[dict[str, Any]] = []
    pipe.add(lambda state: {"a": 1}, name="first")

    @pipe.step
    def second(state: dict[str, Any], context: StepContext) -> dict[str, Any]:
        seen.append(pipe.snapshot(context.run_id))  # read back from the file, mid-run
        return {"b": 2}

    run = await pipe.invoke({"x": 0})
    assert seen == [{"input": {"x": 0}, "first": {"x": 0, "a": 1}}]
    assert pipe.snapshot(run.run_id) == {
        "input": {"x": 0},
        "first": {"x": 0, "a": 1},
        "second": {"x": 0, "a": 1, "b": 2},
    }
    kinds = [(line["kind"], line.get("step")) for line in lines(run.path)]
    assert kinds == [
        ("input", None),
        ("start", "first"),
        ("done", "first"),
        ("start", "second"),
        ("done", "second"),
    ]


async def test_a_failing_step_stops_the_run_and_resume_goes_on_from_it(tmp_path: Path) -> None:
    model = ScriptedModel(["Two tickets, both billing.", "unused"])
    agent = Agent(model=model)
    pipe = Pipeline("tickets", store=tmp_path)
    pipe.add(lambda state: {"count": 2}, name="load")
    pipe.add(agent_step(agent, "Summarize {count} tickets.", into="summary"))
    broken = {"yes": True}

    @pipe.step
    def publish(state: dict[str, Any]) -> dict[str, Any]:
        if broken["yes"]:
            raise ValueError("the outbox is full")
        return {"published": state["summary"].upper()}

    run = await pipe.invoke({})
    assert run.status == "failed"
    assert [r.status for r in run.steps] == ["done", "done", "failed"]
    failed = run.steps[2]
    assert failed.error is not None and str(failed.error) == "ValueError: the outbox is full"
    assert "ValueError: the outbox is full" in failed.error.traceback
    assert run.state == {"count": 2, "summary": "Two tickets, both billing."}
    assert len(model.requests) == 1
    with pytest.raises(PipelineFailed, match="Step 'publish' failed") as raised:
        run.raise_for_status()
    assert isinstance(raised.value.__cause__, ValueError) and "pipe.resume()" in raised.value.hint

    broken["yes"] = False
    again = await pipe.resume()
    assert again.run_id == run.run_id and again.status == "completed"
    assert again.state["published"] == "TWO TICKETS, BOTH BILLING."
    assert len(model.requests) == 1  # the agent step finished before: not asked again
    assert again.raise_for_status() is again


async def test_resume_from_a_named_step_runs_it_and_the_later_ones_again(tmp_path: Path) -> None:
    model = ScriptedModel(["first summary", "second summary"])
    calls: list[str] = []
    pipe = Pipeline("tickets", store=tmp_path)

    @pipe.step
    def load(state: dict[str, Any]) -> dict[str, Any]:
        calls.append("load")
        return {"count": 3}

    pipe.add(agent_step(Agent(model=model), lambda state: f"Summarize {state['count']}.", into="summary"))

    @pipe.step
    def shout(state: dict[str, Any]) -> dict[str, Any]:
        calls.append("shout")
        return {"loud": state["summary"].upper()}

    run = await pipe.invoke({})
    assert run.state["loud"] == "FIRST SUMMARY"
    again = await pipe.resume(run.run_id, from_="summary")
    assert again.state["loud"] == "SECOND SUMMARY"
    assert calls == ["load", "shout", "shout"]
    assert len(model.requests) == 2  # a finished step run again asks afresh
    assert [r.attempt for r in again.steps] == [1, 2, 2]
    assert pipe.snapshot(run.run_id)["summary"]["summary"] == "second summary"
    with pytest.raises(UserError, match="no step 'nope'"):
        await pipe.resume(run.run_id, from_="nope")


async def test_a_map_step_resumes_without_asking_the_finished_items_again(tmp_path: Path) -> None:
    five_asked = asyncio.Event()

    def slowly(request: ModelRequest) -> Any:
        if len(model.requests) >= 5:
            five_asked.set()
        return [pause(0.02), *doubling(request)]

    model = ScriptedModel([slowly] * 40)
    pipe = Pipeline("doubles", store=tmp_path)
    pipe.add(lambda state: {"numbers": list(range(12))}, name="load")
    pipe.add(
        map_step(
            Agent(model=model),
            items_from="numbers",
            prompt="Double {item}",
            output_type=int,
            concurrency=2,
            progress=False,
            into="doubled",
        )
    )
    pipe.add(lambda state: {"total": sum(state["doubled"])}, name="total")

    task = asyncio.ensure_future(pipe.invoke({}))
    checkpoint = tmp_path / "doubles"
    await five_asked.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    run = pipe.run()
    assert run.status == "cancelled" and run.stopped_at is not None and run.stopped_at.name == "doubled"
    (map_file,) = checkpoint.glob(f"{run.run_id}/doubled.1.map.jsonl")
    finished = len(map_file.read_text().splitlines()) - 1
    assert 3 <= finished < 12

    asked = len(model.requests)
    again = await pipe.resume()
    assert again.status == "completed"
    assert again.state["doubled"] == [2 * n for n in range(12)]
    assert again.state["total"] == 132
    assert len(model.requests) - asked == 12 - finished
    assert again.steps[1].detail == "12 ok"
    # What the items finished before the interrupt cost is counted too, and only once.
    assert again.steps[1].usage.input_tokens == 90 * 12 == again.usage.input_tokens


async def test_a_crash_mid_step_loses_only_that_step(tmp_path: Path) -> None:
    calls: list[str] = []
    pipe = Pipeline("crash", store=tmp_path)

    def marking(name: str) -> Any:
        def step(state: dict[str, Any]) -> dict[str, Any]:
            calls.append(name)
            return {name: True}

        return step

    for name in ("one", "two", "three"):
        pipe.add(marking(name), name=name)
    run = await pipe.invoke({})
    # What a crash during "two" leaves: its start line, and a torn line after it.
    written = run.path.read_text().splitlines()
    kept = written[
        : next(i for i, line in enumerate(written) if line.startswith('{"kind":"done","step":"two"'))
    ]
    run.path.write_text("\n".join(kept) + '\n{"kind":"do')
    with pytest.warns(PipelineWarning, match="torn last line"):
        crashed = pipe.run()
    assert [r.status for r in crashed.steps] == ["done", "interrupted", "pending"]
    assert crashed.status == "interrupted"
    calls.clear()
    with pytest.warns(PipelineWarning):
        again = await pipe.resume()
    assert calls == ["two", "three"]
    assert again.state == {"one": True, "two": True, "three": True}


@pytest.mark.parametrize("frames", ["json", "parquet"])
async def test_a_dataframe_state_and_a_dataframe_map(
    tmp_path: Path, frames: Literal["json", "parquet"]
) -> None:
    if frames == "parquet":
        pytest.importorskip("pyarrow")
    tickets = pd.DataFrame({"title": ["Refund", "Crash"]}, index=["a", "b"])
    answers = {"Refund": ("billing", 3), "Crash": ("bug", 5)}

    def classify(request: ModelRequest) -> str:
        category, urgency = answers[request.messages[0].text.split(": ")[1]]
        return json.dumps({"category": category, "urgency": urgency})

    model = ScriptedModel([classify] * 2)
    pipe = Pipeline("frames", store=tmp_path, frames=frames)
    pipe.add(lambda state: {"tickets": tickets}, name="load")
    pipe.add(
        map_step(
            Agent(model=model),
            items_from="tickets",
            prompt="Classify: {title}",
            output_type=Ticket,
            progress=False,
            into="labels",
        )
    )
    pipe.add(lambda state: {"joined": state["tickets"].join(state["labels"])}, name="join")
    run = await pipe.invoke({"window": Window(datetime.date(2026, 3, 1), 31), "pair": (1, "x")})
    assert run.status == "completed"
    snap = pipe.snapshot()
    joined = snap["join"]["joined"]
    assert list(joined.index) == ["a", "b"] and list(joined["category"]) == ["billing", "bug"]
    assert snap["input"] == {"window": Window(datetime.date(2026, 3, 1), 31), "pair": (1, "x")}
    pd.testing.assert_frame_equal(snap["load"]["tickets"], tickets)
    stored = list((tmp_path / "frames" / run.run_id).glob("*.parquet"))
    # As parquet, a frame no step changed is stored once, by the hash of its bytes.
    assert len(stored) == (3 if frames == "parquet" else 0)


async def test_frames_inline_as_json_and_a_model_as_the_state(tmp_path: Path) -> None:
    pipe = Pipeline("report", store=tmp_path, frames="json")
    pipe.add(lambda state: {"count": 2}, name="count")
    pipe.add(lambda state: Report(path=state.path, count=state.count, summary="ok"), name="finish")
    run = await pipe.invoke(Report(path="t.csv"))
    assert run.state == Report(path="t.csv", count=2, summary="ok")
    assert pipe.snapshot()["count"] == Report(path="t.csv", count=2)

    frames = Pipeline("inline", store=tmp_path, frames="json")
    frames.add(
        lambda state: {"frame": pd.DataFrame({"x": [1, 2]}), "s": pd.Series([1.5], name="v")}, name="make"
    )
    await frames.invoke({})
    snap = frames.snapshot()["make"]
    pd.testing.assert_frame_equal(snap["frame"], pd.DataFrame({"x": [1, 2]}))
    assert snap["s"].name == "v" and list(snap["s"]) == [1.5]
    assert not list((tmp_path / "inline").glob("*/*.parquet"))
    # A model JSON does not know all of (a DataFrame field) is stored field by field.
    tables = Pipeline("tables", store=tmp_path, frames="json")
    tables.add(lambda state: {"t": Table(name="x", frame=pd.DataFrame({"y": [3]}))}, name="make")
    await tables.invoke({})
    table = tables.snapshot()["make"]["t"]
    assert isinstance(table, Table) and table.name == "x" and list(table.frame["y"]) == [3]

    bad = Pipeline("bad", store=tmp_path)
    bad.add(lambda state: {"nope": 1}, name="nope")
    failed = await bad.invoke(Report(path="x"))
    with pytest.raises(PipelineFailed, match="Report has no field for"):
        failed.raise_for_status()


async def test_a_state_that_cannot_be_persisted_is_refused_clearly(tmp_path: Path) -> None:
    pipe = Pipeline("unsafe", store=tmp_path)
    pipe.add(lambda state: {"lock": asyncio.Lock()}, name="lock")
    with pytest.raises(UserError, match=r"state\['conn'\] is of type object, which a pipeline cannot"):
        await pipe.invoke({"conn": object()})
    assert not (tmp_path / "unsafe").exists()  # refused before anything ran or was written

    run = await pipe.invoke({})
    assert run.status == "failed"
    error = run.steps[0].error
    assert error is not None and error.code == "state_unserializable"
    assert "asyncio.locks.Lock" in error.message and "run.unsaved" in error.message
    assert isinstance(run.unsaved["lock"], asyncio.Lock)  # the step's result is not lost

    class Local(BaseModel):
        x: int

    def make_local(state: dict[str, Any]) -> dict[str, Any]:
        return {"v": Local(x=1)}

    local = Pipeline("local", store=tmp_path, steps=[make_local])
    failed = await local.invoke({})
    assert failed.steps[0].error is not None
    assert "cannot be found again by its name" in failed.steps[0].error.message
    with pytest.raises(UserError, match="a dict with string keys or a pydantic model"):
        await local.invoke([1, 2])


async def test_a_budget_across_the_steps_stops_the_run_and_a_larger_one_goes_on(tmp_path: Path) -> None:
    model = ScriptedModel([doubling] * 20)
    agent = Agent(model=model)
    pipe = Pipeline("budgeted", store=tmp_path, budget="tokens=450")
    pipe.add(lambda state: {"numbers": list(range(8))}, name="load")
    mapped = map_step(
        agent,
        items_from="numbers",
        prompt="Double {item}",
        output_type=int,
        concurrency=1,
        progress=False,
        into="doubled",
    )
    pipe.add(mapped)
    pipe.add(agent_step(agent, "Double 100", output_type=int, into="hundred"))
    run = await pipe.invoke({})
    assert run.status == "exhausted"
    assert [r.status for r in run.steps] == ["done", "exhausted", "pending"]
    assert "budget of 450" in run.reason and len(model.requests) == 5
    with pytest.raises(PipelineFailed, match="budget") as raised:
        run.raise_for_status()
    assert raised.value.code == "pipeline_exhausted"

    pipe.budget = "tokens=2k"
    again = await pipe.resume(from_="doubled")  # the step that stopped goes on with its checkpoint
    assert again.status == "completed"
    assert again.state["doubled"] == [2 * n for n in range(8)] and again.state["hundred"] == 200
    assert len(model.requests) == 9  # 5 + the 3 items left + the agent step
    assert again.usage.input_tokens == 90 * 9

    pipe.budget = "tokens=900"  # spent: the next spending step does not start
    third = await pipe.resume(from_="hundred")
    assert third.status == "exhausted" and "900" in third.reason and len(model.requests) == 9


async def test_the_display_is_the_same_text_and_html_every_time(tmp_path: Path) -> None:
    async def once(store: Path) -> tuple[Pipeline, PipelineRun]:
        model = ScriptedModel([[text("A summary."), usage(input_tokens=12, output_tokens=3)]])
        pipe = Pipeline("tickets", store=store)
        pipe.add(lambda state: {"count": 2}, name="load")
        pipe.add(agent_step(Agent(model=model), "Summarize {count}.", into="summary"))

        @pipe.step
        def publish(state: dict[str, Any]) -> dict[str, Any]:
            raise RuntimeError("no network")

        pipe.add(lambda state: {}, name="archive")
        return pipe, await pipe.invoke({})

    with pytest.raises(UserError, match="A lambda has no name"):
        Pipeline("tickets", store=tmp_path / "none", steps=[lambda state: {}])
    fresh = Pipeline("tickets", store=tmp_path / "none", steps=[dict])
    assert repr(fresh) == "Pipeline 'tickets' (1 step)\n    dict  python"
    pipe, run = await once(tmp_path / "a")
    _, other = await once(tmp_path / "b")
    assert run.run_id != other.run_id
    assert repr(run) == (
        "Pipeline 'tickets': failed at 'publish'\n"
        "  ✓ load     python           done\n"
        "  ✓ summary  agent → summary  done · 12 in / 3 out\n"
        "  ✗ publish  python           failed · RuntimeError: no network\n"
        "  · archive  python           pending"
    )
    assert repr(run) == repr(other) and run._repr_html_() == other._repr_html_()
    assert repr(pipe).startswith("Pipeline 'tickets' (4 steps): failed at 'publish'\n  ✓ load")
    page = run._repr_html_()
    assert "<code>publish</code>" in page and "RuntimeError: no network" in page and run.run_id not in page
    assert set(run.durations()) == {"load", "summary", "publish", "archive"}
    assert run.durations()["archive"] is None


async def test_runs_are_listed_and_the_latest_is_resumed_by_default(tmp_path: Path) -> None:
    pipe = Pipeline("listed", store=tmp_path)
    pipe.add(lambda state: {"y": state["x"] * 2}, name="double")
    first = await pipe.invoke({"x": 1}, run_id="march")
    second = await pipe.invoke({"x": 2})
    infos = pipe.runs()
    assert [i.run_id for i in infos] == ["march", second.run_id]
    assert all(i.status == "completed" and i.stopped_at is None for i in infos)
    assert pipe.run().state == {"x": 2, "y": 4}
    assert (await pipe.resume("march")).state == first.state  # nothing left to run
    with pytest.raises(UserError, match="exists already"):
        await pipe.invoke({"x": 3}, run_id="march")
    with pytest.raises(UserError, match="has no runs"):
        Pipeline("empty", store=tmp_path).run()
    with pytest.raises(UserError, match="cannot be named 'input'"):
        pipe.add(lambda state: {}, name="input")


async def test_steps_after_the_one_resumed_from_start_afresh_even_when_they_had_stopped(
    tmp_path: Path,
) -> None:
    model = ScriptedModel([doubling] * 20)
    pipe = Pipeline("afresh", store=tmp_path, budget="tokens=150")
    pipe.add(lambda state: {"numbers": [state["base"], state["base"] + 1, state["base"] + 2]}, name="load")
    pipe.add(
        map_step(
            Agent(model=model),
            items_from="numbers",
            prompt="Double {item}",
            output_type=int,
            concurrency=1,
            progress=False,
            into="doubled",
        )
    )
    run = await pipe.invoke({"base": 1})
    assert run.status == "exhausted" and len(model.requests) == 2  # 100 tokens each
    pipe.budget = None
    again = await pipe.resume(from_="load")
    assert again.status == "completed" and again.state["doubled"] == [2, 4, 6]
    assert [r.attempt for r in again.steps] == [2, 2]
    assert len(model.requests) == 5  # the map ran afresh, with a checkpoint of its own


class Level(enum.Enum):
    LOW = "low"
    HIGH = "high"


def test_the_state_encoding_gives_back_what_it_was_given(tmp_path: Path) -> None:
    codec = StateCodec(tmp_path, "json")
    state = {
        "when": datetime.datetime(2026, 3, 1, 12, 30, tzinfo=datetime.timezone.utc),
        "day": datetime.date(2026, 3, 1),
        "by_id": {1: "a", 2: "b"},
        "tagged": {"$ipyagent": "not a tag"},
        "level": Level.HIGH,
        "nan": float("nan"),
        "tickets": [Ticket(category="bug", urgency=5)],
        "pair": (1, [2, (3,)]),
        "count": np.int64(7),
    }
    back = codec.decode(json.loads(json.dumps(codec.encode_state(state))))
    nan = back.pop("nan")
    assert nan != nan  # NaN, as it went
    expected = {**state, "count": 7}
    del expected["nan"]
    assert back == expected and type(back["count"]) is int
    with pytest.raises(UserError, match=r"state\['arr'\] is of type numpy.ndarray"):
        codec.encode_state({"arr": np.zeros(3)})


async def test_a_step_given_what_it_cannot_use_fails_saying_what_to_change(tmp_path: Path) -> None:
    model = ScriptedModel([])
    pipe = Pipeline("misfit", store=tmp_path)
    pipe.add(map_step(Agent(model=model), items_from="rows", prompt="{item}", progress=False, into="out"))
    run = await pipe.invoke({"numbers": [1]})
    error = run.steps[0].error
    assert error is not None and error.code == "invalid_step"
    assert "maps over 'rows', which is not in the state" in error.message and "numbers" in error.message

    asking = Pipeline("template", store=tmp_path)
    asking.add(agent_step(Agent(model=model), "Summarize {missing}.", into="summary"))
    failed = await asking.invoke({"count": 1})
    assert failed.steps[0].error is not None and "{count}" in failed.steps[0].error.message
    assert model.requests == []  # nothing was sent
    bad = Pipeline("shape", store=tmp_path)
    bad.add(lambda state: [1], name="listy")
    shaped = await bad.invoke({})
    with pytest.raises(PipelineFailed, match="returned a list; a step returns a dict"):
        shaped.raise_for_status()
