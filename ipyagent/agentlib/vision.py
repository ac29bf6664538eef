"""Which models accept images, and requests without images for those that do not.

A figure a tool makes (``run_python``'s plots) is kept in the transcript as an image beside a
text description of it. The loop sends the image to a model that accepts images and only the
description to the others. Known vision models are matched by name (GPT-4o, GPT-4.1, GPT-5,
o3/o4, the Claude 3+ families, and Ollama's llava, llama3.2-vision, qwen2.5vl, gemma3, ...);
the config file decides for any other, or against a known one::

    [vision]
    "openai/my-finetune" = true
    "ollama/gemma3" = false

A provider that rejects an image part (a model wrongly taken for a vision model) gets the request
again with the descriptions only, once; :func:`remember_no_images` keeps that decision for the
model for the rest of the process.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from .config_file import config_path, read_config
from .errors import AgentError, UserError
from .events import RunWarning
from .messages import Message, ToolResultBlock

__all__ = [
    "accepts_images",
    "has_images",
    "holds_images",
    "images_rejected",
    "remember_no_images",
    "without_images",
]

# Model names (the part after the endpoint) of known vision models.
_VISION = re.compile(
    r"(^|/)(gpt-4o|gpt-4\.1|gpt-4-turbo|gpt-5|o1(?!-mini)|o3|o4-mini|chatgpt-4o"
    r"|claude-(3|sonnet|opus|haiku)"
    r"|llava|bakllava|llama3\.2-vision|llama4|qwen2\.5vl|qwen2\.5-vl|qwen-vl|minicpm-v|moondream|gemma3(?!n)"
    r"|pixtral|mistral-small3\.[12]|gemini)",
    re.IGNORECASE,
)

_rejected: set[str] = set()


def accepts_images(model_id: str) -> bool:
    """Whether requests to ``model_id`` (``"openai/gpt-4.1"``) may carry images."""
    if model_id in _rejected:
        return False
    configured = _configured()
    endpoint, _, name = model_id.partition("/")
    for key in (model_id, name):
        if key in configured:
            return configured[key]
    return endpoint != "local" and _VISION.search(name) is not None


def remember_no_images(model_id: str) -> None:
    """``model_id`` rejected an image: send it descriptions only from now on."""
    _rejected.add(model_id)


def images_rejected(exc: AgentError, model_id: str, messages: Sequence[Message]) -> RunWarning | None:
    """Whether ``exc`` is the provider refusing the images of a request (a model wrongly taken
    for a vision model): then the model is remembered as one that takes descriptions only, for
    the rest of the process, and the warning to tell the user is returned."""
    status = exc.info.status_code
    if status not in (400, 415, 422) or "image" not in exc.info.message.lower():
        return None
    if not accepts_images(model_id) or not has_images(messages):
        return None
    remember_no_images(model_id)
    return RunWarning(
        code="images_rejected",
        message=f"{model_id} did not accept an image; the figures' descriptions were sent instead.",
        hint="If the model does accept images, say so in ~/.config/ipyagent/config.toml: "
        f'[vision] "{model_id}" = true.',
    )


def has_images(messages: Sequence[Message]) -> bool:
    return any(map(holds_images, messages))


def holds_images(message: Message) -> bool:
    """Whether ``message`` carries a tool result's images (a conversation counts them as they
    are committed, so a request need not look at every message again)."""
    return any(isinstance(b, ToolResultBlock) and b.images for b in message.content)


def without_images(messages: Sequence[Message]) -> list[Message]:
    """``messages`` with the tool results' images left out (their text describes them)."""
    out = []
    for message in messages:
        if holds_images(message):
            content = tuple(
                b.model_copy(update={"images": ()}) if isinstance(b, ToolResultBlock) and b.images else b
                for b in message.content
            )
            message = message.model_copy(update={"content": content})
        out.append(message)
    return out


def _configured() -> Mapping[str, bool]:
    path = config_path()
    table = read_config(path).get("vision", {})
    if not isinstance(table, Mapping) or not all(isinstance(v, bool) for v in table.values()):
        raise UserError(
            f"In {path}, [vision] must map model ids to true or false.",
            hint='Write e.g. [vision] "openai/my-model" = true.',
            code="invalid_config",
        )
    return table
