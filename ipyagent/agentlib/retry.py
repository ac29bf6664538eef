"""Retrying a failed model request: when, how long to wait, the waiting itself, and the loop.

:class:`Retries` is the one retry loop: the agent loop's model turns and the summarizer's
request both go through it, so both retry the same errors the same way.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TypeVar

from .errors import AgentError

__all__ = ["Retries", "RetryPolicy", "wait_before_retry"]

T = TypeVar("T")

#: ``on_error(error, attempt, delay)``: told of every failed attempt before anything else
#: happens; ``delay`` is the wait before the next attempt, or ``None`` when the error will not
#: be retried. Returns True when it dealt with the error itself and the request should be sent
#: again at once (the loop compacts a transcript that overflowed the window).
OnError = Callable[[AgentError, int, float | None], Awaitable[bool]]


@dataclass(frozen=True)
class RetryPolicy:
    """Exponential backoff with jitter; a provider's Retry-After wins when it is given.

    ``attempts`` counts the first try: 4 means up to three retries.
    """

    attempts: int = 4
    base_delay: float = 1.0
    max_delay: float = 30.0
    jitter: float = 0.25

    def delay(self, attempt: int, retry_after: float | None = None) -> float:
        """Seconds to wait after failed attempt number ``attempt`` (1-based)."""
        if retry_after is not None and retry_after >= 0:
            return min(retry_after, self.max_delay * 4)
        backoff = min(self.max_delay, self.base_delay * 2.0 ** (attempt - 1))
        factor: float = 1 + random.uniform(-self.jitter, self.jitter)
        return backoff * factor


async def wait_before_retry(provider: object, seconds: float) -> None:
    """Wait ``seconds`` before sending ``provider`` the failed request again.

    The provider may decide how that time passes by having a ``wait_before_retry(seconds)``
    coroutine method: a :class:`~ipyagent.agentlib.providers.replay.ReplayModel` replaying a
    cassette has no server to wait for and returns at once, while the delay it reports in the
    run's events stays the recorded one.
    """
    wait = getattr(provider, "wait_before_retry", None)
    if wait is not None:
        await wait(seconds)
    else:
        await asyncio.sleep(seconds)


class Retries:
    """The attempts at one model request, numbered from 1.

    :meth:`run` sends until an attempt returns. A retryable :class:`AgentError` is sent again
    after :meth:`RetryPolicy.delay`, until ``policy.attempts`` attempts were made; any other
    error propagates. The numbering goes on across calls to :meth:`run`, for a caller that asks
    again after a reply it rejects (the loop, after an empty reply).
    """

    def __init__(self, policy: RetryPolicy, provider: object) -> None:
        self.policy = policy
        self.provider = provider
        #: The number of the last attempt made (0 before the first).
        self.attempt = 0

    async def run(self, send: Callable[[int], Awaitable[T]], *, on_error: OnError | None = None) -> T:
        """``await send(attempt)`` until it returns, retrying as the policy says."""
        while True:
            self.attempt += 1
            try:
                return await send(self.attempt)
            except AgentError as exc:
                delay = self._delay(exc)
                if on_error is not None and await on_error(exc, self.attempt, delay):
                    continue
                if delay is None:
                    raise
                await wait_before_retry(self.provider, delay)

    def _delay(self, exc: AgentError) -> float | None:
        if exc.retryable and self.attempt < self.policy.attempts:
            return self.policy.delay(self.attempt, exc.retry_after)
        return None
