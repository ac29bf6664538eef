"""The session file on its own: format, loading, torn lines, locking, versions, repair."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from helpers import assert_valid_transcript

from ipyagent.agentlib.errors import UserError
from ipyagent.agentlib.messages import Message, TextBlock, ToolCallBlock, ToolResultBlock
from ipyagent.agentlib.sessions import (
    FORMAT_VERSION,
    INTERRUPTED_RESULT,
    Session,
    SessionWarning,
    read_session,
)
from ipyagent.agentlib.usage import Usage


def call(id: str, name: str = "run_code") -> ToolCallBlock:
    return ToolCallBlock.from_raw(id=id, name=name, raw_arguments='{"code": "1"}')


def calls(*ids: str) -> Message:
    return Message(role="assistant", content=tuple(call(i) for i in ids))


def results(*ids: str) -> Message:
    return Message(
        role="user",
        content=tuple(ToolResultBlock(tool_call_id=i, name="run_code", content="ok") for i in ids),
    )


def records(path: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_a_new_file_starts_with_a_header_and_appends_one_line_per_record(tmp_path: Path) -> None:
    path = tmp_path / "a.agent.jsonl"
    with Session.open(path, model="openai/gpt-4.1", notebook="analysis.ipynb") as session:
        session.append_message(Message.user("hello"))
        session.append_usage(Usage(input_tokens=10, output_tokens=2, requests=1))
        session.append_message(Message(role="assistant", content=(TextBlock(text="hi"),)))
    header, *rest = records(path)
    assert header["type"] == "session"
    assert header["version"] == FORMAT_VERSION
    assert header["model"] == "openai/gpt-4.1"
    assert header["notebook"] == "analysis.ipynb"
    assert header["id"] == session.id
    assert isinstance(header["created"], str) and header["created"].startswith("20")
    assert [r["type"] for r in rest] == ["message", "usage", "message"]


def test_reopening_replays_messages_usage_and_settings(tmp_path: Path) -> None:
    path = tmp_path / "a.agent.jsonl"
    sent = [
        Message.user("one"),
        calls("c1"),
        results("c1"),
        Message(role="assistant", content=(TextBlock(text="two"),)),
    ]
    with Session.open(path, model="m/a") as session:
        for message in sent:
            session.append_message(message)
            session.append_usage(Usage(input_tokens=5, output_tokens=1, requests=1, cost=0.5))
        session.append_settings({"model": "m/b", "thinking": "high", "api_key": "sk-never"})
        first_id = session.id
    state = read_session(path)
    assert state.id == first_id
    assert state.messages == sent
    assert state.usage == Usage(input_tokens=20, output_tokens=4, requests=4, cost=2.0)
    assert state.settings["model"] == "m/b"
    assert state.settings["thinking"] == "high"
    assert "sk-never" not in path.read_text()  # only the known settings keys are ever written


def test_the_parent_folder_must_exist(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="does not exist") as info:
        Session.open(tmp_path / "missing" / "a.agent.jsonl")
    assert info.value.code == "session_folder_missing"
    assert not (tmp_path / "missing").exists()


def test_a_file_that_is_not_a_session_is_refused_and_left_untouched(tmp_path: Path) -> None:
    path = tmp_path / "notes.txt"
    for content in (b"my precious notes\nsecond line\n", b"no newline at all", b'{"type": "other"}\n'):
        path.write_bytes(content)
        with pytest.raises(UserError, match="not an ipyagent session") as info:
            Session.open(path)
        assert info.value.code == "not_a_session"
        assert path.read_bytes() == content


def test_a_newer_format_version_is_a_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "new.agent.jsonl"
    header = {"type": "session", "format": "ipyagent.session", "version": FORMAT_VERSION + 1, "id": "s"}
    path.write_text(json.dumps(header) + "\n")
    for read_only in (False, True):
        with pytest.raises(UserError, match="newer ipyagent") as info:
            Session.open(path, read_only=read_only)
        assert info.value.code == "session_too_new"
        assert "pip install -U ipyagent" in info.value.hint


def test_unknown_record_types_are_kept_and_ignored(tmp_path: Path) -> None:
    path = tmp_path / "a.agent.jsonl"
    with Session.open(path) as session:
        session.append_message(Message.user("before"))
    with path.open("a") as f:
        f.write(json.dumps({"type": "bookmark", "label": "here"}) + "\n")
        # A newer writer of the same version may add keys to a message record, too.
        extra = {"type": "message", "message": Message.user("after").model_dump(mode="json"), "tag": 1}
        f.write(json.dumps(extra) + "\n")
    state = read_session(path)
    assert [m.text for m in state.messages] == ["before", "after"]
    assert state.unknown == [{"type": "bookmark", "label": "here"}]
    with Session.open(path) as session:  # and writing goes on after it
        session.append_message(Message.user("third"))
    assert [m.text for m in read_session(path).messages] == ["before", "after", "third"]
    assert {"type": "bookmark", "label": "here"} in records(path)


def test_a_torn_last_line_is_skipped_with_a_warning_and_cut_when_writing_resumes(tmp_path: Path) -> None:
    path = tmp_path / "a.agent.jsonl"
    with Session.open(path) as session:
        for i in range(3):
            session.append_message(Message.user(f"m{i}"))
    line = json.dumps({"type": "message", "message": Message.user("torn").model_dump(mode="json")})
    with path.open("a") as f:
        f.write(line[: len(line) // 2])  # what a crash mid-write leaves
    with pytest.warns(SessionWarning, match="torn last line"):
        state = read_session(path)
    assert [m.text for m in state.messages] == ["m0", "m1", "m2"]
    with pytest.warns(SessionWarning, match="torn last line"), Session.open(path) as session:
        session.append_message(Message.user("m3"))
    # The torn fragment is gone and the new line starts clean: no warning any more.
    state = read_session(path)
    assert [m.text for m in state.messages] == ["m0", "m1", "m2", "m3"]
    assert state.warnings == []
    assert all(line.startswith("{") for line in path.read_text().splitlines())


def test_a_torn_header_of_a_new_file_starts_it_afresh(tmp_path: Path) -> None:
    path = tmp_path / "a.agent.jsonl"
    path.write_bytes(b'{"type":"session","format":"ipyag')
    with Session.open(path) as session:
        session.append_message(Message.user("hi"))
    assert [m.text for m in read_session(path).messages] == ["hi"]


def test_an_unreadable_line_in_the_middle_is_skipped_and_the_rest_kept(tmp_path: Path) -> None:
    path = tmp_path / "a.agent.jsonl"
    with Session.open(path) as session:
        session.append_message(Message.user("a"))
    with path.open("a") as f:
        f.write("{not json}\n")
        f.write(json.dumps({"type": "message", "message": {"role": "wizard"}}) + "\n")
    with pytest.warns(SessionWarning) as caught, Session.open(path) as session:
        session.append_message(Message.user("b"))
    texts = [str(w.message) for w in caught]
    assert any("line 3" in t for t in texts) and any("line 4" in t for t in texts)
    with pytest.warns(SessionWarning):
        assert [m.text for m in read_session(path).messages] == ["a", "b"]


def test_a_second_writer_gets_a_clear_error_and_a_read_only_view_works(tmp_path: Path) -> None:
    path = tmp_path / "a.agent.jsonl"
    first = Session.open(path)
    first.append_message(Message.user("one"))
    with pytest.raises(UserError, match="already open") as info:
        Session.open(path)
    assert info.value.code == "session_locked"
    assert "read_only=True" in info.value.hint
    view = Session.open(path, read_only=True)
    assert view.read_only
    assert [m.text for m in view.state.messages] == ["one"]
    with pytest.raises(UserError, match="read-only"):
        view.append_message(Message.user("two"))
    first.close()
    assert first.closed
    with pytest.raises(UserError, match="closed"):
        first.append_message(Message.user("late"))
    with Session.open(path) as second:  # the lock went with close()
        second.append_message(Message.user("two"))
    assert [m.text for m in read_session(path).messages] == ["one", "two"]


def test_the_lock_goes_with_the_session_object(tmp_path: Path) -> None:
    path = tmp_path / "a.agent.jsonl"
    session = Session.open(path)
    del session  # garbage collected: the descriptor closes, the lock is released
    Session.open(path).close()


def test_a_read_only_view_of_a_missing_file_does_not_create_it(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="No session file"):
        Session.open(tmp_path / "nope.agent.jsonl", read_only=True)
    assert not (tmp_path / "nope.agent.jsonl").exists()


def test_exclusive_refuses_an_existing_file(tmp_path: Path) -> None:
    path = tmp_path / "a.agent.jsonl"
    Session.open(path).close()
    with pytest.raises(UserError, match="already exists"):
        Session.open(path, exclusive=True)


def test_every_record_is_fsynced_unless_turned_off(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    synced: list[int] = []
    real = os.fsync

    def counting(fd: int) -> None:
        synced.append(fd)
        real(fd)

    monkeypatch.setattr(os, "fsync", counting)
    with Session.open(tmp_path / "a.agent.jsonl") as session:
        before = len(synced)
        for i in range(3):
            session.append_message(Message.user(str(i)))
        assert len(synced) - before == 3
    with Session.open(tmp_path / "b.agent.jsonl", fsync=False) as session:
        before = len(synced)
        session.append_message(Message.user("x"))
        assert len(synced) == before


def test_a_tool_call_left_without_result_is_repaired_once_and_recorded(tmp_path: Path) -> None:
    path = tmp_path / "a.agent.jsonl"
    with Session.open(path) as session:
        session.append_message(Message.user("go"))
        session.append_message(calls("c1", "c2"))  # the crash came while the tools ran
    with pytest.warns(SessionWarning, match="2 tool call"), Session.open(path) as session:
        repaired = session.state.messages
    assert_valid_transcript(repaired)
    assert [r.content for r in repaired[-1].tool_results] == [INTERRUPTED_RESULT] * 2
    assert all(r.is_error for r in repaired[-1].tool_results)
    assert [r["type"] for r in records(path)][-1] == "repair"
    # Loading again replays the recorded repair: same transcript, nothing left to repair.
    with Session.open(path) as session:
        assert session.state.messages == repaired
        assert session.state.warnings == []
        assert session.state.repairs == 1


def test_a_partly_answered_call_is_completed_in_the_next_message(tmp_path: Path) -> None:
    path = tmp_path / "a.agent.jsonl"
    with Session.open(path) as session:
        session.append_message(Message.user("go"))
        session.append_message(calls("c1", "c2"))
        session.append_message(results("c2"))  # a hand-edited or foreign file
        session.append_message(Message(role="assistant", content=(TextBlock(text="done"),)))
    # Read-only: repaired in memory, quietly (a live writer may still be running the tool), and
    # the file is untouched. (Warnings are errors in this test run.)
    state = read_session(path)
    assert_valid_transcript(state.messages)
    assert len(state.messages) == 4
    assert {r.tool_call_id for r in state.messages[2].tool_results} == {"c1", "c2"}
    assert "repair" not in [r["type"] for r in records(path)]
    with pytest.warns(SessionWarning, match="1 tool call"), Session.open(path) as session:
        assert session.state.messages == state.messages  # a writer repairs the same way, and says so
    assert records(path)[-1]["type"] == "repair"
    assert read_session(path).messages == state.messages


def test_compaction_and_reset_records_replay_to_the_current_conversation(tmp_path: Path) -> None:
    path = tmp_path / "a.agent.jsonl"
    summary = Message.user("[Summary of the earlier conversation] stuff")
    with Session.open(path) as session:
        for i in range(5):
            session.append_message(Message.user(f"m{i}"))
        session.append_compaction(
            dropped=3, kept=2, summary=summary, summary_hash="abc", reason="manual", fallback=False
        )
        session.append_message(Message.user("m5"))
    state = read_session(path)
    assert [m.text for m in state.messages] == [summary.text, "m3", "m4", "m5"]
    assert state.compactions == 1
    with Session.open(path) as session:
        session.append_reset()
        session.append_message(Message.user("fresh"))
    state = read_session(path)
    assert [m.text for m in state.messages] == ["fresh"]
    assert state.resets == 1


def damage(path: Path, line: int) -> None:
    """Overwrite line ``line`` (1 = the header) with bytes that are not JSON, as a bad disk or
    a careless hand edit leaves them."""
    lines = path.read_bytes().splitlines(keepends=True)
    lines[line - 1] = b"\x00" * 8 + b"\n"
    path.write_bytes(b"".join(lines))


def test_a_lost_tool_call_line_leaves_no_orphan_results(tmp_path: Path) -> None:
    path = tmp_path / "a.agent.jsonl"
    with Session.open(path) as session:
        session.append_message(Message.user("go"))
        session.append_message(calls("c1"))
        session.append_message(results("c1"))
        session.append_message(Message(role="assistant", content=(TextBlock(text="done"),)))
    damage(path, 3)  # the tool call's line
    with pytest.warns(SessionWarning) as caught:
        state = read_session(path)
    said = " ".join(str(w.message) for w in caught)
    assert "line 3" in said and "1 tool result (run_code)" in said
    assert_valid_transcript(state.messages)
    assert [m.text for m in state.messages] == ["go", "done"]
    # A writer opens it the same way, and the next load agrees.
    with pytest.warns(SessionWarning):
        session = Session.open(path)
    with session:
        assert session.state.messages == state.messages
        session.append_message(Message.user("more"))
    with pytest.warns(SessionWarning):
        assert [m.text for m in read_session(path).messages] == ["go", "done", "more"]


def test_a_lost_result_line_is_answered_as_interrupted(tmp_path: Path) -> None:
    path = tmp_path / "a.agent.jsonl"
    with Session.open(path) as session:
        session.append_message(Message.user("go"))
        session.append_message(calls("c1"))
        session.append_message(results("c1"))
        session.append_message(Message(role="assistant", content=(TextBlock(text="done"),)))
    damage(path, 4)
    with pytest.warns(SessionWarning, match="line 4"):
        state = read_session(path)
    assert_valid_transcript(state.messages)
    assert [r.content for r in state.messages[2].tool_results] == [INTERRUPTED_RESULT]


def test_a_repair_record_after_a_skipped_line_still_opens(tmp_path: Path) -> None:
    path = tmp_path / "a.agent.jsonl"
    with Session.open(path) as session:
        session.append_message(Message.user("go"))
        session.append_message(calls("c1", "c2"))
        session.append_message(results("c2"))  # c1 is then repaired in this message (replace)
    with pytest.warns(SessionWarning, match="1 tool call"), Session.open(path) as session:
        session.append_message(Message(role="assistant", content=(TextBlock(text="done"),)))
    assert [r["type"] for r in records(path)][-2] == "repair"
    damage(path, 2)  # "go": every index the repair record names is now one too far
    with pytest.warns(SessionWarning, match="line 2"):
        state = read_session(path)
    assert_valid_transcript(state.messages)
    assert [m.role for m in state.messages] == ["assistant", "user", "assistant"]
    assert {r.tool_call_id for r in state.messages[1].tool_results} == {"c1", "c2"}
    with pytest.warns(SessionWarning, match="line 2"), Session.open(path) as session:
        assert session.state.messages == state.messages
    assert path.read_bytes().count(b'"type":"repair"') == 1  # nothing new to repair


def test_a_complete_last_line_without_its_newline_is_kept(tmp_path: Path) -> None:
    path = tmp_path / "a.agent.jsonl"
    with Session.open(path) as session:
        session.append_message(Message.user("m0"))
        session.append_message(Message.user("m1"))
    path.write_bytes(path.read_bytes().rstrip(b"\n"))  # e.g. an editor that strips the last newline
    state = read_session(path)  # no warning: nothing is lost (warnings are errors here)
    assert [m.text for m in state.messages] == ["m0", "m1"]
    with Session.open(path) as session:
        assert [m.text for m in session.state.messages] == ["m0", "m1"]
        session.append_message(Message.user("m2"))
    assert [m.text for m in read_session(path).messages] == ["m0", "m1", "m2"]
    assert all(line.startswith("{") for line in path.read_text().splitlines())


def test_a_complete_header_without_its_newline_is_kept(tmp_path: Path) -> None:
    path = tmp_path / "a.agent.jsonl"
    with Session.open(path) as session:
        session_id = session.id
    path.write_bytes(path.read_bytes().rstrip(b"\n"))
    with Session.open(path) as session:
        assert session.id == session_id
        session.append_message(Message.user("hi"))
    assert read_session(path).id == session_id
    assert [m.text for m in read_session(path).messages] == ["hi"]


def test_a_compaction_after_a_skipped_line_keeps_the_messages_it_kept(tmp_path: Path) -> None:
    path = tmp_path / "a.agent.jsonl"
    summary = Message.user("[Summary of the earlier conversation] stuff")
    with Session.open(path) as session:
        for i in range(5):
            session.append_message(Message.user(f"m{i}"))
        session.append_compaction(
            dropped=3, kept=2, summary=summary, summary_hash="abc", reason="manual", fallback=False
        )
    damage(path, 3)  # m1, one of the messages the summary replaced
    with pytest.warns(SessionWarning, match="line 3"):
        state = read_session(path)
    assert [m.text for m in state.messages] == [summary.text, "m3", "m4"]
