"""The three ways the core cuts text to a length."""

from __future__ import annotations

from ipyagent.agentlib.clip import clip, clip_head, clip_middle


def test_clip_keeps_at_most_limit_characters_the_last_an_ellipsis() -> None:
    assert clip("abcdef", 6) == "abcdef"
    assert clip("abcdefg", 6) == "abcde…"


def test_clip_middle_keeps_both_ends_and_says_how_much_was_cut() -> None:
    assert clip_middle("abcdef", 6) == "abcdef"
    assert clip_middle("abcdefghij", 4) == "ab\n[… 6 characters cut …]\nij"


def test_clip_head_keeps_the_start_and_says_how_much_is_shown() -> None:
    assert clip_head("abc", 3, "the answer") == "abc"
    assert clip_head("abcdef", 3, "the answer") == "abc\n… [the answer was cut: 3 of 6 characters shown]"
