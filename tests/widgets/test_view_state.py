"""The view model's types against what travels: the front end's actions, the protocol doc."""

from __future__ import annotations

import re
import typing
from pathlib import Path
from typing import Any

import pytest

from ipyagent.widgets import view_state as vs

ROOT = Path(__file__).parents[2]


def tags(union: Any, key: str) -> set[str]:
    """The ``Literal`` tags of a union of TypedDicts."""
    return {typing.get_args(typing.get_type_hints(member)[key])[0] for member in typing.get_args(union)}


@pytest.mark.parametrize(
    ("content", "action"),
    [
        ({"action": "hello"}, {"action": "hello"}),
        ({"action": "stop", "extra": 1}, {"action": "stop"}),
        (
            {"action": "permission", "id": "c1", "decision": "always"},
            {"action": "permission", "id": "c1", "decision": "always"},
        ),
        ({"action": "answer", "id": 3, "answer": 42}, {"action": "answer", "id": "3", "answer": "42"}),
        ({"action": "answer", "id": "q", "answer": None}, {"action": "answer", "id": "q", "answer": None}),
        ({"action": "send", "text": "hi"}, {"action": "send", "text": "hi", "files": []}),
        ({"action": "model", "model": "openai/gpt-4.1"}, {"action": "model", "model": "openai/gpt-4.1"}),
        ({"action": "permission", "id": "c1", "decision": "maybe"}, None),
        ({"action": "permission", "id": "c1", "decision": ["allow"]}, None),
        ({"action": "delete_everything"}, None),
        (["stop"], None),
        ("stop", None),
    ],
)
def test_only_known_actions_come_out_of_a_front_end_message(content: Any, action: Any) -> None:
    assert vs.parse_action(content) == action


def test_every_action_the_front_end_sends_is_typed_and_parsed() -> None:
    source = "\n".join(p.read_text() for p in (ROOT / "js" / "src").glob("*.js"))
    # A message is an object literal passed to act/send (directly, or as a named `msg`).
    sent = set(re.findall(r"""(?:(?:act|send)\(\s*\w*,?\s*|msg\s*=\s*)\{\s*action:\s*"(\w+)\"""", source))
    assert sent == tags(vs.Action, "action")
    # Each parses with the fields it carries in the front end.
    fields = {"id": "x", "decision": "deny", "text": "t", "model": "m", "seq": 3, "hash": "h", "page": "p"}
    for name in sent:
        assert vs.parse_action({"action": name, **fields}), name


def test_the_protocol_doc_names_every_block_kind_and_patch_op_and_points_to_the_types() -> None:
    doc = (ROOT / "docs" / "widget-protocol.md").read_text()
    assert "ipyagent/widgets/view_state.py" in doc
    documented_kinds = set(re.findall(r"^\| `(\w+)` \|", doc, re.MULTILINE))
    assert documented_kinds == tags(vs.Block, "kind")
    documented_ops = set(re.findall(r'\{"op": "(\w+)"', doc))
    assert documented_ops == tags(vs.Patch, "op")


def test_a_new_state_has_every_field_of_the_type() -> None:
    assert set(vs.new_state()) == set(typing.get_type_hints(vs.ViewState))
