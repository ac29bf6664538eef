"""The plugin seam, and the summaries and memory plugins, driven by a scripted model."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ipyagent import Agent, Memory, Plugin, RetryPolicy, Summaries
from ipyagent.agentlib.errors import AuthenticationError, ProviderUnavailable
from ipyagent.agentlib.events import PermissionRequired, RunWarning
from ipyagent.agentlib.messages import Message
from ipyagent.agentlib.plugins import MAX_CONTEXT_CHARS, PluginRun, Plugins
from ipyagent.agentlib.result import RunResult
from ipyagent.agentlib.summaries import SUMMARIES_SYSTEM_PROMPT
from ipyagent.testing import ScriptedModel, error, tool_call

FAST = RetryPolicy(attempts=1, base_delay=0.001, max_delay=0.001)


class Recorder(Plugin):
    """Says a line of context, offers a tool, and writes down every call it gets."""

    def __init__(self, name: str = "recorder", line: str = "The project's units are metres.") -> None:
        self.name = name
        self.line = line
        self.calls: list[tuple[Any, ...]] = []

    def context(self, run: PluginRun) -> str:
        self.calls.append(("context", run.turn))
        return self.line

    def tools(self) -> list[Any]:
        def units() -> str:
            """The project's units."""
            return "metres"

        return [units]

    async def on_turn(self, run: PluginRun, reply: Message) -> None:
        self.calls.append(("turn", run.turn, reply.text))

    def on_run_end(self, result: RunResult, run: PluginRun) -> None:
        self.calls.append(("end", result.status))


def warnings_of(agent: Agent) -> list[RunWarning]:
    seen: list[RunWarning] = []
    agent.on(RunWarning, seen.append)
    return seen


async def test_a_plugin_adds_context_and_tools_and_is_called_each_turn_and_at_the_end() -> None:
    model = ScriptedModel([tool_call("units", {}), "Metres."])
    plugin = Recorder()
    agent = Agent(model=model, plugins=[plugin], auto_approve=True)
    result = await agent.run("Which units?")
    assert result.status == "completed" and result.text == "Metres."
    assert all("The project's units are metres." in r.system for r in model.requests)
    assert [t.name for t in model.requests[0].tools] == ["units"]
    assert result.messages[2].tool_results[0].content == "metres"
    assert plugin.calls == [("context", 0), ("turn", 1, ""), ("turn", 2, "Metres."), ("end", "completed")]


async def test_without_plugins_the_request_is_unchanged() -> None:
    plain, with_none = ScriptedModel(["ok"]), ScriptedModel(["ok"])
    await Agent(model=plain).run("hi")
    await Agent(model=with_none, plugins=[]).run("hi")
    assert plain.requests[0].system == with_none.requests[0].system
    assert not plain.requests[0].tools


async def test_registering_the_same_name_again_replaces_and_own_plugins_win_over_included() -> None:
    model = ScriptedModel(["ok"])
    agent = Agent(model=model, plugins=[Recorder(line="first")])
    agent.plugins.register(Recorder(line="second"))
    assert agent.plugins.names == ["recorder"]
    await agent.run("hi")
    assert "second" in model.requests[0].system and "first" not in model.requests[0].system

    kernel_wide = Plugins([Recorder(line="kernel"), Recorder("other", line="other line")])
    own = Plugins([Recorder(line="own")], include=[kernel_wide])
    assert [(p.name, getattr(p, "line", "")) for p in own] == [("other", "other line"), ("recorder", "own")]
    own.remove("recorder")
    assert own.get("recorder") is not None and getattr(own.get("recorder"), "line", "") == "kernel"


class Broken(Plugin):
    name = "broken"

    def context(self, run: PluginRun) -> Any:
        return 42  # not text

    def tools(self) -> list[Any]:
        raise RuntimeError("no tools today")

    def on_turn(self, run: PluginRun, reply: Message) -> None:
        raise ValueError("turn hook broke")

    async def on_run_end(self, result: RunResult, run: PluginRun) -> None:
        raise KeyError("end hook broke")


async def test_a_plugin_that_raises_or_returns_nonsense_costs_a_warning_never_the_run() -> None:
    model = ScriptedModel(["Done."])
    agent = Agent(model=model, plugins=[Broken(), Recorder()])
    seen = warnings_of(agent)
    result = await agent.run("go")
    assert result.status == "completed" and result.text == "Done."
    failed = [w for w in seen if w.code == "plugin_failed"]
    assert len(failed) == 4 and all("'broken'" in w.message for w in failed)
    assert ["context()" in failed[0].message, "no tools today" in failed[1].message] == [True, True]
    assert "turn hook broke" in failed[2].message and "end hook broke" in failed[3].message
    # The healthy plugin was not held back by the broken one.
    assert "metres" in model.requests[0].system
    assert agent.plugins.get("recorder").calls[-1] == ("end", "completed")  # type: ignore[union-attr]


async def test_a_long_context_is_cut_to_its_bound() -> None:
    model = ScriptedModel(["ok"])
    await Agent(model=model, plugins=[Recorder(line="x" * (MAX_CONTEXT_CHARS * 2))]).run("hi")
    system = model.requests[0].system
    assert "x" * MAX_CONTEXT_CHARS in system and "x" * (MAX_CONTEXT_CHARS + 1) not in system
    assert "[cut:" in system


class OnlyContext:
    """A plugin by shape alone: a name and one of the methods."""

    name = "shape"

    def context(self, run: PluginRun) -> str:
        return "Answer in French."


async def test_a_plugin_needs_only_a_name_and_the_methods_it_uses() -> None:
    model = ScriptedModel(["Bonjour."])
    agent = Agent(model=model, plugins=[OnlyContext()])  # type: ignore[list-item]
    seen = warnings_of(agent)
    assert (await agent.run("hi")).status == "completed"
    assert "Answer in French." in model.requests[0].system and seen == []


async def test_the_items_of_a_map_call_no_plugins() -> None:
    plugin = Recorder()
    model = ScriptedModel(["a", "b"])
    agent = Agent(model=model, plugins=[plugin])
    result = await agent.map(["x", "y"], "Say {item}", checkpoint=False, progress=False, concurrency=1)
    assert list(result) == ["a", "b"] and plugin.calls == []
    assert all("metres" not in r.system for r in model.requests)


# -- summaries ------------------------------------------------------------------------------------


async def test_a_finished_run_is_summarized_beside_the_session_and_told_to_a_new_conversation(
    tmp_path: Path,
) -> None:
    session = tmp_path / "analysis.agent.jsonl"
    model = ScriptedModel(
        [
            "The mean is 4.2.",
            "Summary: computed the mean of df.x (4.2).\nAdvice: df.x has NaNs; drop them first.",
            "Noted.",
            "Summary: second.\nAdvice: none.",
        ]
    )
    agent = Agent(
        model=model, session=session, notebook=str(tmp_path / "analysis.ipynb"), plugins=[Summaries()]
    )
    await agent.run("Mean of df.x?")
    summaries = agent.plugins.get("summaries")
    assert isinstance(summaries, Summaries)
    assert summaries.path == tmp_path / "analysis.summaries.jsonl"
    summary_request = model.requests[1]
    assert summary_request.system == SUMMARIES_SYSTEM_PROMPT and not summary_request.tools
    # A one-off request: a cache write (1.25x at Anthropic) would never be read back.
    assert summary_request.settings.prompt_cache == "off"
    assert "Mean of df.x?" in summary_request.messages[0].text
    [record] = summaries.records()
    assert record.summary == "computed the mean of df.x (4.2)." and record.advice.startswith("df.x has NaNs")
    assert json.loads(summaries.path.read_text())["run_id"] == record.run_id
    # The same conversation is not told its own runs again; a new one is.
    assert "df.x has NaNs" not in model.requests[0].system
    agent.reset()
    await agent.run("What next?")
    assert "computed the mean of df.x (4.2)." in model.requests[2].system
    assert "Advice: df.x has NaNs" in model.requests[2].system
    assert len(summaries.records()) == 2
    assert summaries.clear() == 2 and summaries.records() == [] and not summaries.path.exists()


async def test_the_last_few_are_replayed_after_a_restart(tmp_path: Path) -> None:
    path = tmp_path / "nb.summaries.jsonl"
    first = ScriptedModel([t for n in range(4) for t in (f"answer {n}", f"Summary: run {n}.")])
    agent = Agent(model=first, plugins=[Summaries(path)])
    for n in range(4):
        agent.reset()
        await agent.run(f"question {n}")
    model = ScriptedModel(["ok", "Summary: later."])
    later = Summaries(path, replay=2, keep=3)
    await Agent(model=model, plugins=[later]).run("hello again")
    system = model.requests[0].system
    assert "run 2." in system and "run 3." in system and "run 1." not in system
    # Past ``keep``, the oldest are deleted from the file.
    assert [r.summary for r in later.records()] == ["run 2.", "run 3.", "later."]


async def test_when_the_model_cannot_summarize_a_digest_is_kept(tmp_path: Path) -> None:
    model = ScriptedModel(["The answer is 7.", error(ProviderUnavailable("The service is down."))])
    plugin = Summaries(tmp_path / "s.jsonl")
    agent = Agent(model=model, plugins=[plugin], retry=FAST)
    seen = warnings_of(agent)
    result = await agent.run("What is 3 + 4?")
    assert result.status == "completed" and result.text == "The answer is 7."
    [record] = plugin.records()
    assert record.fallback and "What is 3 + 4?" in record.summary
    assert [w.code for w in seen] == ["summary_fallback"]


async def test_a_failed_run_is_not_summarized(tmp_path: Path) -> None:
    plugin = Summaries(tmp_path / "s.jsonl")
    result = await Agent(
        model=ScriptedModel([error(AuthenticationError("Bad key."))]), plugins=[plugin], retry=FAST
    ).run("hi")
    assert result.status == "failed" and plugin.records() == []


# -- memory ---------------------------------------------------------------------------------------


def answering(agent: Agent, *decisions: str) -> list[PermissionRequired]:
    asked: list[PermissionRequired] = []
    queue = list(decisions)

    def on_permission(event: PermissionRequired) -> None:
        asked.append(event)
        agent.resolve_permission(event.call_id, queue.pop(0))  # type: ignore[arg-type]

    agent.on(PermissionRequired, on_permission)
    return asked


async def test_the_model_remembers_recalls_and_forgets_notes_with_permission(tmp_path: Path) -> None:
    memory = Memory(tmp_path)
    model = ScriptedModel(
        [
            tool_call("remember", {"title": "Units", "text": "Distances are in metres.\nNever feet."}),
            "Filed.",
            tool_call("recall", {"title": "units"}),
            "Metres.",
            tool_call("forget", {"title": "Units"}),
            "Gone.",
        ]
    )
    agent = Agent(model=model, plugins=[memory])
    asked = answering(agent, "allow", "deny")
    await agent.run("Remember that distances are in metres.")
    assert [a.name for a in asked] == ["remember"]
    [note] = memory.notes()
    assert note.title == "Units" and note.path.parent == tmp_path / ".ipyagent" / "memory"
    assert note.path.read_text().startswith("# Units\n")

    await agent.run("What units?")  # recall is read-only: nobody is asked
    assert len(asked) == 1
    assert "Distances are in metres." in model.requests[3].messages[-1].tool_results[0].content
    # The index is in every later run's system prompt.
    assert "- Units: Distances are in metres." in model.requests[2].system

    await agent.run("Forget the units.")  # denied: the note stays
    assert [a.name for a in asked] == ["remember", "forget"] and memory.find("Units") is not None
    assert memory.forget("Units") and memory.notes() == []


async def test_a_headless_run_cannot_file_a_note_unless_auto_approved(tmp_path: Path) -> None:
    memory = Memory(folder=tmp_path / "notes")
    call = tool_call("remember", {"title": "t", "text": "x"})
    model = ScriptedModel([call, "no", call, "yes"])
    await Agent(model=model, plugins=[memory]).run("file it")
    assert memory.notes() == []
    await Agent(model=model, plugins=[memory], auto_approve=True).run("file it")
    assert [n.title for n in memory.notes()] == ["t"]


async def test_secrets_never_reach_a_note(tmp_path: Path, monkeypatch: Any) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-proj-abcdefghijklmnopqrstuvwxyz0123456789")
    memory = Memory(tmp_path)
    text = "The key is sk-proj-abcdefghijklmnopqrstuvwxyz0123456789, keep it."
    model = ScriptedModel([tool_call("remember", {"title": "Access", "text": text}), "ok"])
    await Agent(model=model, plugins=[memory], auto_approve=True).run("remember the key")
    [note] = memory.notes()
    assert "sk-proj-abcdefghijklmnopqrstuvwxyz0123456789" not in note.path.read_text()
    assert "[redacted]" in note.text


async def test_the_index_is_bounded(tmp_path: Path) -> None:
    memory = Memory(tmp_path, index_chars=200)
    for n in range(30):
        memory.remember(f"note {n:02d}", f"fact number {n}")
    index = memory.index()
    assert len(index) < 260 and "more (recall them by title)" in index


async def test_a_sub_agents_run_calls_no_plugins() -> None:
    plugin = Recorder()
    model = ScriptedModel([tool_call("delegate", {"task": "Say hi.", "tools": []}), "hi", "Done."])
    agent = Agent(model=model, plugins=[plugin], delegate=True)
    result = await agent.run("Delegate a greeting.")
    assert result.text == "Done."
    assert [c[0] for c in plugin.calls] == ["context", "turn", "turn", "end"]
    assert "metres" in model.requests[0].system and "metres" not in model.requests[1].system


async def test_a_run_stopped_at_a_cap_gets_a_digest_without_another_request(tmp_path: Path) -> None:
    plugin = Summaries(tmp_path / "s.jsonl")
    model = ScriptedModel([tool_call("units", {}), "never asked"])
    agent = Agent(model=model, plugins=[plugin, Recorder()], max_turns=1)
    result = await agent.run("Which units?")
    assert result.status == "exhausted" and len(model.requests) == 1
    [record] = plugin.records()
    assert record.fallback and record.status == "exhausted" and "Which units?" in record.summary
