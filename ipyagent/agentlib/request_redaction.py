"""The built-in redaction of outgoing requests: secrets are masked before a model sees them.

Every request a run sends passes through a :class:`RequestRedactor` (on by default; off with
``Agent(redact_requests=False)`` or ``redact_requests = false`` in the config file) after the
before-model hooks and before the policies and the adapter: the system prompt, the user's text,
tool calls and tool results get every known secret (:func:`~.redact.known_secrets`: key-like
environment variables, the config file's keys, URL credentials — each also in the escaped form
``json.dumps`` or ``repr`` writes it in when it holds a quote or a backslash) and every
credential-shaped string (``sk-...``, ``ghp_...``, ``AKIA...``, ``pypi-...``, ``gsk_...``,
``xai-...``, ``npm_...``, JWTs, PEM, OpenSSH and PGP private-key blocks;
:data:`~.redact.SECRET_SHAPES`) replaced by ``[redacted]``.

The shapes are one compiled regular expression and the secrets one list, both applied to each
message once (see :class:`RequestRedactor`): a new kind of token is one more alternative of
that expression, never another pass over the transcript.

Only the copy on the wire is masked. The conversation keeps what the user wrote: it is the
user's own record, beside their notebook (the session file already redacts the known secrets
when it writes), and rewriting it would change ``agent.messages`` under them. Because the
replay provider and the cassette recorder are providers too, what they record is the masked
request.

Thinking that carries a provider's signature is sent back untouched: the provider checks it.
"""

from __future__ import annotations

import operator
from typing import Any

from .messages import ContentBlock, Message, TextBlock, ThinkingBlock, ToolCallBlock, ToolResultBlock
from .model import ModelRequest
from .redact import known_secrets, map_strings, mask_secrets

__all__ = ["RequestRedactor", "redact_requests_default"]


def redact_requests_default() -> bool:
    """``redact_requests`` from the config file (``redact_requests = false`` turns the built-in
    redaction off for every agent that does not say otherwise); ``True`` when it is not set."""
    from .config_file import config_path, read_config
    from .errors import UserError

    try:
        value = read_config(config_path()).get("redact_requests", True)
    except UserError:  # a broken config file is reported where its endpoints are read
        return True
    if not isinstance(value, bool):
        raise UserError(
            f"redact_requests = {value!r} in the ipyagent config file is not true or false.",
            hint="Write redact_requests = false (or true) in ~/.config/ipyagent/config.toml.",
            code="invalid_config",
        )
    return value


class RequestRedactor:
    """Masks secrets in requests. One per run: it remembers the masked copy of each message it
    has seen (the transcript's messages are immutable and resent every turn), so a long
    conversation is scanned once, not once per turn.

    Nor is the transcript walked in Python once per turn: a request whose messages begin with
    the previous request's (the same objects: a turn appends) reuses that request's masked list
    and looks only at the messages added since. Checking that prefix is one list comparison,
    identity first, at C speed; anything else (a compaction, a retried turn) falls back to the
    per-message memory."""

    def __init__(self) -> None:
        self._secrets: tuple[str, ...] = ()
        self._seen: dict[int, tuple[Message, Message]] = {}
        # The previous request's messages, their masked copies, and whether any copy differs.
        self._sent: list[Message] = []
        self._masked: tuple[Message, ...] = ()
        self._changed = False

    def __call__(self, request: ModelRequest) -> ModelRequest:
        secrets = tuple(known_secrets())
        if secrets != self._secrets:  # a key was set or changed since the last request
            self._secrets, self._seen = secrets, {}
            self._sent, self._masked, self._changed = [], (), False
        system = mask_secrets(request.system, secrets)
        given = request.messages
        done = len(self._sent)
        # A list comparison checks identity first, element by element, without a call per
        # message: the cheapest way to see that a turn only appended (an equal message that is
        # not the same object is masked the same way, so it counts as the same).
        if done <= len(given) and list(given[:done]) == self._sent:
            added = [self._message(m) for m in given[done:]]
            masked = (*self._masked, *added)
            changed = self._changed or any(map(operator.is_not, added, given[done:]))
        else:
            masked = tuple(self._message(m) for m in given)
            changed = any(map(operator.is_not, masked, given))
        self._sent, self._masked, self._changed = list(given), masked, changed
        if system is request.system and not changed:
            return request
        return request.model_copy(update={"system": system, "messages": list(masked)})

    def _message(self, message: Message) -> Message:
        known = self._seen.get(id(message))
        if known is not None and known[0] is message:
            return known[1]
        content = [self._block(b) for b in message.content]
        changed = any(a is not b for a, b in zip(content, message.content, strict=True))
        masked = message.model_copy(update={"content": tuple(content)}) if changed else message
        self._seen[id(message)] = (message, masked)  # keeps ``message`` alive: its id stays its own
        return masked

    def _block(self, block: ContentBlock) -> ContentBlock:
        secrets = self._secrets
        if isinstance(block, TextBlock):
            text = mask_secrets(block.text, secrets)
            return block if text is block.text else block.model_copy(update={"text": text})
        if isinstance(block, ToolResultBlock):
            text = mask_secrets(block.content, secrets)
            return block if text is block.content else block.model_copy(update={"content": text})
        if isinstance(block, ToolCallBlock):
            raw = mask_secrets(block.raw_arguments, secrets)
            if raw is block.raw_arguments:
                return block
            arguments: Any = map_strings(block.arguments, lambda s: mask_secrets(s, secrets))
            return block.model_copy(update={"raw_arguments": raw, "arguments": arguments})
        if isinstance(block, ThinkingBlock) and block.signature is None and block.redacted is None:
            text = mask_secrets(block.text, secrets)
            return block if text is block.text else block.model_copy(update={"text": text})
        return block  # images; signed thinking, which the provider verifies
