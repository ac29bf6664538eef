"""Steps that ask an agent: one question of the state, or a map over one of its fields.

    agent_step(agent, "Summarize these counts: {counts}", into="summary")
    map_step(agent, items_from="tickets", prompt="Classify: {title}", output_type=Ticket, into="labels")

Both run through ``agent.map``: each question is its own conversation with the agent's model,
tools and settings (the agent's own conversation is not touched, and nobody is asked for
permission: tools that change things need ``auto_approve``), checkpointed in the run's folder.
A step stopped part-way (an interrupt, a crash, the budget) resumes from that checkpoint, so
finished items are not asked or paid for again. This module builds the steps; the run's course is
:mod:`.pipelines`'.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

from .errors import AgentRunFailed, ErrorInfo, UserError
from .events import MapProgress
from .maps import MapExecutor, MapResult, TextProgress
from .pipelines import BudgetExhausted, Step, StepContext
from .usage import Usage

if TYPE_CHECKING:
    from .agent import Agent

__all__ = ["AgentStep", "MapStep", "agent_step", "map_step"]

StatePrompt = str | Callable[[Any], str]


class AgentStep(Step):
    """One question of the state, its answer set as the field ``into``."""

    spends = True

    def __init__(
        self,
        agent: Agent,
        prompt: StatePrompt,
        *,
        into: str,
        output_type: Any = None,
        output_retries: int = 2,
        name: str | None = None,
    ) -> None:
        super().__init__(name or into)
        self.agent, self.prompt, self.into = agent, prompt, into
        self.output_type, self.output_retries = output_type, output_retries

    def describe(self) -> str:
        return f"agent → {self.into}"

    async def __call__(self, state: Any, context: StepContext) -> Any:
        text = _render(self.prompt, state, self.name)
        spent = _Spent(context, None)
        result = await spent.watching(
            self.agent.map(
                [text],
                _itself,
                output_type=self.output_type,
                output_retries=self.output_retries,
                concurrency=1,
                budget=context.budget,
                checkpoint=context.checkpoint("agent"),
                progress=spent,
            )
        )
        if result.status == "exhausted":
            raise BudgetExhausted(result.reason)
        item = result.items[0]
        if item.status != "ok":
            info = item.error or ErrorInfo(code="run_failed", layer="run", message="The run did not finish.")
            raise AgentRunFailed.from_info(info)
        return {self.into: item.output}


class MapStep(Step):
    """``agent.map`` over the field ``items_from`` (a list, a Series or a DataFrame), the
    results set as the field ``into``: a DataFrame on the items' index for pandas items (the
    output's fields and ``error``), else the list of outputs (``None`` where an item failed)."""

    spends = True

    def __init__(
        self,
        agent: Agent,
        *,
        items_from: str | Callable[[Any], Any],
        prompt: str | Callable[[Any], str],
        into: str,
        output_type: Any = None,
        output_retries: int = 2,
        concurrency: int = 8,
        retry_failed: bool = False,
        progress: Any = True,
        executor: MapExecutor | Any = None,
        name: str | None = None,
    ) -> None:
        super().__init__(name or into)
        self.agent, self.items_from, self.prompt, self.into = agent, items_from, prompt, into
        self.output_type, self.output_retries = output_type, output_retries
        self.concurrency, self.retry_failed = concurrency, retry_failed
        self.progress, self.executor = progress, executor

    def describe(self) -> str:
        source = self.items_from if isinstance(self.items_from, str) else "items"
        return f"map {source} → {self.into}"

    async def __call__(self, state: Any, context: StepContext) -> Any:
        if isinstance(self.items_from, str):
            fields = _fields(state)
            if fields.get(self.items_from) is None:
                problem = "is None in" if self.items_from in fields else "is not in"
                raise UserError(
                    f"Step {self.name!r} maps over {self.items_from!r}, which {problem} the state.",
                    hint=f"Set it in an earlier step, or pass items_from= one of {', '.join(fields)}.",
                    code="invalid_step",
                )
            items = fields[self.items_from]
        else:
            items = self.items_from(state)
        values, index = _items(items)
        spent = _Spent(context, TextProgress() if self.progress is True else self.progress or None)
        result: MapResult = await spent.watching(
            self.agent.map(
                values,
                self.prompt,
                output_type=self.output_type,
                output_retries=self.output_retries,
                concurrency=self.concurrency,
                budget=context.budget,
                checkpoint=context.checkpoint(),
                retry_failed=self.retry_failed,
                progress=spent,
                executor=self.executor,
            )
        )
        counts = [f"{len(result) - result.failed - result.pending} ok"]
        counts += [f"{result.failed} failed"] if result.failed else []
        counts += [f"{result.pending} not run"] if result.pending else []
        context.detail = ", ".join(counts)
        if result.status == "exhausted":
            raise BudgetExhausted(result.reason)
        if index is None:
            return {self.into: result.outputs}
        aligned = MapResult(
            result.items,
            status=result.status,
            reason=result.reason,
            usage=result.usage,
            checkpoint=result.checkpoint,
            index=index,
        )
        return {self.into: aligned.to_pandas()}


def agent_step(
    agent: Agent,
    prompt: StatePrompt,
    *,
    into: str,
    output_type: Any = None,
    output_retries: int = 2,
    name: str | None = None,
) -> AgentStep:
    """A step that asks ``agent`` one question of the state and sets the answer as ``into``.

    ``prompt`` is a template of the state's fields (``"Summarize: {counts}"``) or a function of
    the state returning the prompt; ``output_type`` types the answer as in ``agent.run``. The
    question is its own conversation (the agent's is not touched), checkpointed: a run resumed
    after the answer came in does not ask again. The step is named ``name`` (default ``into``)."""
    return AgentStep(
        agent, prompt, into=into, output_type=output_type, output_retries=output_retries, name=name
    )


def map_step(
    agent: Agent,
    *,
    items_from: str | Callable[[Any], Any],
    prompt: str | Callable[[Any], str],
    into: str,
    output_type: Any = None,
    output_retries: int = 2,
    concurrency: int = 8,
    retry_failed: bool = False,
    progress: Any = True,
    executor: MapExecutor | Any = None,
    name: str | None = None,
) -> MapStep:
    """A step that runs ``agent.map`` over the field ``items_from`` and sets the results as ``into``.

    ``items_from`` names a field of the state (a list, a Series or a DataFrame) or is a function
    of the state giving the items; ``prompt`` is the map's template of an item (``"{title}"``, a
    row's columns) or a function of the item. For pandas items ``into`` gets a DataFrame on
    their index (the output's fields and ``error``); for a list, the outputs (``None`` where an
    item failed). The map checkpoints in the run's folder: a resumed step asks only the items not
    finished. The pipeline's budget, what is left of it, caps the map. The step is named ``name``
    (default ``into``); the other options are ``agent.map``'s."""
    return MapStep(
        agent,
        items_from=items_from,
        prompt=prompt,
        into=into,
        output_type=output_type,
        output_retries=output_retries,
        concurrency=concurrency,
        retry_failed=retry_failed,
        progress=progress,
        executor=executor,
        name=name,
    )


class _Spent:
    """Follows a map's progress for what it has spent, so that a step stopped part-way (an
    interrupt) still counts what its finished items cost; hands each update on to ``display``."""

    def __init__(self, context: StepContext, display: Callable[[MapProgress], Any] | None) -> None:
        self.context, self.display = context, display
        self.usage = Usage()

    def __call__(self, event: MapProgress) -> None:
        self.usage = event.usage
        if self.display is not None:
            self.display(event)

    async def watching(self, map_call: Awaitable[Any]) -> Any:
        try:
            result = await map_call
        except BaseException:
            self.context.spend(self.usage)
            raise
        self.context.spend(result.usage)
        return result


def _fields(state: Any) -> Mapping[str, Any]:
    return dict(state) if isinstance(state, BaseModel) else state


def _render(prompt: StatePrompt, state: Any, step: str) -> str:
    if callable(prompt):
        text = prompt(state)
        if not isinstance(text, str):
            raise UserError(
                f"Step {step!r}: the prompt function returned a {type(text).__name__}, not a str.",
                hint="Make it return the prompt's text.",
                code="invalid_step",
            )
        return text
    fields = _fields(state)
    try:
        return prompt.format_map(fields)
    except (KeyError, IndexError, ValueError, AttributeError) as exc:
        names = ", ".join(f"{{{name}}}" for name in fields)
        raise UserError(
            f"Step {step!r}: the prompt template does not fit the state: {type(exc).__name__}: {exc}",
            hint=f"It may use {names}; write literal braces as {{{{ }}}}, or pass a function of the state.",
            code="invalid_step",
        ) from None


def _items(items: Any) -> tuple[list[Any], Any]:
    """The items as a list (a DataFrame's rows as dicts of their columns), and a pandas index."""
    if type(items).__module__.startswith("pandas") and hasattr(items, "to_dict"):
        if type(items).__name__ == "DataFrame":
            rows = items.to_dict(orient="records")
            return [{str(k): v for k, v in row.items()} for row in rows], items.index
        return list(items.tolist()), items.index
    return list(items), None


def _itself(item: Any) -> str:
    return str(item)
