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

    Nor is anything done per request in proportion to the transcript, which a run's requests
    would make quadratic. The run's requests follow its conversation, which only appends — but
    for a compaction, which replaces its first messages, and a reset, which empties it. So a
    request whose first message and whose message where the previous request ended are the
    previous request's own objects holds that request's messages and more: their masked copies
    are kept, and only the messages added since are looked at. Anything else (a compaction, a
    reset, another conversation's request) falls back to the per-message memory."""

    def __init__(self) -> None:
        self._secrets: tuple[str, ...] = ()
        self._seen: dict[int, tuple[Message, Message]] = {}
        # The previous request's length, first and last messages; the masked copies of its
        # messages (in a list only ever appended to); whether any copy differs from its message.
        self._sent = 0
        self._ends: tuple[Message, Message] | None = None
        self._masked: list[Message] = []
        self._changed = False
        self._system: tuple[str, str] = ("", "")  # the last system prompt, and masked

    def __call__(self, request: ModelRequest) -> ModelRequest:
        secrets = tuple(known_secrets())
        if secrets != self._secrets:  # a key was set or changed since the last request
            self._secrets, self._seen, self._system = secrets, {}, ("", "")
            self._sent, self._ends, self._masked, self._changed = 0, None, [], False
        system = self._mask_system(request.system)
        given = request.messages
        done, ends = self._sent, self._ends
        if ends is not None and done <= len(given) and given[0] is ends[0] and given[done - 1] is ends[1]:
            added = [self._message(m) for m in given[done:]]
            self._masked.extend(added)
            self._changed = self._changed or any(map(operator.is_not, added, given[done:]))
        else:
            self._masked = [self._message(m) for m in given]
            self._changed = any(map(operator.is_not, self._masked, given))
        self._sent, self._ends = len(given), ((given[0], given[-1]) if given else None)
        if system is request.system and not self._changed:
            return request
        # The request gets its own list: the masked one goes on growing with the next turns.
        return request.model_copy(update={"system": system, "messages": list(self._masked)})

    def _mask_system(self, system: str) -> str:
        """The system prompt masked, once per text: it is the same on every request of a run.
        Unmasked, it is returned as given (``mask_secrets`` returns what it did not change)."""
        if system is not self._system[0] and system != self._system[0]:
            self._system = (system, mask_secrets(system, self._secrets))
        seen, masked = self._system
        return system if masked is seen else masked

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
