"""Caps on what a run or a conversation may spend: tokens, dollars, seconds.

``Agent(budget=Budget(tokens=50_000, cost=0.50, seconds=300))`` caps each run;
``conversation_budget=`` caps the conversation's total (tokens, cost and the wall time of its
runs, counted in its session file, so the total survives a restart). In a notebook:
``%%agent --budget tokens=50k,cost=0.5,time=5m``.

The loop checks the caps after every model request and every round of tool calls, and a time cap
also interrupts whatever is running when it expires. A run that reaches a cap stops with status
``exhausted`` and a reason saying which cap and how to go on; its transcript is valid, so the next
run continues it. Tokens are every token the model read or wrote (prompt, cached prompt and
reply). Cost needs a price (:mod:`~ipyagent.agentlib.prices`): for a model with none, a cost cap
cannot apply, and the run says so when it starts.

A token cap is one :class:`TokenLedger` that the run and all its sub-agents draw on, however many
run at once: before each request its possible cost (the prompt, estimated, and the most the reply
may have) is reserved, the reply's ``max_tokens`` is cut to what is left, and the reservation is
settled with what the provider reports. A request that does not fit while others are in flight
waits for them to settle; one that does not fit with nothing in flight ends its run. A reply the
provider made longer than asked ends the run ``exhausted``.
"""

from __future__ import annotations

import asyncio
import math
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .errors import UserError
from .events import RunWarning
from .prices import Price, at_price, price_for
from .usage import Usage

__all__ = ["Budget", "Hold", "Spending", "TokenLedger", "check_budget", "spent_tokens"]

_SUFFIXES = {"": 1, "k": 1_000, "m": 1_000_000}
_SECONDS = {"": 1, "s": 1, "m": 60, "min": 60, "h": 3600}
_SYNTAX = "tokens=50k,cost=0.50,time=5m (any of the three)"


@dataclass(frozen=True)
class Budget:
    """At most ``tokens`` tokens, ``cost`` US dollars and ``seconds`` of wall time; ``None``
    caps nothing."""

    tokens: int | None = None
    cost: float | None = None
    seconds: float | None = None

    def __post_init__(self) -> None:
        for name in ("tokens", "cost", "seconds"):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or not value > 0 or not math.isfinite(value)):
                raise UserError(
                    f"A budget's {name} must be a positive number, not {value!r}.",
                    hint=f"For example Budget(tokens=50_000, cost=0.5, seconds=300), or {_SYNTAX}.",
                    code="invalid_option",
                )

    @property
    def is_empty(self) -> bool:
        return self.tokens is None and self.cost is None and self.seconds is None

    @classmethod
    def parse(cls, text: str) -> Budget:
        """``"tokens=50k,cost=0.50,time=5m"`` (``$0.50``, ``300s``, ``1.5h``, ``2M`` tokens)."""
        values: dict[str, Any] = {}
        for item in filter(None, (part.strip() for part in text.split(","))):
            key, sep, raw = item.partition("=")
            key, raw = key.strip().lower(), raw.strip().lower()
            try:
                if not sep:
                    raise ValueError
                if key == "tokens":
                    values["tokens"] = _scaled(raw, _SUFFIXES, integer=True)
                elif key == "cost":
                    values["cost"] = float(raw.removeprefix("$"))
                elif key in ("time", "seconds"):
                    values["seconds"] = _scaled(raw, _SECONDS, integer=False)
                else:
                    raise ValueError
            except ValueError:
                raise UserError(
                    f"Cannot read the budget {item!r} in {text!r}.",
                    hint=f"Write {_SYNTAX}.",
                    code="invalid_option",
                ) from None
        return cls(**values)

    @classmethod
    def of(cls, value: Budget | Mapping[str, Any] | str | None) -> Budget | None:
        """``value`` as a budget: a :class:`Budget`, a mapping of its fields, a string for
        :meth:`parse`, or None."""
        if value is None or isinstance(value, Budget):
            return value
        if isinstance(value, str):
            return cls.parse(value)
        if isinstance(value, Mapping) and set(value) <= {"tokens", "cost", "seconds"}:
            return cls(**value)
        raise UserError(
            f"Invalid budget {value!r}.",
            hint="Pass Budget(tokens=..., cost=..., seconds=...), a dict of those, or "
            f"a string like {_SYNTAX}.",
            code="invalid_option",
        )

    def __str__(self) -> str:
        parts = []
        if self.tokens is not None:
            parts.append(f"{self.tokens:,} tokens")
        if self.cost is not None:
            parts.append(f"${self.cost:.2f}")
        if self.seconds is not None:
            parts.append(f"{self.seconds:g} s")
        return ", ".join(parts) or "no cap"


def spent_tokens(usage: Usage) -> int:
    """Every token the model read or wrote: the prompt (cached or not) and the reply."""
    return usage.input_tokens + usage.cache_read_tokens + usage.output_tokens


def check_budget(budget: Budget | None, usage: Usage, seconds: float, *, scope: str) -> str | None:
    """Why ``usage`` and ``seconds`` have reached ``budget`` (a sentence for the user), or None.
    ``scope`` is "run" or "conversation"."""
    if budget is None:
        return None
    again = (
        "Run again to let the agent go on with a new budget, or raise it."
        if scope == "run"
        else "Raise the conversation's budget, or start a new conversation (%agent reset)."
    )
    used = spent_tokens(usage)
    if budget.tokens is not None and used >= budget.tokens:
        return f"The {scope} used {used:,} tokens, reaching its budget of {budget.tokens:,}. {again}"
    if budget.cost is not None and usage.cost is not None and usage.cost >= budget.cost:
        return f"The {scope} cost ${usage.cost:.4f}, reaching its budget of ${budget.cost:.2f}. {again}"
    if budget.seconds is not None and seconds >= budget.seconds:
        return f"The {scope} ran {seconds:.1f} s, reaching its time budget of {budget.seconds:g} s. {again}"
    return None


class TokenLedger:
    """The tokens a run and its sub-agents may still spend together: every request of any of them
    reserves its possible cost before it is sent (:meth:`reserve`) and settles it with what it
    really cost (:meth:`Hold.settle`). Lives on one event loop, shared by the runs on it.

    ``cap`` and ``scope`` name the cap it enforces (the run's or the conversation's, whichever
    leaves less), ``before`` what that scope had spent when the ledger was made."""

    def __init__(self, cap: int, *, scope: str = "run", before: int = 0) -> None:
        self.cap, self.scope, self.before = cap, scope, before
        self.spent = 0  # settled, this run and its sub-agents
        self.reserved = 0  # held by requests in flight
        self._waiters: list[asyncio.Future[None]] = []

    @classmethod
    def for_caps(
        cls, budget: Budget | None, conversation_budget: Budget | None, conversation_tokens: int
    ) -> TokenLedger | None:
        """The ledger for a run's token caps (``None`` when neither caps tokens)."""
        caps = [
            (cap - before, cap, scope, before)
            for cap, scope, before in (
                (budget.tokens if budget else None, "run", 0),
                (
                    conversation_budget.tokens if conversation_budget else None,
                    "conversation",
                    conversation_tokens,
                ),
            )
            if cap is not None
        ]
        if not caps:
            return None
        _, cap, scope, before = min(caps)
        return cls(cap, scope=scope, before=before)

    @property
    def left(self) -> int:
        """What no request has spent or holds yet."""
        return self.cap - self.before - self.spent - self.reserved

    @property
    def overspent(self) -> bool:
        return self.before + self.spent > self.cap

    async def reserve(self, prompt: int, max_tokens: int | None) -> Hold | str:
        """Hold ``prompt`` tokens and a reply of up to ``max_tokens`` (``None``: as many as are
        left); the hold's ``reply`` is the ``max_tokens`` to send. While other requests hold
        what this one needs, wait for them; with nothing else in flight and too little left
        for the prompt and a token of reply, say why the run must stop."""
        while True:
            alone = self.cap - self.before - self.spent - prompt  # the reply it would get alone
            want = alone if max_tokens is None else min(max_tokens, alone)
            if want >= 1 and alone - self.reserved >= want:
                hold = Hold(self, prompt, want)
                self.reserved += hold.tokens
                return hold
            if alone < 1:  # whatever the others in flight settle with, it cannot fit
                used = self.before + self.spent
                return (
                    f"The next request (~{prompt:,} tokens of prompt) would pass the {self.scope}'s "
                    f"budget of {self.cap:,} tokens ({used:,} used, sub-agents included). "
                    + (
                        "Run again with a larger budget."
                        if self.scope == "run"
                        else "Raise the conversation's budget."
                    )
                )
            waiter = asyncio.get_running_loop().create_future()
            self._waiters.append(waiter)
            try:
                await waiter
            finally:
                if waiter in self._waiters:
                    self._waiters.remove(waiter)

    def charge(self, tokens: int) -> None:
        """Count ``tokens`` spent without a reservation (a compaction's summary request)."""
        self.spent += tokens
        self._wake()

    def settle(self, held: int, spent: int) -> None:
        """Release a reservation of ``held`` tokens, counting ``spent`` (see :meth:`Hold.settle`)."""
        self.reserved -= held
        self.spent += spent
        self._wake()

    def _wake(self) -> None:
        waiters, self._waiters = self._waiters, []
        for waiter in waiters:
            if not waiter.done():
                waiter.set_result(None)


class Hold:
    """One request's reservation in a :class:`TokenLedger` (or none: ``ledger`` is ``None``).
    ``reply`` is the ``max_tokens`` the request may ask for (``None``: uncapped)."""

    def __init__(self, ledger: TokenLedger | None, prompt: int, reply: int | None) -> None:
        self.ledger, self.reply = ledger, reply
        self.tokens = prompt + (reply or 0)
        self._open = ledger is not None

    def settle(self, tokens: int) -> None:
        """Release the hold, counting ``tokens`` as spent; only the first call counts."""
        if self._open and self.ledger is not None:
            self._open = False
            self.ledger.settle(self.tokens, tokens)


class Spending:
    """What one run may still spend: the loop asks it before the run, before each request and
    when the run is interrupted; it owns the run's clock and its time cap. Its token caps are a
    :class:`TokenLedger`: its own, or its parent's (``ledger``), which a sub-agent shares."""

    def __init__(
        self,
        budget: Budget | None,
        conversation_budget: Budget | None,
        *,
        conversation_seconds: float = 0.0,
        conversation_tokens: int = 0,
        ledger: TokenLedger | None = None,
    ) -> None:
        self.budget = budget
        self.conversation_budget = conversation_budget
        self.ledger = ledger or TokenLedger.for_caps(budget, conversation_budget, conversation_tokens)
        #: Wall time the conversation's earlier runs took.
        self._earlier = conversation_seconds
        self._started = time.monotonic()
        self._timer: asyncio.TimerHandle | None = None
        self._expired_scope: str | None = None
        self._warned_unpriced = False
        self._prices: dict[str, Price | None] = {}

    @property
    def elapsed(self) -> float:
        """Seconds since the run started."""
        return time.monotonic() - self._started

    def start_timer(self) -> None:
        """Cancel the current task when the run's time budget runs out, wherever it is (a stream,
        a tool, a question to the user); :meth:`out_of_time` then tells that cancellation apart
        from the user's."""
        self._started = time.monotonic()
        limits = [
            (budget.seconds - earlier, scope)
            for budget, earlier, scope in (
                (self.budget, 0.0, "run"),
                (self.conversation_budget, self._earlier, "conversation"),
            )
            if budget is not None and budget.seconds is not None
        ]
        task = asyncio.current_task()
        if not limits or task is None:
            return
        seconds, scope = min(limits)
        if seconds <= 0:  # the conversation's time is spent: before_run refuses the run
            return

        def expire() -> None:
            self._expired_scope = scope
            task.cancel()

        self._timer = asyncio.get_running_loop().call_later(seconds, expire)

    def stop_timer(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def out_of_time(self) -> str | None:
        """After a cancellation: the reason when it was the time cap's (the task's cancel request
        is withdrawn: it has been handled), else None (the user stopped the run)."""
        scope = self._expired_scope
        budget = self.budget if scope == "run" else self.conversation_budget
        if scope is None or budget is None or budget.seconds is None:
            return None
        task = asyncio.current_task()
        if task is not None and hasattr(task, "uncancel"):  # Python 3.11+
            task.uncancel()
        seconds = self.elapsed + (self._earlier if scope == "conversation" else 0.0)
        return check_budget(
            Budget(seconds=budget.seconds), Usage(), max(seconds, budget.seconds), scope=scope
        )

    def before_run(self, conversation: Usage) -> str | None:
        """Why the run may not start (the conversation has spent its budget), or None."""
        return check_budget(self.conversation_budget, conversation, self._earlier, scope="conversation")

    def before_request(self, run: Usage, conversation: Usage, prompt_tokens: int) -> str | None:
        """Why the run must stop before its next request, or None: a cap reached, or a token cap
        that the next request's prompt (``prompt_tokens``, estimated) alone would pass."""
        seconds = self.elapsed
        spent = check_budget(self.budget, run, seconds, scope="run") or check_budget(
            self.conversation_budget, conversation, self._earlier + seconds, scope="conversation"
        )
        if spent:
            return spent
        for budget, usage, scope in (
            (self.budget, run, "run"),
            (self.conversation_budget, conversation, "conversation"),
        ):
            if (
                budget is None
                or budget.tokens is None
                or spent_tokens(usage) + prompt_tokens <= budget.tokens
            ):
                continue
            advice = (
                "Run again with a larger budget." if scope == "run" else "Raise the conversation's budget."
            )
            return (
                f"The next request (~{prompt_tokens:,} tokens of prompt) would pass the {scope}'s budget of "
                f"{budget.tokens:,} tokens ({spent_tokens(usage):,} used). {advice}"
            )
        return None

    async def reserve(self, prompt_tokens: int, max_tokens: int | None) -> Hold | str:
        """Reserve the next request's possible cost in the token ledger (see
        :meth:`TokenLedger.reserve`); a hold with nothing to settle when no cap is on tokens."""
        if self.ledger is None:
            return Hold(None, prompt_tokens, max_tokens)
        return await self.ledger.reserve(prompt_tokens, max_tokens)

    def overspent(self, run: Usage, conversation: Usage) -> str | None:
        """After a reply: why the run must end although it asked for no more than was left (the
        provider sent a longer reply than ``max_tokens``, or counted a larger prompt than
        estimated), or None. A run that lands on its cap is not over it."""
        why = (
            "a reply came back longer than the max_tokens it was sent with, or its prompt counted more "
            "tokens than estimated"
        )
        for budget, usage, scope in (
            (self.budget, run, "run"),
            (self.conversation_budget, conversation, "conversation"),
        ):
            if budget is not None and budget.tokens is not None and spent_tokens(usage) > budget.tokens:
                used = spent_tokens(usage)
                return f"The {scope} used {used:,} tokens, past its budget of {budget.tokens:,}: {why}."
        ledger = self.ledger
        if ledger is not None and ledger.overspent:
            return (
                f"The {ledger.scope} and its sub-agents used {ledger.before + ledger.spent:,} tokens, "
                f"past its budget of {ledger.cap:,}: {why}."
            )
        return None

    def left(self, run: Usage, conversation: Usage) -> Budget | None:
        """What is left of every cap, as one budget (``None`` when nothing is capped): a
        sub-agent's run may spend no more. Call it once :meth:`before_request` found nothing
        spent; a cap with nothing left gives the least a budget can hold."""
        seconds = self.elapsed
        tokens: list[float] = []
        cost: list[float] = []
        time_left: list[float] = []
        for budget, usage, earlier in (
            (self.budget, run, 0.0),
            (self.conversation_budget, conversation, self._earlier),
        ):
            if budget is None:
                continue
            if budget.tokens is not None:
                tokens.append(budget.tokens - spent_tokens(usage))
            if budget.cost is not None:
                cost.append(budget.cost - (usage.cost or 0.0))
            if budget.seconds is not None:
                time_left.append(budget.seconds - earlier - seconds)
        if not (tokens or cost or time_left):
            return None
        return Budget(
            tokens=max(1, int(min(tokens))) if tokens else None,
            cost=max(1e-9, min(cost)) if cost else None,
            seconds=max(1e-3, min(time_left)) if time_left else None,
        )

    def readout(self, run: Usage) -> str | None:
        """What the run has spent of each of its caps, for a meter: "12,400 / 50,000 tokens ·
        $0.21 / $0.50 · 40 s / 300 s"; None without a run budget."""
        budget = self.budget
        if budget is None or budget.is_empty:
            return None
        parts = []
        if budget.tokens is not None:
            parts.append(f"{spent_tokens(run):,} / {budget.tokens:,} tokens")
        if budget.cost is not None:
            parts.append(f"${run.cost:.2f} / ${budget.cost:.2f}" if run.cost is not None else "cost unknown")
        if budget.seconds is not None:
            parts.append(f"{time.monotonic() - self._started:.0f} s / {budget.seconds:g} s")
        return " · ".join(parts)

    def priced(self, usage: Usage, model_id: str) -> Usage:
        """``usage`` with its cost at ``model_id``'s price, looked up once per run (a price
        changed in the config file applies from the next run)."""
        if model_id not in self._prices:
            self._prices[model_id] = price_for(model_id)
        return at_price(usage, self._prices[model_id])

    def unpriced_warning(self, usage: Usage, model_id: str) -> RunWarning | None:
        """Once per run: a cost cap is set, but this request has no cost (no known price)."""
        capped = any(b is not None and b.cost is not None for b in (self.budget, self.conversation_budget))
        if usage.cost is not None or not capped or self._warned_unpriced:
            return None
        self._warned_unpriced = True
        return RunWarning(
            code="no_price",
            message=f"No price is known for {model_id}, so the cost cap cannot apply; "
            "tokens are counted and capped as set.",
            hint='Add its price to ~/.config/ipyagent/config.toml: [prices."MODEL"] input = ..., '
            "output = ... (dollars per million tokens), or cap tokens instead.",
        )


def _scaled(raw: str, units: Mapping[str, float], *, integer: bool) -> Any:
    match = re.fullmatch(r"(\d+(?:\.\d+)?)\s*([a-z]*)", raw)
    if match is None or match.group(2) not in units:
        raise ValueError(raw)
    value = float(match.group(1)) * units[match.group(2)]
    return round(value) if integer else value
