"""Tools: plain Python functions the model may call.

:func:`tool` turns a sync or async function into a :class:`Tool`: its name, its docstring's
summary as the description, a JSON schema built by pydantic from the type hints (parameter
descriptions from the docstring), and validation of the model's arguments. Omitted arguments
are not passed at all, so the function's own defaults apply. A parameter annotated
:class:`RunContext` is filled in by the agent and hidden from the model.

Whether a tool is ``read_only`` decides how the agent runs it: read-only tools run at once and
concurrently; all others change something, so they ask for permission and run one at a time.
A ``sandboxed`` tool runs in a child process the operating system confines (:mod:`.sandbox`),
or, where this machine cannot confine one, not at all.
"""

from __future__ import annotations

import inspect
import json
import os
import re
import typing
import warnings
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar, overload

from pydantic import BaseModel, ConfigDict, Field, PydanticUserError, ValidationError, create_model
from pydantic.json_schema import PydanticJsonSchemaWarning

from .docstrings import parse_docstring
from .errors import UserError
from .messages import ImageBlock, ToolCallBlock
from .model import ToolSpec
from .workers import tool_workers

if typing.TYPE_CHECKING:
    from .control_files import Subject
    from .parent_run import ParentRun
    from .sandbox import Limits

__all__ = ["RunContext", "Tool", "ToolArgumentsError", "ToolOutput", "call_groups", "jsonable", "tool"]

F = TypeVar("F", bound=Callable[..., Any])
_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")
_NO_DEFAULT: Any = inspect.Parameter.empty
#: Seconds a sandboxed tool without its own timeout may run (the agent's default tool timeout).
SANDBOX_TIMEOUT = 120.0


class ToolOutput(BaseModel):
    """What a tool returns when it has more to say than a string.

    ``text`` goes to the model. ``display`` is a MIME bundle (``{"text/html": ..., "image/png":
    <base64>}``), or a list of them, shown to the user and never sent to the model.
    """

    model_config = ConfigDict(frozen=True, defer_build=True)

    text: str
    display: dict[str, Any] | list[dict[str, Any]] | None = None
    is_error: bool = False
    #: Images for the model (a figure the tool made, downscaled), sent to models that accept
    #: images; ``text`` should describe them for the others.
    images: list[ImageBlock] | None = None


@dataclass
class RunContext:
    """Handed to a tool that asks for it with a parameter annotated ``RunContext``."""

    run_id: str
    call_id: str
    tool_name: str
    _ask: Callable[[str, list[str]], Awaitable[str | None]] = field(repr=False)
    _parent: Callable[[], ParentRun] | None = field(default=None, repr=False)
    _warn: Callable[[str, str, str], None] | None = field(default=None, repr=False)

    def warn(self, code: str, message: str, hint: str = "") -> None:
        """Tell the user something that does not stop the call (a ``run_warning`` event), e.g.
        before a tool's code runs; does nothing outside a run."""
        if self._warn is not None:
            self._warn(code, message, hint)

    async def ask_user(self, question: str, choices: list[str] | None = None) -> str | None:
        """Ask the person at the keyboard; ``None`` when nobody can answer (a headless run)."""
        return await self._ask(question, list(choices or []))

    def parent_run(self) -> ParentRun:
        """What the run lends this call to start a sub-agent with (the ``delegate`` tool, see
        :mod:`~ipyagent.agentlib.delegation`)."""
        if self._parent is None:
            raise UserError(
                f"The tool {self.tool_name!r} was not called by an agent's run, so it has no run to "
                "delegate from.",
                hint="Call it through Agent.run (give the agent delegate=True).",
                code="no_parent_run",
            )
        return self._parent()


class ToolArgumentsError(Exception):
    """The model's arguments do not fit the tool; ``str()`` is written for the model."""


@dataclass(frozen=True)
class Tool:
    """A function the agent may call. Build one with :func:`tool`."""

    name: str
    description: str
    function: Callable[..., Any]
    arguments_model: type[BaseModel]
    read_only: bool = False
    timeout: float | None = None
    context_parameter: str | None = None
    #: Positional-only parameters in order, with their defaults (they cannot be passed by name).
    positional_only: tuple[tuple[str, Any], ...] = ()
    #: Run in a forked child confined by the OS (writes only in the current folder, no network),
    #: with the sandbox's default limits or the :class:`~.sandbox.Limits` given.
    sandboxed: bool | Limits = False
    #: The files a call would change, from its validated arguments (the file tools say so): the
    #: loop asks before a call that changes a control file, even under auto-approve
    #: (:mod:`~ipyagent.agentlib.control_files`).
    subjects: Callable[[dict[str, Any]], Sequence[Subject]] | None = None
    spec: ToolSpec = field(init=False)

    def __post_init__(self) -> None:
        spec = ToolSpec(
            name=self.name, description=self.description, parameters=_schema(self.arguments_model)
        )
        object.__setattr__(self, "spec", spec)

    def validate(self, arguments: dict[str, Any]) -> dict[str, Any]:
        """Validated keyword arguments, holding only what the model gave (defaults stay the
        function's own)."""
        try:
            parsed = self.arguments_model.model_validate(arguments)
        except ValidationError as exc:
            raise ToolArgumentsError(_describe_validation(self.name, exc)) from exc
        given = parsed.model_fields_set
        # __dict__, not getattr: a field may be called like a BaseModel method ("schema", "copy").
        return {name: parsed.__dict__[name] for name in type(parsed).model_fields if name in given}

    async def call(self, arguments: dict[str, Any], context: RunContext) -> Any:
        """Run the function. Sync functions run in a worker thread so the loop stays live: one
        of :func:`~.workers.tool_workers`, where a call abandoned at its timeout cannot keep
        the calls after it waiting."""
        kwargs = dict(arguments)
        if self.context_parameter:
            kwargs[self.context_parameter] = context
        # An omitted positional-only argument still takes its place, with its default.
        args = [kwargs.pop(name) if name in kwargs else default for name, default in self.positional_only]
        if self.sandboxed:
            return await _call_sandboxed(self, args, kwargs)
        if _is_async(self.function):
            return await self.function(*args, **kwargs)
        result = await tool_workers().run(self.function, args, kwargs, label=self.name)
        if inspect.isawaitable(result):
            return await result
        return result


@overload
def tool(
    function: F,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    read_only: bool = False,
    timeout: float | None = None,
    sandboxed: bool | Limits = False,
) -> Tool: ...
@overload
def tool(
    *,
    name: str | None = None,
    description: str | None = None,
    read_only: bool = False,
    timeout: float | None = None,
    sandboxed: bool | Limits = False,
) -> Callable[[F], Tool]: ...
def tool(
    function: Callable[..., Any] | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    read_only: bool = False,
    timeout: float | None = None,
    sandboxed: bool | Limits = False,
) -> Tool | Callable[[Callable[..., Any]], Tool]:
    """Make a tool from a function: ``@tool``, ``@tool(read_only=True)`` or ``tool(fn)``.

    Args:
        name: The name the model sees (default: the function's name).
        description: What the model is told (default: the docstring's summary).
        read_only: True when the tool changes nothing; it then runs without asking.
        timeout: Seconds before the call is abandoned with an error result (default: the agent's).
        sandboxed: Run the function in a child process the operating system confines: it may
            write only in the current folder (a notebook's folder) and a private temporary one,
            read no personal files, open no network connection, and is killed at ``timeout``.
            Its return value is pickled back. Where this machine cannot confine a child, the
            call is refused, never run unconfined (see ``ipyagent.agentlib.sandbox.available()``).
            Pass ``sandbox.Limits(network=True, memory=..., ...)`` instead of True to change
            the limits.
    """

    def build(fn: Callable[..., Any]) -> Tool:
        return _build(
            fn, name=name, description=description, read_only=read_only, timeout=timeout, sandboxed=sandboxed
        )

    return build(function) if function is not None else build


def as_tool(obj: Tool | Callable[..., Any]) -> Tool:
    return obj if isinstance(obj, Tool) else tool(obj)


def to_output(value: Any) -> ToolOutput:
    """What the model reads for a tool's return value."""
    if isinstance(value, ToolOutput):
        return value
    if value is None:
        return ToolOutput(text="(done, no output)")
    if isinstance(value, str):
        return ToolOutput(text=value)
    if isinstance(value, BaseModel):
        return ToolOutput(text=value.model_dump_json())
    try:
        return ToolOutput(text=json.dumps(value, default=str, ensure_ascii=False))
    except (TypeError, ValueError):
        return ToolOutput(text=repr(value))


def _build(
    fn: Callable[..., Any],
    *,
    name: str | None,
    description: str | None,
    read_only: bool,
    timeout: float | None,
    sandboxed: bool | Limits = False,
) -> Tool:
    tool_name = name if name is not None else getattr(fn, "__name__", None) or type(fn).__name__
    if not _NAME.fullmatch(tool_name):
        raise UserError(
            f"Tool name {tool_name!r} is not allowed.",
            hint="Use 1-64 letters, digits, '_' or '-', e.g. @tool(name='get_weather').",
            code="invalid_tool_name",
        )
    summary, param_docs = parse_docstring(inspect.getdoc(fn))
    try:
        hints = _parameter_hints(fn)
    except Exception as exc:  # unresolvable forward references in user code
        raise UserError(
            f"Cannot read the type hints of tool {tool_name!r}: {exc}",
            hint="Make every annotation importable where the function is defined.",
            code="invalid_tool",
        ) from exc
    fields: dict[str, Any] = {}
    context_parameter: str | None = None
    positional_only: list[tuple[str, Any]] = []
    for pname, param in inspect.signature(fn).parameters.items():
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            continue  # *args/**kwargs have no schema; the model cannot fill them
        if param.kind is param.POSITIONAL_ONLY:
            positional_only.append((pname, param.default))
        annotation = hints.get(pname, Any)
        if annotation is RunContext:
            if sandboxed:
                raise UserError(
                    f"Tool {tool_name!r} is sandboxed and asks for a RunContext; a sandboxed tool runs "
                    "in a child process that cannot reach the run (or the user).",
                    hint="Drop the RunContext parameter, or drop sandboxed=True.",
                    code="invalid_tool",
                )
            context_parameter = pname
            continue
        default = ... if param.default is param.empty else param.default
        fields[pname] = (annotation, Field(default, description=param_docs.get(pname) or None))
    try:
        with warnings.catch_warnings():
            # Parameters called "schema", "json" or "copy" shadow BaseModel methods; harmless here.
            warnings.filterwarnings(
                "ignore", message="Field name .* shadows an attribute", category=UserWarning
            )
            model = create_model(f"{tool_name}_arguments", __config__=ConfigDict(extra="forbid"), **fields)
    except (PydanticUserError, NameError, TypeError) as exc:
        raise UserError(
            f"Cannot make a tool of {tool_name!r}: {exc}",
            hint="Rename parameters that start with '_'; give every parameter a type pydantic understands.",
            code="invalid_tool",
        ) from exc
    return Tool(
        name=tool_name,
        description=description if description is not None else summary,
        function=fn,
        arguments_model=model,
        read_only=read_only,
        timeout=timeout,
        context_parameter=context_parameter,
        positional_only=tuple(positional_only),
        sandboxed=sandboxed,
    )


async def _call_sandboxed(tool: Tool, args: list[Any], kwargs: dict[str, Any]) -> Any:
    """Run ``tool``'s function in the sandbox, in the current folder, killed at its timeout."""
    from . import sandbox

    if isinstance(tool.sandboxed, sandbox.Limits):
        limits = tool.sandboxed
    else:
        limits = sandbox.Limits(timeout=tool.timeout if tool.timeout is not None else SANDBOX_TIMEOUT)
    # The sandbox kills the child at the limit, so this worker is back by then.
    return await tool_workers().run(
        sandbox.call, (tool.function, args, kwargs), {"cwd": os.getcwd(), "limits": limits}, label=tool.name
    )


def _parameter_hints(fn: Callable[..., Any]) -> dict[str, Any]:
    """The parameters' resolved annotations. The return annotation is not needed, and with
    ``from __future__ import annotations`` it often names something imported only locally."""
    target = inspect.unwrap(fn)
    raw = dict(getattr(target, "__annotations__", None) or getattr(type(fn), "__annotations__", {}))
    raw.pop("return", None)
    shim = _Annotated(raw, getattr(target, "__globals__", {}))
    # RunContext resolves even where it was imported only locally (a common notebook pattern).
    return typing.get_type_hints(
        shim, globalns=shim.__globals__, localns={"RunContext": RunContext}, include_extras=True
    )


class _Annotated:
    def __init__(self, annotations: dict[str, Any], globals_: dict[str, Any]) -> None:
        self.__annotations__ = annotations
        self.__globals__ = globals_


def _is_async(fn: Callable[..., Any]) -> bool:
    return inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(getattr(fn, "__call__", None))  # noqa: B004


def _schema(model: type[BaseModel]) -> dict[str, Any]:
    with warnings.catch_warnings():
        # A default JSON cannot express (a sentinel object) is left out of the schema; fine.
        warnings.simplefilter("ignore", PydanticJsonSchemaWarning)
        raw = model.model_json_schema()
    schema: dict[str, Any] = _strip_titles(raw)
    schema.pop("description", None)
    schema.setdefault("properties", {})
    schema["type"] = "object"
    return schema


_VALUES = frozenset({"default", "const", "enum", "examples"})  # data, not schema: keep as written


def _strip_titles(node: Any) -> Any:
    """Drop pydantic's auto-generated ``title`` keywords (noise for the model), but not a
    property that happens to be called "title"."""
    if isinstance(node, dict):
        out: dict[str, Any] = {}
        for key, value in node.items():
            if key == "title" and isinstance(value, str):
                continue
            if key in _VALUES:
                out[key] = value
            elif key in ("properties", "$defs", "definitions") and isinstance(value, dict):
                out[key] = {k: _strip_titles(v) for k, v in value.items()}
            else:
                out[key] = _strip_titles(value)
        return out
    if isinstance(node, list):
        return [_strip_titles(v) for v in node]
    return node


def _describe_validation(name: str, exc: ValidationError) -> str:
    lines = [f"Invalid arguments for tool `{name}`:"]
    for error in exc.errors(include_url=False):
        where = ".".join(str(p) for p in error["loc"]) or "(arguments)"
        lines.append(f"- {where}: {error['msg']}")
    lines.append("Fix the arguments and call the tool again.")
    return "\n".join(lines)


def call_groups(calls: Sequence[ToolCallBlock], tools: Mapping[str, Tool]) -> list[list[ToolCallBlock]]:
    """``calls`` in the groups they run in: consecutive read-only calls together (at once), each
    call that changes something alone, in order."""
    groups: list[list[ToolCallBlock]] = []
    previous_free = False
    for call in calls:
        tool = tools.get(call.name)
        # Calls that cannot execute (unknown tool, bad JSON) only produce an error: no order to keep.
        free = tool is None or tool.read_only or call.arguments is None
        if free and previous_free:
            groups[-1].append(call)
        else:
            groups.append([call])
        previous_free = free
    return groups


def jsonable(value: dict[str, Any]) -> dict[str, Any]:
    """Tool arguments as plain JSON data, for events: pydantic models dumped, enums by value,
    anything else by its ``str``."""
    if all(type(v) in _SCALARS for v in value.values()):  # the common case: JSON already
        return dict(value)
    result: dict[str, Any] = json.loads(json.dumps(value, default=_to_json))
    return result


_SCALARS = frozenset({str, int, float, bool, type(None)})


def _to_json(value: Any) -> Any:
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        return dump(mode="json")
    return getattr(value, "value", None) if hasattr(value, "value") else str(value)
