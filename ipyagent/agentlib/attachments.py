"""What a message can carry besides its text: files, images, and summaries of variables.

``await agent.run("What is in this chart?", attachments=["sales.png", "notes.md"])``: an image file
goes to the model as an image, a text file as its text (bounded, in a ``<file>`` block), and a
:class:`~ipyagent.agentlib.messages.TextBlock` or
:class:`~ipyagent.agentlib.messages.ImageBlock` as it is. The chat's ``@name`` mentions arrive
here as text blocks the kernel wrote (a variable's summary, never its values in bulk).
"""

from __future__ import annotations

import base64
import html
import os
from collections.abc import Sequence
from pathlib import Path
from typing import TypeAlias

from .errors import UserError
from .messages import ImageBlock, TextBlock

__all__ = [
    "MAX_IMAGE_BYTES",
    "MAX_TEXT_CHARS",
    "Attachment",
    "attachment_blocks",
    "attachment_label",
    "file_block",
]

#: A path to a file, or a block as the model will see it.
Attachment: TypeAlias = "str | os.PathLike[str] | TextBlock | ImageBlock"

#: Characters of a text file sent; the rest is cut, and the model told how much.
MAX_TEXT_CHARS = 100_000
#: The largest image file sent (the providers' own limits are about 5 MB per image).
MAX_IMAGE_BYTES = 5_000_000

_IMAGE_TYPES = {
    ".png": "image/png",
    ".jpg": "image/jpeg",
    ".jpeg": "image/jpeg",
    ".gif": "image/gif",
    ".webp": "image/webp",
}


def attachment_blocks(attachments: Sequence[Attachment]) -> list[TextBlock | ImageBlock]:
    """The blocks ``attachments`` add to a message, read now: a file that cannot be read, is
    too big or is not text fails here with a :class:`UserError`, before anything is sent."""
    blocks: list[TextBlock | ImageBlock] = []
    for item in attachments:
        if isinstance(item, TextBlock | ImageBlock):
            blocks.append(item)
        elif isinstance(item, str | os.PathLike):
            blocks.append(_file_block(Path(item).expanduser()))
        else:
            raise UserError(
                f"Cannot attach {type(item).__name__} {item!r:.80}.",
                hint="Attach a file path, or a TextBlock / ImageBlock.",
                code="invalid_attachment",
            )
    return blocks


def attachment_label(block: TextBlock | ImageBlock) -> str:
    """A name for an attached block, for the views: "notebook context", "@sales", "notes.md"."""
    if isinstance(block, ImageBlock):
        return "an image"
    return block.attached or "text"


def _file_block(path: Path) -> TextBlock | ImageBlock:
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise UserError(
            f"Cannot attach {path}: {exc.strerror or exc}.",
            hint="Check the path (relative paths start at the kernel's working directory).",
            code="invalid_attachment",
        ) from exc
    return file_block(path.name, data)


def file_block(name: str, data: bytes) -> TextBlock | ImageBlock:
    """The block for a file's bytes (read from disk, or picked in the chat): an image by its
    name's suffix, else text; a :class:`UserError` when it is too big or not text."""
    name = Path(name).name or "file"
    media_type = _IMAGE_TYPES.get(Path(name).suffix.lower())
    if media_type is not None:
        if len(data) > MAX_IMAGE_BYTES:
            raise UserError(
                f"{name} is {len(data):,} bytes; images up to {MAX_IMAGE_BYTES:,} bytes can be attached.",
                hint="Save a smaller version (lower resolution or JPEG) and attach that.",
                code="invalid_attachment",
            )
        return ImageBlock(media_type=media_type, data=base64.b64encode(data).decode("ascii"))
    if b"\x00" in data[:8192]:
        raise UserError(
            f"{name} is not a text file or a PNG, JPEG, GIF or WebP image.",
            hint="Attach text files or images; load other data in the notebook and mention the variable.",
            code="invalid_attachment",
        )
    text = data.decode("utf-8", errors="replace")
    if len(text) > MAX_TEXT_CHARS:
        text = f"{text[:MAX_TEXT_CHARS]}\n… [cut: {MAX_TEXT_CHARS:,} of {len(text):,} characters attached]"
    # The name may come from a browser: escaped, it cannot close the tag or fake another one.
    return TextBlock(text=f'<file name="{html.escape(name)}">\n{text}\n</file>', attached=name)
