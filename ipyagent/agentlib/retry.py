"""When and how long to wait before retrying a failed model request, and the waiting itself."""

from __future__ import annotations

import asyncio
import random
from dataclasses import dataclass

__all__ = ["RetryPolicy", "wait_before_retry"]


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
