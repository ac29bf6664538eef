"""``agent.map``: items run as independent conversations, results aligned with the input,
failures recorded per item, every finished item checkpointed, and the same call resumed."""

from __future__ import annotations

import asyncio
import io
import json
import os
from collections.abc import AsyncIterator, Callable, Sequence
from pathlib import Path
from typing import Any, Literal

import pandas as pd
import pytest
from pydantic import BaseModel

from ipyagent import Agent, UserError
from ipyagent.agentlib.checkpoint import MapCheckpointWarning
from ipyagent.agentlib.errors import ProviderError
from ipyagent.agentlib.events import MapProgress
from ipyagent.agentlib.maps import ItemResult, MapJob, MapResult, TextProgress, run_item
from ipyagent.agentlib.model import ModelRequest
from ipyagent.agentlib.run_config import RunConfig
from ipyagent.testing import ScriptedModel, error, pause, text, usage


class Ticket(BaseModel):
    category: Literal["billing", "bug", "other"]
    urgency: int


def answering(answer: Callable[[str], Any], count: int, **options: Any) -> ScriptedModel:
    """A model whose every reply is computed from the item's prompt (the first message)."""

    def reply(request: ModelRequest) -> Any:
        return answer(request.messages[0].text)

    return ScriptedModel([reply] * count, **options)


def doubling(prompt: str) -> str:
    return json.dumps({"result": 2 * int(prompt.split()[-1])})


def records(path: Path) -> list[dict[str, Any]]:
    header, *lines = path.read_text().splitlines()
    assert json.loads(header)["format"] == "ipyagent-map"
    return [json.loads(line) for line in lines]


async def test_results_come_back_aligned_with_the_items(tmp_path: Path) -> None:
    model = answering(doubling, 20, delay=0.001)
    agent = Agent(model=model)
    result = await agent.map(
        range(20),
        "Double {item}",
        output_type=int,
        concurrency=5,
        checkpoint=tmp_path / "c.jsonl",
        progress=False,
    )
    assert isinstance(result, MapResult)
    assert result.status == "completed"
    assert list(result) == [2 * n for n in range(20)]
    assert result[3] == 6 and len(result) == 20
    assert len(model.requests) == 20
    # Each item is its own conversation: one user message, and the agent's own is untouched.
    assert all(len(r.messages) == 1 for r in model.requests)
    assert agent.messages == []
    assert sorted(r["i"] for r in records(tmp_path / "c.jsonl")) == list(range(20))


async def test_a_dataframe_gives_a_dataframe_of_the_output_fields_on_its_index(tmp_path: Path) -> None:
    frame = pd.DataFrame(
        {"title": ["Refund", "Crash", "Hello"], "body": ["charged twice", "on start", "hi"]},
        index=["a", "b", "c"],
    )
    answers = {"Refund": ("billing", 3), "Crash": ("bug", 5), "Hello": ("other", 1)}

    def answer(prompt: str) -> str:
        category, urgency = answers[prompt.split(":")[1].split("—")[0].strip()]
        return json.dumps({"category": category, "urgency": urgency})

    model = answering(answer, 3)
    out = await Agent(model=model).map(
        frame,
        "Classify: {title} — {body}",
        output_type=Ticket,
        checkpoint=tmp_path / "c.jsonl",
        progress=False,
    )
    assert isinstance(out, pd.DataFrame)
    assert list(out.index) == ["a", "b", "c"]
    assert list(out.columns) == ["category", "urgency", "error"]
    assert list(out["category"]) == ["billing", "bug", "other"]
    assert list(out["urgency"]) == [3, 5, 1]
    assert out["error"].isna().all()
    assert sorted(r.messages[0].text for r in model.requests)[0] == "Classify: Crash — on start"


async def test_a_series_gives_one_output_column(tmp_path: Path) -> None:
    reviews = pd.Series(["great", "awful"], index=[10, 20])
    model = answering(lambda p: '"positive"' if "great" in p else '"negative"', 2)
    out = await Agent(model=model).map(
        reviews,
        lambda review: f"Sentiment of: {review}",
        output_type=Literal["positive", "negative"],
        checkpoint=tmp_path / "c.jsonl",
        progress=False,
    )
    assert list(out.index) == [10, 20]
    assert list(out["output"]) == ["positive", "negative"]


async def test_a_failing_item_is_recorded_and_does_not_stop_the_others(tmp_path: Path) -> None:
    def answer(prompt: str) -> Any:
        if prompt.endswith(" 2"):
            return [error(ProviderError("The model refused.", hint="Rephrase.", code="refused"))]
        if prompt.endswith(" 4"):
            return "not a number"  # and again, past its retries
        return doubling(prompt)

    model = answering(answer, 12)
    result = await Agent(model=model).map(
        range(6),
        "Double {item}",
        output_type=int,
        output_retries=1,
        checkpoint=tmp_path / "c.jsonl",
        progress=False,
    )
    assert result.status == "completed"
    assert list(result) == [0, 2, None, 6, None, 10]
    assert set(result.errors) == {2, 4}
    assert result.errors[2].code == "refused"
    assert result.errors[4].code == "invalid_output"
    assert result.failed == 2
    frame = result.to_pandas()
    assert list(frame.columns) == ["output", "error"]
    assert frame["error"][2] == "The model refused." and pd.isna(frame["error"][0])
    failed = [r for r in records(tmp_path / "c.jsonl") if not r["ok"]]
    assert sorted(r["i"] for r in failed) == [2, 4]
    assert {r["error"]["code"] for r in failed} == {"refused", "invalid_output"}


async def test_a_rerun_after_a_crash_pays_only_for_the_items_not_finished(tmp_path: Path) -> None:
    checkpoint = tmp_path / "c.jsonl"
    first = answering(doubling, 40, delay=0.002)
    task = asyncio.ensure_future(
        Agent(model=first).map(
            range(40), "Double {item}", output_type=int, concurrency=4, checkpoint=checkpoint, progress=False
        )
    )
    for _ in range(2000):  # until some items are on file, then the "crash"
        await asyncio.sleep(0.005)
        if checkpoint.exists() and len(checkpoint.read_text().splitlines()) > 10:
            break
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    finished = {r["i"] for r in records(checkpoint)}
    assert 10 <= len(finished) < 40  # the crash came mid-map, and lost only the items in flight
    assert len(first.requests) < 40

    second = answering(doubling, 40)
    result = await Agent(model=second).map(
        range(40), "Double {item}", output_type=int, concurrency=4, checkpoint=checkpoint, progress=False
    )
    assert list(result) == [2 * n for n in range(40)]
    assert len(second.requests) == 40 - len(finished)  # finished items were not asked again
    asked = {int(r.messages[0].text.split()[-1]) for r in second.requests}
    assert asked == set(range(40)) - finished
    assert {i.index for i in result.items if i.resumed} == finished
    assert sorted(r["i"] for r in records(checkpoint)) == list(range(40))


async def test_the_same_call_resumes_from_its_default_checkpoint(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    model = answering(doubling, 5)
    first = await Agent(model=model).map(range(5), "Double {item}", output_type=int, progress=False)
    assert first.checkpoint is not None and first.checkpoint.parent == tmp_path
    assert first.checkpoint.name.startswith("agent-map-")
    again = await Agent(model=model).map(range(5), "Double {item}", output_type=int, progress=False)
    assert list(again) == list(first)
    assert len(model.requests) == 5  # nothing asked the second time
    assert all(i.resumed for i in again.items)
    # Another call (another prompt) gets its own file, and asks again.
    model.add(*([lambda r: doubling(r.messages[0].text)] * 5))
    other = await Agent(model=model).map(range(5), "Twice {item}", output_type=int, progress=False)
    assert other.checkpoint != first.checkpoint
    assert len(model.requests) == 10


async def test_a_checkpoint_of_another_call_is_not_reused(tmp_path: Path) -> None:
    path = tmp_path / "labels.jsonl"
    model = answering(doubling, 3)
    await Agent(model=model).map(range(3), "Double {item}", output_type=int, checkpoint=path, progress=False)
    before = path.read_text()
    other = answering(lambda p: '{"result": 1}', 3)
    with pytest.warns(MapCheckpointWarning, match="labels.jsonl"):
        result = await Agent(model=other).map(
            range(3), "Count {item}", output_type=int, checkpoint=path, progress=False
        )
    assert len(other.requests) == 3  # nothing was taken from the other call's file
    assert list(result) == [1, 1, 1]
    assert result.checkpoint is not None and result.checkpoint != path
    assert result.checkpoint.name.startswith("labels.") and result.checkpoint.parent == tmp_path
    assert path.read_text() == before  # and that file was left as it was
    # Another output type or model is another call too.
    typed = answering(doubling, 3)
    with pytest.warns(MapCheckpointWarning):
        await Agent(model=typed).map(
            range(3), "Double {item}", output_type=float, checkpoint=path, progress=False
        )
    assert len(typed.requests) == 3
    renamed = answering(doubling, 3, model_id="scripted/other")
    with pytest.warns(MapCheckpointWarning):
        await Agent(model=renamed).map(
            range(3), "Double {item}", output_type=int, checkpoint=path, progress=False
        )
    assert len(renamed.requests) == 3


async def test_a_budget_stops_the_map_cleanly_and_a_larger_one_goes_on(tmp_path: Path) -> None:
    path = tmp_path / "c.jsonl"

    def answer(prompt: str) -> Any:
        return [text(doubling(prompt)), usage(input_tokens=90, output_tokens=10)]

    model = answering(answer, 10)
    result = await Agent(model=model).map(
        range(10),
        "Double {item}",
        output_type=int,
        concurrency=1,
        budget="tokens=450",
        checkpoint=path,
        progress=False,
    )
    assert result.status == "exhausted"
    assert "budget of 450" in result.reason
    assert len(model.requests) == 5  # 400 spent: the fifth may start; 500: no sixth
    assert list(result)[:5] == [0, 2, 4, 6, 8]
    assert result.pending == 5 and result.failed == 0
    assert result.usage.input_tokens == 450
    frame = result.to_pandas()
    assert pd.isna(frame["error"][0]) and frame["error"][9].startswith("Not run: The map used 500 tokens")
    assert frame.attrs["map"]["status"] == "exhausted" and frame.attrs["map"]["pending"] == 5
    more = answering(answer, 10)
    rest = await Agent(model=more).map(
        range(10),
        "Double {item}",
        output_type=int,
        concurrency=1,
        budget="tokens=10k",
        checkpoint=path,
        progress=False,
    )
    assert rest.status == "completed" and len(more.requests) == 5
    assert list(rest) == [2 * n for n in range(10)]


async def test_a_time_budget_stops_the_items_in_flight(tmp_path: Path) -> None:
    # Item 0 answers at once; the others would take 30 s each.
    model = answering(lambda p: doubling(p) if p.endswith(" 0") else [pause(30), text("late")], 4)
    result = await Agent(model=model).map(
        range(4),
        "Double {item}",
        output_type=int,
        concurrency=4,
        budget="time=0.5s",
        checkpoint=tmp_path / "c.jsonl",
        progress=False,
    )
    assert result.status == "exhausted" and "time budget" in result.reason
    assert [i.status for i in result.items] == ["ok", "pending", "pending", "pending"]
    assert [r["i"] for r in records(tmp_path / "c.jsonl")] == [0]  # stopped items are not on file


async def test_progress_reaches_the_callback_the_agents_listeners_and_a_text_line(tmp_path: Path) -> None:
    model = answering(doubling, 3)
    agent = Agent(model=model)
    seen: list[MapProgress] = []
    heard: list[MapProgress] = []
    agent.on("map_progress", heard.append)
    await agent.map(
        range(3), "Double {item}", output_type=int, checkpoint=tmp_path / "c.jsonl", progress=seen.append
    )
    last = seen[-1]
    assert last.finished and last.status == "completed"
    assert (last.total, last.done, last.failed, last.running) == (3, 3, 0, 0)
    assert last.usage.output_tokens > 0
    assert heard[-1] == last
    line = io.StringIO()
    TextProgress(line)(last)
    assert line.getvalue().startswith("\rmap 3/3 · ")
    assert "tokens" in line.getvalue() and line.getvalue().endswith("completed\n")
    running = MapProgress(total=10, done=4, failed=1, usage=last.usage, elapsed=5, remaining=90)
    line = io.StringIO()
    TextProgress(line)(running)
    assert "map 5/10 · 1 failed" in line.getvalue() and "1m30s left" in line.getvalue()


async def test_a_template_that_does_not_fit_fails_before_any_request(tmp_path: Path) -> None:
    model = ScriptedModel([])
    frame = pd.DataFrame({"title": ["x"]})
    with pytest.raises(UserError) as raised:
        await Agent(model=model).map(frame, "Classify {titel}", checkpoint=False, progress=False)
    assert raised.value.code == "invalid_map_prompt"
    assert "{title}" in raised.value.hint
    assert model.requests == []


async def test_retry_failed_runs_the_failed_items_again(tmp_path: Path) -> None:
    path = tmp_path / "c.jsonl"
    flaky = answering(lambda p: "oops" if p.endswith(" 1") else doubling(p), 3)
    first = await Agent(model=flaky).map(
        range(3), "Double {item}", output_type=int, output_retries=0, checkpoint=path, progress=False
    )
    assert list(first) == [0, None, 4]
    kept = answering(doubling, 3)
    again = await Agent(model=kept).map(
        range(3), "Double {item}", output_type=int, output_retries=0, checkpoint=path, progress=False
    )
    assert len(kept.requests) == 0 and again.errors[1].code == "invalid_output"
    retried = await Agent(model=kept).map(
        range(3),
        "Double {item}",
        output_type=int,
        output_retries=0,
        checkpoint=path,
        retry_failed=True,
        progress=False,
    )
    assert len(kept.requests) == 1 and list(retried) == [0, 2, 4]


async def test_an_executor_decides_where_the_items_run(tmp_path: Path) -> None:
    ran: list[int] = []

    class OneByOne:
        async def run(
            self,
            config: RunConfig,
            jobs: Sequence[MapJob],
            *,
            concurrency: int,
            may_start: Callable[[], bool],
        ) -> AsyncIterator[ItemResult]:
            for job in reversed(jobs):
                if not may_start():
                    return
                ran.append(job.index)
                yield await run_item(config, job)

    result = await Agent(model=answering(doubling, 3)).map(
        range(3), "Double {item}", output_type=int, executor=OneByOne(), checkpoint=False, progress=False
    )
    assert ran == [2, 1, 0]
    assert list(result) == [0, 2, 4]


async def test_a_torn_last_line_is_skipped_and_its_item_runs_again(tmp_path: Path) -> None:
    path = tmp_path / "c.jsonl"
    await Agent(model=answering(doubling, 3)).map(
        range(3), "Double {item}", output_type=int, concurrency=1, checkpoint=path, progress=False
    )
    lines = path.read_text().splitlines()
    torn = lines[-1][: len(lines[-1]) // 2]
    path.write_text("\n".join([*lines[:-1], torn]))  # the last write was cut short
    lost = json.loads(lines[-1])["i"]
    model = answering(doubling, 3)
    with pytest.warns(MapCheckpointWarning, match="torn last line"):
        result = await Agent(model=model).map(
            range(3), "Double {item}", output_type=int, checkpoint=path, progress=False
        )
    assert [int(r.messages[0].text.split()[-1]) for r in model.requests] == [lost]
    assert list(result) == [0, 2, 4]


async def test_a_damaged_checkpoint_says_where_and_what_to_do(tmp_path: Path) -> None:
    path = tmp_path / "c.jsonl"
    await Agent(model=answering(doubling, 3)).map(
        range(3), "Double {item}", output_type=int, checkpoint=path, progress=False
    )
    header, _, *rest = path.read_text().splitlines()
    path.write_text("\n".join([header, "garbage", *rest]) + "\n")
    with pytest.raises(UserError) as raised:
        await Agent(model=ScriptedModel([])).map(
            range(3), "Double {item}", output_type=int, checkpoint=path, progress=False
        )
    assert raised.value.code == "checkpoint_damaged" and "line 2" in raised.value.info.message


@pytest.mark.parametrize("damage", ["truncated", "garbled", "blank"])
async def test_a_damaged_header_is_an_error_not_another_calls_file(tmp_path: Path, damage: str) -> None:
    # Taken for another call's file, a checkpoint whose header was damaged had every item it
    # holds asked (and paid for) again, into a new file beside it.
    path = tmp_path / "c.jsonl"
    await Agent(model=answering(doubling, 3)).map(
        range(3), "Double {item}", output_type=int, checkpoint=path, progress=False
    )
    header, *rest = path.read_text().splitlines()
    broken = {"truncated": header[:20], "garbled": header.replace('"call"', '"ca\x00l'), "blank": ""}[damage]
    path.write_text("\n".join([broken, *rest]) + "\n")
    before = path.read_bytes()
    model = answering(doubling, 3)
    with pytest.raises(UserError) as raised:
        await Agent(model=model).map(
            range(3), "Double {item}", output_type=int, checkpoint=path, progress=False
        )
    assert raised.value.code == "checkpoint_damaged"
    message, hint = raised.value.info.message, raised.value.hint
    assert str(path) in message and "line 1" in message and "3 finished items" in message
    assert "delete" in hint and "checkpoint=" in hint
    assert model.requests == []  # nothing asked, nothing paid
    assert path.read_bytes() == before
    assert os.listdir(tmp_path) == ["c.jsonl"]  # and no file of its own was started beside it


async def test_a_saved_output_the_output_type_no_longer_accepts_is_an_error(tmp_path: Path) -> None:
    from pydantic import field_validator

    path = tmp_path / "c.jsonl"

    def triage(prompt: str) -> str:
        return json.dumps({"category": "bug", "urgency": 5 if prompt.endswith("b") else 2})

    await Agent(model=answering(triage, 2)).map(
        ["a", "b"], "Triage {item}", output_type=Ticket, concurrency=1, checkpoint=path, progress=False
    )

    def stricter() -> type[BaseModel]:
        class Ticket(BaseModel):  # the same schema (so the same call), a stricter check
            category: Literal["billing", "bug", "other"]
            urgency: int

            @field_validator("urgency")
            @classmethod
            def at_most_three(cls, value: int) -> int:
                if value > 3:
                    raise ValueError("urgency is 1 to 3")
                return value

        return Ticket

    again = ScriptedModel([])
    with pytest.raises(UserError) as raised:
        await Agent(model=again).map(
            ["a", "b"], "Triage {item}", output_type=stricter(), checkpoint=path, progress=False
        )
    assert raised.value.code == "checkpoint_output_invalid"
    message, hint = raised.value.info.message, raised.value.hint
    assert str(path) in message and "line 3" in message and "item 1" in message
    assert "urgency is 1 to 3" in message and "Ticket" in message
    assert "output type" in hint and "delete line 3" in hint and "checkpoint=" in hint
    assert again.requests == []


async def test_a_checkpoint_that_cannot_be_written_says_what_to_do(tmp_path: Path) -> None:
    path = tmp_path / "no such folder" / "c.jsonl"
    with pytest.raises(UserError) as raised:
        await Agent(model=answering(doubling, 2)).map(
            range(2), "Double {item}", output_type=int, checkpoint=path, progress=False
        )
    assert raised.value.code == "checkpoint_unwritable"
    assert str(path) in raised.value.info.message and "checkpoint=PATH" in raised.value.hint


async def test_a_cost_cap_on_a_model_with_no_price_says_it_cannot_apply(tmp_path: Path) -> None:
    with pytest.warns(UserWarning, match="No price is known for scripted/script"):
        result = await Agent(model=answering(doubling, 3)).map(
            range(3), "Double {item}", output_type=int, budget="cost=0.01", checkpoint=False, progress=False
        )
    assert result.status == "completed" and list(result) == [0, 2, 4]
