"""Record a model's streams to a cassette, then replay them: offline, deterministic agent tests.

    from ipyagent.testing import ReplayModel

    model = ReplayModel(real_model, cassette="analysis.cassette.jsonl", mode="record")  # once
    model = ReplayModel(cassette="analysis.cassette.jsonl")                   # forever after

In ``record`` mode every request goes to the wrapped provider; its events pass through live and
one JSON line per request is appended to the cassette: the request in a normalized, comparable
form (qualified model id, system prompt, messages without their ids and timestamps, tool-call ids
numbered in order, tool specs, settings, the tool choice when it is not ``auto``, the output
schema of a typed answer), the provider
events it produced, and the error it ended with. A recording asks for deterministic decoding
where the model offers it (the local model decodes greedily at temperature 0), so recording an
unchanged notebook again gives the same cassette; the request is recorded as the agent made it.
In ``replay`` mode (no wrapped provider needed) the recorded streams are served in order, and a
request that differs from the recorded one fails with a :class:`ProviderError` whose message is
a unified diff of the two. Volatile text — today's date and the workspace in the system prompt,
memory addresses, the ``workspace`` path given, the ``scrub`` patterns — is scrubbed before
comparing, on both sides: a pattern added later applies to requests recorded before it.

Secrets never reach a cassette: requests carry no keys, headers or base URLs, and any value of
a key-like environment variable (``*_KEY``, ``*TOKEN*``, ...), of a configured endpoint key or of
a credential in a URL that appears in a record (say, echoed by a tool) is replaced by
``[redacted]`` (:func:`ipyagent.agentlib.redact.known_secrets` says which values).

This module owns the cassette format and the matching; which cassette a notebook uses, and when
recording is on, is :mod:`ipyagent.kernel.cassettes`'s business.
"""

from __future__ import annotations

import asyncio
import builtins
import difflib
import hashlib
import json
import os
import re
import warnings
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from .. import errors as _errors
from ..atomic import atomic_write
from ..errors import AgentError, ErrorInfo, ProviderError, UserError
from ..jsonl import Policy, append_line, json_line, open_for_append, read_lines
from ..messages import Message
from ..model import PROVIDER_EVENT_ADAPTER, ModelRequest, Provider, ProviderEvent, open_stream
from ..redact import known_secrets, map_strings, redact, redact_strings
from ..retry import wait_before_retry

__all__ = ["Cassette", "CassetteWarning", "Recording", "ReplayMode", "ReplayModel", "normalize_request"]

ReplayMode = Literal["record", "replay"]
# Version 2 records the request's tool_choice. Version 1 cassettes, recorded before requests had
# one, still replay: their requests are compared without it. Version 3 records the output schema
# of a typed answer (when there is one); no earlier request had one, so those compare as before.
FORMAT, VERSION = "ipyagent-cassette", 3
#: Lines of diff shown in a mismatch error; the rest is counted, not shown.
MAX_DIFF_LINES = 80

#: Scrubbed before comparing: what differs between machines and days but not between runs.
SYSTEM_SCRUBS: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"Today's date is \d{4}-\d{2}-\d{2}\."), "Today's date is <date>."),
    (re.compile(r"Workspace: .+?\. Relative file paths"), "Workspace: <workspace>. Relative file paths"),
)
TEXT_SCRUBS: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"\b0x[0-9a-fA-F]{6,}\b"), "0x…"),  # reprs of objects: `<Foo at 0x7f3a...>`
)

DEFAULT_RERECORD_HINT = (
    "If the change is intended, record the cassette again against a real model: "
    "ReplayModel(model, cassette=..., mode='record'); in a notebook, run it with IPYAGENT_REPLAY=record "
    "(or `%agent cassette record`) and save it."
)


#: Replay is only as right as its cassette: a damaged line stops it. A torn last line is the request
#: in flight when the recording died; replaying reaches the end of the cassette there.
POLICY = Policy(
    what="cassette",
    damaged="raise",
    torn="the request it held will be reported as past the end of the cassette",
    hint="Record the cassette again (or restore it from version control).",
    code="cassette_damaged",
)


class CassetteWarning(UserWarning):
    """A cassette was readable but not intact (a torn last line was skipped)."""


@dataclass(frozen=True)
class Recording:
    """One recorded request and what it produced."""

    model_id: str
    context_limit: int | None
    request: dict[str, Any]
    events: list[dict[str, Any]]
    error: dict[str, Any] | None = None
    #: The consumer stopped reading (a cancelled run): replay raises ``CancelledError`` after
    #: the events recorded so far.
    cancelled: bool = False
    #: False for a record of a version 1 cassette, which did not record the tool choice.
    has_tool_choice: bool = True


class Cassette:
    """A cassette file: read whole on first use in replay, written one line per request.

    The first record written by a ``Cassette`` replaces the file atomically (a new recording
    starts from scratch); later records are appended and flushed to disk at once, so a crash
    loses at most the request in flight. Share one instance between several
    :class:`ReplayModel` objects to keep one position in it (the kernel does, across cells).
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self.position = 0
        self.written = 0
        self._records: list[Recording] | None = None
        self._last: dict[str, Any] | None = None  # the previous request written (for deltas)

    # -- replay ----------------------------------------------------------------------------------

    @property
    def records(self) -> list[Recording]:
        """Every complete record (loaded on first use)."""
        if self._records is None:
            self._records = _load(self.path)
        return self._records

    def peek(self) -> Recording | None:
        """The record the next request will be compared with (the last one when past the end)."""
        records = self.records
        if not records:
            return None
        return records[min(self.position, len(records) - 1)]

    def take(self) -> tuple[int, Recording | None]:
        """The next record and its index (``None`` when past the end); moves the position on."""
        index = self.position
        self.position += 1
        records = self.records
        return index, records[index] if index < len(records) else None

    # -- record ----------------------------------------------------------------------------------

    def append(self, record: Recording) -> None:
        """Write one record: the first replaces the file atomically, the rest are appended."""
        request = dict(record.request)
        line: dict[str, Any] = {"model_id": record.model_id, "context_limit": record.context_limit}
        previous = self._last
        same = [
            k for k in ("system", "tools", "settings") if previous is not None and previous[k] == request[k]
        ]
        reuse = _common_prefix(previous["messages"], request["messages"]) if previous else 0
        self._last = record.request
        line["same"], line["reuse"] = same, reuse
        line["request"] = {k: v for k, v in request.items() if k not in same}
        line["request"]["messages"] = request["messages"][reuse:]
        line["events"] = record.events
        line["error"], line["cancelled"] = record.error, record.cancelled
        line = redact_strings(line, known_secrets())
        text = json_line(line)
        if self.written == 0:  # a new recording replaces any earlier cassette, whole
            atomic_write(self.path, json_line({"format": FORMAT, "version": VERSION}) + text)
        else:
            fd = open_for_append(self.path, create=False)
            try:
                append_line(fd, text)
            finally:
                os.close(fd)
        self.written += 1

    def __repr__(self) -> str:
        return f"Cassette({str(self.path)!r}, position={self.position}, written={self.written})"


class ReplayModel:
    """A :class:`~ipyagent.agentlib.providers.Provider` that records another one, or replays it.

    Args:
        model: The provider to record. In ``replay`` mode it is never called; when given, its
            ``model_id`` is what the requests must match (else the recorded model is used).
        cassette: The cassette's path, or a shared :class:`Cassette`.
        mode: ``"record"`` or ``"replay"`` (the default).
        model_id: In ``replay`` mode, the model the requests must have been made to (default:
            the wrapped model's, else the recorded one).
        workspace: A folder whose path is replaced by ``<workspace>`` before comparing, so a
            cassette recorded in one checkout replays in another.
        scrub: More ``(regex, replacement)`` pairs applied to request text before comparing.
        rerecord_hint: What a mismatch error tells the user to do.
        deterministic: In ``record`` mode, send a request that sets no temperature at
            temperature 0 to a model that decodes greedily there (one with ``greedy_at_zero``
            set: the local model), so recording it again gives the same reply. The cassette
            keeps the request as the agent made it, so replays match it either way. Other
            providers get the request unchanged: hosted APIs are not deterministic at
            temperature 0, and reasoning models reject any temperature but 1. ``False`` records
            one sample at the model's own settings.
    """

    def __init__(
        self,
        model: Provider | None = None,
        *,
        cassette: str | os.PathLike[str] | Cassette,
        mode: ReplayMode = "replay",
        model_id: str | None = None,
        workspace: str | os.PathLike[str] | None = None,
        scrub: Sequence[tuple[str | re.Pattern[str], str]] = (),
        rerecord_hint: str = DEFAULT_RERECORD_HINT,
        deterministic: bool = True,
    ) -> None:
        if mode not in ("record", "replay"):
            raise UserError(
                f"Unknown replay mode {mode!r}.", hint="Use 'record' or 'replay'.", code="invalid_option"
            )
        if mode == "record" and model is None:
            raise UserError(
                "Recording needs the model to record.",
                hint="Pass it: ReplayModel(model, cassette=..., mode='record').",
                code="invalid_option",
            )
        self.mode: ReplayMode = mode
        self.wrapped = model
        self.cassette = cassette if isinstance(cassette, Cassette) else Cassette(cassette)
        self.rerecord_hint = rerecord_hint
        self.deterministic = deterministic
        self._expected = model_id or (model.model_id if model is not None and mode == "replay" else None)
        scrubs = [(re.compile(p) if isinstance(p, str) else p, r) for p, r in scrub]
        if workspace is not None:
            scrubs.insert(0, (re.compile(re.escape(os.fspath(workspace))), "<workspace>"))
        self._scrubs = tuple(scrubs)

    @property
    def model_id(self) -> str:
        if self.mode == "record":
            assert self.wrapped is not None
            return self.wrapped.model_id
        if self._expected is not None:
            return self._expected
        record = self.cassette.peek()
        if record is None:
            raise UserError(
                f"The cassette {self.cassette.path} holds no recorded requests.",
                hint="Record it first with a real model: mode='record' (notebooks: IPYAGENT_REPLAY=record).",
                code="cassette_empty",
            )
        return record.model_id

    @property
    def context_limit(self) -> int | None:
        if self.mode == "record":
            assert self.wrapped is not None
            return self.wrapped.context_limit
        record = self.cassette.peek()
        return record.context_limit if record is not None else None

    def normalize(self, request: ModelRequest) -> dict[str, Any]:
        """``request`` as it is recorded and compared (see :func:`normalize_request`)."""
        return normalize_request(request, model_id=self.model_id, scrub=self._scrubs)

    def _scrubbed(self, recorded: dict[str, Any]) -> dict[str, Any]:
        """A recorded request with today's scrubs applied: one added since it was recorded (a
        new volatile value found) applies to it as to the live request, so no re-recording."""
        scrubs = (*self._scrubs, *TEXT_SCRUBS)

        def clean(text: str) -> str:
            for pattern, replacement in scrubs:
                text = pattern.sub(replacement, text)
            return text

        scrubbed: dict[str, Any] = map_strings(recorded, clean)
        return scrubbed

    def stream(self, request: ModelRequest) -> AsyncIterator[ProviderEvent]:
        if self.mode == "record":
            return self._record(request)
        return self._replay(request)

    async def _record(self, request: ModelRequest) -> AsyncIterator[ProviderEvent]:
        wrapped = self.wrapped
        assert wrapped is not None
        normalized = self.normalize(request)
        events: list[ProviderEvent] = []
        error: dict[str, Any] | None = None
        cancelled = False
        try:
            async with open_stream(wrapped, self._as_sent(request)) as stream:
                async for event in stream:
                    events.append(event)
                    yield event
        except AgentError as exc:
            error = _error_record(exc)
            raise
        except Exception as exc:  # a custom provider's own exception: replayed as the same type
            error = {"class": type(exc).__name__, "foreign": True, "message": str(exc)}
            raise
        except BaseException:  # cancelled, or the consumer stopped reading (GeneratorExit)
            cancelled = True
            raise
        finally:
            dumped = [_dump_event(e) for e in events]
            record = Recording(wrapped.model_id, wrapped.context_limit, normalized, dumped, error, cancelled)
            self.cassette.append(record)

    def _as_sent(self, request: ModelRequest) -> ModelRequest:
        """``request`` as a recording sends it: at temperature 0 when that decodes greedily."""
        if (
            not self.deterministic
            or request.settings.temperature is not None  # the agent's own choice stands
            or not getattr(self.wrapped, "greedy_at_zero", False)
        ):
            return request
        settings = request.settings.model_copy(update={"temperature": 0.0})
        return request.model_copy(update={"settings": settings})

    async def _replay(self, request: ModelRequest) -> AsyncIterator[ProviderEvent]:
        live = self.normalize(request)
        index, record = self.cassette.take()
        if record is not None and not record.has_tool_choice:
            live.pop("tool_choice", None)
        total = len(self.cassette.records)
        if record is None:
            raise ProviderError(
                f"The cassette {self.cassette.path} has {total} recorded request(s); this is request "
                f"{index + 1}: the agent asked the model more than when it was recorded.",
                hint=self.rerecord_hint,
                code="replay_exhausted",
                retryable=False,
            )
        recorded = self._scrubbed(record.request)
        if live != recorded:
            raise ProviderError(
                f"Request {index + 1} of {total} differs from the one recorded in {self.cassette.path}:\n"
                + request_diff(recorded, live),
                hint=self.rerecord_hint,
                code="replay_mismatch",
                retryable=False,
            )
        for event in record.events:
            yield PROVIDER_EVENT_ADAPTER.validate_python(event)
            await asyncio.sleep(0)  # a real stream's pace: cancellation can land between events
        if record.error is not None:
            raise _error_from(record.error)
        if record.cancelled:
            raise asyncio.CancelledError

    async def wait_before_retry(self, seconds: float) -> None:
        """Recording waits as long as the recorded provider asked (its server is real); a replay
        does not wait at all: the answers are on file and the recorded run already waited."""
        if self.mode == "record":
            await wait_before_retry(self.wrapped, seconds)
        else:
            await asyncio.sleep(0)

    def __repr__(self) -> str:
        return (
            f"ReplayModel(mode={self.mode!r}, cassette={str(self.cassette.path)!r}, wrapped={self.wrapped!r})"
        )


# -- normalized requests -------------------------------------------------------------------------


def normalize_request(
    request: ModelRequest,
    *,
    model_id: str | None = None,
    scrub: Sequence[tuple[re.Pattern[str], str]] = (),
) -> dict[str, Any]:
    """A JSON-able, comparable form of ``request``: no message ids or timestamps, tool-call ids
    numbered in order of appearance, images by hash, volatile text scrubbed, secrets redacted."""
    endpoint = model_id.split("/", 1)[0] if model_id and "/" in model_id else None
    calls: dict[str, str] = {}
    system = request.system
    for pattern, replacement in SYSTEM_SCRUBS:
        system = pattern.sub(replacement, system)
    normalized = {
        "model": f"{endpoint}/{request.model}" if endpoint else request.model,
        "system": system,
        "tools": [t.model_dump(mode="json") for t in request.tools],
        # Prompt caching changes the bill, never the answer: not part of what a replay matches.
        "settings": request.settings.model_dump(mode="json", exclude={"prompt_cache"}),
        "messages": [_message(m, calls) for m in request.messages],
    }
    if request.tool_choice != "auto":  # left out when auto: most requests, and all of version 1
        choice = request.tool_choice
        normalized["tool_choice"] = list(choice) if isinstance(choice, tuple) else choice
    if request.output_schema is not None:  # left out when none: every request before version 3
        normalized["output_schema"] = request.output_schema.model_dump(mode="json")
    scrubs, secrets = (*scrub, *TEXT_SCRUBS), known_secrets()

    def clean(text: str) -> str:
        for pattern, replacement in scrubs:
            text = pattern.sub(replacement, text)
        return redact(text, secrets)

    cleaned: dict[str, Any] = map_strings(normalized, clean)
    return cleaned


def _message(message: Message, calls: dict[str, str]) -> dict[str, Any]:
    out: dict[str, Any] = {"role": message.role}
    if message.model is not None:
        out["model"] = message.model
    if message.finish_reason is not None:
        out["finish_reason"] = message.finish_reason
    if message.interrupted:
        out["interrupted"] = True
    content = []
    for block in message.content:
        # `denied` is for the views; no provider sees it, so it is no part of the request.
        data = {
            "type": block.type,
            **block.model_dump(mode="json", exclude_defaults=True, exclude={"denied"}),
        }
        for key in ("id", "tool_call_id"):  # ids are the agent's, random: number them instead
            if key in data:
                data[key] = calls.setdefault(data[key], f"call_{len(calls) + 1}")
        for image in (data, *data.get("images", ())):
            if isinstance(image.get("data"), str):  # an inline image: its hash is enough to compare
                digest = hashlib.sha256(image["data"].encode()).hexdigest()[:16]
                image["data"] = f"sha256:{digest} ({len(image['data'])} chars)"
        content.append(data)
    out["content"] = content
    return out


def request_diff(recorded: dict[str, Any], live: dict[str, Any]) -> str:
    """A unified diff of two normalized requests, rendered one field or block line per line."""
    lines = list(
        difflib.unified_diff(_render(recorded), _render(live), "recorded", "this run", n=2, lineterm="")
    )
    if len(lines) > MAX_DIFF_LINES:
        lines = [*lines[:MAX_DIFF_LINES], f"… ({len(lines) - MAX_DIFF_LINES} more diff lines)"]
    return "\n".join(lines)


def _render(request: dict[str, Any]) -> list[str]:
    lines = [f"model: {request.get('model')}", f"settings: {_json(request.get('settings'))}"]
    if "tool_choice" in request:
        lines.append(f"tool_choice: {_json(request['tool_choice'])}")
    if "output_schema" in request:
        lines.append(f"output_schema: {_json(request['output_schema'])}")
    lines += _field("system", request.get("system", ""), "")
    for tool in request.get("tools", []):
        lines.append(f"tool {tool.get('name')}:")
        lines += _field("description", tool.get("description", ""), "  ")
        lines += [
            "  parameters:",
            *("    " + s for s in json.dumps(tool.get("parameters"), indent=2, sort_keys=True).splitlines()),
        ]
    for number, message in enumerate(request.get("messages", []), 1):
        extras = "".join(f", {k}={v}" for k, v in message.items() if k not in ("role", "content"))
        lines.append(f"message {number} ({message.get('role')}{extras}):")
        for block in message.get("content", []):
            if set(block) == {"type", "text"}:  # the common case, on one line
                lines += _field(str(block["type"]), block["text"], "  ")
                continue
            lines.append(f"  {block.get('type')}:")
            for key, value in block.items():
                if key != "type":
                    lines += _field(key, value, "    ")
    return lines


def _field(name: str, value: Any, indent: str) -> list[str]:
    if isinstance(value, str) and ("\n" in value or len(value) > 100):
        return [f"{indent}{name}: |", *(f"{indent}  {line}" for line in value.splitlines())]
    return [f"{indent}{name}: {value if isinstance(value, str) else _json(value)}"]


def _json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False)


def _common_prefix(a: list[Any], b: list[Any]) -> int:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


# -- events and errors ---------------------------------------------------------------------------


def _dump_event(event: ProviderEvent) -> dict[str, Any]:
    data: dict[str, Any] = event.model_dump(mode="json", exclude_defaults=True)
    return {"type": event.type, **data}


def _error_record(exc: AgentError) -> dict[str, Any]:
    bases = [c.__name__ for c in type(exc).__mro__[1:] if issubclass(c, AgentError)]
    return {
        "class": type(exc).__name__,
        "bases": bases,
        "info": exc.info.model_dump(mode="json"),
        "retry_after": exc.retry_after,
    }


def _error_from(record: dict[str, Any]) -> BaseException:
    name = str(record.get("class"))
    if record.get("foreign"):
        builtin = getattr(builtins, name, None)
        if isinstance(builtin, type) and issubclass(builtin, Exception):
            return builtin(record.get("message", ""))
        return RuntimeError(f"{name}: {record.get('message', '')}")
    cls: type[AgentError] = ProviderError
    for candidate in (name, *record.get("bases", ())):
        found = getattr(_errors, candidate, None)
        if isinstance(found, type) and issubclass(found, AgentError):
            cls = found
            break
    info = ErrorInfo.model_validate(record["info"])
    keep = info.model_dump(include={"hint", "code", "retryable", "severity", "status_code"})
    return cls(info.message, **keep, retry_after=record.get("retry_after"))


# -- reading -------------------------------------------------------------------------------------


def _load(path: Path) -> list[Recording]:
    try:
        handle = path.open("rb")
    except FileNotFoundError:
        raise UserError(
            f"No cassette at {path}: there is nothing to replay.",
            hint="Record it first with a real model (mode='record'; for a notebook, run it with "
            "IPYAGENT_REPLAY=record or `%agent cassette record`), or point to the right file.",
            code="cassette_missing",
        ) from None
    previous: dict[str, Any] | None = None
    version = VERSION

    def parse(line: bytes, number: int) -> Recording | None:
        nonlocal previous, version
        data = json.loads(line)
        if number == 1:  # the header
            if not isinstance(data, dict) or data.get("format") != FORMAT:
                raise ValueError("this is not an ipyagent cassette (no header line)")
            version = int(data.get("version", 0))
            if version > VERSION:
                raise ValueError(f"written by a newer ipyagent (version {data['version']}): upgrade")
            return None
        request = dict(data["request"])
        for key in data.get("same", ()):
            request[key] = previous[key] if previous is not None else None
        reuse = int(data.get("reuse", 0))
        request["messages"] = [*(previous["messages"][:reuse] if previous else []), *request["messages"]]
        record = Recording(
            model_id=data["model_id"],
            context_limit=data.get("context_limit"),
            request=request,
            events=list(data["events"]),
            error=data.get("error"),
            cancelled=bool(data.get("cancelled")),
            has_tool_choice=version >= 2,
        )
        for event in record.events:  # fail now, with a line number, not mid-replay
            PROVIDER_EVENT_ADAPTER.validate_python(event)
        previous = request
        return record

    with handle:
        read = read_lines(handle, path, parse, POLICY)
    for note in read.notes:  # only a torn last line: a damaged one raised
        warnings.warn(note, CassetteWarning, stacklevel=4)
    return read.records
