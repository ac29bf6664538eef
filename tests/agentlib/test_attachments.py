"""Attachments: files and images go with the prompt; what cannot be sent fails before the run."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest

from ipyagent import Agent
from ipyagent.agentlib.attachments import MAX_TEXT_CHARS, attachment_blocks
from ipyagent.agentlib.errors import UserError
from ipyagent.agentlib.messages import ImageBlock, TextBlock
from ipyagent.testing import ScriptedModel

PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
)


async def test_an_image_and_a_text_file_go_with_the_prompt(tmp_path: Path) -> None:
    (tmp_path / "chart.png").write_bytes(PNG)
    (tmp_path / "notes.md").write_text("Revenue fell in May.")
    model = ScriptedModel(["A flat line."])
    agent = Agent(model=model)
    await agent.run("What do these show?", attachments=[tmp_path / "chart.png", str(tmp_path / "notes.md")])
    [message] = model.requests[0].messages
    text, image, notes = message.content
    assert isinstance(text, TextBlock) and text.text == "What do these show?"
    assert isinstance(image, ImageBlock) and image.media_type == "image/png"
    assert base64.b64decode(image.data or "") == PNG
    assert (
        isinstance(notes, TextBlock) and notes.text == '<file name="notes.md">\nRevenue fell in May.\n</file>'
    )


def test_a_long_text_file_is_cut_and_says_so(tmp_path: Path) -> None:
    (tmp_path / "big.txt").write_text("x" * (MAX_TEXT_CHARS + 10))
    [block] = attachment_blocks([tmp_path / "big.txt"])
    assert isinstance(block, TextBlock)
    assert f"[cut: {MAX_TEXT_CHARS:,} of {MAX_TEXT_CHARS + 10:,} characters attached]" in block.text


@pytest.mark.parametrize(
    ("name", "content", "message"),
    [
        ("missing.txt", None, "Cannot attach"),
        ("data.bin", b"\x00\x01\x02", "not a text file"),
    ],
)
async def test_what_cannot_be_attached_fails_before_anything_is_sent(
    tmp_path: Path, name: str, content: bytes | None, message: str
) -> None:
    if content is not None:
        (tmp_path / name).write_bytes(content)
    model = ScriptedModel(["never"])
    agent = Agent(model=model)
    with pytest.raises(UserError, match=message):
        await agent.run("Look.", attachments=[tmp_path / name])
    assert model.requests == [] and agent.messages == []
