"""Helpers the tests share (importable as `helpers`: pytest puts this folder on sys.path)."""

from __future__ import annotations

from ipyagent.agentlib.messages import Message


def assert_valid_transcript(messages: list[Message]) -> None:
    """What every provider demands: each tool call is answered by the next message, exactly once,
    and every tool result answers a call of the message just before it."""
    for i, message in enumerate(messages):
        if message.tool_results:
            before = {c.id for c in messages[i - 1].tool_calls} if i else set()
            orphans = [r.tool_call_id for r in message.tool_results if r.tool_call_id not in before]
            assert not orphans, f"message {i} answers tool calls not made just before it: {orphans}"
        calls = [c.id for c in message.tool_calls]
        if not calls:
            continue
        assert message.role == "assistant"
        assert i + 1 < len(messages), f"tool calls {calls} at the end of the transcript have no results"
        answered = [r.tool_call_id for r in messages[i + 1].tool_results]
        assert sorted(answered) == sorted(calls), f"calls {calls} answered by {answered}"
    ids = [c.id for m in messages for c in m.tool_calls]
    assert len(ids) == len(set(ids)), f"duplicate tool-call ids: {ids}"
